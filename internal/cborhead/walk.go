package cborhead

import (
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
// number of items (twice its pairs, for a map), or -1 for an indefinite
// length, which only the walk counts.
func Open(b []byte) (it Items, n int) {
	if b[0]&0x1f == 31 {
		return Items{rest: b[1:], indef: true}, -1
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
	x, y := chunks{s: a}, chunks{s: b}
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

// chunks yields the content octets of a well-formed string, one at a
// time, across the chunks of an indefinite length.
type chunks struct {
	s     []byte // what is left of the item
	cur   []byte // what is left of the current chunk
	indef bool
	begun bool
}

func (c *chunks) next() (byte, bool) {
	for len(c.cur) == 0 {
		switch {
		case !c.begun:
			c.begun = true
			if c.s[0]&0x1f == 31 {
				c.indef, c.s = true, c.s[1:]
				continue
			}
			c.cur, _ = String(c.s)
			c.s = nil
			if len(c.cur) == 0 {
				return 0, false
			}
		case !c.indef || c.s[0] == 0xff:
			return 0, false
		default:
			var chunk []byte
			chunk, c.s = Item(c.s)
			c.cur, _ = String(chunk)
		}
	}
	b := c.cur[0]
	c.cur = c.cur[1:]
	return b, true
}

// Repeated reports a key found twice among the keys at the positions ps
// of m, each an integer or a string, and the position of one of them. It
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
