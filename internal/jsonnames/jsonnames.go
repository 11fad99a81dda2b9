// Package jsonnames checks that no object of a JSON text has two members
// of the same name, the names compared once unescaped ("a" and "\u0061"
// are one name): RFC 8259 section 4 makes unique names a SHOULD, RFC 7493
// section 2.3 a MUST, and RFC 7515 section 4 asks a JWS parser to reject
// a duplicate header parameter or to read only the last.
//
// It runs on a text that a validating decoder has read with duplicate
// names allowed (jsontext.AllowDuplicateNames), so that a stranger's
// octets cost what their size says: it copies no name and builds no set.
// It keeps the position of each name of the objects still open, and when
// an object closes sorts its names in place and compares neighbours. The
// positions of the first 256 names open at once live on the stack; past
// them, one allocation holds as many as the rest of the text can have
// names (one per five octets: "":0,), so that what Check allocates is
// less than the size of the text, whatever its shape. A validating decoder that
// tracks names itself keeps, for each open object, a copy of its names
// and, past a few dozen, a map of them: tens of octets per name, and per
// level of nesting.
package jsonnames

import (
	"cmp"
	"fmt"
	"slices"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting Check reads: that of jsontext, which
// reads the text first (RFC 8259 section 9 lets a parser bound it).
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

// Check reports a name that appears twice in one object of b, a valid
// JSON text (RFC 8259) shorter than 2 GiB and nested at most MaxDepth
// deep, as a *DuplicateError, or nil. On a text that is not valid JSON
// its result is unspecified.
func Check(b []byte) error {
	if len(b) >= first {
		return fmt.Errorf("JSON text of %d octets: too long to check", len(b))
	}
	var (
		small [256]uint32 // the names' positions, as long as they fit
		names = small[:0] // positions of the names of the open objects
		// object and named hold a bit per level: the container is an
		// object, and has names in the stack.
		object, named [MaxDepth/64 + 1]uint64
		depth         int
		wantName      bool
	)
	bit := func(set *[MaxDepth/64 + 1]uint64, d int) bool { return set[d/64]&(1<<(d%64)) != 0 }
	put := func(set *[MaxDepth/64 + 1]uint64, d int, v bool) {
		if v {
			set[d/64] |= 1 << (d % 64)
		} else {
			set[d/64] &^= 1 << (d % 64)
		}
	}
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			start := i
			for i++; b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			if !wantName {
				continue
			}
			wantName = false
			pos := uint32(start)
			if !bit(&named, depth) {
				put(&named, depth, true)
				pos |= first
			}
			if len(names) == cap(names) {
				// The rest of the text holds at most one name per five
				// octets ("":0, or "":0}): one allocation for all.
				more := make([]uint32, len(names), len(names)+(len(b)-start)/5+1)
				copy(more, names)
				names = more
			}
			names = append(names, pos)
		case '{', '[':
			depth++
			if depth > MaxDepth {
				return fmt.Errorf("JSON nested deeper than %d", MaxDepth)
			}
			put(&object, depth, c == '{')
			put(&named, depth, false)
			wantName = c == '{'
		case '}', ']':
			if c == '}' && bit(&named, depth) {
				j := len(names) - 1
				for names[j]&first == 0 {
					j--
				}
				if err := unique(b, names[j:]); err != nil {
					return err
				}
				names = names[:j]
			}
			depth--
		case ',':
			wantName = bit(&object, depth)
		}
	}
	return nil
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

// compare orders the JSON strings at the start of a and b by their
// unescaped UTF-8 octets.
func compare(a, b []byte) int {
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

// unescape returns the content of the JSON string at the start of s.
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
	ru := hex4(r.s[r.i:])
	r.i += 4
	if utf16.IsSurrogate(ru) { // valid JSON: a pair, high then low
		ru = utf16.DecodeRune(ru, hex4(r.s[r.i+2:]))
		r.i += 6
	}
	r.n, r.at = utf8.EncodeRune(r.pending[:], ru), 1
	return r.pending[0], true
}

func hex4(s []byte) rune {
	var v rune
	for _, c := range s[:4] {
		v <<= 4
		switch {
		case c <= '9':
			v |= rune(c - '0')
		case c <= 'F':
			v |= rune(c - 'A' + 10)
		default:
			v |= rune(c - 'a' + 10)
		}
	}
	return v
}
