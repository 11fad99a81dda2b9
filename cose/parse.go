package cose

import (
	"fmt"
	"math"
	"slices"
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

// CBOR major types.
const (
	majorBytes = cborhead.Bytes
	majorArray = cborhead.Array
	majorMap   = cborhead.Map
	majorTag   = cborhead.Tag
)

func major(raw []byte) byte { return cborhead.Major(raw) }

// sign1 is a COSE_Sign1 message that passed the structural checks.
type sign1 struct {
	protected []byte // the content of the protected bstr, as sent
	// wrapped is that bstr as the message holds it when its head is
	// definite and shortest, as the Sig_structure wants it; else nil.
	wrapped     []byte
	payload     []byte
	signature   []byte
	prot, unpro bucket
	dec         cbor.DecMode // the profile's decoder, for the header values
}

// bucket is a header map as the checks read it, in place: the values of
// the labels they name, still undecoded, and the map's octets, whose
// other values are checked for validity once the signature has verified
// (validate). No value is decoded and no map built before: a header of
// 2000 labels of {} costs no more than a string of its size.
type bucket struct {
	raw  []byte // the map; nil for an empty protected header
	n    int    // its labels
	alg  []byte // the value of label 1, or nil
	crit []byte // label 2
	ct   []byte // label 3
	kid  []byte // label 4
}

// The labels the draft and RFC 9052 give meaning to here, and their
// values' place in a bucket.
const (
	labelAlg         = 1
	labelCrit        = 2
	labelContentType = 3
	labelKID         = 4
)

func (b *bucket) value(l uint64) *[]byte {
	switch l {
	case labelAlg:
		return &b.alg
	case labelCrit:
		return &b.crit
	case labelContentType:
		return &b.ct
	case labelKID:
		return &b.kid
	}
	return nil
}

// readHeader reads a header map in place: a map whose labels are ints or
// text strings (RFC 9052 section 3: "label = int / tstr"), text in valid
// UTF-8, each label once (RFC 8949 section 5.6). The labels are counted
// before anything is kept: the positions of all of them go to pos (on the
// stack when they fit, else one array of exactly their number), for the
// duplicate checks, and the values of the four labels the checks read to
// the bucket. raw is well formed: the message passed the CBOR library's
// check, or the protected header did (parse).
func readHeader(raw []byte, which string, pos *[]uint32) (bucket, error) {
	if len(raw) == 0 || cborhead.Major(raw) != majorMap {
		return bucket{}, malformed("%s header is not a map", which)
	}
	if uint64(len(raw)) > math.MaxUint32 { // positions below are uint32
		return bucket{}, fmt.Errorf("%w: %s header of %d octets", ErrTooLarge, which, len(raw))
	}
	it, n := cborhead.Open(raw)
	b := bucket{raw: raw, n: n / 2}
	if b.n > cap(*pos) {
		*pos = make([]uint32, 0, b.n)
	}
	for l, ok := it.Next(); ok; l, ok = it.Next() {
		at := len(raw) - it.Left() - len(l)
		v, _ := it.Next()
		switch cborhead.Major(l) {
		case cborhead.Unsigned:
			arg, _, _ := cborhead.Head(l)
			if dst := b.value(arg); dst != nil {
				*dst = v // a duplicate is refused below
			}
		case cborhead.Negative:
		case cborhead.Text:
			if !cborhead.ValidText(l) {
				return bucket{}, malformed("%s header label: invalid UTF-8 string", which)
			}
		default:
			return bucket{}, malformed("%s header label of major type %d, want int or text (RFC 9052 section 3)", which, cborhead.Major(l))
		}
		*pos = append(*pos, uint32(at))
	}
	if at, dup := cborhead.Repeated(raw, *pos); dup {
		return bucket{}, malformed("%s header: label %s twice (RFC 8949 section 5.6)", which, labelText(raw[at:]))
	}
	return b, nil
}

// labelText shows a well-formed label for an error.
func labelText(l []byte) string {
	arg, _, _ := cborhead.Head(l)
	switch cborhead.Major(l) {
	case cborhead.Unsigned:
		return fmt.Sprint(arg)
	case cborhead.Negative:
		return fmt.Sprintf("-1-%d", arg)
	}
	s, _ := cborhead.String(l)
	return fmt.Sprintf("%q", s)
}

// shared returns a label found in both buckets, whose labels are at the
// positions pa of a and pb of b, each list sorted by readHeader when it
// held more than 16 labels. It compares every pair when there are few,
// and else merges the two lists sorted.
func shared(a []byte, pa []uint32, b []byte, pb []uint32) ([]byte, bool) {
	at := func(p, q uint32) int { return cborhead.CompareKey(a[p:], b[q:]) }
	if len(pa)*len(pb) <= 256 {
		for _, p := range pa {
			for _, q := range pb {
				if at(p, q) == 0 {
					return a[p:], true
				}
			}
		}
		return nil, false
	}
	sortKeys(a, pa)
	sortKeys(b, pb)
	for len(pa) > 0 && len(pb) > 0 {
		switch c := at(pa[0], pb[0]); {
		case c == 0:
			return a[pa[0]:], true
		case c < 0:
			pa = pa[1:]
		default:
			pb = pb[1:]
		}
	}
	return nil, false
}

func sortKeys(m []byte, ps []uint32) {
	slices.SortFunc(ps, func(p, q uint32) int { return cborhead.CompareKey(m[p:], m[q:]) })
}

// scalar decodes a header value that is an integer, a string, a simple
// value or a float; for an array, a map or a tag it returns a description
// of its kind instead, without decoding it, and ok false.
func scalar(dm cbor.DecMode, raw []byte) (v any, ok bool, err error) {
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
// (RFC 8949 section 5.3: invalid UTF-8, duplicate keys, a tag on content
// it does not fit) is refused as before; it runs once the signature has
// verified. The values checkHeaders decoded with the same decoder are not
// decoded again: the protected content type and alg (scalar, as any) and
// the kid of either bucket (a byte string, which decodes as any exactly
// when it decodes as octets).
func (s *sign1) validate(dm cbor.DecMode) error {
	for i, b := range []bucket{s.prot, s.unpro} {
		if b.raw == nil {
			continue
		}
		it, _ := cborhead.Open(b.raw)
		for l, ok := it.Next(); ok; l, ok = it.Next() {
			raw, _ := it.Next()
			if arg, _, _ := cborhead.Head(l); cborhead.Major(l) == cborhead.Unsigned &&
				(arg == labelKID || (i == 0 && (arg == labelContentType || arg == labelAlg))) {
				continue // decoded by checkHeaders
			}
			var v any
			if err := dm.Unmarshal(raw, &v); err != nil {
				return malformed("header value of label %s: %v", labelText(l), err)
			}
		}
	}
	return nil
}

// parse checks the size, the CBOR, the tag and the four-element structure,
// reads both header buckets in place, and refuses a label present in both.
// strict adds the strict profile's rules: preferred serialization, definite
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
	if strict { // no tag inside, which the outer decoder allows
		if err := dec.inner.Wellformed(content); err != nil {
			return nil, malformed("COSE_Sign1 content: %v", err)
		}
	}
	// The four elements, in place: counted first, so that an array of a
	// thousand items costs no more than a string.
	it, n := cborhead.Open(content)
	if n != 4 {
		return nil, malformed("COSE_Sign1 array of %d elements, want 4", n)
	}
	var elems [4][]byte
	for i := range elems {
		elems[i], _ = it.Next()
	}
	if elems[2][0] == 0xf6 || elems[2][0] == 0xf7 {
		return nil, malformed("detached payload (nil) is not allowed")
	}
	s := &sign1{dec: dec.inner}
	for _, f := range []struct {
		name string
		raw  []byte
		dst  *[]byte
	}{
		{"protected header", elems[0], &s.protected},
		{"payload", elems[2], &s.payload},
		{"signature", elems[3], &s.signature},
	} {
		if major(f.raw) != majorBytes {
			return nil, malformed("%s is not a byte string", f.name)
		}
		*f.dst, _ = cborhead.String(f.raw) // in place, or its chunks joined
	}
	if shortest(elems[0], len(s.protected)) {
		s.wrapped = elems[0]
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
	var smallP, smallU [16]uint32
	posP, posU := smallP[:0], smallU[:0]
	var err error
	if s.unpro, err = readHeader(elems[1], "unprotected", &posU); err != nil {
		return nil, err
	}
	if len(s.protected) > 0 {
		// The protected header is the content of a byte string, which the
		// message's check did not look into.
		if err := dec.inner.Wellformed(s.protected); err != nil {
			return nil, malformed("protected header: %v", err)
		}
		if s.prot, err = readHeader(s.protected, "protected", &posP); err != nil {
			return nil, err
		}
	} // else RFC 9052 section 3: an empty protected header is the empty bstr
	if l, both := shared(s.prot.raw, posP, s.unpro.raw, posU); both {
		return nil, malformed("label %s in both the protected and the unprotected header (RFC 9052 section 3)", labelText(l))
	}

	if strict {
		if s.unpro.n != 0 {
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

// shortest reports whether the well-formed byte string b has a definite
// length, n, written in the shortest head (RFC 8949 section 4.2.1).
func shortest(b []byte, n int) bool {
	head := len(b) - n
	switch {
	case b[0]&0x1f == 31:
		return false
	case n < 24:
		return head == 1
	case n < 1<<8:
		return head == 2
	case n < 1<<16:
		return head == 3
	case n < 1<<32:
		return head == 5
	}
	return head == 9
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
	if s.prot.ct == nil {
		return Header{}, fmt.Errorf("%w: content type (label 3) is missing from the protected header, want %q", ErrType, ContentType)
	}
	ct, _, err := scalar(s.dec, s.prot.ct)
	if err != nil {
		return Header{}, err
	}
	if t, ok := ct.(string); !ok || !contentTypeMatches(t, strict) {
		return Header{}, fmt.Errorf("%w: content type %#v, want %q", ErrType, ct, ContentType)
	}

	if s.prot.crit != nil || s.unpro.crit != nil {
		return Header{}, fmt.Errorf("%w: crit (label 2) is not allowed in a signed handoff", ErrCrit)
	}

	if s.prot.alg == nil {
		return Header{}, fmt.Errorf("%w: alg (label 1) is missing from the protected header", ErrAlg)
	}
	rawAlg, _, err := scalar(s.dec, s.prot.alg)
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
	if h.KID, err = s.kid(s.prot.kid, ""); err != nil {
		return Header{}, err
	}
	if h.UnprotectedKID, err = s.kid(s.unpro.kid, "unprotected "); err != nil {
		return Header{}, err
	}
	return h, nil
}

// kid reads a kid (label 4): a byte string, or absent (nil).
func (s *sign1) kid(raw []byte, which string) (string, error) {
	if raw == nil {
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
