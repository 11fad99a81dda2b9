package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strings"

	"github.com/fxamacker/cbor/v2"
)

// Vector is one file of testdata/vectors. The format is described in the
// README.md the generator writes beside the files.
type Vector struct {
	Name        string            `json:"name"`
	Description string            `json:"description"`
	HC          []string          `json:"hc"`
	Input       Input             `json:"input"`
	Trust       map[string]JWKSet `json:"trust"`
	Receiver    Receiver          `json:"receiver"`
	Prior       []string          `json:"prior,omitempty"`
	// Level is the level of the sentence the vector rests on: MUST,
	// SHOULD, MAY, or open where the text leaves the verdict open.
	Level string `json:"level"`
	// Basis is the sentences the vector rests on.
	Basis []Basis `json:"basis"`
	// Requires lists the optional features a receiver needs to run it.
	Requires []string `json:"requires"`
	// Acceptable is every outcome a conforming receiver may reach.
	Acceptable []Outcome `json:"acceptable"`
	// WhyOpen says why more than one outcome is acceptable.
	WhyOpen string `json:"why_open,omitempty"`
	// Expected is the outcome this project's receiver reaches, one of
	// Acceptable, with the details (chain state, references) it reports.
	Expected Expected `json:"expected"`
}

// Input is the Handoff object the receiver is given.
type Input struct {
	Encoding    string  `json:"encoding"`
	HandoffB64  string  `json:"handoff_b64"`
	HandoffText string  `json:"handoff_text,omitempty"`
	Decoded     Decoded `json:"decoded"`
}

// Decoded is an unverified, human-readable view of the Handoff's elements.
type Decoded struct {
	Offer Element   `json:"offer"`
	Chain []Element `json:"chain,omitempty"`
	Extra []string  `json:"extra_members,omitempty"`
}

// Element is the unverified view of one signed handoff.
type Element struct {
	Format    string `json:"format"`
	Digest    string `json:"digest"`
	Size      int    `json:"size"`
	Protected any    `json:"protected,omitempty"`
	// Unprotected is the COSE unprotected header, when not empty.
	Unprotected any    `json:"unprotected,omitempty"`
	Payload     any    `json:"payload,omitempty"`
	Error       string `json:"error,omitempty"`
}

// JWKSet is {"keys": [...]}.
type JWKSet struct {
	Keys []json.RawMessage `json:"keys"`
}

// Receiver is the receiving agent's configuration and host context.
type Receiver struct {
	Self             string               `json:"self"`
	Now              int64                `json:"now"`
	Dialog           string               `json:"dialog"`
	Skew             int64                `json:"skew"`
	MaxLifetime      int64                `json:"max_lifetime"`
	MaxChain         int                  `json:"max_chain"`
	RequireFullChain bool                 `json:"require_full_chain"`
	TrustedOrigins   []string             `json:"trusted_origins"`
	AllowReentry     []string             `json:"allow_reentry"`
	RefsPolicy       string               `json:"refs_policy"`
	RefObjects       map[string]RefObject `json:"ref_objects"`
	MemoryLostAt     int64                `json:"memory_lost_at"`
}

// RefObject is an object a reference names, as the receiver can obtain it.
type RefObject struct {
	OctetsB64 string `json:"octets_b64"`
	SaltB64   string `json:"salt_b64,omitempty"`
}

// Expected is the outcome a conforming receiver reaches.
type Expected struct {
	Accepted       bool     `json:"accepted"`
	Retransmission bool     `json:"retransmission"`
	Reason         string   `json:"reason"`
	Chain          string   `json:"chain"`
	Refs           []string `json:"refs,omitempty"`
	OfferDigest    string   `json:"offer_digest"`
}

