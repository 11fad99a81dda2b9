package handoff

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/agentproto/handoff/internal/cborhead"
	"github.com/agentproto/handoff/internal/jsoncheck"
	"github.com/agentproto/handoff/reason"
	"github.com/fxamacker/cbor/v2"
)

// Section 2.1 of the draft, as read from the wire: the Handoff object
// parsed in place, its elements located and checked for their signed
// forms, their octets owned.

// handoffWire is a Handoff object as read from the wire, before its
// elements are checked: each element is a string, a byte string, or the
// name of the kind of value found in its place.
type handoffWire struct {
	offer    wireElement
	hasOffer bool
	// chain is the chain's first elements: all of them, or, when the
	// reader was given a bound (readBound), at most that many.
	chain    []wireElement
	chainLen int // the chain's elements, read or not
	hasChain bool
	// chainKind names what the chain member held when it was not an array.
	chainKind string
	// members is the object's octets, private, when it has members this
	// version does not define: Extra is built from them (fillExtra) when
	// it is asked for, not before.
	members []byte
	// variant is, for the strict profile, a member name that differs from
	// a defined one only in case, and that name.
	variant [2]string
	// deferForms: see parseHandoff.
	deferForms bool
}

// readBound is how many elements of the chain a receiver builds before a
// signature verifies: past them it only checks them for well-formedness
// and counts them (maxRead). Section 5.1 orders the checks, "The first
// failure ends processing" (HC-30): step 1, "Check the signed form ...
// Then verify the signature with a key that its trust configuration binds
// to iss. Reasons: bad-signature, untrusted-key", comes before step 6,
// "If the Handoff carries a chain, check it ... Reasons: broken-chain,
// cycle, too-deep", where section 5.3, check 7 says "A receiver MUST
// enforce a maximum chain length ... Reason: too-deep" (HC-50; HC-46
// checks each element "as in step 1"). So an element past Limits.MaxChain
// counts for nothing but the chain's length: Limits.MaxChain + 1 elements
// are enough to tell that a chain is too long, and the outcome stays the
// draft's, bad-signature at step 1 for a bad signature and too-deep at
// step 6 for an offer whose signature verifies.
func readBound(lim Limits) int { return lim.maxChain() + 1 }

// readJSON reads a Handoff object in JSON, building at most maxRead of the
// chain's elements (-1: all). jsoncheck checks the whole text as jsontext
// would read it (grammar, UTF-8, surrogates, depth), the values kept
// undecoded included, and that no object repeats a name, at a cost
// bounded by the size whatever the shape; and in the same pass hands over
// the object's members and the chain's elements, as written, building
// nothing but the elements.
//
// An element without escapes is read as a view of data (the octets between
// its quotes), which handoffWire.own then copies, or decodes from
// base64url, into one array for all.
func (w *handoffWire) readJSON(data []byte, lim Limits, maxRead int) error {
	hasExtra := false
	room := min(defaultMaxChain, len(data)/64) // the elements' slice, never grown
	if maxRead >= 0 {
		room = min(room, maxRead)
	}
	var last []byte      // the member whose elements Walk passes, and whether
	var lastIsChain bool // it is the chain: decided once per member
	err := jsoncheck.Walk(data, jsoncheck.Fields{
		Element: func(raw, v []byte) error {
			if len(last) == 0 || &raw[0] != &last[0] {
				name, err := jsonName(raw)
				if err != nil {
					return err
				}
				last, lastIsChain = raw, string(name) == "chain"
			}
			if !lastIsChain {
				return nil
			}
			if w.chainLen++; maxRead >= 0 && w.chainLen > maxRead {
				return nil // checked and counted, not built
			}
			e, err := jsonElement(v)
			if w.chain == nil {
				w.chain = make([]wireElement, 0, room)
			}
			w.chain = append(w.chain, e)
			return err
		},
		Member: func(raw, v []byte) error {
			name, err := jsonName(raw)
			if err != nil {
				return err
			}
			switch string(name) {
			case "offer":
				w.hasOffer = true
				w.offer, err = jsonElement(v)
			case "chain":
				w.hasChain = true
				if v[0] != '[' {
					w.chainKind = jsonKind(v[0])
				} else if w.chain == nil {
					w.chain = make([]wireElement, 0) // an empty array
				}
			default:
				hasExtra = true
				w.noteVariant(name, lim)
			}
			return err
		},
	})
	if err != nil {
		return malformed("JSON: %v", err)
	}
	if data[len(data)-len(bytes.TrimLeft(data, " \t\r\n"))] != '{' {
		return malformed("JSON value is not an object")
	}
	if hasExtra {
		w.members = bytes.Clone(data)
	}
	return nil
}

