package handoff

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/go-json-experiment/json/jsontext"
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

// peekMembers reads a payload that must be a map, as decodePayload would
// accept it at its top level, and decodes only the members named: the
// others are checked to be well formed (JSON: valid, as jsontext checks
// every value) and skipped, never built. It runs before a signature
// verifies, so that what an unknown sender's octets cost stays a small
// multiple of their size; decodePayload checks the rest once the
// signature has verified.
func peekMembers(payload []byte, enc Encoding, lim Limits, names ...string) (map[string]any, error) {
	if len(payload) > lim.MaxElementSize {
		return nil, fmt.Errorf("%w: payload of %d octets exceeds %d", ErrTooLarge, len(payload), lim.MaxElementSize)
	}
	m := make(map[string]any, len(names))
	if enc == CBOR {
		if len(payload) == 0 {
			return nil, malformed("CBOR: empty input")
		}
		if payload[0]>>5 != 5 {
			return nil, malformed("CBOR value is not a map")
		}
		dm, err := cborDecMode(lim, profileExact)
		if err != nil {
			return nil, fmt.Errorf("handoff: CBOR options: %w", err)
		}
		// Into a struct of the three members step 1 reads: the library
		// skips every other member without building or copying it.
		// Duplicate names are found once the signature has verified, by
		// the full decoder; before, the last of them is read.
		var p peekCBOR
		rest, err := cborPeekMode.UnmarshalFirst(payload, &p)
		switch {
		case err != nil:
			return nil, malformed("CBOR: %v", err)
		case len(rest) != 0:
			return nil, malformed("trailing data after CBOR value")
		}
		for _, n := range names {
			r := p.member(n)
			if r == nil {
				continue
			}
			switch r[0] >> 5 {
			case 4, 5, 6: // an array, a map or a tag: its kind is enough
				m[n] = kindOnly(r[0] >> 5)
				continue
			}
			var v any
			if err := dm.Unmarshal(r, &v); err != nil {
				return nil, malformed("CBOR: %v", err)
			}
			m[n] = v // text and integers are as decodePayload reads them
		}
		return m, nil
	}
	d := jsonDecoders.Get().(*jsontext.Decoder)
	defer func() {
		d.Reset(bytes.NewBuffer(nil))
		jsonDecoders.Put(d)
	}()
	d.Reset(bytes.NewBuffer(payload))
	switch d.PeekKind() {
	case '{':
	case 0:
		_, err := d.ReadToken()
		return nil, jsonErr(err)
	default:
		return nil, malformed("JSON value is not an object")
	}
	if _, err := d.ReadToken(); err != nil {
		return nil, jsonErr(err)
	}
	for d.PeekKind() != '}' {
		if d.PeekKind() != '"' {
			_, err := d.ReadToken()
			return nil, jsonErr(err)
		}
		raw, err := d.ReadValue()
		if err != nil {
			return nil, jsonErr(err)
		}
		name, err := jsonText(raw, true)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(names, name) {
			if _, err := d.ReadValue(); err != nil {
				return nil, jsonErr(err)
			}
			continue
		}
		switch d.PeekKind() {
		case '[', '{': // its kind is enough
			k := d.PeekKind()
			if _, err := d.ReadValue(); err != nil {
				return nil, jsonErr(err)
			}
			m[name] = kindOnly(map[jsontext.Kind]byte{'[': 4, '{': 5}[k])
			continue
		}
		if m[name], err = jsonValue(d, lim, 1); err != nil {
			return nil, err
		}
	}
	if _, err := d.ReadToken(); err != nil {
		return nil, jsonErr(err)
	}
	if _, err := d.ReadToken(); err != io.EOF {
		return nil, malformed("trailing data after JSON value")
	}
	return m, nil
}

// peekCBOR holds the members of a payload that step 1 reads.
type peekCBOR struct {
	V    cbor.RawMessage `cbor:"v"`
	Type cbor.RawMessage `cbor:"type"`
	Iss  cbor.RawMessage `cbor:"iss"`
}

