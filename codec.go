package handoff

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"

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

// profile selects how much the decoders accept beyond what the draft and
// the RFCs it builds on require.
//
// profileExact, the zero value, accepts exactly what the text accepts: any
// valid JSON text (RFC 8259) whose strings are valid Unicode and whose
// member names are unique (RFC 7493 sections 2.1 and 2.3), and any valid,
// well-formed CBOR data item (RFC 8949) that the CDDL allows, in any
// serialization.
//
// profileStrict is an opt-in hardening for deployments that want one
// encoding per value. For CBOR it adds: every head in its shortest form
// (RFC 8949 section 4.2.1 preferred serialization, floats included); no
// indefinite lengths; no tags; no NaN or infinities; no simple values but
// false, true and null; text keys in every map; no integers beyond the
// 64-bit ranges. JSON is decoded the same way in both profiles. The other
// parts of the strict profile (such as refusing case variants of member
// names) belong to the layers above the codec.
type profile uint8

const (
	profileExact profile = iota
	profileStrict
)

// The generic value model both decoders produce, and both encoders take.
//
//   - map[string]any: a JSON object; a CBOR map whose keys are all text
//     strings. The top-level value is always one (the CDDL's "* text =>
//     any" makes every member name text).
//   - map[any]any: a CBOR map nested in a value with at least one key that
//     is not text. Keys are as cbor decodes them (uint64, int64,
//     cbor.ByteString for byte strings, bool, float64, cbor.Tag...). It has
//     no JSON form.
//   - []any; string; bool; nil (JSON null, CBOR null and undefined).
//   - uint64: a non-negative integer (CBOR major type 0; a JSON integer
//     literal from 0 to 2^64-1). int64: a negative integer that fits
//     (CBOR major type 1; a JSON integer literal from -2^63 to -1).
//   - json.Number: any other JSON number, exactly as written: fractions,
//     exponents, -0, integers out of the 64-bit ranges. The model refuses
//     it where a Time or v is expected and keeps it in unknown members.
//   - *big.Int: a CBOR bignum (tags 2 and 3, whatever its magnitude) or a
//     negative integer below -2^63 (major type 1). Written back as a
//     bignum.
//   - float64: a CBOR float of any width, NaN and infinities included.
//   - []byte: a CBOR byte string.
//   - cbor.Tag: any other CBOR tag, its content in this model. Tags 0 and
//     1 are kept as cbor.Tag too, their content as decoded.
//   - cbor.SimpleValue: a CBOR simple value other than false, true, null
//     and undefined.
//
// Known losses, both within RFC 8949's own equivalences or documented:
// CBOR undefined reads as nil, as null does; a float is read into float64
// and written back in its shortest exact width; an indefinite-length item
// is written back with a definite length. Signed octets are never
// re-encoded (HC-20), so none of this touches a digest.

// cloneMembers returns a deep copy of a map of members in the value model.
func cloneMembers(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	c := make(map[string]any, len(m))
	for k, v := range m {
		c[k] = cloneValue(v)
	}
	return c
}

// cloneValue returns a deep copy of a value of the model: maps, arrays,
// byte strings, bignums and tags are copied; the other kinds are
// immutable values. Tags' contents are copied too.
func cloneValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		return cloneMembers(t)
	case map[any]any:
		c := make(map[any]any, len(t))
		for k, e := range t {
			c[k] = cloneValue(e) // keys are comparable, hence immutable values
		}
		return c
	case []any:
		if t == nil {
			return t
		}
		c := make([]any, len(t))
		for i, e := range t {
			c[i] = cloneValue(e)
		}
		return c
	case []byte:
		return bytes.Clone(t)
	case json.RawMessage:
		return bytes.Clone(t)
	case cbor.RawMessage:
		return bytes.Clone(t)
	case *big.Int:
		if t == nil {
			return t
		}
		return new(big.Int).Set(t)
	case cbor.Tag:
		return cbor.Tag{Number: t.Number, Content: cloneValue(t.Content)}
	}
	return v
}

func typeName(v any) string {
	switch v.(type) {
	case map[string]any:
		return "map"
	case []any:
		return "array"
	case string:
		return "text"
	case uint64:
		return "unsigned integer"
	case int64:
		return "negative integer"
	case float64:
		return "float"
	case bool:
		return "bool"
	case nil:
		return "null"
	case []byte:
		return "byte string"
	case json.Number:
		return "non-integer or out-of-range number"
	case *big.Int:
		return "bignum"
	case map[any]any:
		return "map with non-text keys"
	case cbor.Tag:
		return "tag"
	case cbor.SimpleValue:
		return "simple value"
	}
	return fmt.Sprintf("%T", v)
}
