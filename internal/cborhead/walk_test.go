package cborhead

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/fxamacker/cbor/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// anyMode reads any well-formed item, as the callers' modes do.
var anyMode = func() cbor.DecMode {
	dm, err := cbor.DecOptions{
		IndefLength:      cbor.IndefLengthAllowed,
		TagsMd:           cbor.TagsAllowed,
		MaxNestedLevels:  65535,
		MaxArrayElements: math.MaxInt32,
		MaxMapPairs:      math.MaxInt32,
	}.DecMode()
	if err != nil {
		panic(err)
	}
	return dm
}()

// firstItem returns the first data item of b as the library delimits it,
// or false when b does not start with a well-formed item.
func firstItem(b []byte) ([]byte, bool) {
	var v View
	rest, err := anyMode.UnmarshalFirst(b, &v)
	if err != nil || anyMode.Wellformed(b[:len(b)-len(rest)]) != nil {
		return nil, false
	}
	return b[:len(b)-len(rest)], true
}

func TestSkip(t *testing.T) {
	for _, hexItem := range [][]byte{
		{0x00}, {0x18, 0x20}, {0x3b, 1, 2, 3, 4, 5, 6, 7, 8}, {0x43, 1, 2, 3}, {0x60},
		{0x5f, 0x41, 1, 0x40, 0xff}, {0x7f, 0xff},
		{0x83, 0x01, 0x82, 0x02, 0x03, 0x04}, {0x9f, 0x01, 0x9f, 0xff, 0x80, 0xff},
		{0xa2, 0x01, 0xa0, 0x61, 'a', 0x9f, 0xbf, 0xff, 0xff},
		{0xbf, 0x01, 0x02, 0xff}, {0xd2, 0x84, 0x40, 0xa0, 0x40, 0x40},
		{0xd9, 0xff, 0xff, 0xc1, 0x00}, {0xf9, 0x3c, 0x00}, {0xfb, 0, 0, 0, 0, 0, 0, 0, 0}, {0xf8, 0x20},
	} {
		in := append(bytes.Clone(hexItem), 0xaa, 0xbb) // what follows the item
		want, ok := firstItem(in)
		require.True(t, ok, "%x", hexItem)
		item, rest := Item(in)
		assert.Equal(t, want, item, "%x", hexItem)
		assert.Equal(t, []byte{0xaa, 0xbb}, rest, "%x", hexItem)
	}
}

func TestItems(t *testing.T) {
	for _, c := range []struct {
		in    []byte
		n     int
		items [][]byte
	}{
		{[]byte{0x80}, 0, nil},
		{[]byte{0x82, 0x01, 0x41, 0xff}, 2, [][]byte{{0x01}, {0x41, 0xff}}},
		{[]byte{0x9f, 0x01, 0x80, 0xff}, 2, [][]byte{{0x01}, {0x80}}},
		{[]byte{0xa1, 0x61, 'a', 0xa0}, 2, [][]byte{{0x61, 'a'}, {0xa0}}},
		{[]byte{0xbf, 0x61, 'a', 0xa0, 0xff}, 2, [][]byte{{0x61, 'a'}, {0xa0}}},
		{[]byte{0xb8, 0x00}, 0, nil},
	} {
		in := append(bytes.Clone(c.in), 0xcc)
		it, n := Open(in)
		assert.Equal(t, c.n, n, "%x", c.in)
		var got [][]byte
		for item, ok := it.Next(); ok; item, ok = it.Next() {
			got = append(got, item)
		}
		assert.Equal(t, c.items, got, "%x", c.in)
		assert.Equal(t, []byte{0xcc}, it.Rest(), "%x", c.in)
	}
}