// member returns the member named n, or nil.
func (p *peekCBOR) member(n string) cbor.RawMessage {
	switch n {
	case "v":
		return p.V
	case "type":
		return p.Type
	case "iss":
		return p.Iss
	}
	return nil
}

// cborPeekMode reads a payload into peekCBOR: names matched exactly, and
// the shape bounded by the size alone, as in cborDecOptions.
var cborPeekMode = func() cbor.DecMode {
	o := cborDecOptions(Limits{}.withDefaults(), profileExact)
	o.DupMapKey = cbor.DupMapKeyQuiet
	o.FieldNameMatching = cbor.FieldNameMatchingCaseSensitive
	dm, err := o.DecMode()
	if err != nil {
		panic(err) // constant options: a programmer error
	}
	return dm
}()

// kindOnly stands, in what peekMembers returns, for an array, a map or a
// tag (CBOR major types 4, 5 and 6) that it did not decode: enough for the
// member's type check to refuse it, as typeName names the decoded value.
func kindOnly(major byte) any {
	switch major {
	case 4:
		return []any(nil)
	case 5:
		return map[string]any(nil)
	}
	return cbor.Tag{}
}

// decodeJSONItem decodes one JSON value that was kept undecoded (a
// json.RawMessage) into the value model, checked as a payload's members
// are, with the bounds of the default Limits.
func decodeJSONItem(raw []byte) (any, error) {
	d := jsonDecoders.Get().(*jsontext.Decoder)
	defer func() {
		d.Reset(bytes.NewBuffer(nil))
		jsonDecoders.Put(d)
	}()
	d.Reset(bytes.NewBuffer(raw))
	v, err := jsonValue(d, Limits{}.withDefaults(), 1)
	if err != nil {
		return nil, err
	}
	if _, err := d.ReadToken(); err != io.EOF {
		return nil, malformed("trailing data after JSON value")
	}
	return v, nil
}

// decodeCBORItem decodes one CBOR data item that was kept undecoded (a
// cbor.RawMessage) into the value model, checked for validity as a
// payload's members are (profileExact), with the bounds of the default
// Limits.
func decodeCBORItem(raw []byte) (any, error) {
	if len(raw) == 0 {
		return nil, malformed("CBOR: empty input")
	}
	lim := Limits{}.withDefaults()
	dm, err := cborDecMode(lim, profileExact)
	if err != nil {
		return nil, fmt.Errorf("handoff: CBOR options: %w", err)
	}
	c := cborConv{lim: lim, p: profileExact}
	var v any
	if err := dm.Unmarshal(raw, &v); err == nil {
		if v, err = c.value(v, 1); !errors.Is(err, errTimeTag) {
			return v, err
		}
	}
	return c.item(dm, raw, 1)
}

// decodeJSON parses one JSON object strictly (RFC 8259 and RFC 7493): the
// text must be valid UTF-8 and every string valid Unicode, so a lone
// surrogate escape such as "\udc00" is refused instead of read as U+FFFD
// (RFC 7493 section 2.1, RFC 8259 section 8.2); member names are unique
// once unescaped ("a" and "\u0061" are the same name, RFC 7493 section
// 2.3); nesting and members are bounded by lim; nothing may follow the
// object. Names that differ only in case are distinct names here; the
// model decides what to do with them.
//
// The decoder is jsontext, which checks the grammar, UTF-8, surrogates and
// duplicate names in the same single pass that builds the value.
func decodeJSON(data []byte, lim Limits) (map[string]any, error) {
	d := jsonDecoders.Get().(*jsontext.Decoder)
	defer func() {
		d.Reset(bytes.NewBuffer(nil)) // keep no reference to data
		jsonDecoders.Put(d)
	}()
	d.Reset(bytes.NewBuffer(data)) // a bytes.Buffer is parsed in place, not copied
	if k := d.PeekKind(); k != '{' {
		if k == 0 {
			_, err := d.ReadToken()
			return nil, jsonErr(err)
		}
		return nil, malformed("JSON value is not an object")
	}
	v, err := jsonObject(d, lim, 0)
	if err != nil {
		return nil, err
	}
	if _, err := d.ReadToken(); err != io.EOF {
		return nil, malformed("trailing data after JSON value")
	}
	return v, nil
}

