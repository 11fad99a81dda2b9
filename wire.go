package handoff

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"

	"github.com/agentproto/handoff/internal/cborhead"
	"github.com/agentproto/handoff/reason"
	"github.com/fxamacker/cbor/v2"
	"github.com/go-json-experiment/json/jsontext"
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
	chain    []wireElement
	hasChain bool
	// chainKind names what the chain member held when it was not an array.
	chainKind string
	extra     map[string]any
	// deferForms: see parseHandoff.
	deferForms bool
}

// wireElement is one element as read: text or a byte string, its octets
// (for text, its UTF-8 octets), or neither (kind then names what was there
// instead). The octets are private to the Handoff unless view is set: they
// are then the input's own, until handoffWire.own copies or decodes them.
type wireElement struct {
	octets  []byte
	isText  bool
	isBytes bool
	kind    string
	view    bool
	// b64: text without a period, already decoded from base64url into
	// octets (handoffWire.own), as elementFrom would decode it.
	b64 bool
}

func (w *handoffWire) keep(name string, raw any) {
	if w.extra == nil {
		w.extra = map[string]any{}
	}
	w.extra[name] = raw
}

// readJSON reads a Handoff object in JSON. jsontext checks the grammar,
// UTF-8, surrogates and unique names of every value, the ones kept
// undecoded included, in one pass that builds nothing but the elements.
//
// An element without escapes is read as a view of data (the octets between
// its quotes, found by the decoder's input offset), which handoffWire.own
// then copies, or decodes from base64url, into one array for all.
func (w *handoffWire) readJSON(data []byte) error {
	d := jsonDecoders.Get().(*jsontext.Decoder)
	defer func() {
		d.Reset(bytes.NewBuffer(nil)) // keep no reference to data
		jsonDecoders.Put(d)
	}()
	d.Reset(bytes.NewBuffer(data))
	switch d.PeekKind() {
	case '{':
	case 0:
		_, err := d.ReadToken()
		return jsonErr(err)
	default:
		return malformed("JSON value is not an object")
	}
	if _, err := d.ReadToken(); err != nil {
		return jsonErr(err)
	}
	for d.PeekKind() != '}' {
		if d.PeekKind() != '"' {
			_, err := d.ReadToken()
			return jsonErr(err)
		}
		raw, err := d.ReadValue() // the name; jsontext refuses a duplicate
		if err != nil {
			return jsonErr(err)
		}
		name, err := jsonText(raw, true)
		if err != nil {
			return err
		}
		switch name {
		case "offer":
			w.hasOffer = true
			if w.offer, err = jsonElement(d, data); err != nil {
				return err
			}
		case "chain":
			w.hasChain = true
			if d.PeekKind() != '[' {
				if w.chainKind, err = jsonSkip(d); err != nil {
					return err
				}
				continue
			}
			if _, err := d.ReadToken(); err != nil {
				return jsonErr(err)
			}
			// Room for the chain's elements, as many as an input of this
			// size could hold at one per 64 octets, up to the default
			// bound: a chain is read without growing the slice.
			w.chain = make([]wireElement, 0, min(defaultMaxChain, len(data)/64))
			for d.PeekKind() != ']' {
				e, err := jsonElement(d, data)
				if err != nil {
					return err
				}
				w.chain = append(w.chain, e)
			}
			if _, err := d.ReadToken(); err != nil {
				return jsonErr(err)
			}
		default:
			v, err := d.ReadValue()
			if err != nil {
				return jsonErr(err)
			}
			w.keep(name, json.RawMessage(bytes.Clone(v)))
		}
	}
	if _, err := d.ReadToken(); err != nil { // '}'
		return jsonErr(err)
	}
	if _, err := d.ReadToken(); err != io.EOF {
		return malformed("trailing data after JSON value")
	}
	return nil
}

// jsonElement reads one element: a string, or any other value, which is
// checked and skipped and whose kind is kept. data is what d reads: a
// string without escapes is its own text, and its octets are a view of
// data.
func jsonElement(d *jsontext.Decoder, data []byte) (wireElement, error) {
	if d.PeekKind() != '"' {
		kind, err := jsonSkip(d)
		return wireElement{kind: kind}, err
	}
	raw, err := d.ReadValue()
	if err != nil {
		return wireElement{}, jsonErr(err)
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		end := int(d.InputOffset()) - 1 // the closing quote
		return wireElement{octets: data[end-len(raw)+2 : end : end], isText: true, view: true}, nil
	}
	b, err := jsontext.AppendUnquote(nil, raw)
	if err != nil {
		return wireElement{}, malformed("JSON string: %v", err)
	}
	return wireElement{octets: b, isText: true}, nil
}

// jsonSkip checks and skips one value, and names its kind as typeName
// names the decoded value.
func jsonSkip(d *jsontext.Decoder) (string, error) {
	kind := map[jsontext.Kind]string{'{': "map", '[': "array", '0': "number", 't': "bool", 'f': "bool", 'n': "null"}[d.PeekKind()]
	if _, err := d.ReadValue(); err != nil {
		return "", jsonErr(err)
	}
	return kind, nil
}

