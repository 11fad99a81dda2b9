package handoff

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/big"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/ref"
	"github.com/fxamacker/cbor/v2"
	"github.com/go-json-experiment/json/jsontext"
)

// Section 2 of the draft: the offer and the members it shares with the
// status. The decoders check the CDDL; unknown members are kept (HC-01).

// AgentID names an agent (HC-02). It is a string, recommended to be a URI,
// that a receiver's trust configuration maps to keys. Two AgentIDs are the
// same agent only when their strings are identical: no case folding, no
// normalisation.
type AgentID string

// HopID names one hop. It matches [A-Za-z0-9_-]{22,64} and carries at least
// 128 random bits (HC-12). It is the nonce of replay detection.
type HopID string

// Valid reports whether h matches the draft's HopId pattern.
func (h HopID) Valid() bool { return len(h) >= 22 && len(h) <= 64 && allB64url(string(h)) }

// NewHopID returns a fresh hop identifier: 16 octets (128 bits) from r, or
// from crypto/rand when r is nil, in base64url without padding (HC-12).
func NewHopID(r io.Reader) (HopID, error) {
	if r == nil {
		r = rand.Reader
	}
	var b [16]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return "", err
	}
	return HopID(base64.RawURLEncoding.EncodeToString(b[:])), nil
}

// Time is seconds since 1970-01-01T00:00:00Z, ignoring leap seconds, as an
// unsigned integer (HC-12, CDDL "Time = uint"). Every value CBOR's uint can
// carry is accepted, 0 to 2^64-1; in JSON, every integer literal in that
// range (RFC 8259 section 6 leaves the range to the implementation: this
// one states 2^64-1). Arithmetic on Time saturates instead of wrapping.
type Time uint64

// timeMax is the largest Time: 2^64-1, the largest CBOR uint.
const timeMax Time = math.MaxUint64

// maxUnix is the largest Time that Std represents exactly; later times are
// clamped to it (2^62 seconds: beyond any date time.Time computes with
// safely), which no comparison with a real clock can tell apart.
const maxUnix = 1 << 62

// TimeOf returns t as a Time, rounded down to the second. Times before 1970
// give 0.
func TimeOf(t time.Time) Time {
	if s := t.Unix(); s > 0 {
		return Time(s)
	}
	return 0
}

// Std returns t as a time.Time in UTC, clamped to 2^62 seconds.
func (t Time) Std() time.Time { return time.Unix(int64(min(t, maxUnix)), 0).UTC() }

// plus returns t + d seconds, saturating at the largest Time.
func (t Time) plus(d Time) Time {
	if t > math.MaxUint64-d {
		return math.MaxUint64
	}
	return t + d
}

// seconds converts a non-negative duration to whole seconds.
func seconds(d time.Duration) Time { return Time(d / time.Second) }

// Principal names the principal on whose behalf the root of a chain acted
// (obo, section 5.5). It is informational: no access control decision may
// rest on it (HC-57).
type Principal struct {
	Sub string
	Iss string // optional: the issuer in whose namespace Sub is unique
	// Extra holds members this version does not define, kept as decoded.
	Extra map[string]any
}

// Offer is a handoff offer (HandoffOffer, section 2). Its v is 1 and its
// type "offer"; both are implied by the Go type.
type Offer struct {
	Hop    HopID
	Dialog string
	Task   string // optional
	Iss    AgentID
	Aud    AgentID
	Iat    Time
	Exp    Time
	Obo    *Principal     // optional
	Grant  *digest.Digest // optional: digest of the credential's octets (HC-03)
	Prev   *digest.Digest // optional: handoff digest of the offer passed on
	Refs   []ref.Ref      // optional; when present, at least one
	// Extra holds members this version does not define (HC-01), as decoded.
	Extra map[string]any
}

// Member names of the data model (section 2). Matching is exact and case
// sensitive: "AUD" is not "aud" but an unknown member, ignored and kept
// (HC-01), unless the strict profile refuses it.
var (
	offerMembers     = []string{"v", "type", "hop", "dialog", "task", "iss", "aud", "iat", "exp", "obo", "grant", "prev", "refs"}
	statusMembers    = []string{"v", "type", "hop", "offer", "iss", "aud", "iat", "state", "reason", "detail", "refs"}
	principalMembers = []string{"sub", "iss"}
	refMembers       = []string{"kind", "dig", "loc", "proof"}
	handoffMembers   = []string{"offer", "chain"}
)

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