// noteVariant records, for the strict profile, a member name that differs
// from a defined one only in case.
func (w *handoffWire) noteVariant(name []byte, lim Limits) {
	// A case variant of a defined name is at most three octets per letter
	// (the Kelvin sign folds to k); no longer name can be one.
	if !lim.Strict || w.variant[0] != "" || len(name) > 15 {
		return
	}
	if kn, ok := variantOf(string(name), handoffMembers); ok {
		w.variant = [2]string{string(name), kn}
	}
}

// handoffCBORMode checks a Handoff object in CBOR to be well formed, which
// the reader relies on to walk it in place. Its only bounds are the size
// bound and the library's: a data item can hold no more items than it has
// octets, and nesting is bounded by the library's largest bound.
var handoffCBORMode = func() cbor.DecMode {
	dm, err := cbor.DecOptions{
		DupMapKey:        cbor.DupMapKeyEnforcedAPF,
		UTF8:             cbor.UTF8RejectInvalid,
		IndefLength:      cbor.IndefLengthAllowed,
		TagsMd:           cbor.TagsAllowed,
		MaxNestedLevels:  65535,
		MaxArrayElements: math.MaxInt32,
		MaxMapPairs:      math.MaxInt32,
	}.DecMode()
	if err != nil {
		panic(err) // constant options: a programmer error
	}
	return dm
}()

// readCBOR reads a Handoff object in CBOR, building at most maxRead of the
// chain's elements (-1: all): a map with text keys, valid UTF-8 and
// unique, each value well formed (RFC 8949), the elements read and every
// other member kept as its octets. The object is checked well formed in
// one pass of the library, and then walked in place (cborhead): nothing
// is decoded twice, and nothing is built for an item but the elements.
func (w *handoffWire) readCBOR(data []byte, lim Limits, maxRead int) error {
	if data[0]>>5 != cborhead.Map { // the CDDL's root is a map, untagged
		return malformed("CBOR value is not a map")
	}
	if uint64(len(data)) > math.MaxUint32 { // positions below are uint32
		return fmt.Errorf("%w: CBOR object of %d octets", ErrTooLarge, len(data))
	}
	if err := handoffCBORMode.Wellformed(data); err != nil {
		if _, ok := errors.AsType[*cbor.ExtraneousDataError](err); ok {
			return malformed("trailing data after CBOR value")
		}
		return malformed("CBOR: %v", err)
	}
	// The object is read in place: every value is a view of one private
	// copy of the input, so that reading it costs one copy in all.
	data = bytes.Clone(data)
	it, n := cborhead.Open(data)
	var small [16]uint32
	keys := small[:0] // the positions of the keys, for the duplicate check
	if n/2 > len(small) {
		keys = make([]uint32, 0, n/2)
	}
	hasExtra := false
	for k, ok := it.Next(); ok; k, ok = it.Next() {
		at := len(data) - it.Left() - len(k)
		v, _ := it.Next()
		if cborhead.Major(k) != cborhead.Text {
			return malformed("CBOR: member name of kind %s, want text", cborKind(k))
		}
		if !cborhead.ValidText(k) {
			return malformed("CBOR: member name: invalid UTF-8 string")
		}
		keys = append(keys, uint32(at))
		name, _ := cborhead.String(k)
		var err error
		switch string(name) {
		case "offer":
			w.hasOffer = true
			if w.offer, err = cborElement(v); err != nil {
				return err
			}
		case "chain":
			w.hasChain = true
			if cborhead.Major(v) != cborhead.Array {
				w.chainKind = cborKind(v)
				continue
			}
			// The elements past maxRead are well formed, as the whole
			// object is, and counted: never built.
			elems, count := cborhead.Open(v)
			w.chainLen = count
			if maxRead >= 0 {
				count = min(count, maxRead)
			}
			w.chain = make([]wireElement, 0, count)
			for range count {
				e, _ := elems.Next()
				we, err := cborElement(e)
				if err != nil {
					return err
				}
				w.chain = append(w.chain, we)
			}
		default:
			hasExtra = true
			w.noteVariant(name, lim)
		}
	}
	if at, dup := cborhead.Repeated(data, keys); dup {
		name, _ := cborhead.String(data[at:])
		return malformed("CBOR: found duplicate map key %q", name)
	}
	if hasExtra {
		w.members = data
	}
	return nil
}