// handoffCBORMode reads the Handoff object's own map: the members' values
// stay undecoded (cbor.RawMessage), so the only bounds are the size bound
// and the library's: a data item can hold no more items than it has
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

// readCBOR reads a Handoff object in CBOR: a map with text keys, each
// value well formed (RFC 8949), the elements decoded and every other member
// kept as its octets.
func (w *handoffWire) readCBOR(data []byte, lim Limits) error {
	if data[0]>>5 != 5 { // major type 5: the CDDL's root is a map, untagged
		return malformed("CBOR value is not a map")
	}
	// The object is read in place: every value is a view of one private
	// copy of the input, so that reading it costs one copy in all.
	data = bytes.Clone(data)
	var m map[string]cborhead.View
	rest, err := handoffCBORMode.UnmarshalFirst(data, &m)
	switch {
	case err != nil:
		return malformed("CBOR: %v", err)
	case len(rest) != 0:
		return malformed("trailing data after CBOR value")
	}
	for name, raw := range m {
		switch name {
		case "offer":
			w.hasOffer = true
			if w.offer, err = cborElement(raw); err != nil {
				return err
			}
		case "chain":
			w.hasChain = true
			if raw[0]>>5 != 4 {
				w.chainKind = cborKind(raw)
				continue
			}
			var a []cborhead.View
			if err := handoffCBORMode.Unmarshal(raw, &a); err != nil {
				return malformed("CBOR: chain: %v", err)
			}
			w.chain = make([]wireElement, len(a))
			for i, e := range a {
				if w.chain[i], err = cborElement(e); err != nil {
					return err
				}
			}
		default:
			w.keep(name, cbor.RawMessage(raw))
		}
	}
	return nil
}

// cborElement reads one element: a text or byte string, or the kind of the
// item found instead.
func cborElement(raw cborhead.View) (wireElement, error) {
	switch raw[0] >> 5 {
	case 3:
		var s string
		if err := handoffCBORMode.Unmarshal(raw, &s); err != nil {
			return wireElement{}, malformed("CBOR: %v", err)
		}
		return wireElement{octets: []byte(s), isText: true}, nil
	case 2:
		if n, b, ok := cborhead.Head(raw); ok && uint64(len(b)) == n {
			return wireElement{octets: b, isBytes: true}, nil // in place
		}
		var b []byte // an indefinite length: the library joins the chunks
		if err := handoffCBORMode.Unmarshal(raw, &b); err != nil {
			return wireElement{}, malformed("CBOR: %v", err)
		}
		return wireElement{octets: b, isBytes: true}, nil
	}
	return wireElement{kind: cborKind(raw)}, nil
}

// cborKind names the kind of a well-formed item from its initial octet, as
// typeName names the decoded value.
func cborKind(raw []byte) string {
	switch raw[0] >> 5 {
	case 0:
		return "unsigned integer"
	case 1:
		return "negative integer"
	case 4:
		return "array"
	case 5:
		return "map"
	case 6:
		return "tag"
	}
	switch raw[0] {
	case 0xf4, 0xf5:
		return "bool"
	case 0xf6, 0xf7:
		return "null"
	case 0xf9, 0xfa, 0xfb:
		return "float"
	}
	return "simple value"
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
	if lim.Strict {
		if k, kn, found := caseVariant(w.extra, handoffMembers); found {
			return nil, malformed("%s: differs only in case from the member %q (strict profile)", k, kn)
		}
	}
	h := &Handoff{Offer: offer, Extra: w.extra}
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

// decodeB64uOctets is decodeB64u for text held as octets, so that a COSE
// element in JSON is decoded straight from the input: the same canonical
// base64url without padding, CR and LF refused.
func decodeB64uOctets(t []byte) ([]byte, error) {
	return decodeB64uInto(make([]byte, base64.RawURLEncoding.DecodedLen(len(t))), t)
}

// decodeB64uInto is decodeB64uOctets into dst, of DecodedLen(len(t))
// octets: it returns the decoded prefix of dst.
func decodeB64uInto(dst, t []byte) ([]byte, error) {
	if len(t) == 0 {
		return nil, fmt.Errorf("empty base64url")
	}
	if bytes.IndexByte(t, '\r') >= 0 || bytes.IndexByte(t, '\n') >= 0 {
		return nil, fmt.Errorf("not canonical base64url without padding")
	}
	n, err := base64.RawURLEncoding.Strict().Decode(dst, t)
	if err != nil {
		return nil, fmt.Errorf("not canonical base64url without padding")
	}
	return dst[:n:n], nil
}

// coseTagLen reports whether b starts with the head of tag 18, a
// COSE_Sign1 (HC-17), in any of the lengths RFC 8949 allows (0xd2, or
// 0xd8 0x12, ...), and the length of that head.
func coseTagLen(b []byte) (int, bool) {
	if len(b) == 0 || b[0]>>5 != 6 {
		return 0, false
	}
	v, rest, ok := cborhead.Head(b)
	return len(b) - len(rest), ok && v == 18
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
