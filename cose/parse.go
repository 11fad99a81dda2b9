package cose

import (
	"fmt"
	"math"
	"strings"

	"github.com/fxamacker/cbor/v2"

	"github.com/agentproto/handoff/internal/cborhead"
)

// Decoding limits. Sizes are bounded by the size limit before decoding
// starts, and a data item holds no more items than it has octets, so the
// shape is bounded by the size alone, up to the library's largest bounds:
// any valid message within the size limit is read (RFC 8949; the draft
// bounds element size only, HC-61).
const (
	maxNesting = 65535
	maxItems   = math.MaxInt32
)

// A profile's decoders. outer reads the tagged message, with tags allowed
// so that the outer tag can be read; inner reads everything in it.
type decoders struct {
	outer, inner cbor.DecMode
}

var (
	// defaultDec accepts any valid CBOR (RFC 8949): heads of any length,
	// indefinite lengths, tags in header values. It refuses what RFC 8949
	// makes invalid (duplicate map keys, invalid UTF-8, a tag on content
	// it does not fit) and what exceeds the shape limits.
	defaultDec decoders
	// strictDec is the strict profile's: definite lengths only and no tag
	// but the outer one. Shortest heads are checked by preferredLen.
	strictDec decoders
	// preferredMode re-encodes a decoded value with every head in its
	// shortest form (RFC 8949 section 4.1 preferred serialization, floats
	// included) and maps in no particular order, for the length check.
	preferredMode cbor.EncMode
)

func init() {
	opts := cbor.DecOptions{
		DupMapKey:        cbor.DupMapKeyEnforcedAPF,
		IndefLength:      cbor.IndefLengthAllowed,
		MaxNestedLevels:  maxNesting,
		MaxArrayElements: maxItems,
		MaxMapPairs:      maxItems,
		UTF8:             cbor.UTF8RejectInvalid,
		IntDec:           cbor.IntDecConvertNone,
		MapKeyByteString: cbor.MapKeyByteStringAllowed,
		TagsMd:           cbor.TagsAllowed,
	}
	defaultDec = decoders{outer: mustDec(opts), inner: mustDec(opts)}
	opts.IndefLength = cbor.IndefLengthForbidden
	outer := mustDec(opts)
	opts.TagsMd = cbor.TagsForbidden
	strictDec = decoders{outer: outer, inner: mustDec(opts)}
	var err error
	preferredMode, err = cbor.EncOptions{
		Sort:          cbor.SortNone,
		ShortestFloat: cbor.ShortestFloat16,
		IndefLength:   cbor.IndefLengthForbidden,
	}.EncMode()
	if err != nil {
		panic(err)
	}
}

func mustDec(opts cbor.DecOptions) cbor.DecMode {
	dm, err := opts.DecMode()
	if err != nil {
		panic(err) // constant options: a programmer error
	}
	return dm
}

// sign1 is a COSE_Sign1 message that passed the structural checks.
type sign1 struct {
	protected   []byte // the content of the protected bstr, as sent
	payload     []byte
	signature   []byte
	prot, unpro headerMap
	dec         cbor.DecMode // the profile's decoder, for the header values
}

// CBOR major types.
const (
	majorBytes = 2
	majorArray = 4
	majorMap   = 5
	majorTag   = 6
)

func major(raw []byte) byte { return raw[0] >> 5 }

// label is a header label (RFC 9052 section 3: int / tstr), comparable so
// that the same label in both buckets is found whatever its encoding.
type label struct {
	text bool
	s    string
	neg  bool   // a negative int: -1 - n
	n    uint64 // the int's argument
}

func intLabel(v int64) label {
	if v < 0 {
		return label{neg: true, n: uint64(-1 - v)}
	}
	return label{n: uint64(v)}
}

func (l label) String() string {
	switch {
	case l.text:
		return fmt.Sprintf("%q", l.s)
	case l.neg:
		return fmt.Sprintf("-1-%d", l.n)
	}
	return fmt.Sprint(l.n)
}

// The labels the draft and RFC 9052 give meaning to here.
var (
	labelAlg         = intLabel(1)
	labelCrit        = intLabel(2)
	labelContentType = intLabel(3)
	labelKID         = intLabel(4)
)

// headerMap is a header bucket: each label with its value undecoded, as
// the message holds it. Only the values the checks need are decoded, and
// only once the value's kind is known to be a scalar (see scalar); the
// others are checked for validity after the signature verifies.
type headerMap map[label]cbor.RawMessage

// decodeHeader decodes a header map: a valid CBOR map whose labels are ints
// or text strings (RFC 9052 section 3).
func decodeHeader(dm cbor.DecMode, raw []byte, bucket string) (headerMap, error) {
	if len(raw) == 0 || major(raw) != majorMap {
		return nil, malformed("%s header is not a map", bucket)
	}
	var m map[any]cbor.RawMessage
	if err := dm.Unmarshal(raw, &m); err != nil {
		return nil, malformed("%s header: %v", bucket, err)
	}
	return headerFrom(m, bucket)
}

