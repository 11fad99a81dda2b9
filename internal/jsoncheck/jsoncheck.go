// Package jsoncheck checks a JSON text as strictly as jsontext reads it,
// and at a cost bounded by its size whatever its shape, so that a reader
// of a stranger's octets can check them first and then read them with
// jsontext, which can no longer fail on them.
//
// What it accepts is what jsontext accepts, refusing duplicate names: one
// value (RFC 8259), whitespace around it, strings in valid UTF-8 with no
// escaped lone surrogate (RFC 8259 section 8.2, RFC 7493 section 2.1), at
// most MaxDepth levels of nesting (RFC 8259 section 9 lets a parser bound
// it; jsontext's bound), and no object with two members of the same name
// once unescaped ("a" and "\u0061" are one name; RFC 7493 section 2.3,
// RFC 7515 section 4). FuzzCheck holds the two to one answer.
//
// Why not jsontext alone: refusing duplicate names, it keeps a copy of
// every name of each open object and, past 64 names, a map of them (tens
// of octets per name and per level of nesting); and an error inside a
// nested value builds a JSON pointer to it level by level (about 20 octets
// per level, and each name again). Check keeps the positions of the names
// of the open objects and a bit per level, sorts an object's names in
// place when it closes, and its errors name an offset.
package jsoncheck

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting Check accepts, as jsontext: objects and
// arrays, the outermost one included.
const MaxDepth = 10000

// first marks the first name of an object in the stack of names.
const first = 1 << 31

// A DuplicateError names the member name found twice in one object.
type DuplicateError struct {
	Name string // unescaped
}

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("duplicate object member name %q", e.Name)
}

// ErrTooDeep is the error of a text nested deeper than MaxDepth.
var ErrTooDeep = fmt.Errorf("nested deeper than %d levels", MaxDepth)

// errAt is a syntax error at an offset of the text.
func errAt(at int, what string) error {
	return fmt.Errorf("invalid JSON at offset %d: %s", at, what)
}

// set is a bit per level of nesting.
type set [MaxDepth/64 + 1]uint64

func (s *set) get(d int) bool { return s[d/64]&(1<<(d%64)) != 0 }

func (s *set) put(d int, v bool) {
	if v {
		s[d/64] |= 1 << (d % 64)
	} else {
		s[d/64] &^= 1 << (d % 64)
	}
}

// What the text may hold next.
const (
	wantValue        = iota // a value
	wantValueOrClose        // a value or ']', after '['
	wantNameOrClose         // a name or '}', after '{'
	wantName                // a name, after ',' in an object
	wantColon               // ':', after a name
	wantCommaOrClose        // ',' or the container's end, after a value
	wantNothing             // the value is complete: only whitespace
)

// Check reports whether b, shorter than 2 GiB, is a valid JSON text as
// described in the package documentation: nil, a *DuplicateError,
// ErrTooDeep or a syntax error naming an offset. It allocates nothing
// while the open objects hold at most 256 names at once, and past them
// one array, as long as the rest of the text can hold names (one per five
// octets: "":0,), so less than the text's size.
func Check(b []byte) error { return Walk(b, Fields{}) }

// Fields receives, from Walk, what a reader of an object wants of it:
// its members, and the elements of its members that are arrays, each as
// written in the text, in the one pass that checks it. A function left
// nil is not called; an error a function returns ends the walk.
type Fields struct {
	// Member is called for each member of the top-level object, once its
	// value is checked: name is the member's name with its quotes, value
	// its value, as written.
	Member func(name, value []byte) error
	// Element is called for each element of an array that is the value
	// of a member of the top-level object, once the element is checked
	// (before Member is called for the array), with the member's name.
	Element func(name, value []byte) error
}

