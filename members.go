package handoff

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/ref"
	"github.com/fxamacker/cbor/v2"
)

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
		if kn, ok := variantOf(k, known); ok {
			return k, kn, true
		}
	}
	return "", "", false
}

// variantOf returns the name in known of which name is a case variant (see
// caseVariant), if any. It allocates nothing, so that a Handoff object's
// members can be looked at one by one before a signature verifies.
func variantOf(name string, known []string) (string, bool) {
	if contains(known, name) {
		return "", false
	}
	for _, kn := range known {
		if strings.EqualFold(name, kn) || foldEqual(name, kn) {
			return kn, true
		}
	}
	return "", false
}

// foldEqual reports whether a and b fold to the same text as encoding/json
// matches names to struct fields (each rune to upper(lower(r))), so that
// "iſs" and "ıss" count as case variants of "iss" too: it compares
// strings.ToUpper(strings.ToLower(s)) of both, rune by rune, without
// building either.
func foldEqual(a, b string) bool {
	for a != "" && b != "" {
		r, n := utf8.DecodeRuneInString(a)
		q, m := utf8.DecodeRuneInString(b)
		if unicode.ToUpper(unicode.ToLower(r)) != unicode.ToUpper(unicode.ToLower(q)) {
			return false
		}
		a, b = a[n:], b[m:]
	}
	return a == "" && b == ""
}

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