// headerFrom labels the members of a header map.
func headerFrom(m map[any]cbor.RawMessage, bucket string) (headerMap, error) {
	out := make(headerMap, len(m))
	for k, v := range m {
		var l label
		switch k := k.(type) {
		case uint64:
			l = label{n: k}
		case int64:
			l = intLabel(k)
		case string:
			l = label{text: true, s: k}
		default:
			return nil, malformed("%s header label of type %T, want int or text (RFC 9052 section 3)", bucket, k)
		}
		out[l] = v
	}
	return out, nil
}

// scalar decodes a header value that is an integer, a string, a simple
// value or a float; for an array, a map or a tag it returns a description
// of its kind instead, without decoding it, and ok false.
func scalar(dm cbor.DecMode, raw cbor.RawMessage) (v any, ok bool, err error) {
	switch major(raw) {
	case majorArray:
		return "an array", false, nil
	case majorMap:
		return "a map", false, nil
	case majorTag:
		return "a tag", false, nil
	}
	if err := dm.Unmarshal(raw, &v); err != nil {
		return nil, false, malformed("header value: %v", err)
	}
	return v, true, nil
}

// validate decodes every header value, which the checks before the
// signature did not, so that a message holding invalid CBOR anywhere
// (RFC 8949 section 5.3: invalid UTF-8, duplicate keys) is refused as
// before; it runs once the signature has verified. The values
// checkHeaders decoded with the same decoder are not decoded again: the
// protected content type and alg (scalar, as any) and the kid of either
// bucket (a byte string, which decodes as any exactly when it decodes as
// octets).
func (s *sign1) validate(dm cbor.DecMode) error {
	for b, bucket := range []headerMap{s.prot, s.unpro} {
		for l, raw := range bucket {
			if l == labelKID || (b == 0 && (l == labelContentType || l == labelAlg)) {
				continue // decoded by checkHeaders
			}
			var v any
			if err := dm.Unmarshal(raw, &v); err != nil {
				return malformed("header value of label %v: %v", l, err)
			}
		}
	}
	return nil
}

// parse checks the size, the CBOR, the tag and the four-element structure,
// decodes both header buckets, and refuses a label present in both. strict
// adds the strict profile's rules: preferred serialization, definite
// lengths, no inner tags, an empty unprotected header.
func parse(msg []byte, maxSize int, strict bool) (*sign1, error) {
	if maxSize <= 0 {
		maxSize = DefaultMaxSize
	}
	if len(msg) > maxSize {
		return nil, fmt.Errorf("%w: %d octets, limit %d", ErrTooLarge, len(msg), maxSize)
	}
	if len(msg) == 0 {
		return nil, malformed("empty input")
	}
	dec := defaultDec
	if strict {
		dec = strictDec
	}
	if major(msg) == majorArray {
		return nil, malformed("untagged COSE_Sign1, want tag %d", Tag)
	}
	if err := dec.outer.Wellformed(msg); err != nil {
		return nil, malformed("%v", err)
	}
	// The message is one well-formed item: its head, read as RFC 8949
	// section 3 defines it, gives the tag and where its content starts,
	// which is then read in place rather than copied.
	number, content, ok := cborhead.Head(msg)
	if !ok || major(msg) != majorTag {
		return nil, malformed("not a tagged COSE_Sign1, want tag %d", Tag)
	}
	if number != Tag {
		return nil, malformed("tag %d, want %d (COSE_Sign1)", number, Tag)
	}
	if len(content) == 0 || major(content) != majorArray {
		return nil, malformed("COSE_Sign1 content is not an array")
	}
	// The four elements in one pass, undecoded: byte strings are read
	// once their kind is checked (a tag on one makes it another kind), and
	// the unprotected header as a map of undecoded values.
	var elems []cborhead.View
	if err := dec.inner.Unmarshal(content, &elems); err != nil {
		return nil, malformed("COSE_Sign1 content: %v", err)
	}
	if len(elems) != 4 {
		return nil, malformed("COSE_Sign1 array of %d elements, want 4", len(elems))
	}
	if elems[2][0] == 0xf6 || elems[2][0] == 0xf7 {
		return nil, malformed("detached payload (nil) is not allowed")
	}
	s := &sign1{dec: dec.inner}
	for _, f := range []struct {
		name string
		raw  cborhead.View
		dst  *[]byte
	}{
		{"protected header", elems[0], &s.protected},
		{"payload", elems[2], &s.payload},
		{"signature", elems[3], &s.signature},
	} {
		if major(f.raw) != majorBytes {
			return nil, malformed("%s is not a byte string", f.name)
		}
		if n, b, ok := cborhead.Head(f.raw); ok && uint64(len(b)) == n {
			*f.dst = b // a definite length: the octets in place
			continue
		}
		if err := dec.inner.Unmarshal(f.raw, f.dst); err != nil {
			return nil, malformed("%s: %v", f.name, err)
		}
	}
	if len(s.payload) == 0 {
		return nil, malformed("empty payload")
	}
	if len(s.signature) == 0 {
		return nil, malformed("empty signature")
	}

	if major(elems[1]) != majorMap {
		return nil, malformed("unprotected header is not a map")
	}
	var err error
	if s.unpro, err = decodeHeader(dec.inner, []byte(elems[1]), "unprotected"); err != nil {
		return nil, err
	}
	if len(s.protected) == 0 {
		// RFC 9052 section 3: an empty protected header is the empty bstr.
		s.prot = headerMap{}
	} else if s.prot, err = decodeHeader(dec.inner, s.protected, "protected"); err != nil {
		return nil, err
	}
	for l := range s.unpro {
		if _, ok := s.prot[l]; ok {
			return nil, malformed("label %v in both the protected and the unprotected header (RFC 9052 section 3)", l)
		}
	}

	if strict {
		if len(s.unpro) != 0 {
			return nil, malformed("unprotected header is not empty (strict profile): it is not signed, and the handoff digest covers the octets as sent")
		}
		if err := preferred(msg); err != nil {
			return nil, err
		}
		if len(s.protected) > 0 {
			if err := preferred(s.protected); err != nil {
				return nil, fmt.Errorf("%w (in the protected header)", err)
			}
		}
	}
	return s, nil
}