// Walk is Check, calling f's functions as it goes when the top-level
// value is an object. The names of an object are compared when it closes:
// a duplicate is reported after the functions have seen both.
func Walk(b []byte, f Fields) error {
	if len(b) >= first {
		return fmt.Errorf("JSON text of %d octets: too long to check", len(b))
	}
	var (
		small  [256]uint32 // the names' positions, as long as they fit
		names  = small[:0] // positions of the names of the open objects
		object set         // the container at a level is an object
		named  set         // it has names in the stack
		depth  int
		want   = wantValue
		// The member of the top-level object being read, and where its
		// value, and the element of that value, start.
		member          []byte
		valueAt, elemAt int
		visit           = f.Member != nil || f.Element != nil
	)
	// done is called when a value ends at i, at depth d.
	done := func(d, i int) error {
		switch {
		case !visit || !object.get(1):
		case d == 1 && f.Member != nil:
			return f.Member(member, b[valueAt:i])
		case d == 2 && !object.get(2) && f.Element != nil:
			return f.Element(member, b[elemAt:i])
		}
		return nil
	}
	for i := 0; ; {
		for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
			i++
		}
		if i == len(b) {
			if want == wantNothing {
				return nil
			}
			return errAt(i, "unexpected end of input")
		}
		c := b[i]
		switch want {
		case wantNothing:
			return errAt(i, "data after the top-level value")
		case wantColon:
			if c != ':' {
				return errAt(i, "want ':' after an object name")
			}
			i++
			want = wantValue
			continue
		case wantCommaOrClose:
			switch {
			case c == ',' && object.get(depth):
				i, want = i+1, wantName
				continue
			case c == ',':
				i, want = i+1, wantValue
				continue
			case c == '}' && object.get(depth), c == ']' && !object.get(depth):
			default:
				return errAt(i, "want ',' or the end of the object or array")
			}
		case wantNameOrClose, wantName:
			if c == '}' && want == wantNameOrClose {
				break
			}
			if c != '"' {
				return errAt(i, "want an object name")
			}
			pos := uint32(i)
			if !named.get(depth) {
				named.put(depth, true)
				pos |= first
			}
			if len(names) == cap(names) {
				// The rest of the text holds at most one name per five
				// octets ("":0, or "":0}): one allocation for all.
				more := make([]uint32, len(names), len(names)+(len(b)-i)/5+1)
				copy(more, names)
				names = more
			}
			names = append(names, pos)
			start := i
			var err error
			if i, err = scanString(b, i); err != nil {
				return err
			}
			if depth == 1 {
				member = b[start:i:i]
			}
			want = wantColon
			continue
		case wantValueOrClose:
			if c == ']' {
				break
			}
			fallthrough
		case wantValue:
			switch depth {
			case 1:
				valueAt = i
			case 2:
				elemAt = i
			}
			var err error
			switch c {
			case '{', '[':
				if depth++; depth > MaxDepth {
					return ErrTooDeep
				}
				object.put(depth, c == '{')
				named.put(depth, false)
				want = wantValueOrClose
				if c == '{' {
					want = wantNameOrClose
				}
				i++
				continue
			case '"':
				i, err = scanString(b, i)
			case 't':
				i, err = scanLiteral(b, i, "true")
			case 'f':
				i, err = scanLiteral(b, i, "false")
			case 'n':
				i, err = scanLiteral(b, i, "null")
			default:
				i, err = scanNumber(b, i)
			}
			if err != nil {
				return err
			}
			if err := done(depth, i); err != nil {
				return err
			}
			want = wantCommaOrClose
			if depth == 0 {
				want = wantNothing
			}
			continue
		}
		// c closes the container at depth.
		if c == '}' && named.get(depth) {
			j := len(names) - 1
			for names[j]&first == 0 {
				j--
			}
			if err := unique(b, names[j:]); err != nil {
				return err
			}
			names = names[:j]
		}
		i++
		depth--
		if err := done(depth, i); err != nil {
			return err
		}
		want = wantCommaOrClose
		if depth == 0 {
			want = wantNothing
		}
	}
}

// scanString checks the string at b[i], a quote, and returns the offset
// after it: no control character, valid escapes, surrogate escapes in
// pairs, valid UTF-8.
func scanString(b []byte, i int) (int, error) {
	start := i
	for i++; i < len(b); {
		for i < len(b) && plainOctet[b[i]] { // the common case, in a tight loop
			i++
		}
		if i == len(b) {
			break
		}
		c := b[i]
		switch {
		case c == '"':
			return i + 1, nil
		case c < 0x20:
			return 0, errAt(i, "control character in a string")
		case c == '\\':
			if i+1 >= len(b) {
				return 0, errAt(i, "unexpected end of input in an escape")
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
				continue
			case 'u':
			default:
				return 0, errAt(i, "invalid escape")
			}
			r, ok := hex4(b, i+2)
			if !ok {
				return 0, errAt(i, "invalid \\u escape")
			}
			i += 6
			switch {
			case utf16.IsSurrogate(r) && r >= 0xdc00:
				return 0, errAt(i-6, "lone low surrogate escape")
			case utf16.IsSurrogate(r):
				lo, ok := hex4(b, i+2)
				if i+1 >= len(b) || b[i] != '\\' || b[i+1] != 'u' || !ok || lo < 0xdc00 || lo > 0xdfff {
					return 0, errAt(i-6, "high surrogate escape without its low half")
				}
				i += 6
			}
		case c < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				return 0, errAt(i, "invalid UTF-8 in a string")
			}
			i += n
		}
	}
	return 0, errAt(start, "unterminated string")
}

