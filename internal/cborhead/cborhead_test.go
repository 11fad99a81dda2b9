package cborhead

import (
	"testing"

	"github.com/fxamacker/cbor/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHead(t *testing.T) {
	for _, c := range []struct {
		in   []byte
		arg  uint64
		rest int
		ok   bool
	}{
		{[]byte{0xd2, 0x84}, 18, 1, true},
		{[]byte{0xd8, 0x12, 0x84}, 18, 1, true},
		{[]byte{0x59, 0x01, 0x00}, 256, 0, true},
		{[]byte{0x5b, 0, 0, 0, 0, 0, 0, 0, 3, 'a', 'b', 'c'}, 3, 3, true},
		{[]byte{0x5f}, 0, 0, false},       // indefinite length
		{[]byte{0x1c}, 0, 0, false},       // reserved additional information
		{[]byte{0x59, 0x01}, 0, 0, false}, // truncated head
		{nil, 0, 0, false},
	} {
		arg, rest, ok := Head(c.in)
		assert.Equal(t, c.ok, ok, "%x", c.in)
		if ok {
			assert.Equal(t, c.arg, arg, "%x", c.in)
			assert.Len(t, rest, c.rest, "%x", c.in)
		}
	}
}

func TestView_KeepsTheItemInPlace(t *testing.T) {
	data, err := cbor.Marshal([]any{"a", []byte{1, 2}})
	require.NoError(t, err)
	var items []View
	require.NoError(t, cbor.Unmarshal(data, &items))
	require.Len(t, items, 2)
	assert.Equal(t, []byte{0x61, 'a'}, []byte(items[0]))
	assert.Equal(t, &data[len(data)-3], &items[1][0], "a view of the input, not a copy")
}
