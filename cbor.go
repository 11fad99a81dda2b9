package handoff

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"time"

	"github.com/fxamacker/cbor/v2"
)

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
// In profileExact every valid, well-formed data item is accepted: any
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