func TestString(t *testing.T) {
	s, inPlace := String([]byte{0x63, 'a', 'b', 'c'})
	assert.Equal(t, "abc", string(s))
	assert.True(t, inPlace)
	s, inPlace = String([]byte{0x7f, 0x61, 'a', 0x60, 0x62, 'b', 'c', 0xff})
	assert.Equal(t, "abc", string(s))
	assert.False(t, inPlace)
	s, _ = String([]byte{0x5f, 0xff})
	assert.Empty(t, s)

	assert.True(t, ValidText([]byte{0x62, 0xc3, 0xa9}))
	assert.False(t, ValidText([]byte{0x61, 0xff}))
	// RFC 8949 section 3.2.3: each chunk must be valid on its own, so a
	// character split across two chunks is invalid.
	assert.False(t, ValidText([]byte{0x7f, 0x61, 0xc3, 0x61, 0xa9, 0xff}))
	assert.True(t, ValidText([]byte{0x7f, 0x62, 0xc3, 0xa9, 0xff}))
}

// The walk allocates nothing, however many items or levels it reads.
func TestWalk_AllocatesNothing(t *testing.T) {
	wide := append([]byte{0x9a, 0, 1, 0, 0}, bytes.Repeat([]byte{0xa0}, 1<<16)...)
	deep := append(bytes.Repeat([]byte{0x9f}, 10000), bytes.Repeat([]byte{0xff}, 10000)...)
	for _, in := range [][]byte{wide, deep} {
		require.NoError(t, anyMode.Wellformed(in))
		assert.Zero(t, testing.AllocsPerRun(5, func() {
			it, _ := Open(in)
			for _, ok := it.Next(); ok; _, ok = it.Next() {
			}
			_ = Skip(in)
		}))
	}
}

// FuzzWalk holds the walk to the library: on every well-formed item, Skip
// ends where the library ends it; an array's or a map's items, walked,
// are its content in order; a string's content and its UTF-8 validity
// are what the library decodes.
func FuzzWalk(f *testing.F) {
	for _, s := range [][]byte{{0x83, 0x01, 0x82, 0x02, 0x03, 0x04}, {0xbf, 0x61, 'a', 0x9f, 0xff, 0xff},
		{0x7f, 0x61, 'a', 0x60, 0xff}, {0xd2, 0x84, 0x43, 0xa1, 0x01, 0x26, 0xa0, 0x40, 0x40}} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		item, ok := firstItem(b)
		if !ok {
			return
		}
		got, rest := Item(b)
		require.Equal(t, item, got)
		require.Equal(t, b[len(item):], rest)
		switch Major(item) {
		case Array, Map:
			it, n := Open(item)
			var content []byte
			count := 0
			for e, ok := it.Next(); ok; e, ok = it.Next() {
				content = append(content, e...)
				count++
			}
			require.Empty(t, it.Rest())
			require.Equal(t, n, count)
			if item[0]&0x1f == 31 { // one octet of head, the items, the break
				require.True(t, bytes.Equal(item[1:len(item)-1], content))
				return
			}
			require.True(t, bytes.Equal(item[len(item)-len(content):], content))
		case Text:
			var s string
			err := anyMode.Unmarshal(item, &s)
			valid := ValidText(item)
			require.Equal(t, utf8.ValidString(s) && err == nil, valid)
			if valid {
				got, _ := String(item)
				require.Equal(t, s, string(got))
			}
		case Bytes:
			var want []byte
			require.NoError(t, anyMode.Unmarshal(item, &want))
			got, _ := String(item)
			require.Equal(t, len(want), len(got))
			require.True(t, bytes.Equal(want, got))
		}
	})
}

