package handoff

import (
	"encoding/json"
	"fmt"
	"math/big"
	"net/url"
	"sort"
	"strings"

	"github.com/fxamacker/cbor/v2"
)

// Member names of the data model (section 2). Matching is exact and case
// sensitive; a name that differs only in case is refused by the decoders.
var (
	offerMembers     = []string{"v", "type", "hop", "dialog", "task", "iss", "aud", "iat", "exp", "obo", "grant", "prev", "refs"}
	statusMembers    = []string{"v", "type", "hop", "offer", "iss", "aud", "iat", "state", "reason", "detail", "refs"}
	principalMembers = []string{"sub", "iss"}
	refMembers       = []string{"kind", "dig", "loc", "proof"}
	handoffMembers   = []string{"offer", "chain"}
)

// fields reads the members of one decoded map by exact name.
type fields struct {
	m    map[string]any
	path string
}

func (f fields) has(name string) bool { _, ok := f.m[name]; return ok }

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
		return 0, malformed("%s%s: Time must be an unsigned integer, got %s", f.path, name, typeName(v))
	}
	if Time(u) > MaxTime {
		return 0, malformed("%s%s: Time %d exceeds %d", f.path, name, u, MaxTime)
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

func (f fields) digest(name string, required bool) (*Digest, error) {
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

func (f fields) refs() ([]ContextRef, error) {
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
	refs := make([]ContextRef, len(a))
	for i, e := range a {
		r, err := refFrom(e, f.path+"refs["+itoa(i)+"].")
		if err != nil {
			return nil, err
		}
		refs[i] = r
	}
	return refs, nil
}

// extra returns the members outside known, kept as decoded (HC-01): "a
// receiver MUST ignore members it does not understand". A member whose
// name differs only in case from a known one ("ISS", "Task") is such a
// member: names match exactly, so it is kept here and never read as the
// defined one. Refusing it is for the strict profile (caseVariant).
func (f fields) extra(known []string) (map[string]any, error) {
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
func caseVariant(m map[string]any, known []string) (name, of string, found bool) {
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

func digestFrom(v any, path string) (Digest, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return Digest{}, malformed("%s: Digest must be a map, got %s", path, typeName(v))
	}
	for k := range m { // HC-06: Digest is closed
		if k != "alg" && k != "val" {
			return Digest{}, malformed("%s: Digest is closed, unexpected member %q", path, k)
		}
	}
	f := fields{m: m, path: path + "."}
	alg, err := f.text("alg", true)
	if err != nil {
		return Digest{}, err
	}
	val, err := f.text("val", true)
	if err != nil {
		return Digest{}, err
	}
	d, err := newDigest(alg, val)
	if err != nil {
		return Digest{}, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

func refFrom(v any, path string) (ContextRef, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return ContextRef{}, malformed("%s: ContextRef must be a map, got %s", path, typeName(v))
	}
	f := fields{m: m, path: path}
	kind, err := f.text("kind", true)
	if err != nil {
		return ContextRef{}, err
	}
	if !knownKind(kind) && !absoluteURI(kind) { // HC-10
		return ContextRef{}, malformed("%skind: %q is neither a defined kind nor an absolute URI", path, kind)
	}
	dig, err := f.digest("dig", true)
	if err != nil {
		return ContextRef{}, err
	}
	loc, err := f.text("loc", false)
	if err != nil {
		return ContextRef{}, err
	}
	extra, err := f.extra(refMembers)
	if err != nil {
		return ContextRef{}, err
	}
	return ContextRef{Kind: kind, Dig: *dig, Loc: loc, Proof: m["proof"], Extra: extra}, nil
}

func principalFrom(v any, path string) (*Principal, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, malformed("%s: Principal must be a map, got %s", path, typeName(v))
	}
	f := fields{m: m, path: path + "."}
	sub, err := f.text("sub", true)
	if err != nil {
		return nil, err
	}
	iss, err := f.text("iss", false)
	if err != nil {
		return nil, err
	}
	extra, err := f.extra(principalMembers)
	if err != nil {
		return nil, err
	}
	return &Principal{Sub: sub, Iss: iss, Extra: extra}, nil
}

func knownKind(k string) bool {
	switch k {
	case KindDigest, KindSaltedDigest, KindSCITTReceipt, KindLearnlogHead:
		return true
	}
	return false
}

func absoluteURI(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.IsAbs()
}

// offerFrom maps a decoded payload to an Offer, checking the CDDL.
func offerFrom(m map[string]any) (*Offer, error) {
	f := fields{m: m}
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
		if o.Obo, err = principalFrom(v, "obo"); err != nil {
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
	if o.Extra, err = f.extra(offerMembers); err != nil {
		return nil, err
	}
	return &o, nil
}

// statusFrom maps a decoded payload to a Status, checking the CDDL.
func statusFrom(m map[string]any) (*Status, error) {
	f := fields{m: m}
	if err := f.version(); err != nil {
		return nil, err
	}
	if err := f.typ("status"); err != nil {
		return nil, err
	}
	var s Status
	var err error
	if s.Hop, err = f.hop(); err != nil {
		return nil, err
	}
	d, err := f.digest("offer", true)
	if err != nil {
		return nil, err
	}
	s.Offer = *d
	if s.Iss, err = f.agent("iss"); err != nil {
		return nil, err
	}
	if s.Aud, err = f.agent("aud"); err != nil {
		return nil, err
	}
	if s.Iat, err = f.time("iat"); err != nil {
		return nil, err
	}
	st, err := f.text("state", true)
	if err != nil {
		return nil, err
	}
	s.State = State(st)
	if !s.State.Wire() {
		return nil, malformed("state: %q is not a status state", st)
	}
	r, err := f.text("reason", false)
	if err != nil {
		return nil, err
	}
	s.Reason = Reason(r)
	if s.Detail, err = f.text("detail", false); err != nil {
		return nil, err
	}
	if s.Refs, err = f.refs(); err != nil {
		return nil, err
	}
	if s.Extra, err = f.extra(statusMembers); err != nil {
		return nil, err
	}
	return &s, nil
}

// member is one name/value pair in the order the encoders write it.
type member struct {
	name  string
	value any
}

func digestValue(d Digest) map[string]any {
	return map[string]any{"alg": d.Alg, "val": d.B64()}
}

func refsValue(refs []ContextRef) []any {
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
			m[k] = v
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
			p[k] = v
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

func (s *Status) members() []member {
	ms := []member{{"v", uint64(1)}, {"type", "status"}, {"hop", string(s.Hop)},
		{"offer", digestValue(s.Offer)}, {"iss", string(s.Iss)}, {"aud", string(s.Aud)},
		{"iat", uint64(s.Iat)}, {"state", string(s.State)}}
	if s.Reason != "" {
		ms = append(ms, member{"reason", string(s.Reason)})
	}
	if s.Detail != "" {
		ms = append(ms, member{"detail", s.Detail})
	}
	if len(s.Refs) > 0 {
		ms = append(ms, member{"refs", refsValue(s.Refs)})
	}
	return appendExtra(ms, s.Extra, statusMembers)
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
	return "value"
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}