// own makes the octets of every element private: a view of the input
// that holds a period (a JWS, or no signed handoff) is copied, and one
// without (base64url, in JSON) is decoded, both into one array. Text
// that does not decode is copied on its own, for elementFrom to refuse.
// With deferForms, a chain element without a period is copied as text
// too: the receiver decodes it at step 6 unless it finds it by its text
// (Handoff.checkForms, checkChain).
func (w *handoffWire) own() {
	n := 0
	asText := func(e *wireElement) bool {
		return bytes.IndexByte(e.octets, '.') >= 0 || (w.deferForms && e != &w.offer)
	}
	size := func(e *wireElement) {
		if !e.view {
			return
		}
		if asText(e) {
			n += len(e.octets)
		} else {
			n += base64.RawURLEncoding.DecodedLen(len(e.octets))
		}
	}
	size(&w.offer)
	for i := range w.chain {
		size(&w.chain[i])
	}
	buf := make([]byte, 0, n)
	take := func(e *wireElement) {
		if !e.view {
			return
		}
		e.view = false
		t, at := e.octets, len(buf)
		if asText(e) {
			buf = append(buf, t...)
			e.octets = buf[at:len(buf):len(buf)]
			return
		}
		if b, err := decodeB64uInto(buf[at:at+base64.RawURLEncoding.DecodedLen(len(t))], t); err == nil {
			buf = buf[:at+len(b)]
			e.octets, e.b64 = buf[at:len(buf):len(buf)], true
			return
		}
		e.octets = bytes.Clone(t)
	}
	take(&w.offer)
	for i := range w.chain {
		take(&w.chain[i])
	}
}

// handoff checks what was read against the CDDL of section 2.1.
func (w *handoffWire) handoff(enc Encoding, lim Limits) (*Handoff, error) {
	if !w.hasOffer {
		return nil, malformed("offer: required member missing")
	}
	w.own()
	offer, err := elementFrom(w.offer, enc, lim, "offer")
	if err != nil {
		return nil, err
	}
	if lim.Strict && w.variant[0] != "" {
		return nil, malformed("%s: differs only in case from the member %q (strict profile)", w.variant[0], w.variant[1])
	}
	h := &Handoff{Offer: offer}
	if w.members != nil {
		h.members, h.membersEnc = w.members, enc
	}
	if w.chainLen > len(w.chain) {
		h.chainLen = w.chainLen
	}
	switch {
	case !w.hasChain:
		return h, nil
	case w.chain == nil:
		h.chainErr = &chainError{Index: -1, Reason: reason.BadSignature, Detail: "chain: want an array of signed handoffs, got " + w.chainKind, err: ErrMalformed}
		return h, nil
	case len(w.chain) == 0:
		h.chainErr = &chainError{Index: -1, Reason: reason.BadSignature, Detail: "chain: empty array ([+ SignedHandoff])", err: ErrMalformed}
		return h, nil
	}
	h.Chain = make([]Signed, len(w.chain))
	var pending []int
	if w.deferForms {
		pending = make([]int, 0, len(w.chain))
	}
	for i, e := range w.chain {
		if w.deferForms && e.isText && !e.b64 && bytes.IndexByte(e.octets, '.') > 0 && len(e.octets) <= lim.MaxElementSize {
			// A JWS, unless the rest of the JwsCompact test fails, when
			// it is not a signed handoff at all (checkForms).
			h.Chain[i] = Signed{Format: JWS, Octets: e.octets}
			pending = append(pending, i)
			continue
		}
		if w.deferForms && enc == JSON && e.isText && !e.b64 && bytes.IndexByte(e.octets, '.') < 0 {
			// Base64url text of a COSE element, still undecoded: its form
			// is what elementFrom makes of the text (checkForms), unless
			// the receiver verified the element before (checkChain).
			h.Chain[i] = Signed{Format: COSE, Octets: e.octets}
			pending = append(pending, i)
			continue
		}
		s, err := elementFrom(e, enc, lim, "")
		if err != nil && h.chainErr == nil {
			_, err = elementFrom(e, enc, lim, fmt.Sprintf("chain[%d]", i)) // named, now that it is needed
			h.chainErr = &chainError{Index: i, Reason: reason.BadSignature, Detail: err.Error(), err: errClass(err)}
		}
		h.Chain[i] = s
	}
	if len(pending) > 0 {
		h.forms = &pendingForms{enc: enc, idx: pending}
		if h.chainErr != nil {
			// Another element failed: which failure comes first is known
			// only with every form checked.
			failed := h.chainErr
			h.chainErr = nil
			h.checkForms(lim, nil)
			if h.chainErr == nil || h.chainErr.Index > failed.Index {
				h.chainErr = failed
			}
		}
	}
	return h, nil
}