func TestCompareKey(t *testing.T) {
	same := [][2][]byte{
		{{0x18, 0x20}, {0x19, 0x00, 0x20}},
		{{0x20}, {0x38, 0x00}},
		{{0x63, 'a', 'b', 'c'}, {0x7f, 0x61, 'a', 0x60, 0x62, 'b', 'c', 0xff}},
		{{0x60}, {0x7f, 0xff}},
		{{0x60}, {0x7f, 0x60, 0x60, 0xff}},
		{{0x78, 0x01, 'x'}, {0x61, 'x'}},
	}
	for _, p := range same {
		assert.Zero(t, CompareKey(p[0], p[1]), "%x %x", p[0], p[1])
		assert.Zero(t, CompareKey(p[1], p[0]), "%x %x", p[1], p[0])
	}
	differ := [][2][]byte{
		{{0x00}, {0x20}},       // 0 and -1
		{{0x01}, {0x61, 0x01}}, // 1 and "\x01"
		{{0x61, 'a'}, {0x62, 'a', 'a'}},
		{{0x61, 'a'}, {0x41, 'a'}}, // text and bytes
		{{0x7f, 0x61, 'a', 0xff}, {0x7f, 0x61, 'b', 0xff}},
	}
	for _, p := range differ {
		assert.NotZero(t, CompareKey(p[0], p[1]), "%x %x", p[0], p[1])
		assert.Equal(t, -CompareKey(p[0], p[1]), CompareKey(p[1], p[0]), "%x %x", p[0], p[1])
	}
}

func TestRepeated(t *testing.T) {
	for _, n := range []int{2, 16, 17, 1000} {
		var m []byte
		var ps []uint32
		for i := range n {
			ps = append(ps, uint32(len(m)))
			m = append(m, 0x19, byte(i>>8), byte(i)) // i, in a two-octet head
		}
		_, found := Repeated(m, slices.Clone(ps))
		assert.False(t, found, n)
		ps = append(ps, uint32(len(m)))
		m = append(m, byte(n/2)&0x17) // one of them again, in its shortest head
		at, found := Repeated(m, slices.Clone(ps))
		assert.True(t, found, n)
		if found {
			v, _, _ := Head(m[at:])
			assert.Equal(t, uint64(n/2)&0x17, v)
		}
	}
}

// FuzzRepeated holds Repeated to the library: the keys of a well-formed
// map, integers and text strings, repeat exactly when the library, refusing
// duplicate keys, refuses the map.
func FuzzRepeated(f *testing.F) {
	f.Add([]byte{0xa2, 0x18, 0x20, 0x01, 0x19, 0x00, 0x20, 0x02})
	f.Add([]byte{0xbf, 0x61, 'a', 0x01, 0x7f, 0x61, 'a', 0xff, 0x02, 0xff})
	f.Add([]byte{0xa2, 0x00, 0x00, 0x20, 0x00})
	dup, err := cbor.DecOptions{
		DupMapKey:        cbor.DupMapKeyEnforcedAPF,
		IndefLength:      cbor.IndefLengthAllowed,
		TagsMd:           cbor.TagsAllowed,
		MaxNestedLevels:  65535,
		MaxArrayElements: math.MaxInt32,
		MaxMapPairs:      math.MaxInt32,
		IntDec:           cbor.IntDecConvertNone,
	}.DecMode()
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, b []byte) {
		item, ok := firstItem(b)
		if !ok || Major(item) != Map {
			return
		}
		it, _ := Open(item)
		var ps []uint32
		for k, ok := it.Next(); ok; k, ok = it.Next() {
			switch Major(k) {
			case Unsigned:
			case Negative:
				if v, _, _ := Head(k); v > math.MaxInt64 {
					return // beyond int64: the library makes it a big.Int, no map key
				}
			case Text:
				if !ValidText(k) {
					return
				}
			default:
				return
			}
			ps = append(ps, uint32(len(item)-it.Left()-len(k)))
			it.Next()
		}
		var m map[any]View
		libErr := dup.Unmarshal(item, &m)
		var de *cbor.DupMapKeyError
		if libErr != nil && !errors.As(libErr, &de) {
			return // refused for another reason (a tag on unfit content)
		}
		_, found := Repeated(item, ps)
		require.Equal(t, libErr != nil, found, "library: %v", libErr)
	})
}
