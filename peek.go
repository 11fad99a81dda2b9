package handoff

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/fxamacker/cbor/v2"

	"github.com/agentproto/handoff/internal/cborhead"
	"github.com/agentproto/handoff/internal/jsoncheck"
)

// peekMembers reads a payload that must be a map, as decodePayload would
// accept it at its top level, and decodes only the members named: the
// others are checked to be well formed (JSON: valid, and no name
// repeated, as jsoncheck checks the whole text before jsontext reads it)
// and skipped, never built. It runs before a signature verifies, so that what an
// unknown sender's octets cost stays a small
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
		// Checked well formed by the library, then walked in place: the
		// members step 1 reads are kept as views, every other member is
		// skipped, its name not even made a string. Duplicate names are
		// found once the signature has verified, by the full decoder;
		// before, the first of them is read.
		if err := cborPeekMode.Wellformed(payload); err != nil {
			if _, ok := errors.AsType[*cbor.ExtraneousDataError](err); ok {
				return nil, malformed("trailing data after CBOR value")
			}
			return nil, malformed("CBOR: %v", err)
		}
		var p peekCBOR
		it, _ := cborhead.Open(payload)
		for k, ok := it.Next(); ok; k, ok = it.Next() {
			v, _ := it.Next()
			if cborhead.Major(k) != cborhead.Text {
				continue // a name that is not text: the full decoder refuses it
			}
			if !cborhead.ValidText(k) {
				return nil, malformed("CBOR: invalid UTF-8 string")
			}
			name, _ := cborhead.String(k)
			if dst := p.member(string(name)); dst != nil && *dst == nil {
				*dst = v
			}
		}
		for _, n := range names {
			r := *p.member(n)
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
	// One pass of jsoncheck checks the whole payload and hands over its
	// members as written: only the named ones are decoded.
	err := jsoncheck.Walk(payload, jsoncheck.Fields{Member: func(raw, v []byte) error {
		name, err := jsonName(raw)
		if err != nil {
			return err
		}
		for _, n := range names {
			switch {
			case string(name) != n:
			case v[0] == '[': // its kind is enough
				m[n] = kindOnly(cborhead.Array)
			case v[0] == '{':
				m[n] = kindOnly(cborhead.Map)
			default:
				m[n], err = jsonScalar(v)
			}
		}
		return err
	}})
	if err != nil {
		return nil, malformed("JSON: %v", err)
	}
	if payload[len(payload)-len(bytes.TrimLeft(payload, " \t\r\n"))] != '{' {
		return nil, malformed("JSON value is not an object")
	}
	return m, nil
}

// peekCBOR holds the members of a payload that step 1 reads, in place.
type peekCBOR struct {
	V, Type, Iss []byte
}

// member returns where the member named n is kept, or nil for a name
// step 1 does not read.
func (p *peekCBOR) member(n string) *[]byte {
	switch n {
	case "v":
		return &p.V
	case "type":
		return &p.Type
	case "iss":
		return &p.Iss
	}
	return nil
}

// cborPeekMode checks a payload well formed before peekMembers walks it:
// the shape bounded by the size alone, as in cborDecOptions.
var cborPeekMode = func() cbor.DecMode {
	dm, err := cborDecOptions(Limits{}.withDefaults(), profileExact).DecMode()
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

// peekIss reads, before the signature is checked, what step 1 needs from
// a payload: that it is a well-formed map whose v is 1 and type is want,
// and its iss, whose keys verify it. Nothing else is decoded.
//
// Its errors say the package once: the jws or cose package wraps them in
// the middle of a message ("jws: key lookup: malformed input: ...").
func peekIss(payload []byte, enc Encoding, lim Limits, want string) (AgentID, error) {
	m, err := peekMembers(payload, enc, lim.withDefaults(), "v", "type", "iss")
	if err != nil {
		return "", unprefixed{err}
	}
	f := fields{m: m}
	if err := f.version(); err != nil {
		return "", unprefixed{err}
	}
	if err := f.typ(want); err != nil {
		return "", unprefixed{err}
	}
	iss, err := f.agent("iss")
	if err != nil {
		return "", unprefixed{err}
	}
	return iss, nil
}