// fillExtra builds h.Extra from the members kept as octets, if any: each
// member this version does not define, undecoded, as a view of those
// octets, which are h's own: a json.RawMessage from JSON, a
// cbor.RawMessage from CBOR (HC-01). The octets were checked when they
// were read: nothing here can fail.
func (h *Handoff) fillExtra() {
	if h == nil || h.members == nil {
		return
	}
	data := h.members
	h.members = nil
	h.Extra = map[string]any{}
	if h.membersEnc == CBOR {
		it, _ := cborhead.Open(data)
		for k, ok := it.Next(); ok; k, ok = it.Next() {
			v, _ := it.Next()
			if name, _ := cborhead.String(k); !contains(handoffMembers, string(name)) {
				h.Extra[string(name)] = cbor.RawMessage(v[:len(v):len(v)])
			}
		}
		return
	}
	_ = jsoncheck.Walk(data, jsoncheck.Fields{Member: func(raw, v []byte) error {
		if name, _ := jsonName(raw); !contains(handoffMembers, string(name)) {
			h.Extra[string(name)] = json.RawMessage(v[:len(v):len(v)])
		}
		return nil
	}})
}

// elementFrom reads one signed handoff of a Handoff object. On error the
// returned Signed still holds what octets there were, so that the element
// keeps its place (and its digest) in the chain.
func elementFrom(e wireElement, enc Encoding, lim Limits, path string) (Signed, error) {
	var s Signed
	switch {
	case e.isText && e.b64:
		s = Signed{Format: COSE, Octets: e.octets}
	case e.isText:
		t := e.octets
		switch {
		case jwsCompact.Match(t):
			s = Signed{Format: JWS, Octets: t}
		case enc == JSON:
			b, err := decodeB64uOctets(t)
			if err != nil {
				return Signed{Octets: t}, malformed("%s: neither a JWS nor a base64url COSE_Sign1: %v", path, err)
			}
			s = Signed{Format: COSE, Octets: b}
		default:
			return Signed{Octets: t}, malformed("%s: text that is not a JWS compact serialization", path)
		}
	case e.isBytes:
		if enc != CBOR {
			return Signed{Octets: e.octets}, malformed("%s: byte string outside CBOR", path)
		}
		s = Signed{Format: COSE, Octets: e.octets}
	default:
		return Signed{}, malformed("%s: want a signed handoff, got %s", path, e.kind)
	}
	if len(s.Octets) > lim.MaxElementSize {
		return Signed{Octets: s.Octets}, fmt.Errorf("%w: %s: element of %d octets exceeds %d", ErrTooLarge, path, len(s.Octets), lim.MaxElementSize)
	}
	if _, ok := coseTagLen(s.Octets); s.Format == COSE && !ok {
		return Signed{Octets: s.Octets}, malformed("%s: COSE element is not a tagged COSE_Sign1", path)
	}
	return s, nil
}

// pendingForms is the chain elements of a Handoff whose form is still
// unchecked, in increasing index: those taken as JWS by the period they
// hold (Format JWS), the rest of their form unchecked, and, in JSON, the
// text without a period of a COSE element (Format COSE, Octets the text),
// not decoded yet.
type pendingForms struct {
	enc Encoding
	idx []int
}

// checkForms completes the form checks that parseHandoff deferred, except
// for the elements seen reports (nil: none), so that the Handoff holds
// what ParseHandoff returns for the same input: an element that is not a
// JWS is what elementFrom makes of it, and chainErr names the first
// failing element. A Handoff read with a failing element has no pending
// forms (handoffWire.handoff), so a deferred failure is the first one.
func (h *Handoff) checkForms(lim Limits, seen func(i int) bool) {
	if h == nil || h.forms == nil {
		return
	}
	f := h.forms
	h.forms = nil
	lim = lim.withDefaults()
	for _, i := range f.idx {
		if (seen != nil && seen(i)) || (h.Chain[i].Format == JWS && jwsCompact.Match(h.Chain[i].Octets)) {
			continue
		}
		e := wireElement{octets: h.Chain[i].Octets, isText: true}
		s, err := elementFrom(e, f.enc, lim, fmt.Sprintf("chain[%d]", i))
		h.Chain[i] = s
		if h.chainErr == nil && err != nil {
			h.chainErr = &chainError{Index: i, Reason: reason.BadSignature, Detail: err.Error(), err: errClass(err)}
		}
	}
}