// jsonDecoders recycles decoders, whose buffers and name sets are the
// larger part of a decode's allocations. A decoder carries nothing from
// one use to the next: Reset clears it before each.
var jsonDecoders = sync.Pool{New: func() any { return jsontext.NewDecoder(bytes.NewBuffer(nil)) }}

func jsonErr(err error) error {
	if err == io.EOF || err == nil {
		err = io.ErrUnexpectedEOF
	}
	return malformed("JSON: %v", err)
}

func jsonObject(d *jsontext.Decoder, lim Limits, depth int) (map[string]any, error) {
	if depth >= lim.MaxDepth {
		return nil, malformed("nesting deeper than %d", lim.MaxDepth)
	}
	if _, err := d.ReadToken(); err != nil { // '{'
		return nil, jsonErr(err)
	}
	var m map[string]any
	if depth == 0 {
		m = make(map[string]any, 16) // an offer has up to 13 defined members
	} else {
		m = map[string]any{}
	}
	for {
		switch d.PeekKind() {
		case '}':
			if _, err := d.ReadToken(); err != nil {
				return nil, jsonErr(err)
			}
			return m, nil
		case '"':
		default:
			_, err := d.ReadToken()
			return nil, jsonErr(err)
		}
		if len(m) >= lim.MaxMembers {
			return nil, malformed("map of more than %d members", lim.MaxMembers)
		}
		raw, err := d.ReadValue() // the name; jsontext refuses a duplicate
		if err != nil {
			return nil, jsonErr(err)
		}
		k, err := jsonText(raw, true)
		if err != nil {
			return nil, err
		}
		v, err := jsonValue(d, lim, depth+1)
		if err != nil {
			return nil, err
		}
		m[k] = v
	}
}

