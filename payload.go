package handoff

import (
	"bytes"
	"io"
	"math"
	"slices"

	"github.com/agentproto/handoff/digest"
	"github.com/fxamacker/cbor/v2"
	"github.com/go-json-experiment/json/jsontext"
)

// fastOffer decodes payload on the typed fast path of its encoding, when
// the profile allows it; ok false leaves it to the full path. It reads the
// CDDL's members only, and steps aside at the first member it does not
// know; obo and refs it reads into the generic model, as the full path
// does, so it runs once the signature has verified (openOffer).
func fastOffer(payload []byte, enc Encoding, lim Limits) (*Offer, bool) {
	if lim.Strict {
		return nil, false
	}
	if enc == JSON {
		return offerFromJSONFast(payload, lim)
	}
	return offerFromCBORFast(payload, lim)
}

// offerCBOR is a CBOR offer payload as the fast path reads it: the
// members of the CDDL, typed, in one pass of the CBOR library with no
// generic values between. Dialog, Iat and Exp start at sentinels that a
// decoded value can never equal (text that is not UTF-8) or that the fast
// path never accepts (2^64-1), so that a required member left unset is
// seen as missing.
type offerCBOR struct {
	V      uint64      `cbor:"v"`
	Type   string      `cbor:"type"`
	Hop    string      `cbor:"hop"`
	Dialog string      `cbor:"dialog"`
	Task   string      `cbor:"task"`
	Iss    string      `cbor:"iss"`
	Aud    string      `cbor:"aud"`
	Iat    uint64      `cbor:"iat"`
	Exp    uint64      `cbor:"exp"`
	Obo    any         `cbor:"obo"`
	Grant  *digestCBOR `cbor:"grant"`
	Prev   *digestCBOR `cbor:"prev"`
	Refs   any         `cbor:"refs"`
}

type digestCBOR struct {
	Alg string `cbor:"alg"`
	Val string `cbor:"val"`
}

const textUnset = "\xff"

// cborFastMode is the exact profile's decoder (cborDecOptions) narrowed
// to what the fast path can read without losing a distinction the CDDL
// makes: no tags, no null or undefined (a member present as null would
// read as absent), member names matched exactly, and any member outside
// offerCBOR an error. Whatever it refuses goes to the full decoder.
var cborFastMode = func() cbor.DecMode {
	def := Limits{}.withDefaults()
	o := cborDecOptions(def, profileExact)
	o.TagsMd = cbor.TagsForbidden
	o.ExtraReturnErrors = cbor.ExtraDecErrorUnknownField
	o.FieldNameMatching = cbor.FieldNameMatchingCaseSensitive
	simple, err := cbor.NewSimpleValueRegistryFromDefaults(
		cbor.WithRejectedSimpleValue(cbor.SimpleValue(22)), // null
		cbor.WithRejectedSimpleValue(cbor.SimpleValue(23)), // undefined
	)
	if err != nil {
		panic(err) // constant options: a programmer error
	}
	o.SimpleValues = simple
	dm, err := o.DecMode()
	if err != nil {
		panic(err)
	}
	return dm
}()

// fastLimits reports whether lim are the default bounds, the only ones
// the fast paths serve.
func fastLimits(lim Limits) bool {
	def := Limits{}.withDefaults()
	return lim.MaxDepth == def.MaxDepth && lim.MaxMembers == def.MaxMembers
}

