package cose

import (
	"bytes"
	"fmt"

	"github.com/fxamacker/cbor/v2"
)

// Decoding limits. Sizes are bounded by maxSize before decoding starts;
// these bound the shape. The outer structure needs two levels (the array
// and the unprotected map), a protected header a few more.
const (
	maxNesting = 8
	maxItems   = 256
)

var (
	// outerMode decodes the tagged message: tags allowed, so that the
	// outer tag can be read and checked.
	outerMode cbor.DecMode
	// strictMode decodes everything inside it: no tags at all.
	strictMode cbor.DecMode
	// encMode re-encodes the structure for the canonical form check and
	// matches what Sign emits (RFC 8949 core deterministic encoding).
	encMode cbor.EncMode
)

func init() {
	opts := cbor.DecOptions{
		DupMapKey:        cbor.DupMapKeyEnforcedAPF,
		IndefLength:      cbor.IndefLengthForbidden,
		MaxNestedLevels:  maxNesting,
		MaxArrayElements: maxItems,
		MaxMapPairs:      maxItems,
		UTF8:             cbor.UTF8RejectInvalid,
		IntDec:           cbor.IntDecConvertSignedOrFail,
		TagsMd:           cbor.TagsAllowed,
	}
	var err error
	if outerMode, err = opts.DecMode(); err != nil {
		panic(err)
	}
	opts.TagsMd = cbor.TagsForbidden
	if strictMode, err = opts.DecMode(); err != nil {
		panic(err)
	}
	if encMode, err = (cbor.EncOptions{Sort: cbor.SortCoreDeterministic, IndefLength: cbor.IndefLengthForbidden}).EncMode(); err != nil {
		panic(err)
	}
}

// sign1 is a COSE_Sign1 message that passed the structural checks.
type sign1 struct {
	rawProtected cbor.RawMessage // the protected bstr, head included
	protected    []byte          // its content
	payload      []byte
	signature    []byte
}

// CBOR major types.
const (
	majorBytes = 2
	majorMap   = 5
)

func major(raw []byte) byte { return raw[0] >> 5 }

// emptyMap is the only unprotected header accepted.
var emptyMap = []byte{0xa0}

// parse checks the size, strict CBOR, the tag, the four-element structure,
// the empty unprotected header and the canonical outer form.
func parse(msg []byte, maxSize int) (*sign1, error) {
	if maxSize <= 0 {
		maxSize = DefaultMaxSize
	}
	if len(msg) > maxSize {
		return nil, fmt.Errorf("%w: %d octets, limit %d", ErrTooLarge, len(msg), maxSize)
	}
	if len(msg) == 0 {
		return nil, malformed("empty input")
	}
	if major(msg) == 4 {
		return nil, malformed("untagged COSE_Sign1, want tag %d", Tag)
	}
	var tag cbor.RawTag
	if err := outerMode.Unmarshal(msg, &tag); err != nil {
		return nil, malformed("%v", err)
	}
	if tag.Number != Tag {
		return nil, malformed("tag %d, want %d (COSE_Sign1)", tag.Number, Tag)
	}
	var elems []cbor.RawMessage
	if err := strictMode.Unmarshal(tag.Content, &elems); err != nil {
		return nil, malformed("COSE_Sign1 content: %v", err)
	}
	if len(elems) != 4 {
		return nil, malformed("COSE_Sign1 array of %d elements, want 4", len(elems))
	}
	s := &sign1{rawProtected: elems[0]}
	for _, f := range []struct {
		name string
		raw  []byte
		dst  *[]byte
	}{
		{"protected header", elems[0], &s.protected},
		{"payload", elems[2], &s.payload},
		{"signature", elems[3], &s.signature},
	} {
		if f.name == "payload" && bytes.Equal(f.raw, []byte{0xf6}) {
			return nil, malformed("detached payload (nil) is not allowed")
		}
		if major(f.raw) != majorBytes {
			return nil, malformed("%s is not a byte string", f.name)
		}
		if err := strictMode.Unmarshal(f.raw, f.dst); err != nil {
			return nil, malformed("%s: %v", f.name, err)
		}
	}
	if major(elems[1]) != majorMap {
		return nil, malformed("unprotected header is not a map")
	}
	if !bytes.Equal(elems[1], emptyMap) {
		return nil, malformed("unprotected header must be empty: it is not signed, and the handoff digest covers the octets as sent")
	}
	if len(s.payload) == 0 {
		return nil, malformed("empty payload")
	}
	if len(s.signature) == 0 {
		return nil, malformed("empty signature")
	}
	canon, err := encMode.Marshal(cbor.Tag{
		Number:  Tag,
		Content: []any{s.protected, cbor.RawMessage(emptyMap), s.payload, s.signature},
	})
	if err != nil {
		return nil, malformed("%v", err)
	}
	if !bytes.Equal(canon, msg) {
		return nil, malformed("not in canonical form (a tag, array or byte string head is longer than needed)")
	}
	return s, nil
}

// parseProtected parses the protected header strictly and applies the
// draft's rules to it (HC-15, HC-17, HC-18, HC-60). The whole map is decoded,
// unknown labels included, so that every value in it is strict CBOR too.
func parseProtected(b []byte) (Header, error) {
	hdr := map[any]any{}
	if len(b) > 0 {
		if major(b) != majorMap {
			return Header{}, malformed("protected header is not a map")
		}
		if err := strictMode.Unmarshal(b, &hdr); err != nil {
			return Header{}, malformed("protected header: %v", err)
		}
	}
	for label := range hdr {
		switch label.(type) {
		case int64, string:
		default:
			return Header{}, malformed("protected header label of type %T", label)
		}
	}

	ct, ok := hdr[int64(3)]
	if !ok {
		return Header{}, fmt.Errorf("%w: content type (label 3) is missing, want %q", ErrType, ContentType)
	}
	if s, ok := ct.(string); !ok || s != ContentType {
		return Header{}, fmt.Errorf("%w: content type %#v, want %q", ErrType, ct, ContentType)
	}

	if _, ok := hdr[int64(2)]; ok {
		return Header{}, fmt.Errorf("%w: crit (label 2) is not allowed in a signed handoff", ErrCrit)
	}

	rawAlg, ok := hdr[int64(1)]
	if !ok {
		return Header{}, fmt.Errorf("%w: alg (label 1) is missing", ErrAlg)
	}
	id, ok := rawAlg.(int64)
	if !ok {
		return Header{}, fmt.Errorf("%w: alg %#v is not an integer", ErrAlg, rawAlg)
	}
	alg, ok := algName(id)
	if !ok {
		return Header{}, fmt.Errorf("%w: alg %d is not an accepted asymmetric algorithm", ErrAlg, id)
	}

	var kid []byte
	if v, ok := hdr[int64(4)]; ok {
		if kid, ok = v.([]byte); !ok {
			return Header{}, malformed("kid (label 4) is not a byte string")
		}
	}
	return Header{Alg: alg, KID: string(kid)}, nil
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}
