package evidence

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/gowebpki/jcs"
)

// The package's canonical form (RFC 8785, JCS), made in one pass whose
// cost is a small multiple of the input whatever its nesting (issue 20).
//
// jsontext validates the text (syntax, UTF-8, escapes, nesting at most
// 10,000 deep) without keeping state per level; duplicate names are left
// to this pass, which finds them for free while sorting. The validated
// text is then split into tokens once (lexer). Every value and member
// name becomes one 16-octet node in a flat array sized in advance from the
// count of structural characters, and every string's unescaped text goes
// into one arena. The tree is kept for the restricted-data scan, which
// walks it instead of reading the text again. An object's members
// are sorted by their names' UTF-16 code units (RFC 8785 section 3.2.3)
// when the object closes, by relinking its nodes: nothing is copied, so a
// member deep inside costs the same as one at the top. A last walk writes
// each octet of the output once: strings by jsontext.AppendQuote (the
// minimal escaping of RFC 8785 section 3.2.2.2), numbers by
// jcs.NumberToJSON (the ECMAScript form of section 3.2.2.3), literals as
// they are.
//
// Memory: 16 octets per JSON value or member name (at most one per two
// octets of input), the arena (at most the input), the output (the input,
// or more where a number's canonical form is longer than its literal), and
// the scratch of the largest object's members (8 octets each).

// jnode is one value or member name. Containers chain their children
// through next, starting at first (in a); scalars hold their canonical
// text (a number, a literal) or their unescaped text (a string) as
// arena[a:b].
type jnode struct {
	kind jsontext.Kind
	next int32
	a, b int32
}

const noNode = -1

// canon holds one canonicalization.
type canon struct {
	nodes   []jnode
	arena   []byte
	members []member // scratch: the members of the object being closed
	frames  []cframe
}

// member is a name node and its value node.
type member struct{ name, value int32 }

// cframe is an open container: its node and its last child so far.
type cframe struct{ node, last int32 }

// canonicalize checks that data is one JSON value (RFC 8259) in valid
// UTF-8 without lone surrogate escapes, with no two members of one object
// named alike (ErrDuplicateName, RFC 7493), and returns its tree and its
// JCS form.
func canonicalize(data []byte) (*canon, []byte, error) {
	// jsontext validates without building state per level; tokens are
	// then split from the validated text by lex, which need not check
	// anything again.
	if !jsontext.Value(data).IsValid(jsontext.AllowDuplicateNames(true)) {
		_, err := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowDuplicateNames(true)).ReadValue()
		if err == nil {
			err = errors.New("invalid JSON text")
		}
		return nil, nil, classify(err, data)
	}
	n, depth := countValues(data)
	c := &canon{nodes: make([]jnode, 0, n), arena: make([]byte, 0, len(data)), frames: make([]cframe, 0, depth)}
	if err := c.read(&lexer{data: data}); err != nil {
		return nil, nil, err
	}
	out := make([]byte, 0, len(data))
	return c, c.write(out, 0), nil
}

// countValues returns the number of values and member names in valid JSON
// text (one more than its structural characters { [ , : outside strings)
// and its deepest nesting.
func countValues(data []byte) (n, depth int) {
	n, d, in := 1, 0, false
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case in && c == '\\':
			i++
		case c == '"':
			in = !in
		case in:
		case c == '{' || c == '[':
			n++
			d++
			depth = max(depth, d)
		case c == '}' || c == ']':
			d--
		case c == ',' || c == ':':
			n++
		}
	}
	return n, depth
}

// lexer splits JSON text that jsontext has validated into its tokens. It
// checks nothing: on valid text, separators (, :) carry nothing the
// position of a token does not say.
type lexer struct {
	data []byte
	i    int
}

// next returns the next token's kind ('{', '}', '[', ']', '"', '0', 't',
// 'f', 'n', or 0 at the end) and, for a scalar, its text.
func (l *lexer) next() (jsontext.Kind, []byte) {
	d := l.data
	for l.i < len(d) {
		switch d[l.i] {
		case ' ', '\t', '\n', '\r', ',', ':':
			l.i++
			continue
		}
		break
	}
	if l.i >= len(d) {
		return 0, nil
	}
	start := l.i
	switch c := d[l.i]; c {
	case '{', '}', '[', ']':
		l.i++
		return jsontext.Kind(c), nil
	case '"':
		j := l.i + 1
		for d[j] != '"' {
			if d[j] == '\\' {
				j++
			}
			j++
		}
		l.i = j + 1
		return '"', d[start:l.i]
	case 't', 'n':
		l.i += 4
		return jsontext.Kind(c), d[start:l.i]
	case 'f':
		l.i += 5
		return 'f', d[start:l.i]
	default:
		j := l.i + 1
		for j < len(d) && (d[j] >= '0' && d[j] <= '9' || d[j] == '.' || d[j] == 'e' || d[j] == 'E' || d[j] == '+' || d[j] == '-') {
			j++
		}
		l.i = j
		return '0', d[start:l.i]
	}
}