// offerFromJSONFast decodes the common JSON offer, one with only the
// members the CDDL names, straight from the tokens into an Offer, with no
// generic values between but for obo and refs. It reports ok
// only for an input the full path (decodePayload, then offerFrom) accepts,
// and then returns the same Offer; anything else, valid or not, is left
// to the full path, which alone reports errors. The same jsontext decoder
// checks the grammar, UTF-8, surrogates and duplicate names as on the full
// path. FuzzDecodeOffer holds the two paths to that.
func offerFromJSONFast(payload []byte, lim Limits) (*Offer, bool) {
	lim = lim.withDefaults()
	if !fastLimits(lim) || len(payload) > lim.MaxElementSize {
		return nil, false
	}
	d := jsonDecoders.Get().(*jsontext.Decoder)
	defer func() {
		d.Reset(bytes.NewBuffer(nil)) // keep no reference to payload
		jsonDecoders.Put(d)
	}()
	d.Reset(bytes.NewBuffer(payload))
	if d.PeekKind() != '{' {
		return nil, false
	}
	if _, err := d.ReadToken(); err != nil {
		return nil, false
	}
	var o Offer
	var seen uint16 // one bit per member, in the order of offerMembers
	text := func() (string, bool) {
		if d.PeekKind() != '"' {
			return "", false
		}
		raw, err := d.ReadValue()
		if err != nil {
			return "", false
		}
		t, err := jsonText(raw, false)
		return t, err == nil
	}
	unsigned := func() (uint64, bool) {
		if d.PeekKind() != '0' {
			return 0, false
		}
		raw, err := d.ReadValue()
		if err != nil {
			return 0, false
		}
		u, ok := jsonNumber(raw).(uint64)
		return u, ok
	}
	value := func() (any, bool) { // a member the generic model reads
		if k := d.PeekKind(); k != '{' && k != '[' {
			return nil, false
		}
		v, err := jsonValue(d, lim, 1)
		return v, err == nil
	}
	// digestValue reads a Digest (HC-06: closed, alg and val, both text)
	// straight from its tokens, as digestFrom reads the decoded map.
	digestValue := func() (digest.Digest, bool) {
		if d.PeekKind() != '{' {
			return digest.Digest{}, false
		}
		if _, err := d.ReadToken(); err != nil {
			return digest.Digest{}, false
		}
		var alg, val string
		var has uint8
		for d.PeekKind() == '"' {
			raw, err := d.ReadValue()
			if err != nil {
				return digest.Digest{}, false
			}
			name, err := jsonText(raw, true)
			if err != nil {
				return digest.Digest{}, false
			}
			var ok bool
			switch name {
			case "alg":
				alg, ok = text()
				has |= 1
			case "val":
				val, ok = text()
				has |= 2
			}
			if !ok {
				return digest.Digest{}, false // another member, or not text
			}
		}
		if _, err := d.ReadToken(); err != nil || has != 3 { // '}'
			return digest.Digest{}, false
		}
		dg, err := newDigest(alg, val)
		return dg, err == nil
	}
	for d.PeekKind() == '"' {
		raw, err := d.ReadValue()
		if err != nil {
			return nil, false
		}
		name, err := jsonText(raw, true)
		if err != nil {
			return nil, false
		}
		bit := slices.Index(offerMembers, name)
		if bit < 0 {
			return nil, false // an unknown member: the generic model keeps it
		}
		seen |= 1 << bit
		ok := true
		var t string
		var u uint64
		var v any
		switch name {
		case "v":
			u, ok = unsigned()
			ok = ok && u == 1
		case "type":
			t, ok = text()
			ok = ok && t == "offer"
		case "hop":
			t, ok = text()
			o.Hop = HopID(t)
			ok = ok && o.Hop.Valid()
		case "dialog":
			o.Dialog, ok = text()
		case "task":
			o.Task, ok = text()
		case "iss":
			t, ok = text()
			o.Iss = AgentID(t)
			ok = ok && t != ""
		case "aud":
			t, ok = text()
			o.Aud = AgentID(t)
			ok = ok && t != ""
		case "iat":
			u, ok = unsigned()
			o.Iat = Time(u)
		case "exp":
			u, ok = unsigned()
			o.Exp = Time(u)
		case "obo":
			if v, ok = value(); ok {
				var err error
				o.Obo, err = principalFrom(v, "obo", false)
				ok = err == nil
			}
		case "grant", "prev":
			var dg digest.Digest
			if dg, ok = digestValue(); ok {
				if name == "grant" {
					o.Grant = &dg
				} else {
					o.Prev = &dg
				}
			}
		case "refs":
			if v, ok = value(); ok {
				var err error
				o.Refs, err = (fields{m: map[string]any{"refs": v}}).refs()
				ok = err == nil
			}
		}
		if !ok {
			return nil, false
		}
	}
	if _, err := d.ReadToken(); err != nil { // '}', or a token the full path refuses
		return nil, false
	}
	if _, err := d.ReadToken(); err != io.EOF {
		return nil, false
	}
	const required = 1<<0 | 1<<1 | 1<<2 | 1<<3 | 1<<5 | 1<<6 | 1<<7 | 1<<8 // v type hop dialog iss aud iat exp
	if seen&required != required {
		return nil, false
	}
	return &o, true
}

