package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"sort"

	"github.com/fxamacker/cbor/v2"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/internal/ecsig"
)

// Octets that the library's encoders never write: valid JSON and CBOR that
// is unusual, non-preferred or carries members the draft does not define,
// and signed forms with header parameters a receiver must ignore. Every
// helper is deterministic.

// offerJSON is o's JSON payload as the library writes it.
func offerJSON(o *handoff.Offer) []byte {
	p, err := o.Payload(handoff.JSON)
	if err != nil {
		panic(err)
	}
	return p
}

// offerCBOR is o's CBOR payload as the library writes it (preferred
// serialization).
func offerCBOR(o *handoff.Offer) []byte {
	p, err := o.Payload(handoff.CBOR)
	if err != nil {
		panic(err)
	}
	return p
}

// jsonInsert adds members, written as JSON text ("\"a\":1,\"b\":2"), at the
// end of the JSON object p.
func jsonInsert(p []byte, members string) []byte {
	i := bytes.LastIndexByte(p, '}')
	if i < 0 {
		panic("not a JSON object")
	}
	out := append([]byte{}, p[:i]...)
	out = append(out, ',')
	out = append(out, members...)
	return append(out, p[i:]...)
}

// jsonSetRaw replaces the value of the text member name of the JSON object
// p with raw, JSON text written as is (escapes included).
func jsonSetRaw(p []byte, name, raw string) []byte {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(p, &m); err != nil {
		panic(err)
	}
	old := append([]byte(`"`+name+`":`), m[name]...)
	if bytes.Count(p, old) != 1 {
		panic("member " + name + " not found once")
	}
	return bytes.Replace(p, old, []byte(`"`+name+`":`+raw), 1)
}

