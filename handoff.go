package handoff

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"

	"github.com/fxamacker/cbor/v2"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/agentproto/handoff/internal/cborhead"
)

// Section 2.1 of the draft: the signed forms of a handoff, and the Handoff
// object a host protocol carries.

// Format names the signed form of a handoff (section 3).
type Format uint8

const (
	// JWS is the JWS Compact Serialization with typ "agent-handoff+jwt".
	JWS Format = iota + 1
	// COSE is a tagged COSE_Sign1 with content type
	// "application/agent-handoff+cbor".
	COSE
)

func (f Format) String() string {
	switch f {
	case JWS:
		return "jws"
	case COSE:
		return "cose"
	}
	return "unknown"
}

// Signed is a signed handoff: an offer or status as octets, exactly as sent.
// For JWS the octets are the ASCII compact serialization; for COSE, the
// encoded tagged COSE_Sign1 message. Its handoff digest is SHA-256 over
// Octets (HC-20), never over a re-serialization.
type Signed struct {
	Format Format
	Octets []byte
}

// Digest returns the handoff digest of s (section 3.3, HC-20).
func (s Signed) Digest() Digest { return SHA256(s.Octets) }

// IsZero reports whether s holds no octets.
func (s Signed) IsZero() bool { return len(s.Octets) == 0 }

// ParseSigned identifies a signed handoff held on its own (a status, or an
// element read from a file): the JWS compact form, or a tagged COSE_Sign1
// (first octet 0xd2, tag 18). It checks the form only; OpenOffer and
// OpenStatus verify.
func ParseSigned(b []byte, lim Limits) (Signed, error) {
	lim = lim.withDefaults()
	if len(b) > lim.MaxElementSize {
		return Signed{}, fmt.Errorf("%w: signed handoff of %d octets exceeds %d", ErrTooLarge, len(b), lim.MaxElementSize)
	}
	if _, ok := coseTagLen(b); ok {
		return Signed{Format: COSE, Octets: bytes.Clone(b)}, nil
	}
	switch {
	case jwsCompact.Match(b):
		return Signed{Format: JWS, Octets: bytes.Clone(b)}, nil
	case len(b) > 0 && (b[0] == '{' || b[0] == 0xa1 || b[0] == 0xa2 || b[0] == 0xbf):
		return Signed{}, malformed("this is a map, perhaps a Handoff object {offer, chain}; a signed handoff on its own was expected: a JWS compact serialization or a tagged COSE_Sign1")
	}
	return Signed{}, malformed("neither a JWS compact serialization nor a tagged COSE_Sign1")
}

// Handoff is what a host protocol carries: the signed current offer and,
// optionally, the chain of earlier signed offers, oldest first (section
// 2.1). Its own members are not signed.
type Handoff struct {
	Offer Signed
	Chain []Signed
	// Extra holds members of the Handoff object this version does not
	// define (HC-01). ParseHandoff keeps each exactly as received, never
	// decoded: a json.RawMessage from JSON, a cbor.RawMessage from CBOR.
	// Encode writes such a value as it is in its own encoding, and
	// converts it to the other; any other value of the model is encoded
	// as a payload member is.
	Extra map[string]any

	// chainErr records why the chain member, or one of its elements, is
	// not a signed handoff. Such a chain fails step 6 of section 5.1, after
	// the offer's own checks (issue of order: a damaged chain must not hide
	// a retransmission or a wrong audience).
	chainErr *ChainError
	// forms, when not nil, lists the chain elements whose JwsCompact form
	// is still to be checked (parseHandoff with deferForms): until
	// checkForms runs, chainErr may miss a failure among them.
	forms *pendingForms
}

// pendingForms is the chain elements of a Handoff taken as JWS by the
// period they hold, the rest of their form unchecked, in increasing index.
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
		if (seen != nil && seen(i)) || jwsCompact.Match(h.Chain[i].Octets) {
			continue
		}
		e := wireElement{octets: h.Chain[i].Octets, isText: true}
		s, err := elementFrom(e, f.enc, lim, fmt.Sprintf("chain[%d]", i))
		h.Chain[i] = s
		if h.chainErr == nil && err != nil {
			h.chainErr = &ChainError{Index: i, Reason: ReasonBadSignature, Detail: err.Error(), err: errClass(err)}
		}
	}
}