// offerFromCBORFast decodes the common CBOR offer, one with only the
// members the CDDL names, in one typed pass. It reports ok only for an
// input the full path (decodePayload, then offerFrom) accepts, and then
// returns the same Offer; anything else, valid or not, is left to the full
// path, which alone reports errors. FuzzOfferCBORFast holds the two paths
// to that.
func offerFromCBORFast(payload []byte, lim Limits) (*Offer, bool) {
	lim = lim.withDefaults()
	if !fastLimits(lim) || len(payload) > lim.MaxElementSize || len(payload) == 0 || payload[0]>>5 != 5 {
		return nil, false
	}
	w := offerCBOR{Dialog: textUnset, Iat: math.MaxUint64, Exp: math.MaxUint64}
	if rest, err := cborFastMode.UnmarshalFirst(payload, &w); err != nil || len(rest) != 0 {
		return nil, false
	}
	if w.V != 1 || w.Type != "offer" || !HopID(w.Hop).Valid() || w.Dialog == textUnset ||
		w.Iss == "" || w.Aud == "" || w.Iat == math.MaxUint64 || w.Exp == math.MaxUint64 {
		return nil, false
	}
	o := &Offer{Hop: HopID(w.Hop), Dialog: w.Dialog, Task: w.Task, Iss: AgentID(w.Iss), Aud: AgentID(w.Aud),
		Iat: Time(w.Iat), Exp: Time(w.Exp)}
	for _, d := range []struct {
		from *digestCBOR
		to   **digest.Digest
	}{{w.Grant, &o.Grant}, {w.Prev, &o.Prev}} {
		if d.from == nil {
			continue
		}
		dg, err := newDigest(d.from.Alg, d.from.Val)
		if err != nil {
			return nil, false
		}
		*d.to = &dg
	}
	c := cborConv{lim: lim, p: profileExact}
	if w.Obo != nil {
		v, err := c.value(w.Obo, 1)
		if err != nil {
			return nil, false
		}
		if o.Obo, err = principalFrom(v, "obo", false); err != nil {
			return nil, false
		}
	}
	if w.Refs != nil {
		v, err := c.value(w.Refs, 1)
		if err != nil {
			return nil, false
		}
		if o.Refs, err = (fields{m: map[string]any{"refs": v}}).refs(); err != nil {
			return nil, false
		}
	}
	return o, true
}

// decodeOffer decodes an offer payload strictly (section 2): required
// members present and of the right type, v 1, type "offer", HopId pattern,
// Time an unsigned integer, Digest closed; unknown members kept in Extra
// (HC-01). It verifies nothing. A CBOR offer in the exact profile is
// first tried on the typed fast path (offerFromCBORFast), which steps
// aside for anything it cannot read as the full path would, so an input
// costs at most one pass more than on the full path.
func decodeOffer(payload []byte, enc Encoding, lim Limits) (*Offer, error) {
	if o, ok := fastOffer(payload, enc, lim); ok {
		return o, nil
	}
	m, err := decodePayload(payload, enc, lim)
	if err != nil {
		return nil, err
	}
	return offerFrom(m, lim.Strict)
}

// validate checks o the way a decoder checks a payload, so that nothing is
// signed that a receiver must refuse.
func (o *Offer) validate() error {
	p, err := o.encode(CBOR)
	if err != nil {
		return err
	}
	_, err = decodeOffer(p, CBOR, Limits{})
	return err
}

// Payload returns o's payload octets in enc, as a signer signs them: JSON
// for a JWS, CBOR for a COSE_Sign1 (section 3). Signer uses it; it is
// exported for signers outside this package (a remote key service that
// builds its own envelope). The CDDL is checked first.
func (o *Offer) Payload(enc Encoding) ([]byte, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	return o.encode(enc)
}