// cborItem is the preferred CBOR encoding of v.
func cborItem(v any) []byte {
	b, err := cborDet.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// cborAppend adds members (each a key's and a value's encoded octets) to
// the definite-length CBOR map p whose head is one octet (at most 23
// members), keeping the order of p's members.
func cborAppend(p []byte, members ...[]byte) []byte {
	if len(members)%2 != 0 {
		panic("cborAppend: key without value")
	}
	n := int(p[0]) - 0xa0
	if n < 0 || n+len(members)/2 > 23 {
		panic(fmt.Sprintf("cborAppend: head %#x", p[0]))
	}
	out := []byte{byte(0xa0 + n + len(members)/2)}
	out = append(out, p[1:]...)
	for _, m := range members {
		out = append(out, m...)
	}
	return out
}

// Hand-written CBOR items, for values an encoder normalises away.
var (
	cborNaN        = []byte{0xf9, 0x7e, 0x00}                                                       // NaN, half precision
	cborPosInf     = []byte{0xf9, 0x7c, 0x00}                                                       // +Infinity
	cborNegInf     = []byte{0xf9, 0xfc, 0x00}                                                       // -Infinity
	cborUndefined  = []byte{0xf7}                                                                   // undefined
	cborMinNeg64   = []byte{0x3b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}                   // -2^64, the most negative major type 1 integer
	cborIntKeyMap  = []byte{0xa3, 0x01, 0x02, 0x20, 0x61, 0x78, 0x3a, 0x7f, 0xff, 0xff, 0xff, 0xf6} // {1: 2, -1: "x", -2^31: null}
	cborTagEpoch   = []byte{0xc1, 0x1a, 0x6a, 0xde, 0x59, 0x00}                                     // 1(1793022208), an epoch time
	cborTagUnknown = append([]byte{0xd9, 0x12, 0x67}, cborItem("opaque to this receiver")...)       // tag 4711, unassigned
)

// wide encodes v as CBOR that is valid but never preferred: every integer
// and length in an eight-octet head, and the outermost map (when top is
// true) of indefinite length. Map keys keep the order of their wide
// encodings, sorted bytewise.
func wide(v any, top bool) []byte {
	head := func(major byte, n uint64) []byte {
		b := []byte{major<<5 | 27, 0, 0, 0, 0, 0, 0, 0, 0}
		binary.BigEndian.PutUint64(b[1:], n)
		return b
	}
	switch t := v.(type) {
	case map[any]any:
		type kv struct{ k, v []byte }
		var members []kv
		for k, e := range t {
			members = append(members, kv{wide(k, false), wide(e, false)})
		}
		sort.Slice(members, func(i, j int) bool { return bytes.Compare(members[i].k, members[j].k) < 0 })
		var out []byte
		if top {
			out = []byte{0xbf}
		} else {
			out = head(5, uint64(len(members)))
		}
		for _, m := range members {
			out = append(append(out, m.k...), m.v...)
		}
		if top {
			out = append(out, 0xff)
		}
		return out
	case []any:
		out := head(4, uint64(len(t)))
		for _, e := range t {
			out = append(out, wide(e, false)...)
		}
		return out
	case string:
		return append(head(3, uint64(len(t))), t...)
	case []byte:
		return append(head(2, uint64(len(t))), t...)
	case uint64:
		return head(0, t)
	case int64:
		if t >= 0 {
			return head(0, uint64(t))
		}
		return head(1, uint64(-(t + 1)))
	case bool:
		if t {
			return []byte{0xf5}
		}
		return []byte{0xf4}
	case nil:
		return []byte{0xf6}
	case float64:
		b := []byte{0xfb, 0, 0, 0, 0, 0, 0, 0, 0}
		binary.BigEndian.PutUint64(b[1:], math.Float64bits(t))
		return b
	}
	panic(fmt.Sprintf("wide: %T", v))
}

// widePayload re-encodes the CBOR payload p with wide.
func widePayload(p []byte) []byte {
	var m map[any]any
	if err := cbor.Unmarshal(p, &m); err != nil {
		panic(err)
	}
	return wide(m, true)
}

// coseParts is a COSE_Sign1 taken apart: the protected header's octets,
// the unprotected header's encoding, the payload and the signature.
type coseParts struct {
	prot, unprot, payload, sig []byte
}

// signCOSE signs payload under the protected header octets prot with a's
// key, with the unprotected header unprot (an encoded CBOR map).
func signCOSE(a *agent, prot, unprot, payload []byte) coseParts {
	tbs := append([]byte{0x84, 0x6a}, "Signature1"...)
	tbs = append(tbs, cborItem(prot)...)
	tbs = append(tbs, 0x40)
	tbs = append(tbs, cborItem(payload)...)
	sig, err := ecsig.Sign(nil, a.key, a.alg, tbs)
	if err != nil {
		panic(err)
	}
	return coseParts{prot: prot, unprot: unprot, payload: payload, sig: sig}
}

// preferred is the COSE_Sign1 in preferred serialization, tag 18.
func (c coseParts) preferred() handoff.Signed {
	out := []byte{0xd2, 0x84}
	out = append(out, cborItem(c.prot)...)
	out = append(out, c.unprot...)
	out = append(out, cborItem(c.payload)...)
	out = append(out, cborItem(c.sig)...)
	return handoff.Signed{Format: handoff.COSE, Octets: out}
}

// wide is the same COSE_Sign1 with every head of the envelope (tag,
// array, byte string lengths) longer than needed. The signed octets are
// the same, so the signature still verifies; the element's octets, and so
// its handoff digest, differ.
func (c coseParts) wide() handoff.Signed {
	out := []byte{0xd8, 0x12, 0x98, 0x04}
	for i, b := range [][]byte{c.prot, nil, c.payload, c.sig} {
		if i == 1 {
			out = append(out, c.unprot...)
			continue
		}
		out = append(out, 0x5a)
		out = binary.BigEndian.AppendUint32(out, uint32(len(b)))
		out = append(out, b...)
	}
	return handoff.Signed{Format: handoff.COSE, Octets: out}
}

// protOf is the preferred encoding of a protected header map.
func protOf(m map[int64]any) []byte { return cborItem(m) }

// emptyMap is the encoding of an empty unprotected header.
var emptyMap = []byte{0xa0}

// handoffCBORRaw writes a CBOR Handoff object member by member, in the
// order given: each name with its value's encoded octets.
func handoffCBORRaw(members ...[]byte) []byte {
	if len(members)%2 != 0 || len(members)/2 > 23 {
		panic("handoffCBORRaw")
	}
	out := []byte{byte(0xa0 + len(members)/2)}
	for _, m := range members {
		out = append(out, m...)
	}
	return out
}

// elementItem is the CBOR item that carries s in a CBOR Handoff: a text
// string for a JWS, a byte string for a COSE_Sign1.
func elementItem(s handoff.Signed) []byte {
	if s.Format == handoff.JWS {
		return cborItem(string(s.Octets))
	}
	return cborItem(s.Octets)
}

// elementJSON is the JSON string that carries s in a JSON Handoff.
func elementJSON(s handoff.Signed) string {
	if s.Format == handoff.JWS {
		return `"` + string(s.Octets) + `"`
	}
	return `"` + b64.EncodeToString(s.Octets) + `"`
}

// thumbprintOctets is a's RFC 7638 thumbprint as raw octets.
func thumbprintOctets(a *agent) []byte {
	b, err := b64.DecodeString(a.kid)
	if err != nil {
		panic(err)
	}
	return b
}
