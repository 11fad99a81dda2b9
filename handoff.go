package handoff

import (
	"bytes"
	"encoding/base64"
	"fmt"
)

// Section 2.1 of the draft: the signed forms of a handoff, and the Handoff
// object a host protocol carries.

// Format names the signed form of a handoff (section 3).
type Format uint8

const (
	// JWS is the JWS Compact Serialization with typ "agent-handoff+jwt".
	JWS Format = iota + 1
	// COSE is a tagged COSE_Sign1 with content type
	// "application/agent-handoff+cbor".
	COSE
)

func (f Format) String() string {
	switch f {
	case JWS:
		return "jws"
	case COSE:
		return "cose"
	}
	return "unknown"
}

// Signed is a signed handoff: an offer or status as octets, exactly as sent.
// For JWS the octets are the ASCII compact serialization; for COSE, the
// encoded tagged COSE_Sign1 message. Its handoff digest is SHA-256 over
// Octets (HC-20), never over a re-serialization.
type Signed struct {
	Format Format
	Octets []byte
}

// Digest returns the handoff digest of s (section 3.3, HC-20).
func (s Signed) Digest() Digest { return SHA256(s.Octets) }

// IsZero reports whether s holds no octets.
func (s Signed) IsZero() bool { return len(s.Octets) == 0 }

// ParseSigned identifies a signed handoff held on its own (a status, or an
// element read from a file): the JWS compact form, or a tagged COSE_Sign1
// (first octet 0xd2, tag 18). It checks the form only; OpenOffer and
// OpenStatus verify.
func ParseSigned(b []byte, lim Limits) (Signed, error) {
	lim = lim.withDefaults()
	if len(b) > lim.MaxElementSize {
		return Signed{}, fmt.Errorf("%w: signed handoff of %d octets exceeds %d", ErrTooLarge, len(b), lim.MaxElementSize)
	}
	if _, ok := coseTagLen(b); ok {
		return Signed{Format: COSE, Octets: bytes.Clone(b)}, nil
	}
	switch {
	case jwsCompact.Match(b):
		return Signed{Format: JWS, Octets: bytes.Clone(b)}, nil
	case len(b) > 0 && (b[0] == '{' || b[0] == 0xa1 || b[0] == 0xa2 || b[0] == 0xbf):
		return Signed{}, malformed("this is a map, perhaps a Handoff object {offer, chain}; a signed handoff on its own was expected: a JWS compact serialization or a tagged COSE_Sign1")
	}
	return Signed{}, malformed("neither a JWS compact serialization nor a tagged COSE_Sign1")
}

// Handoff is what a host protocol carries: the signed current offer and,
// optionally, the chain of earlier signed offers, oldest first (section
// 2.1). Its own members are not signed.
type Handoff struct {
	Offer Signed
	Chain []Signed
	// Extra holds members of the Handoff object this version does not
	// define, as decoded (HC-01).
	Extra map[string]any

	// chainErr records why the chain member, or one of its elements, is
	// not a signed handoff. Such a chain fails step 6 of section 5.1, after
	// the offer's own checks (issue of order: a damaged chain must not hide
	// a retransmission or a wrong audience).
	chainErr *ChainError
}

// ParseHandoff decodes a Handoff object in JSON or CBOR, telling them apart
// by the first octet ('{' or white space for JSON). Decoding is strict, as
// for payloads, and bounded: the size is checked before parsing, and each
// element against Limits.MaxElementSize. In JSON a JWS element is its
// compact text and a COSE element base64url text; in CBOR a JWS is a text
// string and a COSE element a byte string (HC-19). Element octets are kept
// exactly.
//
// ParseHandoff fails only when the object or its offer is unusable. A chain
// member that is not an array of signed handoffs, or an element that is not
// one, is kept and reported by Receive at step 6 (section 5.3, check 1),
// since the checks of the offer itself come first; ParseHandoff's callers
// see it through ChainErr.
func ParseHandoff(data []byte, lim Limits) (*Handoff, Encoding, error) {
	lim = lim.withDefaults()
	if len(data) > lim.MaxHandoffSize {
		return nil, 0, fmt.Errorf("%w: Handoff of %d octets exceeds %d", ErrTooLarge, len(data), lim.MaxHandoffSize)
	}
	if len(data) == 0 {
		return nil, 0, malformed("empty input")
	}
	enc := CBOR
	switch data[0] {
	case '{', ' ', '\t', '\r', '\n':
		enc = JSON
	}
	if _, ok := coseTagLen(data); ok {
		return nil, 0, malformed("this is a signed handoff (a tagged COSE_Sign1) on its own; a Handoff object {offer, chain} was expected")
	}
	if jwsCompact.Match(data) {
		return nil, 0, malformed("this is a signed handoff (a JWS compact serialization) on its own; a Handoff object {offer, chain} was expected")
	}
	// A chain may hold more elements than a map may hold members: allow
	// the array bound to follow the size bound instead.
	plim := lim
	plim.MaxMembers = max(lim.MaxMembers, lim.MaxHandoffSize/8)
	var m map[string]any
	var err error
	if enc == JSON {
		m, err = decodeJSON(data, plim)
	} else {
		m, err = decodeCBOR(data, plim, ProfileExact)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("%w (input taken as a Handoff object in %s)", err, enc)
	}
	h, err := handoffFrom(m, enc, lim)
	if err != nil {
		return nil, 0, err
	}
	return h, enc, nil
}