// read reads the one value of the text and everything in it.
func (c *canon) read(lx *lexer) error {
	for {
		k, v := lx.next()
		var i int32 = noNode
		switch k {
		case 0:
			return fmt.Errorf("%w: unexpected end of input", ErrMalformed)
		case '}', ']':
			f := c.frames[len(c.frames)-1]
			c.frames = c.frames[:len(c.frames)-1]
			if k == '}' {
				if err := c.sortMembers(f.node); err != nil {
					return err
				}
			}
			if len(c.frames) == 0 {
				return nil
			}
			continue
		case '{', '[':
			i = c.add(jnode{kind: k, next: noNode, a: noNode})
		default:
			start := int32(len(c.arena))
			var err error
			switch k {
			case '"':
				c.arena, err = jsontext.AppendUnquote(c.arena, v)
			case '0':
				c.arena, err = appendNumber(c.arena, v)
			default:
				c.arena = append(c.arena, v...)
			}
			if err != nil {
				return fmt.Errorf("%w: %v", ErrMalformed, err)
			}
			i = c.add(jnode{kind: k, next: noNode, a: start, b: int32(len(c.arena))})
		}
		if n := len(c.frames); n > 0 {
			f := &c.frames[n-1]
			if f.last == noNode {
				c.nodes[f.node].a = i
			} else {
				c.nodes[f.last].next = i
			}
			f.last = i
		}
		switch k {
		case '{', '[':
			c.frames = append(c.frames, cframe{node: i, last: noNode})
		default:
			if len(c.frames) == 0 {
				return nil
			}
		}
	}
}

func (c *canon) add(n jnode) int32 {
	c.nodes = append(c.nodes, n)
	return int32(len(c.nodes) - 1)
}

// appendNumber appends the canonical form of a JSON number literal: the
// literal itself for an integer of at most 15 digits (exact in binary64,
// and so its own ECMAScript form), else jcs.NumberToJSON of its value.
func appendNumber(dst, lit []byte) ([]byte, error) {
	digits := lit
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	plain := len(digits) > 0 && len(digits) <= 15
	for _, d := range digits {
		plain = plain && d >= '0' && d <= '9'
	}
	if plain {
		if string(lit) == "-0" {
			return append(dst, '0'), nil
		}
		return append(dst, lit...), nil
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		return dst, fmt.Errorf("%w: number %.32q: %v", ErrMalformed, lit, err)
	}
	s, err := jcs.NumberToJSON(f)
	if err != nil {
		return dst, fmt.Errorf("%w: number %.32q: %v", ErrMalformed, lit, err)
	}
	return append(dst, s...), nil
}

// sortMembers orders the members of object o by name (UTF-16 code units)
// and refuses two members of one name.
func (c *canon) sortMembers(o int32) error {
	ms := c.members[:0]
	for n := c.nodes[o].a; n != noNode; {
		v := c.nodes[n].next
		ms = append(ms, member{name: n, value: v})
		n = c.nodes[v].next
	}
	c.members = ms
	if len(ms) < 2 {
		return nil
	}
	name := func(m member) []byte { nd := c.nodes[m.name]; return c.arena[nd.a:nd.b] }
	sorted := true
	for i := 1; i < len(ms) && sorted; i++ {
		sorted = compareUTF16(name(ms[i-1]), name(ms[i])) < 0
	}
	if !sorted {
		slices.SortFunc(ms, func(x, y member) int { return compareUTF16(name(x), name(y)) })
	}
	for i := 1; i < len(ms); i++ {
		if bytes.Equal(name(ms[i-1]), name(ms[i])) {
			return fmt.Errorf("%w: %w: %.64q", ErrMalformed, ErrDuplicateName, name(ms[i]))
		}
	}
	if sorted {
		return nil
	}
	c.nodes[o].a = ms[0].name
	for i, m := range ms {
		c.nodes[m.name].next = m.value
		if i+1 < len(ms) {
			c.nodes[m.value].next = ms[i+1].name
		} else {
			c.nodes[m.value].next = noNode
		}
	}
	return nil
}

// compareUTF16 compares two UTF-8 strings by their UTF-16 code units
// (RFC 8785 section 3.2.3). Byte order is code point order, which differs
// from UTF-16 order only between a supplementary character (a surrogate
// pair, 0xD800-0xDBFF first) and one in U+E000..U+FFFF.
func compareUTF16(a, b []byte) int {
	for len(a) > 0 && len(b) > 0 {
		ra, na := utf8.DecodeRune(a)
		rb, nb := utf8.DecodeRune(b)
		if ra != rb {
			return cmpUnit(ra) - cmpUnit(rb)
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

// cmpUnit is the first UTF-16 code unit of r, scaled so that runes with
// one first unit keep their order: a surrogate pair's first unit is
// 0xD800 + ((r-0x10000)>>10), and pairs are ordered among themselves by r.
func cmpUnit(r rune) int {
	if r < 0x10000 {
		return int(r) << 21
	}
	return (0xD800+int((r-0x10000)>>10))<<21 | int(r&0x3FF)
}

// write appends the canonical form of node i.
func (c *canon) write(out []byte, i int32) []byte {
	n := c.nodes[i]
	switch n.kind {
	case '{', '[':
		open, close := byte('['), byte(']')
		if n.kind == '{' {
			open, close = '{', '}'
		}
		out = append(out, open)
		name := n.kind == '{'
		first := true
		for ch := n.a; ch != noNode; ch = c.nodes[ch].next {
			switch {
			case n.kind == '[' && !first, n.kind == '{' && name && !first:
				out = append(out, ',')
			}
			first = false
			out = c.write(out, ch)
			if n.kind == '{' {
				if name {
					out = append(out, ':')
				}
				name = !name
			}
		}
		return append(out, close)
	case '"':
		out, _ = jsontext.AppendQuote(out, c.arena[n.a:n.b])
		return out
	default:
		return append(out, c.arena[n.a:n.b]...)
	}
}
