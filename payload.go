package handoff

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// EncodeJSON returns o's payload as JSON: the payload of a JWS (section 3.1).
// Members are written in the draft's order, extensions after them sorted by
// name.
func (o *Offer) EncodeJSON() ([]byte, error) { return encodeJSONMembers(o.members()) }

// EncodeCBOR returns o's payload in CBOR core deterministic encoding: the
// payload of a COSE_Sign1 (section 3.2).
func (o *Offer) EncodeCBOR() ([]byte, error) { return encodeCBORMembers(o.members()) }

// EncodeJSON returns s's payload as JSON.
func (s *Status) EncodeJSON() ([]byte, error) { return encodeJSONMembers(s.members()) }

// EncodeCBOR returns s's payload in CBOR core deterministic encoding.
func (s *Status) EncodeCBOR() ([]byte, error) { return encodeCBORMembers(s.members()) }

// DecodeOffer decodes an offer payload strictly (section 2): required
// members present and of the right type, v 1, type "offer", HopId pattern,
// Time an unsigned integer, Digest closed; unknown members kept in Extra
// (HC-01). It does not verify anything: use OpenOffer for signed octets.
func DecodeOffer(payload []byte, enc Encoding, lim Limits) (*Offer, error) {
	m, err := decodePayload(payload, enc, lim)
	if err != nil {
		return nil, err
	}
	return offerFrom(m)
}

// DecodeStatus decodes a status payload strictly, as DecodeOffer does.
func DecodeStatus(payload []byte, enc Encoding, lim Limits) (*Status, error) {
	m, err := decodePayload(payload, enc, lim)
	if err != nil {
		return nil, err
	}
	return statusFrom(m)
}

func decodePayload(payload []byte, enc Encoding, lim Limits) (map[string]any, error) {
	lim = lim.withDefaults()
	if len(payload) > lim.MaxElementSize {
		return nil, fmt.Errorf("%w: payload of %d octets exceeds %d", ErrTooLarge, len(payload), lim.MaxElementSize)
	}
	switch enc {
	case JSON:
		return decodeJSON(payload, lim)
	case CBOR:
		return decodeCBOR(payload, lim, ProfileExact)
	}
	return nil, fmt.Errorf("%w: unknown encoding %d", ErrMalformed, enc)
}

func encodeJSONMembers(ms []member) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.name)
		v, err := toJSONValue(m.value)
		if err != nil {
			return nil, err
		}
		vb, err := marshalJSON(v)
		if err != nil {
			return nil, fmt.Errorf("%w: member %q: %v", ErrMalformed, m.name, err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// marshalJSON encodes without HTML escaping, so that "<", ">" and "&"
// appear as themselves.
func marshalJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func encodeCBORMembers(ms []member) ([]byte, error) {
	m := make(map[string]any, len(ms))
	for _, e := range ms {
		v, err := toCBORValue(e.value)
		if err != nil {
			return nil, err
		}
		m[e.name] = v
	}
	b, err := cborEncMode.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return b, nil
}