// preferred reports whether the well-formed, definite-length CBOR item b is
// in preferred serialization (RFC 8949 section 4.1): decoded and re-encoded
// with shortest heads, it must be exactly as long, which holds only when no
// head of b is longer than needed. Map order does not change the length.
func preferred(b []byte) error {
	var v any
	if err := strictDec.outer.Unmarshal(b, &v); err != nil {
		return malformed("%v", err)
	}
	again, err := preferredMode.Marshal(v)
	if err != nil || len(again) != len(b) {
		return malformed("not in preferred serialization: a head is longer than needed (RFC 8949 section 4.1; strict profile)")
	}
	return nil
}

// contentTypeMatches reports whether a content type names the media type of
// a signed handoff's payload. Media type names are case-insensitive (RFC
// 6838 section 4.2), over ASCII letters only; parameters are not part of
// the type the draft names. The strict profile wants the exact string.
func contentTypeMatches(ct string, strict bool) bool {
	if strict {
		return ct == ContentType
	}
	return asciiLower(ct) == ContentType
}

// asciiLower maps A-Z to a-z and leaves every other octet as it is.
func asciiLower(s string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}, s)
}

// checkHeaders applies the draft's rules to the two header buckets (HC-15,
// HC-17, HC-18, HC-60): only the protected alg and content type count; crit
// is refused in either bucket; kid may be in either, and is reported with
// where it came from.
func (s *sign1) checkHeaders(strict bool) (Header, error) {
	rawCT, ok := s.prot[labelContentType]
	if !ok {
		return Header{}, fmt.Errorf("%w: content type (label 3) is missing from the protected header, want %q", ErrType, ContentType)
	}
	ct, _, err := scalar(s.dec, rawCT)
	if err != nil {
		return Header{}, err
	}
	if t, ok := ct.(string); !ok || !contentTypeMatches(t, strict) {
		return Header{}, fmt.Errorf("%w: content type %#v, want %q", ErrType, ct, ContentType)
	}

	_, inProt := s.prot[labelCrit]
	_, inUnpro := s.unpro[labelCrit]
	if inProt || inUnpro {
		return Header{}, fmt.Errorf("%w: crit (label 2) is not allowed in a signed handoff", ErrCrit)
	}

	raw, ok := s.prot[labelAlg]
	if !ok {
		return Header{}, fmt.Errorf("%w: alg (label 1) is missing from the protected header", ErrAlg)
	}
	rawAlg, _, err := scalar(s.dec, raw)
	if err != nil {
		return Header{}, err
	}
	id, ok := rawAlg.(int64)
	if !ok {
		return Header{}, fmt.Errorf("%w: alg %#v is not a negative integer of an accepted algorithm", ErrAlg, rawAlg)
	}
	alg, ok := algName(id)
	if !ok {
		return Header{}, fmt.Errorf("%w: alg %d is not an accepted asymmetric algorithm", ErrAlg, id)
	}

	h := Header{Alg: alg}
	if h.KID, err = s.kid(s.prot, ""); err != nil {
		return Header{}, err
	}
	if h.UnprotectedKID, err = s.kid(s.unpro, "unprotected "); err != nil {
		return Header{}, err
	}
	return h, nil
}

// kid reads the kid (label 4) of a bucket: a byte string, or absent.
func (s *sign1) kid(bucket headerMap, which string) (string, error) {
	raw, ok := bucket[labelKID]
	if !ok {
		return "", nil
	}
	if major(raw) != majorBytes {
		return "", malformed("%skid (label 4) is not a byte string (RFC 9052 section 3.1)", which)
	}
	var kid []byte
	if err := s.dec.Unmarshal(raw, &kid); err != nil {
		return "", malformed("%skid (label 4): %v", which, err)
	}
	return string(kid), nil
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}