// ChainErr returns why the Handoff's chain is not a list of signed
// handoffs, or nil. Receive reports it at step 6.
func (h *Handoff) ChainErr() error {
	if h.chainErr == nil {
		return nil
	}
	return h.chainErr
}

func handoffFrom(m map[string]any, enc Encoding, lim Limits) (*Handoff, error) {
	v, ok := m["offer"]
	if !ok {
		return nil, malformed("offer: required member missing")
	}
	offer, err := elementFrom(v, enc, lim, "offer")
	if err != nil {
		return nil, err
	}
	extra, err := extraMembers(fields{m: m, strict: lim.Strict}, handoffMembers)
	if err != nil {
		return nil, err
	}
	h := &Handoff{Offer: offer, Extra: extra}
	c, ok := m["chain"]
	if !ok {
		return h, nil
	}
	a, ok := c.([]any)
	switch {
	case !ok:
		h.chainErr = &ChainError{Index: -1, Reason: ReasonBadSignature, Detail: "chain: want an array of signed handoffs, got " + typeName(c), err: ErrMalformed}
		return h, nil
	case len(a) == 0:
		h.chainErr = &ChainError{Index: -1, Reason: ReasonBadSignature, Detail: "chain: empty array ([+ SignedHandoff])", err: ErrMalformed}
		return h, nil
	}
	h.Chain = make([]Signed, len(a))
	for i, e := range a {
		s, err := elementFrom(e, enc, lim, fmt.Sprintf("chain[%d]", i))
		if err != nil && h.chainErr == nil {
			h.chainErr = &ChainError{Index: i, Reason: ReasonBadSignature, Detail: err.Error(), err: errClass(err)}
		}
		h.Chain[i] = s
	}
	return h, nil
}

// elementFrom reads one signed handoff of a Handoff object. On error the
// returned Signed still holds what octets there were, so that the element
// keeps its place (and its digest) in the chain.
func elementFrom(v any, enc Encoding, lim Limits, path string) (Signed, error) {
	var s Signed
	switch t := v.(type) {
	case string:
		switch {
		case jwsCompact.MatchString(t):
			s = Signed{Format: JWS, Octets: []byte(t)}
		case enc == JSON:
			b, err := decodeB64u(t)
			if err != nil {
				return Signed{Octets: []byte(t)}, malformed("%s: neither a JWS nor a base64url COSE_Sign1: %v", path, err)
			}
			s = Signed{Format: COSE, Octets: b}
		default:
			return Signed{Octets: []byte(t)}, malformed("%s: text that is not a JWS compact serialization", path)
		}
	case []byte:
		if enc != CBOR {
			return Signed{Octets: t}, malformed("%s: byte string outside CBOR", path)
		}
		s = Signed{Format: COSE, Octets: t}
	default:
		return Signed{}, malformed("%s: want a signed handoff, got %s", path, typeName(v))
	}
	if len(s.Octets) > lim.MaxElementSize {
		return Signed{Octets: s.Octets}, fmt.Errorf("%w: %s: element of %d octets exceeds %d", ErrTooLarge, path, len(s.Octets), lim.MaxElementSize)
	}
	if _, ok := coseTagLen(s.Octets); s.Format == COSE && !ok {
		return Signed{Octets: s.Octets}, malformed("%s: COSE element is not a tagged COSE_Sign1", path)
	}
	return s, nil
}

// Encode returns h as a Handoff object in the given encoding.
func (h *Handoff) Encode(enc Encoding) ([]byte, error) {
	if h.Offer.IsZero() {
		return nil, malformed("Handoff without offer")
	}
	m := map[string]any{}
	for k, v := range h.Extra {
		if !contains(handoffMembers, k) {
			m[k] = v
		}
	}
	m["offer"] = elementValue(h.Offer, enc)
	if len(h.Chain) > 0 {
		a := make([]any, len(h.Chain))
		for i, e := range h.Chain {
			a[i] = elementValue(e, enc)
		}
		m["chain"] = a
	}
	switch enc {
	case JSON:
		v, err := toJSONValue(m)
		if err != nil {
			return nil, err
		}
		return marshalJSON(v)
	case CBOR:
		v, err := toCBORValue(m)
		if err != nil {
			return nil, err
		}
		return cborEncMode.Marshal(v)
	}
	return nil, fmt.Errorf("%w: unknown encoding %d", ErrMalformed, enc)
}

func elementValue(s Signed, enc Encoding) any {
	if s.Format == JWS {
		return string(s.Octets)
	}
	if enc == JSON {
		return base64.RawURLEncoding.EncodeToString(s.Octets)
	}
	return s.Octets
}

// coseTagLen reports whether b starts with the head of tag 18, a
// COSE_Sign1 (HC-17), in any of the lengths RFC 8949 allows (0xd2, or
// 0xd8 0x12, ...), and the length of that head.
func coseTagLen(b []byte) (int, bool) {
	if len(b) == 0 || b[0]>>5 != 6 {
		return 0, false
	}
	n := 0
	switch ai := b[0] & 0x1f; {
	case ai < 24:
		return 1, ai == 18
	case ai == 24:
		n = 1
	case ai == 25:
		n = 2
	case ai == 26:
		n = 4
	case ai == 27:
		n = 8
	default:
		return 0, false
	}
	if len(b) < 1+n {
		return 0, false
	}
	var v uint64
	for _, c := range b[1 : 1+n] {
		v = v<<8 | uint64(c)
	}
	return 1 + n, v == 18
}