// plainOctet marks the octets a string may hold as they are, with nothing
// to check: ASCII but controls, the quote and the backslash.
var plainOctet = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func scanLiteral(b []byte, i int, lit string) (int, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, errAt(i, "invalid literal")
	}
	return i + len(lit), nil
}

// scanNumber checks the number at b[i] (RFC 8259 section 6) and returns
// the offset after it.
func scanNumber(b []byte, i int) (int, error) {
	start := i
	digits := func() int {
		n := 0
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i, n = i+1, n+1
		}
		return n
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case digits() == 0:
		return 0, errAt(start, "invalid character at the start of a value")
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return 0, errAt(start, "invalid number")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return 0, errAt(start, "invalid number")
		}
	}
	return i, nil
}

// unique checks the names at the positions ps, the names of one object,
// reordering ps.
func unique(b []byte, ps []uint32) error {
	for i := range ps {
		ps[i] &^= first
	}
	cmpAt := func(p, q uint32) int { return compare(b[p:], b[q:]) }
	if len(ps) <= 16 {
		for i := 1; i < len(ps); i++ {
			for j := range i {
				if cmpAt(ps[i], ps[j]) == 0 {
					return &DuplicateError{Name: unescape(b[ps[i]:])}
				}
			}
		}
		return nil
	}
	slices.SortFunc(ps, cmpAt)
	for i := 1; i < len(ps); i++ {
		if cmpAt(ps[i-1], ps[i]) == 0 {
			return &DuplicateError{Name: unescape(b[ps[i]:])}
		}
	}
	return nil
}

// compare orders the valid JSON strings at the start of a and b by their
// unescaped UTF-8 octets: those between the quotes when neither has an
// escape, else one octet at a time.
func compare(a, b []byte) int {
	if p, q := plain(a), plain(b); p != nil && q != nil {
		return bytes.Compare(p, q)
	}
	x, y := reader{s: a, i: 1}, reader{s: b, i: 1}
	for {
		c, ok := x.next()
		d, ok2 := y.next()
		switch {
		case !ok || !ok2:
			return cmp.Compare(btoi(ok), btoi(ok2))
		case c != d:
			return cmp.Compare(c, d)
		}
	}
}

func btoi(v bool) int {
	if v {
		return 1
	}
	return 0
}

// plain returns the octets between the quotes of the valid JSON string at
// the start of s when it has no escape, else nil.
func plain(s []byte) []byte {
	for i := 1; ; i++ {
		switch s[i] {
		case '"':
			return s[1:i:i]
		case '\\':
			return nil
		}
	}
}

// unescape returns the content of the valid JSON string at the start of s.
func unescape(s []byte) string {
	r := reader{s: s, i: 1}
	var out []byte
	for c, ok := r.next(); ok; c, ok = r.next() {
		out = append(out, c)
	}
	return string(out)
}

// reader yields the unescaped UTF-8 octets of a valid JSON string, one at
// a time, from s[i:], up to its closing quote.
type reader struct {
	s       []byte
	i       int
	pending [utf8.UTFMax]byte // an escape's octets not yet yielded
	n, at   int
}

func (r *reader) next() (byte, bool) {
	if r.at < r.n {
		r.at++
		return r.pending[r.at-1], true
	}
	c := r.s[r.i]
	switch c {
	case '"':
		return 0, false
	case '\\':
	default:
		r.i++
		return c, true
	}
	e := r.s[r.i+1]
	r.i += 2
	switch e {
	case 'b':
		return '\b', true
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	case 'u':
	default: // '"', '\\' and '/' stand for themselves
		return e, true
	}
	ru, _ := hex4(r.s, r.i)
	r.i += 4
	if utf16.IsSurrogate(ru) { // valid: a pair, high then low
		lo, _ := hex4(r.s, r.i+2)
		ru = utf16.DecodeRune(ru, lo)
		r.i += 6
	}
	r.n, r.at = utf8.EncodeRune(r.pending[:], ru), 1
	return r.pending[0], true
}

// hex4 reads four hexadecimal digits at s[i:].
func hex4(s []byte, i int) (rune, bool) {
	if i < 0 || i+4 > len(s) {
		return 0, false
	}
	var v rune
	for _, c := range s[i : i+4] {
		v <<= 4
		switch {
		case '0' <= c && c <= '9':
			v |= rune(c - '0')
		case 'a' <= c && c <= 'f':
			v |= rune(c - 'a' + 10)
		case 'A' <= c && c <= 'F':
			v |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return v, true
}