func jsonValue(d *jsontext.Decoder, lim Limits, depth int) (any, error) {
	switch d.PeekKind() {
	case '{':
		return jsonObject(d, lim, depth)
	case '[':
		if depth >= lim.MaxDepth {
			return nil, malformed("nesting deeper than %d", lim.MaxDepth)
		}
		if _, err := d.ReadToken(); err != nil {
			return nil, jsonErr(err)
		}
		a := []any{}
		for d.PeekKind() != ']' {
			if len(a) >= lim.MaxMembers {
				return nil, malformed("array of more than %d elements", lim.MaxMembers)
			}
			v, err := jsonValue(d, lim, depth+1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		if _, err := d.ReadToken(); err != nil {
			return nil, jsonErr(err)
		}
		return a, nil
	case '"':
		raw, err := d.ReadValue()
		if err != nil {
			return nil, jsonErr(err)
		}
		return jsonText(raw, false)
	case '0':
		raw, err := d.ReadValue()
		if err != nil {
			return nil, jsonErr(err)
		}
		return jsonNumber(raw), nil
	}
	t, err := d.ReadToken()
	if err != nil {
		return nil, jsonErr(err)
	}
	switch t.Kind() {
	case 't', 'f':
		return t.Bool(), nil
	case 'n':
		return nil, nil
	}
	return nil, malformed("JSON syntax: unexpected %v", t.Kind())
}

// jsonText returns the text of a JSON string that jsontext has validated.
// A string without escapes is its own text; the draft's member names are
// interned so that decoding them allocates nothing.
func jsonText(raw jsontext.Value, name bool) (string, error) {
	body := raw[1 : len(raw)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		if name {
			if s, ok := internName(body); ok {
				return s, nil
			}
		}
		return string(body), nil
	}
	b, err := jsontext.AppendUnquote(nil, raw)
	if err != nil {
		return "", malformed("JSON string: %v", err)
	}
	return string(b), nil
}

func internName(b []byte) (string, bool) {
	switch string(b) {
	case "v":
		return "v", true
	case "type":
		return "type", true
	case "hop":
		return "hop", true
	case "dialog":
		return "dialog", true
	case "task":
		return "task", true
	case "iss":
		return "iss", true
	case "aud":
		return "aud", true
	case "iat":
		return "iat", true
	case "exp":
		return "exp", true
	case "obo":
		return "obo", true
	case "grant":
		return "grant", true
	case "prev":
		return "prev", true
	case "refs":
		return "refs", true
	case "offer":
		return "offer", true
	case "chain":
		return "chain", true
	case "state":
		return "state", true
	case "reason":
		return "reason", true
	case "detail":
		return "detail", true
	case "alg":
		return "alg", true
	case "val":
		return "val", true
	case "kind":
		return "kind", true
	case "dig":
		return "dig", true
	case "loc":
		return "loc", true
	case "sub":
		return "sub", true
	}
	return "", false
}

// jsonNumber keeps an integer literal that parses exactly as uint64 (0 to
// 2^64-1) or int64 (-2^63 to -1), and every other number as json.Number,
// exactly as written, so that a Time can refuse fractions, exponents and
// -0 and an unknown member keeps them.
func jsonNumber(raw []byte) any {
	integer := true
	for _, c := range raw {
		if c == '.' || c == 'e' || c == 'E' {
			integer = false
			break
		}
	}
	if integer {
		if raw[0] == '-' {
			if i, err := strconv.ParseInt(string(raw), 10, 64); err == nil && i != 0 {
				return i
			}
		} else if u, err := strconv.ParseUint(string(raw), 10, 64); err == nil {
			return u
		}
	}
	return json.Number(raw)
}

// cborSimple accepts false, true and null only (the strict profile).
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

// cborDecOptions are the decoder's options for a profile and bounds. Both
// profiles refuse what RFC 8949 makes invalid: duplicate map keys (section
// 5.6), text that is not valid UTF-8 (section 5.3.1), items that are not
// well-formed (truncated, reserved additional information, a break
// outside an indefinite-length item); and both bound nesting and sizes
// before allocating. The strict profile adds its restrictions.
func cborDecOptions(lim Limits, p profile) cbor.DecOptions {
	o := cbor.DecOptions{
		DupMapKey:        cbor.DupMapKeyEnforcedAPF,
		UTF8:             cbor.UTF8RejectInvalid,
		MaxNestedLevels:  min(max(lim.MaxDepth, 4), maxNesting),
		MaxArrayElements: min(max(lim.MaxMembers, 16), maxItems),
		MaxMapPairs:      min(max(lim.MaxMembers, 16), maxItems),
		IntDec:           cbor.IntDecConvertNone,
		BigIntDec:        cbor.BigIntDecodePointer,
		IndefLength:      cbor.IndefLengthAllowed,
		TagsMd:           cbor.TagsAllowed,
	}
	if p == profileStrict {
		o.IndefLength = cbor.IndefLengthForbidden
		o.TagsMd = cbor.TagsForbidden
		o.SimpleValues = cborSimple
		o.NaN = cbor.NaNDecodeForbidden
		o.Inf = cbor.InfDecodeForbidden
	}
	return o
}

type cborModeKey struct {
	depth, members int
	p              profile
}

// cborDecModes holds the decoder modes for the default bounds, built
// once: building a mode costs more than decoding a payload. It is never
// written after initialisation.
var cborDecModes = func() map[cborModeKey]cbor.DecMode {
	m := map[cborModeKey]cbor.DecMode{}
	def := Limits{}.withDefaults()
	for _, p := range []profile{profileExact, profileStrict} {
		k := cborModeKey{def.MaxDepth, def.MaxMembers, p}
		dm, err := cborDecOptions(def, p).DecMode()
		if err != nil {
			panic(err) // constant options: a programmer error
		}
		m[k] = dm
	}
	return m
}()

func cborDecMode(lim Limits, p profile) (cbor.DecMode, error) {
	if dm, ok := cborDecModes[cborModeKey{lim.MaxDepth, lim.MaxMembers, p}]; ok {
		return dm, nil
	}
	return cborDecOptions(lim, p).DecMode()
}

// cborEncMode is RFC 8949 section 4.2.1 core deterministic encoding: the one
// form in which this package writes CBOR. A *big.Int is written as a bignum
// whatever its magnitude, so that a bignum read is a bignum written.
var cborEncMode = func() cbor.EncMode {
	o := cbor.CoreDetEncOptions()
	o.BigIntConvert = cbor.BigIntConvertNone
	em, err := o.EncMode()
	if err != nil {
		panic(err) // constant options: a programmer error
	}
	return em
}()

// cborPreferredMode writes every head in its shortest form (RFC 8949
// section 4.2.1 preferred serialization, floats included) and keeps maps in
// no particular order. The strict profile uses it to measure an input.
var cborPreferredMode = func() cbor.EncMode {
	em, err := cbor.EncOptions{Sort: cbor.SortNone, ShortestFloat: cbor.ShortestFloat16,
		IndefLength: cbor.IndefLengthForbidden}.EncMode()
	if err != nil {
		panic(err)
	}
	return em
}()

// errTimeTag tells decodeCBOR that the library read a tag 0 or 1 as a
// time.Time; the item is decoded again keeping the tag as it came.
var errTimeTag = errors.New("time tag")

// decodeCBOR parses one CBOR data item, which must be a map with text keys
// (the CDDL's top-level maps), into the generic value model.
//
// In ProfileExact every valid, well-formed data item is accepted: any
// serialization (longer heads than needed, indefinite lengths, floats of
// any width, keys in any order), tags, NaN and infinities, simple values,
// nested maps with keys of any type that Go can hold as a map key. The
// draft asks for no deterministic or preferred encoding (RFC 8949 section
// 4.1 leaves the choice to the protocol), and the digest is over the
// octets as sent (HC-20), so a re-encoded element is another element.
//
// profileStrict restores the one-encoding-per-value hardening: besides
// the decoder options of the profile, every head must be in its shortest
// form. That check is by length: the decoded value, re-encoded with
// shortest heads, must be exactly as long as the input, which holds only
// when no head of the input is longer than needed.
//
// Limits of the library, refused with ErrMalformed although RFC 8949
// calls them valid: a map key that is an array, a map or a bignum (Go
// cannot hold it as a map key), or a tag 0 or 1. An input the first pass
// refuses is decoded a second time before it is refused, so hostile input
// costs at most two passes.
func decodeCBOR(data []byte, lim Limits, p profile) (map[string]any, error) {
	if len(data) == 0 {
		return nil, malformed("CBOR: empty input")
	}
	if data[0]>>5 != 5 { // major type 5: the CDDL's root is a map, untagged
		return nil, malformed("CBOR value is not a map")
	}
	dm, err := cborDecMode(lim, p)
	if err != nil {
		return nil, fmt.Errorf("handoff: CBOR options: %w", err)
	}
	c := cborConv{lim: lim, p: p}
	// The top level is read straight into map[string]any: a key that is not
	// text fails here, and the second pass below reports it.
	var top map[string]any
	rest, err := dm.UnmarshalFirst(data, &top)
	var m map[string]any
	switch {
	case err != nil && p == profileExact:
		// The library may have failed on a tag 0 or 1 whose content it
		// cannot read as a time; the second pass keeps such a tag as it
		// is, and finds any other error again.
		m, err = c.top(dm, data)
	case err != nil:
		return nil, malformed("CBOR: %v", err)
	case len(rest) != 0:
		return nil, malformed("trailing data after CBOR value")
	default:
		m, err = c.members(top)
		if errors.Is(err, errTimeTag) {
			m, err = c.top(dm, data)
		}
	}
	if err != nil {
		return nil, err
	}
	if p == profileStrict {
		again, err := cborPreferredMode.Marshal(m)
		if err != nil || len(again) != len(data) {
			return nil, malformed("CBOR head longer than needed (RFC 8949 section 4.2.1 preferred serialization)")
		}
	}
	return m, nil
}

// cborConv converts the decoder's generic values to the shared model.
type cborConv struct {
	lim Limits
	p   profile
}

// members converts the values of the top-level map in place.
func (c cborConv) members(m map[string]any) (map[string]any, error) {
	if len(m) > c.lim.MaxMembers {
		return nil, malformed("map of more than %d members", c.lim.MaxMembers)
	}
	for k, e := range m {
		ce, err := c.value(e, 1)
		if err != nil {
			return nil, err
		}
		m[k] = ce
	}
	return m, nil
}

// top is the second pass over the whole item (see item).
func (c cborConv) top(dm cbor.DecMode, data []byte) (map[string]any, error) {
	v, err := c.item(dm, data, 0)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, malformed("CBOR map key is not a text string")
	}
	return m, nil
}

func (c cborConv) value(v any, depth int) (any, error) {
	switch t := v.(type) {
	case map[any]any:
		return c.mapValue(t, depth)
	case map[string]any: // converted already, by the second pass (item)
		if len(t) > c.lim.MaxMembers {
			return nil, malformed("map of more than %d members", c.lim.MaxMembers)
		}
		for k, e := range t {
			ce, err := c.value(e, depth+1)
			if err != nil {
				return nil, err
			}
			t[k] = ce
		}
		return t, nil
	case []any:
		if len(t) > c.lim.MaxMembers {
			return nil, malformed("array of more than %d elements", c.lim.MaxMembers)
		}
		for i, e := range t {
			ce, err := c.value(e, depth+1)
			if err != nil {
				return nil, err
			}
			t[i] = ce
		}
		return t, nil
	case uint64, int64, string, []byte, bool, nil, float64:
		return t, nil
	case *big.Int:
		if c.p == profileStrict {
			return nil, malformed("CBOR integer %v beyond 64 bits", t)
		}
		return t, nil
	case cbor.Tag:
		ct, err := c.value(t.Content, depth+1)
		if err != nil {
			return nil, err
		}
		return cbor.Tag{Number: t.Number, Content: ct}, nil
	case cbor.SimpleValue:
		return t, nil
	case time.Time:
		return nil, errTimeTag
	}
	return nil, malformed("CBOR value of unsupported type %T", v)
}

func (c cborConv) mapValue(t map[any]any, depth int) (any, error) {
	if len(t) > c.lim.MaxMembers {
		return nil, malformed("map of more than %d members", c.lim.MaxMembers)
	}
	text := true
	nans := 0
	for k := range t {
		switch kt := k.(type) {
		case string:
			continue
		case time.Time:
			return nil, errTimeTag
		case float64:
			if math.IsNaN(kt) {
				nans++
			}
		}
		text = false
	}
	if nans > 1 { // a Go map holds each NaN apart; RFC 8949 section 5.6 does not
		return nil, malformed("CBOR map with duplicate NaN keys")
	}
	if text {
		m := make(map[string]any, len(t))
		for k, e := range t {
			ce, err := c.value(e, depth+1)
			if err != nil {
				return nil, err
			}
			m[k.(string)] = ce
		}
		return m, nil
	}
	if c.p == profileStrict || depth == 0 {
		for k := range t {
			if _, ok := k.(string); !ok {
				return nil, malformed("CBOR map key %v is not a text string", k)
			}
		}
	}
	for k, e := range t {
		ce, err := c.value(e, depth+1)
		if err != nil {
			return nil, err
		}
		t[k] = ce
	}
	return t, nil
}

// item decodes one data item again, level by level, where the first pass
// read a tag 0 or 1 as a time.Time: such a tag is kept as a cbor.Tag with
// its content as decoded, so that nothing of it is lost and a value the
// library cannot read as a time (RFC 8949 section 3.4 leaves its checking
// to the application) is still accepted.
func (c cborConv) item(dm cbor.DecMode, data []byte, depth int) (any, error) {
	var err error
	switch data[0] >> 5 {
	case 4:
		var a []cbor.RawMessage
		if err = dm.Unmarshal(data, &a); err == nil {
			out := make([]any, len(a))
			for i, e := range a {
				if out[i], err = c.item(dm, e, depth+1); err != nil {
					return nil, err
				}
			}
			return c.value(out, depth)
		}
	case 5:
		var m map[any]cbor.RawMessage
		if err = dm.Unmarshal(data, &m); err == nil {
			out := make(map[any]any, len(m))
			for k, e := range m {
				if _, ok := k.(time.Time); ok {
					return nil, malformed("CBOR map key: a tag 0 or 1 is not supported as a map key")
				}
				if out[k], err = c.item(dm, e, depth+1); err != nil {
					return nil, err
				}
			}
			return c.value(out, depth)
		}
	case 6:
		var t cbor.RawTag
		if err = dm.Unmarshal(data, &t); err == nil {
			if t.Number != 0 && t.Number != 1 {
				var v any
				if err = dm.Unmarshal(data, &v); err == nil {
					if v, err = c.value(v, depth); !errors.Is(err, errTimeTag) {
						return v, err
					}
				}
			}
			ct, err := c.item(dm, t.Content, depth+1)
			if err != nil {
				return nil, err
			}
			return cbor.Tag{Number: t.Number, Content: ct}, nil
		}
	default:
		var v any
		if err = dm.Unmarshal(data, &v); err == nil {
			return c.value(v, depth)
		}
	}
	return nil, malformed("CBOR: %v", err)
}

// toCBORValue prepares a value of the shared model for encoding as CBOR. A
// JSON number that is not an int64 or uint64 becomes what RFC 8949 section
// 6.2 suggests: an integer literal a bignum, any other number a float.
func toCBORValue(v any) (any, error) {
	return mapLeaves(v, func(leaf any) (any, error) {
		if raw, ok := leaf.(json.RawMessage); ok {
			// A member kept undecoded from JSON: converted now.
			v, err := decodeJSONItem(raw)
			if err != nil {
				return nil, err
			}
			return toCBORValue(v)
		}
		n, ok := leaf.(json.Number)
		if !ok {
			return leaf, nil // a cbor.RawMessage is written as it is
		}
		// A json.Number given by a caller may hold an integer in range.
		if u, err := strconv.ParseUint(string(n), 10, 64); err == nil {
			return u, nil
		}
		if i, err := strconv.ParseInt(string(n), 10, 64); err == nil && n != "-0" {
			return i, nil
		}
		if i, ok := new(big.Int).SetString(string(n), 10); ok && n != "-0" {
			return i, nil
		}
		f, err := strconv.ParseFloat(string(n), 64)
		if err != nil {
			return nil, fmt.Errorf("%w: number %s has no CBOR form", ErrMalformed, n)
		}
		return f, nil
	})
}

// toJSONValue prepares a value of the shared model for encoding as JSON;
// byte strings, which JSON lacks, become base64url text. CBOR values that
// JSON cannot express (tags, simple values, non-finite floats, maps with
// non-text keys) are an error, never silently changed.
func toJSONValue(v any) (any, error) {
	return mapLeaves(v, func(leaf any) (any, error) {
		switch t := leaf.(type) {
		case []byte:
			return base64.RawURLEncoding.EncodeToString(t), nil
		case cbor.RawMessage:
			// A member kept undecoded from CBOR: converted now.
			v, err := decodeCBORItem(t)
			if err != nil {
				return nil, err
			}
			return toJSONValue(v)
		case float64:
			if math.IsNaN(t) || math.IsInf(t, 0) {
				return nil, fmt.Errorf("%w: CBOR float %v has no JSON form", ErrMalformed, t)
			}
		case map[any]any, cbor.Tag, cbor.SimpleValue, time.Time:
			return nil, fmt.Errorf("%w: CBOR %s has no JSON form", ErrMalformed, typeName(t))
		}
		return leaf, nil
	})
}

// mapLeaves copies a value of the shared model, applying f to every value
// that is neither a map nor an array nor a tag.
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
	case map[any]any:
		if _, err := f(t); err != nil {
			return nil, err
		}
		m := make(map[any]any, len(t))
		for k, e := range t {
			c, err := mapLeaves(e, f)
			if err != nil {
				return nil, err
			}
			m[k] = c
		}
		return m, nil
	case cbor.Tag:
		if _, err := f(t); err != nil {
			return nil, err
		}
		c, err := mapLeaves(t.Content, f)
		if err != nil {
			return nil, err
		}
		return cbor.Tag{Number: t.Number, Content: c}, nil
	}
	return f(v)
}
