package handoff

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"regexp"
)

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

var jwsCompact = regexp.MustCompile(`^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$`)

// ParseSigned identifies a signed handoff held on its own (a status, or an
// element read from a file): the JWS compact form, or a tagged COSE_Sign1
// (first octet 0xd2, tag 18). It checks the form only; OpenOffer and
// OpenStatus verify.
func ParseSigned(b []byte, lim Limits) (Signed, error) {
	lim = lim.withDefaults()
	if len(b) > lim.MaxElementSize {
		return Signed{}, fmt.Errorf("%w: signed handoff of %d octets exceeds %d", ErrTooLarge, len(b), lim.MaxElementSize)
	}
	switch {
	case len(b) > 0 && b[0] == 0xd2:
		return Signed{Format: COSE, Octets: bytes.Clone(b)}, nil
	case jwsCompact.Match(b):
		return Signed{Format: JWS, Octets: bytes.Clone(b)}, nil
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
}

// ParseHandoff decodes a Handoff object in JSON or CBOR, telling them apart
// by the first octet ('{' or white space for JSON). Decoding is strict, as
// for payloads, and bounded: the size is checked before parsing, and each
// element against Limits.MaxElementSize. The chain length is not limited
// here (the receive rules report too-deep, HC-50); the size bound keeps it
// finite. In JSON a JWS element is its compact text and a COSE element
// base64url text; in CBOR a JWS is a text string and a COSE element a byte
// string (HC-19). Element octets are kept exactly.
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
		return nil, 0, err
	}
	h, err := handoffFrom(m, enc, lim)
	if err != nil {
		return nil, 0, err
	}
	return h, enc, nil
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
	extra, err := fields{m: m}.extra(handoffMembers)
	if err != nil {
		return nil, err
	}
	h := &Handoff{Offer: offer, Extra: extra}
	if c, ok := m["chain"]; ok {
		a, ok := c.([]any)
		if !ok {
			return nil, malformed("chain: want array, got %s", typeName(c))
		}
		if len(a) == 0 {
			return nil, malformed("chain: empty array ([+ SignedHandoff])")
		}
		h.Chain = make([]Signed, len(a))
		for i, e := range a {
			if h.Chain[i], err = elementFrom(e, enc, lim, "chain["+itoa(i)+"]"); err != nil {
				return nil, err
			}
		}
	}
	return h, nil
}

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
				return Signed{}, malformed("%s: neither a JWS nor a base64url COSE_Sign1: %v", path, err)
			}
			s = Signed{Format: COSE, Octets: b}
		default:
			return Signed{}, malformed("%s: text that is not a JWS compact serialization", path)
		}
	case []byte:
		if enc != CBOR {
			return Signed{}, malformed("%s: byte string outside CBOR", path)
		}
		s = Signed{Format: COSE, Octets: t}
	default:
		return Signed{}, malformed("%s: want a signed handoff, got %s", path, typeName(v))
	}
	if len(s.Octets) > lim.MaxElementSize {
		return Signed{}, fmt.Errorf("%w: %s: element of %d octets exceeds %d", ErrTooLarge, path, len(s.Octets), lim.MaxElementSize)
	}
	if s.Format == COSE && (len(s.Octets) == 0 || s.Octets[0] != 0xd2) {
		return Signed{}, malformed("%s: COSE element is not a tagged COSE_Sign1", path)
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