// fastOffer decodes payload on the typed fast path of its encoding, when
// the profile allows it; ok false leaves it to the full path. Its cost is
// bounded whatever the input: it reads the CDDL's members only, and steps
// aside at the first member it does not know.
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

const textUnset = "\xff" // not UTF-8: no decoded text equals it

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
// generic values between but for obo, grant, prev and refs. It reports ok
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
			if v, ok = value(); ok {
				dg, err := digestFrom(v, name)
				ok = err == nil
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

func decodePayload(payload []byte, enc Encoding, lim Limits) (map[string]any, error) {
	lim = lim.withDefaults()
	if len(payload) > lim.MaxElementSize {
		return nil, fmt.Errorf("%w: payload of %d octets exceeds %d", ErrTooLarge, len(payload), lim.MaxElementSize)
	}
	switch enc {
	case JSON:
		return decodeJSON(payload, lim)
	case CBOR:
		return decodeCBOR(payload, lim, profileOf(lim))
	}
	return nil, fmt.Errorf("%w: unknown encoding %d", ErrMalformed, enc)
}

// offerFrom maps a decoded payload to an Offer, checking the CDDL.
func offerFrom(m map[string]any, strict bool) (*Offer, error) {
	f := fields{m: m, strict: strict}
	if err := f.version(); err != nil {
		return nil, err
	}
	if err := f.typ("offer"); err != nil {
		return nil, err
	}
	var o Offer
	var err error
	if o.Hop, err = f.hop(); err != nil {
		return nil, err
	}
	if o.Dialog, err = f.text("dialog", true); err != nil {
		return nil, err
	}
	if o.Task, err = f.text("task", false); err != nil {
		return nil, err
	}
	if o.Iss, err = f.agent("iss"); err != nil {
		return nil, err
	}
	if o.Aud, err = f.agent("aud"); err != nil {
		return nil, err
	}
	if o.Iat, err = f.time("iat"); err != nil {
		return nil, err
	}
	if o.Exp, err = f.time("exp"); err != nil {
		return nil, err
	}
	if v, ok := m["obo"]; ok {
		if o.Obo, err = principalFrom(v, "obo", strict); err != nil {
			return nil, err
		}
	}
	if o.Grant, err = f.digest("grant", false); err != nil {
		return nil, err
	}
	if o.Prev, err = f.digest("prev", false); err != nil {
		return nil, err
	}
	if o.Refs, err = f.refs(); err != nil {
		return nil, err
	}
	if o.Extra, err = extraMembers(f, offerMembers); err != nil {
		return nil, err
	}
	return &o, nil
}

// fields reads the members of one decoded map by exact name.
type fields struct {
	m      map[string]any
	path   string
	strict bool
}

func (f fields) text(name string, required bool) (string, error) {
	v, ok := f.m[name]
	if !ok {
		if required {
			return "", malformed("%s%s: required member missing", f.path, name)
		}
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", malformed("%s%s: want text, got %s", f.path, name, typeName(v))
	}
	return s, nil
}

func (f fields) time(name string) (Time, error) {
	v, ok := f.m[name]
	if !ok {
		return 0, malformed("%s%s: required member missing", f.path, name)
	}
	u, ok := v.(uint64)
	if !ok {
		return 0, malformed("%s%s: Time must be an unsigned integer no larger than 2^64-1, got %s", f.path, name, typeName(v))
	}
	return Time(u), nil
}

func (f fields) version() error {
	v, ok := f.m["v"]
	if !ok {
		return malformed("%sv: required member missing", f.path)
	}
	if u, ok := v.(uint64); !ok || u != 1 {
		return malformed("%sv: version must be 1", f.path)
	}
	return nil
}

func (f fields) typ(want string) error {
	t, err := f.text("type", true)
	if err != nil {
		return err
	}
	if t != want {
		return malformed("%stype: %q, want %q", f.path, t, want)
	}
	return nil
}

func (f fields) agent(name string) (AgentID, error) {
	s, err := f.text(name, true)
	if err != nil {
		return "", err
	}
	if s == "" {
		return "", malformed("%s%s: empty AgentId", f.path, name)
	}
	return AgentID(s), nil
}

func (f fields) hop() (HopID, error) {
	s, err := f.text("hop", true)
	if err != nil {
		return "", err
	}
	if !HopID(s).Valid() {
		return "", malformed("%shop: %q does not match [A-Za-z0-9_-]{22,64}", f.path, s)
	}
	return HopID(s), nil
}

func (f fields) digest(name string, required bool) (*digest.Digest, error) {
	v, ok := f.m[name]
	if !ok {
		if required {
			return nil, malformed("%s%s: required member missing", f.path, name)
		}
		return nil, nil
	}
	d, err := digestFrom(v, f.path+name)
	if err != nil {
		return nil, err
	}
	return &d, nil
}

func (f fields) refs() ([]ref.Ref, error) {
	v, ok := f.m["refs"]
	if !ok {
		return nil, nil
	}
	a, ok := v.([]any)
	if !ok {
		return nil, malformed("%srefs: want array, got %s", f.path, typeName(v))
	}
	if len(a) == 0 {
		return nil, malformed("%srefs: empty array ([+ ContextRef])", f.path)
	}
	refs := make([]ref.Ref, len(a))
	for i, e := range a {
		r, err := refFrom(e, fmt.Sprintf("%srefs[%d].", f.path, i), f.strict)
		if err != nil {
			return nil, err
		}
		refs[i] = r
	}
	return refs, nil
}

// extraMembers returns the members of f outside known, kept as decoded
// (HC-01: a receiver MUST ignore members it does not understand, and a
// forwarder MUST NOT remove them). Names match exactly: "AUD" is an unknown
// member beside "aud", never the member itself. The strict profile refuses a
// name that differs from a known one only in case, as encoding/json folds it
// ("iſs" counts as "iss"), since decoders that fold case would take it for
// the member; the draft does not ask for that.
func extraMembers(f fields, known []string) (map[string]any, error) {
	if f.strict {
		if k, kn, found := caseVariant(f.m, known); found {
			return nil, malformed("%s%s: differs only in case from the member %q (strict profile)", f.path, k, kn)
		}
	}
	var x map[string]any
	for k, v := range f.m {
		if contains(known, k) {
			continue
		}
		if x == nil {
			x = map[string]any{}
		}
		x[k] = v
	}
	return x, nil
}

// caseVariant returns a member name of m that differs only in case from a
// name in known, or folds to it the way encoding/json matches names to
// struct fields, and that name. The strict profile refuses such a member,
// since a decoder that folds case would take it for the defined one.
func caseVariant[V any](m map[string]V, known []string) (name, of string, found bool) {
	for k := range m {
		if contains(known, k) {
			continue
		}
		for _, kn := range known {
			if strings.EqualFold(k, kn) || foldJSON(k) == foldJSON(kn) {
				return k, kn, true
			}
		}
	}
	return "", "", false
}

// foldJSON folds a name as encoding/json matches names to struct fields
// (each rune to upper(lower(r))), so that "iſs" and "ıss" count as case
// variants of "iss" too.
func foldJSON(s string) string { return strings.ToUpper(strings.ToLower(s)) }

func refFrom(v any, path string, strict bool) (ref.Ref, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return ref.Ref{}, malformed("%s: ContextRef must be a map, got %s", path, typeName(v))
	}
	f := fields{m: m, path: path, strict: strict}
	kind, err := f.text("kind", true)
	if err != nil {
		return ref.Ref{}, err
	}
	if !ref.ValidKind(kind) { // HC-10
		return ref.Ref{}, malformed("%skind: %q is neither a defined kind nor an absolute URI", path, kind)
	}
	dig, err := f.digest("dig", true)
	if err != nil {
		return ref.Ref{}, err
	}
	loc, err := f.text("loc", false)
	if err != nil {
		return ref.Ref{}, err
	}
	extra, err := extraMembers(f, refMembers)
	if err != nil {
		return ref.Ref{}, err
	}
	return ref.Ref{Kind: kind, Dig: *dig, Loc: loc, Proof: m["proof"], Extra: extra}, nil
}

