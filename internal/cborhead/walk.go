package cborhead

import (
	"bytes"
	"cmp"
	"slices"
	"unicode/utf8"
)

// The functions below walk a data item that the CBOR library has already
// found well formed (DecMode.Wellformed): they read its structure in place,
// building nothing, and rely on that check for every length and count. On
// octets that are not well formed their results are unspecified (they do
// not panic on a short input only because the check ran first).

// Major types (RFC 8949 section 3.1).
const (
	Unsigned = 0
	Negative = 1
	Bytes    = 2
	Text     = 3
	Array    = 4
	Map      = 5
	Tag      = 6
	Simple   = 7
)

// Major returns the major type of the item at the start of b.
func Major(b []byte) byte { return b[0] >> 5 }

// Skip returns the octets after the well-formed data item at the start of
// b. It keeps one count of the items left for definite lengths, and
// recurses only into an indefinite length, whose end is its break code:
// it allocates nothing.
func Skip(b []byte) []byte {
	for n := 1; n > 0; n-- {
		if b[0]&0x1f == 31 { // an indefinite length: items up to the break
			b = b[1:]
			for b[0] != 0xff {
				b = Skip(b)
			}
			b = b[1:]
			continue
		}
		arg, rest, _ := Head(b)
		switch Major(b) {
		case Bytes, Text:
			rest = rest[arg:]
		case Array:
			n += int(arg)
		case Map:
			n += 2 * int(arg)
		case Tag:
			n++
		}
		b = rest
	}
	return b
}

// Item returns the well-formed data item at the start of b, and the octets
// after it.
func Item(b []byte) (item, rest []byte) {
	rest = Skip(b)
	return b[:len(b)-len(rest)], rest
}

// Items walks the items of a well-formed array or map, in place: a map's
// keys and values alternate. Its zero value is empty.
type Items struct {
	rest  []byte
	left  uint64 // items left, for a definite length
	indef bool
}

// Open starts a walk over the array or map at the start of b. n is its
// number of items (twice its pairs, for a map): its head's, or for an
// indefinite length, counted by a first walk, which allocates nothing.
func Open(b []byte) (it Items, n int) {
	if b[0]&0x1f == 31 {
		it = Items{rest: b[1:], indef: true}
		for c := it; ; n++ {
			if _, ok := c.Next(); !ok {
				return it, n
			}
		}
	}
	arg, rest, _ := Head(b)
	if Major(b) == Map {
		arg *= 2
	}
	return Items{rest: rest, left: arg}, int(arg)
}

// Next returns the next item, or false at the end of the container.
func (it *Items) Next() ([]byte, bool) {
	switch {
	case it.indef && it.rest[0] == 0xff:
		return nil, false
	case !it.indef && it.left == 0:
		return nil, false
	}
	it.left--
	item, rest := Item(it.rest)
	it.rest = rest
	return item, true
}

// Left returns how many octets of the buffer given to Open follow the
// last item Next returned: that item starts len(buf)-Left()-len(item)
// octets into the buffer.
func (it *Items) Left() int { return len(it.rest) }

// Rest returns the octets after the container, once Next has returned
// false.
func (it *Items) Rest() []byte {
	if it.indef {
		return it.rest[1:] // the break code
	}
	return it.rest
}

// String returns the content of the well-formed text or byte string at
// the start of b: in place for a definite length; for an indefinite
// length, its chunks joined into a new slice, or nil when it has none.
// inPlace says which.
func String(b []byte) (s []byte, inPlace bool) {
	if b[0]&0x1f != 31 {
		n, rest, _ := Head(b)
		return rest[:n:n], true
	}
	it, _ := Open(b)
	for c, ok := it.Next(); ok; c, ok = it.Next() {
		chunk, _ := String(c) // a chunk has a definite length
		s = append(s, chunk...)
	}
	return s, false
}

// ValidText reports whether the well-formed text string at the start of b
// is valid UTF-8 (RFC 8949 section 5.3.1), each chunk of an indefinite
// length on its own, as section 3.2.3 requires, without joining them.
func ValidText(b []byte) bool {
	if b[0]&0x1f != 31 {
		s, _ := String(b)
		return utf8.Valid(s)
	}
	it, _ := Open(b)
	for c, ok := it.Next(); ok; c, ok = it.Next() {
		if s, _ := String(c); !utf8.Valid(s) {
			return false
		}
	}
	return true
}

// CompareKey orders two well-formed data items that are integers or
// strings, as map keys are compared (RFC 8949 section 5.6, by value): by
// major type, then by an integer's argument or by a string's content
// octets, whatever the length of its head or its chunks. It is 0 exactly
// when the two are the same key.
func CompareKey(a, b []byte) int {
	if c := cmp.Compare(Major(a), Major(b)); c != 0 {
		return c
	}
	if m := Major(a); m != Bytes && m != Text {
		x, _, _ := Head(a)
		y, _, _ := Head(b)
		return cmp.Compare(x, y)
	}
	if a[0]&0x1f != 31 && b[0]&0x1f != 31 { // definite lengths: in place
		n, x, _ := Head(a)
		m, y, _ := Head(b)
		return bytes.Compare(x[:n], y[:m])
	}
	x, y := chunks{s: a}, chunks{s: b}
	var p, q []byte // what is left of the current chunk of each
	for {
		for len(p) == 0 && x.next(&p) {
		}
		for len(q) == 0 && y.next(&q) {
		}
		n := min(len(p), len(q))
		if n == 0 {
			return cmp.Compare(len(p), len(q)) // one or both at their end
		}
		if c := bytes.Compare(p[:n], q[:n]); c != 0 {
			return c
		}
		p, q = p[n:], q[n:]
	}
}

// chunks walks the chunks of a well-formed string: one for a definite
// length, each of an indefinite one's.
type chunks struct {
	s     []byte // what is left of the item
	begun bool
	indef bool
}

// next sets *c to the next chunk's content, or reports the end.
func (ch *chunks) next(c *[]byte) bool {
	if !ch.begun {
		ch.begun = true
		if ch.s[0]&0x1f != 31 {
			*c, _ = String(ch.s)
			return true
		}
		ch.indef, ch.s = true, ch.s[1:]
	}
	if !ch.indef || ch.s[0] == 0xff {
		return false
	}
	var chunk []byte
	chunk, ch.s = Item(ch.s)
	*c, _ = String(chunk)
	return true
}

// Repeated reports a key found twice among the keys at the positions ps
// of m (shorter than 4 GiB), each an integer or a string, and the
// position of one of them. It
// reorders ps: for more than 16 keys it sorts them in place, so that it
// needs no memory but ps, and compares neighbours.
func Repeated(m []byte, ps []uint32) (uint32, bool) {
	at := func(p, q uint32) int { return CompareKey(m[p:], m[q:]) }
	if len(ps) <= 16 {
		for i := 1; i < len(ps); i++ {
			for j := range i {
				if at(ps[i], ps[j]) == 0 {
					return ps[i], true
				}
			}
		}
		return 0, false
	}
	slices.SortFunc(ps, at)
	for i := 1; i < len(ps); i++ {
		if at(ps[i-1], ps[i]) == 0 {
			return ps[i], true
		}
	}
	return 0, false
}