// ParseHandoff decodes a Handoff object in JSON or CBOR, telling them apart
// by the first octet ('{' or white space for JSON). It runs before any
// signature is checked, so it decodes only what the checks need: the
// offer, and the chain as a list of elements. Members it does not define
// are checked for well-formedness and kept exactly as received, never
// decoded (HC-01; see SECURITY.md, "What input costs"): in Extra, as a
// json.RawMessage for JSON and a cbor.RawMessage for CBOR.
//
// Decoding is strict and bounded: the size is checked before parsing, and
// each element against Limits.MaxElementSize. JSON is checked as the
// payload decoder checks it (RFC 8259, RFC 7493: valid UTF-8 and Unicode,
// unique names), members it keeps included; CBOR must be well formed
// (RFC 8949), with text keys, valid UTF-8 and unique keys in the object
// itself; a member kept undecoded is checked for validity when it is
// decoded. In JSON a JWS element is its compact text and a COSE element
// base64url text; in CBOR a JWS is a text string and a COSE element a byte
// string (HC-19). Element octets are kept exactly.
//
// ParseHandoff fails only when the object or its offer is unusable. A chain
// member that is not an array of signed handoffs, or an element that is not
// one, is kept and reported by Receive at step 6 (section 5.3, check 1),
// since the checks of the offer itself come first; ParseHandoff's callers
// see it through ChainErr.
func ParseHandoff(data []byte, lim Limits) (*Handoff, Encoding, error) {
	return parseHandoff(data, lim, false)
}

// parseHandoff is ParseHandoff. With deferForms, a text element that holds
// a period is taken as a JWS and the rest of its JwsCompact test is left
// to the receiver (Handoff.checkForms), which skips it for an element it
// verified before: such an element has the octets of one that passed it.
func parseHandoff(data []byte, lim Limits, deferForms bool) (*Handoff, Encoding, error) {
	lim = lim.withDefaults()
	if len(data) > lim.MaxHandoffSize {
		return nil, 0, fmt.Errorf("%w: Handoff of %d octets exceeds %d", ErrTooLarge, len(data), lim.MaxHandoffSize)
	}
	if len(data) == 0 {
		return nil, 0, malformed("empty input")
	}
	enc := CBOR
	switch data[0] {
	case '{', ' ', '\t', '\r', '\n':
		enc = JSON
	}
	if _, ok := coseTagLen(data); ok {
		return nil, 0, malformed("this is a signed handoff (a tagged COSE_Sign1) on its own; a Handoff object {offer, chain} was expected")
	}
	if jwsCompact.Match(data) {
		return nil, 0, malformed("this is a signed handoff (a JWS compact serialization) on its own; a Handoff object {offer, chain} was expected")
	}
	w := handoffWire{deferForms: deferForms}
	var err error
	if enc == JSON {
		err = w.readJSON(data)
	} else {
		err = w.readCBOR(data, lim)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("%w (input taken as a Handoff object in %s)", err, enc)
	}
	h, err := w.handoff(enc, lim)
	if err != nil {
		return nil, 0, err
	}
	return h, enc, nil
}

// ChainErr returns why the Handoff's chain is not a list of signed
// handoffs, or nil. Receive reports it at step 6.
func (h *Handoff) ChainErr() error {
	if h.chainErr == nil {
		return nil
	}
	return h.chainErr
}

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
			w.chain = make([]wireElement, 0, min(DefaultMaxChain, len(data)/64))
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
func (w *handoffWire) own() {
	n := 0
	size := func(e *wireElement) {
		if !e.view {
			return
		}
		if bytes.IndexByte(e.octets, '.') >= 0 {
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
		if bytes.IndexByte(t, '.') >= 0 {
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
		h.chainErr = &ChainError{Index: -1, Reason: ReasonBadSignature, Detail: "chain: want an array of signed handoffs, got " + w.chainKind, err: ErrMalformed}
		return h, nil
	case len(w.chain) == 0:
		h.chainErr = &ChainError{Index: -1, Reason: ReasonBadSignature, Detail: "chain: empty array ([+ SignedHandoff])", err: ErrMalformed}
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
		s, err := elementFrom(e, enc, lim, "")
		if err != nil && h.chainErr == nil {
			_, err = elementFrom(e, enc, lim, fmt.Sprintf("chain[%d]", i)) // named, now that it is needed
			h.chainErr = &ChainError{Index: i, Reason: ReasonBadSignature, Detail: err.Error(), err: errClass(err)}
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

// Encode returns h as a Handoff object in the given encoding.
func (h *Handoff) Encode(enc Encoding) ([]byte, error) {
	if h.Offer.IsZero() {
		return nil, malformed("Handoff without offer")
	}
	m := map[string]any{}
	for k, v := range h.Extra {
		if !contains(handoffMembers, k) {
			m[k] = v
		}
	}
	m["offer"] = elementValue(h.Offer, enc)
	if len(h.Chain) > 0 {
		a := make([]any, len(h.Chain))
		for i, e := range h.Chain {
			a[i] = elementValue(e, enc)
		}
		m["chain"] = a
	}
	switch enc {
	case JSON:
		v, err := toJSONValue(m)
		if err != nil {
			return nil, err
		}
		return marshalJSON(v)
	case CBOR:
		v, err := toCBORValue(m)
		if err != nil {
			return nil, err
		}
		return cborEncMode.Marshal(v)
	}
	return nil, fmt.Errorf("%w: unknown encoding %d", ErrMalformed, enc)
}

func elementValue(s Signed, enc Encoding) any {
	if s.Format == JWS {
		return string(s.Octets)
	}
	if enc == JSON {
		return base64.RawURLEncoding.EncodeToString(s.Octets)
	}
	return s.Octets
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
