package handoff

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/fxamacker/cbor/v2"
)

// Encoding names the serialisation of a payload or of a Handoff object.
type Encoding uint8

const (
	JSON Encoding = iota + 1
	CBOR
)

func (e Encoding) String() string {
	switch e {
	case JSON:
		return "json"
	case CBOR:
		return "cbor"
	}
	return "unknown"
}

// The generic value model both decoders produce: map[string]any (text
// member names only), []any, string, uint64 (non-negative integers), int64
// (negative integers), float64 (CBOR floats), json.Number (JSON numbers that
// are not integers), bool, nil, and []byte (CBOR byte strings only).

// decodeJSON parses one JSON object strictly: valid UTF-8, no duplicate
// member names and no two names that differ only in case (encoding/json
// would match "ISS" to iss and let a later duplicate win), bounded nesting
// and members, no trailing data.
func decodeJSON(data []byte, lim Limits) (map[string]any, error) {
	if !utf8.Valid(data) {
		return nil, malformed("JSON is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := jsonValue(dec, lim, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, malformed("trailing data after JSON value")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, malformed("JSON value is not an object")
	}
	return m, nil
}

func jsonValue(dec *json.Decoder, lim Limits, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, malformed("JSON syntax: %v", err)
	}
	switch t := tok.(type) {
	case json.Delim:
		if depth >= lim.MaxDepth {
			return nil, malformed("nesting deeper than %d", lim.MaxDepth)
		}
		switch t {
		case '{':
			m := map[string]any{}
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, malformed("JSON syntax: %v", err)
				}
				k, _ := kt.(string)
				if err := addMember(seen, k, len(m), lim); err != nil {
					return nil, err
				}
				v, err := jsonValue(dec, lim, depth+1)
				if err != nil {
					return nil, err
				}
				m[k] = v
			}
			if _, err := dec.Token(); err != nil {
				return nil, malformed("JSON syntax: %v", err)
			}
			return m, nil
		case '[':
			a := []any{}
			for dec.More() {
				if len(a) >= lim.MaxMembers {
					return nil, malformed("array of more than %d elements", lim.MaxMembers)
				}
				v, err := jsonValue(dec, lim, depth+1)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, malformed("JSON syntax: %v", err)
			}
			return a, nil
		}
		return nil, malformed("JSON syntax: unexpected %v", t)
	case json.Number:
		return jsonNumber(t)
	case string, bool, nil:
		return t, nil
	}
	return nil, malformed("JSON syntax: unexpected token")
}

// addMember records member name k of a map and refuses duplicates and maps
// that are too large. Names that differ only in case from a member the data
// model defines are refused where the model is known (fields.extra).
func addMember(seen map[string]bool, k string, n int, lim Limits) error {
	if n >= lim.MaxMembers {
		return malformed("map of more than %d members", lim.MaxMembers)
	}
	if seen[k] {
		return malformed("duplicate member %q", k)
	}
	seen[k] = true
	return nil
}

// jsonNumber keeps integers as uint64 or int64 and every other number as
// json.Number, so that a Time can refuse floats and exponent forms.
func jsonNumber(n json.Number) (any, error) {
	s := string(n)
	if strings.ContainsAny(s, ".eE") {
		return n, nil
	}
	if strings.HasPrefix(s, "-") {
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil || i == 0 { // "-0" is no negative integer: keep it as written
			return n, nil
		}
		return i, nil
	}
	u, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return n, nil
	}
	return u, nil
}

// cborSimple accepts false, true and null only: undefined and the
// unassigned simple values have no place in the data model.
var cborSimple = func() *cbor.SimpleValueRegistry {
	var fns []func(*cbor.SimpleValueRegistry) error
	for sv := 0; sv < 256; sv++ {
		if (sv < 20 || sv > 22) && (sv < 24 || sv > 31) {
			fns = append(fns, cbor.WithRejectedSimpleValue(cbor.SimpleValue(sv)))
		}
	}
	r, err := cbor.NewSimpleValueRegistryFromDefaults(fns...)
	if err != nil {
		panic(err) // constant options: a programmer error
	}
	return r
}()

// cborDecMode is strict: duplicate map keys, indefinite lengths, tags, NaN,
// infinities and simple values other than false, true and null are errors,
// text must be valid UTF-8, and maps decode with any key type so that
// non-text member names are seen and refused.
func cborDecMode(lim Limits) (cbor.DecMode, error) {
	return cbor.DecOptions{
		DupMapKey:        cbor.DupMapKeyEnforcedAPF,
		IndefLength:      cbor.IndefLengthForbidden,
		TagsMd:           cbor.TagsForbidden,
		UTF8:             cbor.UTF8RejectInvalid,
		MaxNestedLevels:  max(lim.MaxDepth, 4),
		MaxArrayElements: max(lim.MaxMembers, 16),
		MaxMapPairs:      max(lim.MaxMembers, 16),
		IntDec:           cbor.IntDecConvertNone,
		SimpleValues:     cborSimple,
		NaN:              cbor.NaNDecodeForbidden,
		Inf:              cbor.InfDecodeForbidden,
	}.DecMode()
}

