package handoff

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"slices"

	"github.com/agentproto/handoff/digest"
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
func (s Signed) Digest() digest.Digest { return digest.SHA256(s.Octets) }

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
	// define (HC-01). ParseHandoff keeps each exactly as received, never
	// decoded: a json.RawMessage from JSON, a cbor.RawMessage from CBOR.
	// Encode writes such a value as it is in its own encoding, and
	// converts it to the other; any other value of the model is encoded
	// as a payload member is.
	Extra map[string]any

	// chainErr records why the chain member, or one of its elements, is
	// not a signed handoff. Such a chain fails step 6 of section 5.1, after
	// the offer's own checks (issue of order: a damaged chain must not hide
	// a retransmission or a wrong audience).
	chainErr *chainError
	// chainLen is, when the chain held more elements than were read (a
	// receiver reads at most Limits.MaxChain + 1 before the signature
	// verifies, readBound), how many it held; else 0.
	chainLen int
	// members, when not nil, is the Handoff object's octets, its own,
	// from which Extra is still to be built (fillExtra), in membersEnc:
	// a receiver builds it only when Received.Handoff asks for it.
	members    []byte
	membersEnc Encoding
	// forms, when not nil, lists the chain elements whose form is still
	// to be checked (parseHandoff with deferForms): the rest of the
	// JwsCompact test of a text with a period, and the base64url decoding
	// of a COSE element's text in JSON. Until checkForms runs, chainErr
	// may miss a failure among them.
	forms *pendingForms
}

// ParseHandoff decodes a Handoff object in JSON or CBOR, telling them apart
// by the first octet ('{' or white space for JSON). It runs before any
// signature is checked, so it decodes only what the checks need: the
// offer, and the chain as a list of elements. Members it does not define
// are checked for well-formedness and kept exactly as received, never
// decoded (HC-01; see SECURITY.md, "What input costs"): in Extra, as a
// json.RawMessage for JSON and a cbor.RawMessage for CBOR.
//
// Decoding is strict and bounded: the size is checked before parsing, and
// each element against Limits.MaxElementSize. JSON is checked as the
// payload decoder checks it (RFC 8259, RFC 7493: valid UTF-8 and Unicode,
// unique names), members it keeps included; CBOR must be well formed
// (RFC 8949), with text keys, valid UTF-8 and unique keys in the object
// itself; a member kept undecoded is checked for validity when it is
// decoded. In JSON a JWS element is its compact text and a COSE element
// base64url text; in CBOR a JWS is a text string and a COSE element a byte
// string (HC-19). Element octets are kept exactly.
//
// ParseHandoff fails only when the object or its offer is unusable. A chain
// member that is not an array of signed handoffs, or an element that is not
// one, is kept and reported by Receive at step 6 (section 5.3, check 1),
// since the checks of the offer itself come first; ParseHandoff's callers
// see it through chainErrOf.
//
// ParseHandoff reads every element of the chain, however many, and builds
// Extra: it is for a caller that wants the whole object. Receive reads
// only what step 1 needs before the signature verifies: at most
// Limits.MaxChain + 1 elements, and no member it does not define
// (SECURITY.md, "What input costs").
func ParseHandoff(data []byte, lim Limits) (*Handoff, Encoding, error) {
	h, enc, err := parseHandoff(data, lim, false)
	if err != nil {
		return nil, 0, err
	}
	h.fillExtra()
	return h, enc, nil
}

// parseHandoff is ParseHandoff for a receiver when receiving is set: a
// text element that holds a period is taken as a JWS and the rest of its
// JwsCompact test is left to the receiver (Handoff.checkForms), which skips
// it for an element it verified before: such an element has the octets of
// one that passed it. Likewise a JSON text without a period, a COSE
// element's base64url, is kept as text: the receiver decodes it, unless it
// finds the element by the digest of that text (checkChain). The chain is
// read up to readBound(lim) elements, and Extra is left to fillExtra.
func parseHandoff(data []byte, lim Limits, receiving bool) (*Handoff, Encoding, error) {
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
	w := handoffWire{deferForms: receiving}
	maxRead := -1
	if receiving {
		maxRead = readBound(lim)
	}
	var err error
	if enc == JSON {
		err = w.readJSON(data, lim, maxRead)
	} else {
		err = w.readCBOR(data, lim, maxRead)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("%w (input taken as a Handoff object in %s)", err, enc)
	}
	h, err := w.handoff(enc, lim)
	if err != nil {
		return nil, 0, err
	}
	return h, enc, nil
}

// chainErrOf returns why the Handoff's chain is not a list of signed
// handoffs, or nil. Receive reports it at step 6.
func (h *Handoff) chainErrOf() error {
	if h.chainErr == nil {
		return nil
	}
	return h.chainErr
}

// Encode returns h as a Handoff object in the given encoding.
func (h *Handoff) Encode(enc Encoding) ([]byte, error) {
	if len(h.Offer.Octets) == 0 {
		return nil, malformed("Handoff without offer")
	}
	if h.chainLen > len(h.Chain) {
		return nil, fmt.Errorf("%w: the chain held %d elements, of which only the first %d were read (Limits.MaxChain); it cannot be written whole", ErrTooLarge, h.chainLen, len(h.Chain))
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

func (s Signed) clone() Signed { return Signed{Format: s.Format, Octets: slices.Clone(s.Octets)} }

// clone returns a deep copy of h.
func (h *Handoff) clone() *Handoff {
	if h == nil {
		return nil
	}
	c := *h
	c.Offer = h.Offer.clone()
	if h.Chain != nil {
		c.Chain = make([]Signed, len(h.Chain))
		for i, e := range h.Chain {
			c.Chain[i] = e.clone()
		}
	}
	c.Extra = cloneMembers(h.Extra)
	c.members = bytes.Clone(h.members)
	return &c
}