func principalFrom(v any, path string, strict bool) (*Principal, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, malformed("%s: Principal must be a map, got %s", path, typeName(v))
	}
	f := fields{m: m, path: path + ".", strict: strict}
	sub, err := f.text("sub", true)
	if err != nil {
		return nil, err
	}
	iss, err := f.text("iss", false)
	if err != nil {
		return nil, err
	}
	extra, err := extraMembers(f, principalMembers)
	if err != nil {
		return nil, err
	}
	return &Principal{Sub: sub, Iss: iss, Extra: extra}, nil
}

// member is one name/value pair in the order the encoders write it.
type member struct {
	name  string
	value any
}

func digestValue(d digest.Digest) map[string]any {
	return map[string]any{"alg": d.Alg, "val": d.B64()}
}

func refsValue(refs []ref.Ref) []any {
	a := make([]any, len(refs))
	for i, r := range refs {
		m := map[string]any{"kind": r.Kind, "dig": digestValue(r.Dig)}
		if r.Loc != "" {
			m["loc"] = r.Loc
		}
		if r.Proof != nil {
			m["proof"] = r.Proof
		}
		for k, v := range r.Extra {
			if !contains(refMembers, k) {
				m[k] = v
			}
		}
		a[i] = m
	}
	return a
}

// members lists o's members in the draft's order, then extensions sorted.
func (o *Offer) members() []member {
	ms := []member{{"v", uint64(1)}, {"type", "offer"}, {"hop", string(o.Hop)}, {"dialog", o.Dialog}}
	if o.Task != "" {
		ms = append(ms, member{"task", o.Task})
	}
	ms = append(ms, member{"iss", string(o.Iss)}, member{"aud", string(o.Aud)},
		member{"iat", uint64(o.Iat)}, member{"exp", uint64(o.Exp)})
	if o.Obo != nil {
		p := map[string]any{"sub": o.Obo.Sub}
		if o.Obo.Iss != "" {
			p["iss"] = o.Obo.Iss
		}
		for k, v := range o.Obo.Extra {
			if !contains(principalMembers, k) {
				p[k] = v
			}
		}
		ms = append(ms, member{"obo", p})
	}
	if o.Grant != nil {
		ms = append(ms, member{"grant", digestValue(*o.Grant)})
	}
	if o.Prev != nil {
		ms = append(ms, member{"prev", digestValue(*o.Prev)})
	}
	if len(o.Refs) > 0 {
		ms = append(ms, member{"refs", refsValue(o.Refs)})
	}
	return appendExtra(ms, o.Extra, offerMembers)
}