// cborEncMode is RFC 8949 section 4.2.1 core deterministic encoding: the one
// form in which this package writes CBOR.
var cborEncMode = func() cbor.EncMode {
	em, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic(err) // constant options: a programmer error
	}
	return em
}()

// cborPreferredMode writes every head in its shortest form (RFC 8949
// section 4.2.1 preferred serialization, floats included) and keeps maps in
// no particular order. decodeCBOR uses it to measure an input.
var cborPreferredMode = func() cbor.EncMode {
	em, err := cbor.EncOptions{Sort: cbor.SortNone, ShortestFloat: cbor.ShortestFloat16,
		IndefLength: cbor.IndefLengthForbidden}.EncMode()
	if err != nil {
		panic(err)
	}
	return em
}()

// decodeCBOR parses one CBOR map strictly. Besides the decoder's checks
// (duplicate keys, indefinite lengths, tags, invalid UTF-8, nesting and
// size bounds), every head must be in its shortest form: RFC 8949
// preferred serialization. Map keys may come in any order, as the draft
// asks for no deterministic encoding. The check is by length: the decoded
// value, re-encoded with shortest heads, must be exactly as long as the
// input, which holds only when no head of the input is longer than needed.
func decodeCBOR(data []byte, lim Limits) (map[string]any, error) {
	dm, err := cborDecMode(lim)
	if err != nil {
		return nil, fmt.Errorf("handoff: CBOR options: %w", err)
	}
	var raw any
	rest, err := dm.UnmarshalFirst(data, &raw)
	if err != nil {
		return nil, malformed("CBOR: %v", err)
	}
	if len(rest) != 0 {
		return nil, malformed("trailing data after CBOR value")
	}
	v, err := fromCBOR(raw, lim)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, malformed("CBOR value is not a map")
	}
	again, err := cborPreferredMode.Marshal(raw)
	if err != nil || len(again) != len(data) {
		return nil, malformed("CBOR head longer than needed (RFC 8949 section 4.2.1 preferred serialization)")
	}
	return m, nil
}

// fromCBOR converts the decoder's generic values to the shared model,
// refusing non-text member names.
func fromCBOR(v any, lim Limits) (any, error) {
	switch t := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(t))
		seen := map[string]bool{}
		for k, e := range t {
			ks, ok := k.(string)
			if !ok {
				return nil, malformed("CBOR map key %v is not a text string", k)
			}
			if err := addMember(seen, ks, len(m), lim); err != nil {
				return nil, err
			}
			c, err := fromCBOR(e, lim)
			if err != nil {
				return nil, err
			}
			m[ks] = c
		}
		return m, nil
	case []any:
		a := make([]any, len(t))
		for i, e := range t {
			c, err := fromCBOR(e, lim)
			if err != nil {
				return nil, err
			}
			a[i] = c
		}
		return a, nil
	case uint64, int64, string, []byte, bool, nil:
		return t, nil
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) {
			return nil, malformed("CBOR float %v", t)
		}
		return t, nil
	case float32:
		return float64(t), nil
	}
	return nil, malformed("CBOR value of unsupported type %T", v)
}

// toCBORValue prepares a value of the shared model for encoding as CBOR:
// a JSON number that is not an integer becomes a float.
func toCBORValue(v any) (any, error) {
	return mapLeaves(v, func(leaf any) (any, error) {
		if n, ok := leaf.(json.Number); ok {
			f, err := n.Float64()
			if err != nil {
				return nil, fmt.Errorf("%w: number %s", ErrMalformed, n)
			}
			return f, nil
		}
		return leaf, nil
	})
}

// toJSONValue prepares a value of the shared model for encoding as JSON;
// byte strings, which JSON lacks, become base64url text.
func toJSONValue(v any) (any, error) {
	return mapLeaves(v, func(leaf any) (any, error) {
		if b, ok := leaf.([]byte); ok {
			return base64.RawURLEncoding.EncodeToString(b), nil
		}
		return leaf, nil
	})
}

// mapLeaves copies a value of the shared model, applying f to every value
// that is neither a map nor an array.
func mapLeaves(v any, f func(any) (any, error)) (any, error) {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			c, err := mapLeaves(e, f)
			if err != nil {
				return nil, err
			}
			m[k] = c
		}
		return m, nil
	case []any:
		a := make([]any, len(t))
		for i, e := range t {
			c, err := mapLeaves(e, f)
			if err != nil {
				return nil, err
			}
			a[i] = c
		}
		return a, nil
	}
	return f(v)
}
