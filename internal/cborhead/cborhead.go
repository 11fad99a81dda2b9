// Package cborhead reads CBOR data items in place: the head of an item
// (RFC 8949 section 3) and a decoding target that keeps an item's octets
// without copying them. It serves the Handoff object's reader and the
// COSE envelope's, which read the structure of octets the CBOR library
// has already checked to be well formed.
package cborhead

// Head reads the head of a data item: its argument, and the octets after
// the head. ok is false for an indefinite length, a reserved additional
// information value or a truncated head, which the callers leave to the
// CBOR library.
func Head(b []byte) (arg uint64, rest []byte, ok bool) {
	if len(b) == 0 {
		return 0, nil, false
	}
	n := 0
	switch ai := b[0] & 0x1f; {
	case ai < 24:
		return uint64(ai), b[1:], true
	case ai == 24:
		n = 1
	case ai == 25:
		n = 2
	case ai == 26:
		n = 4
	case ai == 27:
		n = 8
	default:
		return 0, nil, false
	}
	if len(b) < 1+n {
		return 0, nil, false
	}
	for _, c := range b[1 : 1+n] {
		arg = arg<<8 | uint64(c)
	}
	return arg, b[1+n:], true
}

// View is a data item as a view of the octets being decoded: fxamacker/cbor
// hands UnmarshalCBOR a slice of its input, which View keeps without a copy.
type View []byte

// UnmarshalCBOR keeps the item's octets.
func (v *View) UnmarshalCBOR(b []byte) error {
	*v = b
	return nil
}