// decodeHandoff reads a Handoff object without the library: which encoding
// it is in, its elements' octets, and its unknown members. It is for the
// decoded view and the expected offer digest only.
func decodeHandoff(data []byte) (enc string, offer []byte, chain [][]byte, extra []string, err error) {
	var m map[string]any
	if len(data) > 0 && (data[0] == '{' || data[0] == ' ' || data[0] == '\n') {
		enc = "json"
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber() // numbers beyond float64 in unknown members
		err = dec.Decode(&m)
	} else {
		enc = "cbor"
		var raw map[string]any
		err = cbor.Unmarshal(data, &raw)
		m = raw
	}
	if err != nil {
		return "", nil, nil, nil, err
	}
	elem := func(v any) ([]byte, error) {
		switch t := v.(type) {
		case string:
			if strings.Contains(t, ".") || enc == "cbor" {
				return []byte(t), nil
			}
			return b64.DecodeString(t)
		case []byte:
			return t, nil
		}
		return nil, fmt.Errorf("element of type %T", v)
	}
	if offer, err = elem(m["offer"]); err != nil {
		return "", nil, nil, nil, err
	}
	if c, ok := m["chain"].([]any); ok {
		for _, e := range c {
			b, err := elem(e)
			if err != nil {
				return "", nil, nil, nil, err
			}
			chain = append(chain, b)
		}
	}
	for k := range m {
		if k != "offer" && k != "chain" {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	return enc, offer, chain, extra, nil
}

func digestB64(b []byte) string {
	sum := sha256.Sum256(b)
	return b64.EncodeToString(sum[:])
}

// view decodes one element without verifying anything.
func view(octets []byte) Element {
	e := Element{Digest: digestB64(octets), Size: len(octets)}
	if len(octets) == 0 {
		e.Error = "empty element"
		return e
	}
	if octets[0] != 0xd2 && octets[0] != 0x84 {
		e.Format = "jws"
		parts := strings.Split(string(octets), ".")
		if len(parts) != 3 {
			e.Error = "not a JWS compact serialization"
			return e
		}
		e.Protected = jsonView(parts[0])
		e.Payload = jsonView(parts[1])
		return e
	}
	e.Format = "cose"
	var raw any
	if octets[0] == 0xd2 {
		var tag cbor.RawTag
		if err := cbor.Unmarshal(octets, &tag); err != nil {
			e.Error = err.Error()
			return e
		}
		octets = tag.Content
	} else {
		e.Error = "COSE_Sign1 without tag 18"
	}
	var arr []cbor.RawMessage
	if err := cbor.Unmarshal(octets, &arr); err != nil || len(arr) != 4 {
		e.Error = "not a COSE_Sign1 array"
		return e
	}
	var prot, payload []byte
	if cbor.Unmarshal(arr[0], &prot) != nil || cbor.Unmarshal(arr[2], &payload) != nil {
		e.Error = "COSE_Sign1 members are not byte strings"
		return e
	}
	if err := cbor.Unmarshal(prot, &raw); err == nil {
		e.Protected = coseHeaderView(raw)
	}
	var unprot map[any]any
	if err := cbor.Unmarshal(arr[1], &unprot); err == nil && len(unprot) > 0 {
		e.Unprotected = coseHeaderView(unprot)
	}
	if err := cbor.Unmarshal(payload, &raw); err == nil {
		e.Payload = cborView(raw)
	} else {
		e.Error = "payload: " + err.Error()
	}
	return e
}

// jsonView decodes a base64url segment holding JSON, kept as written.
func jsonView(seg string) any {
	b, err := b64.DecodeString(seg)
	if err != nil {
		return "(not base64url)"
	}
	if !json.Valid(b) {
		return string(b)
	}
	return json.RawMessage(b)
}

var coseLabels = map[int64]string{1: "alg (1)", 2: "crit (2)", 3: "content type (3)", 4: "kid (4)"}

func coseHeaderView(v any) any {
	m, ok := v.(map[any]any)
	if !ok {
		return cborView(v)
	}
	out := map[string]any{}
	for k, val := range m {
		name := fmt.Sprint(k)
		if i, ok := k.(int64); ok && coseLabels[i] != "" {
			name = coseLabels[i]
		} else if u, ok := k.(uint64); ok && coseLabels[int64(u)] != "" {
			name = coseLabels[int64(u)]
		}
		out[name] = cborView(val)
	}
	return out
}

// cborView turns a decoded CBOR value into JSON: maps with their keys as
// text, byte strings in CBOR diagnostic notation ('text' when printable,
// h'hex' otherwise).
func cborView(v any) any {
	switch t := v.(type) {
	case map[any]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[fmt.Sprint(k)] = cborView(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = cborView(e)
		}
		return out
	case float64:
		switch {
		case math.IsNaN(t):
			return "NaN (CBOR float)"
		case math.IsInf(t, 1):
			return "Infinity (CBOR float)"
		case math.IsInf(t, -1):
			return "-Infinity (CBOR float)"
		}
		return t
	case big.Int:
		return t.String() + " (CBOR integer)"
	case *big.Int:
		return t.String() + " (CBOR integer)"
	case cbor.Tag:
		return map[string]any{"tag": t.Number, "content": cborView(t.Content)}
	case cbor.SimpleValue:
		return fmt.Sprintf("simple(%d)", t)
	case []byte:
		if printable(t) {
			return "'" + string(t) + "'"
		}
		return "h'" + hex.EncodeToString(t) + "'"
	}
	return v
}

func printable(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c < 0x20 || c > 0x7e || c == '\'' {
			return false
		}
	}
	return true
}

// render builds the file of one case.
func render(c *Case) ([]byte, error) {
	enc, offer, chain, extra, err := decodeHandoff(c.Input)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Slug, err)
	}
	v := Vector{
		Name:        c.Slug,
		Description: c.Description,
		HC:          c.HC,
		Input: Input{
			Encoding:   enc,
			HandoffB64: b64.EncodeToString(c.Input),
			Decoded:    Decoded{Offer: view(offer), Extra: extra},
		},
		Trust:    map[string]JWKSet{},
		Receiver: c.Receiver,
		Expected: c.Expected,
	}
	if enc == "json" {
		v.Input.HandoffText = string(c.Input)
	}
	for _, e := range chain {
		v.Input.Decoded.Chain = append(v.Input.Decoded.Chain, view(e))
	}
	for _, a := range c.Trust {
		v.Trust[string(a.id)] = JWKSet{Keys: []json.RawMessage{a.jwk()}}
	}
	for id, keys := range c.TrustJWK {
		v.Trust[id] = JWKSet{Keys: keys}
	}
	elems := []Element{v.Input.Decoded.Offer}
	elems = append(elems, v.Input.Decoded.Chain...)
	for _, p := range c.Prior {
		v.Prior = append(v.Prior, b64.EncodeToString(p))
		if _, po, pc, _, err := decodeHandoff(p); err == nil {
			elems = append(elems, view(po))
			for _, e := range pc {
				elems = append(elems, view(e))
			}
		}
	}
	v.Expected.OfferDigest = digestB64(offer)
	if err := annotate(c, &v, payloadHasPrev(v.Input.Decoded.Offer), signedAlgs(v.Trust, elems)); err != nil {
		return nil, err
	}
	c.Level = v.Level
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	e.SetIndent("", "  ")
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