func appendExtra(ms []member, extra map[string]any, known []string) []member {
	keys := make([]string, 0, len(extra))
	for k := range extra {
		if !contains(known, k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		ms = append(ms, member{k, extra[k]})
	}
	return ms
}

// encode returns o's payload: JSON for a JWS, CBOR for a COSE_Sign1
// (section 3).
func (o *Offer) encode(enc Encoding) ([]byte, error) { return encodeMembers(o.members(), enc) }

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

func encodeMembers(ms []member, enc Encoding) ([]byte, error) {
	switch enc {
	case JSON:
		return encodeJSONMembers(ms)
	case CBOR:
		return encodeCBORMembers(ms)
	}
	return nil, fmt.Errorf("%w: unknown encoding %d", ErrMalformed, enc)
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
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

func encodeJSONMembers(ms []member) ([]byte, error) {
	// One buffer and two encoders for all members: names as json.Marshal
	// writes them, values without HTML escaping (marshalJSON). Each Encode
	// ends with a newline, which is cut.
	var b bytes.Buffer
	b.Grow(64 * len(ms))
	keys, values := json.NewEncoder(&b), json.NewEncoder(&b)
	values.SetEscapeHTML(false)
	put := func(e *json.Encoder, v any) error {
		if err := e.Encode(v); err != nil {
			return err
		}
		b.Truncate(b.Len() - 1)
		return nil
	}
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := put(keys, m.name); err != nil {
			return nil, fmt.Errorf("%w: member %q: %v", ErrMalformed, m.name, err)
		}
		b.WriteByte(':')
		v := m.value
		switch v.(type) {
		case string, uint64: // leaves toJSONValue leaves as they are
		default:
			var err error
			if v, err = toJSONValue(v); err != nil {
				return nil, err
			}
		}
		if err := put(values, v); err != nil {
			return nil, fmt.Errorf("%w: member %q: %v", ErrMalformed, m.name, err)
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// marshalJSON encodes without HTML escaping, so that "<", ">" and "&"
// appear as themselves.
func marshalJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func encodeCBORMembers(ms []member) ([]byte, error) {
	m := make(map[string]any, len(ms))
	for _, e := range ms {
		v := e.value
		switch v.(type) {
		case string, uint64: // leaves toCBORValue leaves as they are
		default:
			var err error
			if v, err = toCBORValue(v); err != nil {
				return nil, err
			}
		}
		m[e.name] = v
	}
	b, err := cborEncMode.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return b, nil
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
