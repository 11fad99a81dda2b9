package handoff

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/go-jose/go-jose/v4"

	"github.com/agentproto/handoff/internal/ecsig"
	"github.com/agentproto/handoff/jws"
)

// Signature algorithms, by their JOSE names. The COSE forms use the
// matching COSE algorithm values (ES256 -7, ES384 -35, EdDSA -8).
const (
	ES256 = "ES256" // ECDSA P-256 SHA-256: every implementation supports it
	ES384 = "ES384" // ECDSA P-384 SHA-384
	EdDSA = "EdDSA" // Ed25519
)

// TrustedKey is a public key that a trust configuration binds to one
// AgentID, pinned to exactly one algorithm (HC-21, HC-22).
type TrustedKey struct {
	Public crypto.PublicKey
	Alg    string
	// KID is the key identifier a message names it by. Empty means the RFC
	// 7638 thumbprint, which NewTrust fills in.
	KID string
}

// Trust is a receiver's trust configuration: which keys speak for which
// AgentID (section 3.4). Keys carried in messages are never consulted
// (HC-21). A Trust is immutable once built and safe for concurrent use.
type Trust struct {
	keys map[AgentID][]boundKey
	// withheld gives, for an agent whose keys the configuration refuses to
	// use (Withhold), why: a message from it is refused as untrusted-key
	// with that detail.
	withheld map[AgentID]string
	// onUnknown, when set, hears of each lookup whose kid names no key of
	// its iss, or whose iss has no key (OnUnknownKey).
	onUnknown func(iss AgentID, kid string)
}

// boundKey is a trusted key with the names a message may give it: its
// KID, and its RFC 7638 thumbprint as base64url text and as raw octets.
type boundKey struct {
	TrustedKey
	thumb    string
	thumbRaw string
}

// NewTrust builds a trust configuration. Each key must suit its Alg; a key
// without KID gets its thumbprint.
func NewTrust(keys map[AgentID][]TrustedKey) (*Trust, error) {
	t := &Trust{keys: make(map[AgentID][]boundKey, len(keys))}
	for id, ks := range keys {
		if id == "" {
			return nil, fmt.Errorf("%w: trust: empty AgentID", ErrMalformed)
		}
		for _, k := range ks {
			if err := checkKeyAlg(k.Public, k.Alg); err != nil {
				return nil, fmt.Errorf("handoff: trust: %s: %w", id, unprefixed{err})
			}
			thumb, err := jws.Thumbprint(k.Public)
			if err != nil {
				return nil, fmt.Errorf("handoff: trust: %s: %w", id, unprefixed{err})
			}
			raw, err := base64.RawURLEncoding.DecodeString(thumb)
			if err != nil {
				return nil, fmt.Errorf("handoff: trust: %s: %w", id, unprefixed{err})
			}
			if k.KID == "" {
				k.KID = thumb
			}
			t.keys[id] = append(t.keys[id], boundKey{TrustedKey: k, thumb: thumb, thumbRaw: string(raw)})
		}
	}
	return t, nil
}

// Keys returns the keys bound to id.
func (t *Trust) Keys(id AgentID) []TrustedKey {
	if t == nil {
		return nil
	}
	out := make([]TrustedKey, len(t.keys[id]))
	for i, k := range t.keys[id] {
		out[i] = k.TrustedKey
	}
	return out
}

// Withhold returns a copy of t in which each agent of why is bound to no
// key: a message from it is refused as untrusted-key, its detail saying
// why (for example that the agent's keys are stale). It is how a trust
// source fails closed for one agent without dropping the others.
func (t *Trust) Withhold(why map[AgentID]string) *Trust {
	c := t.clone()
	for id, w := range why {
		delete(c.keys, id)
		c.withheld[id] = w
	}
	return c
}

// OnUnknownKey returns a copy of t that calls f when a message's kid names
// no key bound to its iss, or its iss has no key at all, so that a trust
// source can refresh that agent's keys (a rotation it has not seen yet).
// The iss and kid come from a message whose signature is not yet checked:
// f must treat them as a hint only, fetch nothing they name, and bound the
// work a forged kid can cause. f is called on the receive path, never
// under a lock of this module; it must not block.
func (t *Trust) OnUnknownKey(f func(iss AgentID, kid string)) *Trust {
	c := t.clone()
	c.onUnknown = f
	return c
}

// Withheld returns why t withholds the keys of id, and whether it does.
func (t *Trust) Withheld(id AgentID) (string, bool) {
	if t == nil {
		return "", false
	}
	w, ok := t.withheld[id]
	return w, ok
}

func (t *Trust) clone() *Trust {
	c := &Trust{keys: make(map[AgentID][]boundKey, len(t.keys)), withheld: make(map[AgentID]string, len(t.withheld)), onUnknown: t.onUnknown}
	for id, ks := range t.keys {
		c.keys[id] = ks
	}
	for id, w := range t.withheld {
		c.withheld[id] = w
	}
	return c
}

// noKey is the lookup error for an iss the configuration binds no key to.
func (t *Trust) noKey(iss AgentID) errNoTrustedKey {
	w, _ := t.Withheld(iss)
	return errNoTrustedKey{iss: iss, why: w}
}

// binds reports whether t binds to id the key k, with k's algorithm: then
// an element of id that k verified verifies under t too.
func (t *Trust) binds(id AgentID, k keyRef) bool {
	return slices.ContainsFunc(t.keys[id], func(n boundKey) bool { return n.thumb == k.thumb && n.Alg == k.alg })
}

// keyRef names one trusted key by its RFC 7638 thumbprint and its pinned
// algorithm: the key that verified an element.
type keyRef struct{ thumb, alg string }

func (k boundKey) ref() keyRef { return keyRef{thumb: k.thumb, alg: k.Alg} }

// AgentIDs returns the agents the configuration knows, sorted.
func (t *Trust) AgentIDs() []AgentID {
	ids := make([]AgentID, 0, len(t.keys))
	for id := range t.keys {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// candidates returns the keys bound to iss that a message naming kid may
// be verified with, the keys kid names first (HC-16, HC-18, HC-21), and
// whether kid names one of them. The kid is only a hint that orders keys
// already bound to iss: the draft fixes no kid encoding for COSE, so a kid
// names a key when it equals the key's KID or its RFC 7638 thumbprint, as
// base64url text or as the 32 raw octets. A kid that names no key of iss
// leaves every key of iss to try, since all of them are trusted for iss.
// Each key keeps its own algorithm (HC-22).
func (t *Trust) candidates(iss AgentID, kid string) (keys []boundKey, named bool) {
	if t == nil {
		return nil, false
	}
	bound := t.keys[iss]
	defer func() {
		if t.onUnknown != nil && (len(bound) == 0 || kid != "" && !named) {
			t.onUnknown(iss, kid)
		}
	}()
	names := func(k boundKey) bool { return kid != "" && (kid == k.KID || kid == k.thumb || kid == k.thumbRaw) }
	keys = make([]boundKey, 0, len(bound))
	for _, k := range bound {
		if names(k) {
			keys, named = append(keys, k), true
		}
	}
	for _, k := range bound {
		if !names(k) {
			keys = append(keys, k)
		}
	}
	return keys, named
}

// ParseTrust reads a trust configuration from a JSON object mapping each
// AgentID to a JWK Set ({"keys": [JWK, ...]}) of public keys. Each key is
// pinned to its "alg"; a P-256 key without "alg" means ES256, and any other
// key must name its alg. A JWK "kid" is kept; without one the key is named by
// its thumbprint.
func ParseTrust(doc []byte) (*Trust, error) {
	lim := Limits{MaxDepth: 8, MaxMembers: 4096}.withDefaults()
	m, err := decodeJSON(doc, lim)
	if err != nil {
		return nil, fmt.Errorf("handoff: trust document: %w", unprefixed{err})
	}
	keys := map[AgentID][]TrustedKey{}
	for id, v := range m {
		ks, err := jwkSet(v, "")
		if err != nil {
			if what := notTrustDocument(m); what != "" {
				return nil, fmt.Errorf("%w: trust document: this is %s, not a trust document, which maps each AgentID to a JWK Set: "+
					`{"spiffe://example.org/agent": {"keys": [JWK, ...]}}`, ErrMalformed, what)
			}
			return nil, fmt.Errorf("handoff: trust document: %q: %w", id, unprefixed{err})
		}
		keys[AgentID(id)] = ks
	}
	return NewTrust(keys)
}

// notTrustDocument says what a document that ParseTrust refuses is
// instead, when it is a bare JWK or a JWK Set: "" otherwise. It is asked
// only once a member failed, so it never refuses a trust document.
func notTrustDocument(m map[string]any) string {
	if _, ok := m["kty"].(string); ok {
		return "a JWK (it has \"kty\")"
	}
	if _, ok := m["keys"].([]any); ok && len(m) == 1 {
		return "a JWK Set (it has \"keys\")"
	}
	return ""
}

// ParseJWKSet reads a JWK Set ({"keys": [JWK, ...]}) of public keys, each
// validated as ParseTrust validates it. A non-empty alg pins every key to
// it: a key without "alg" takes it, and a key naming another alg is
// refused. With alg empty, a P-256 key without "alg" means ES256 and any
// other key must name its alg, as in ParseTrust.
func ParseJWKSet(doc []byte, alg string) ([]TrustedKey, error) {
	if alg != "" && !ecsig.Supported(alg) {
		return nil, fmt.Errorf("%w: JWK Set: unsupported alg %q (asymmetric ES256, ES384 or EdDSA only, HC-15)", ErrMalformed, alg)
	}
	lim := Limits{MaxDepth: 8, MaxMembers: 4096}.withDefaults()
	m, err := decodeJSON(doc, lim)
	if err != nil {
		return nil, fmt.Errorf("handoff: JWK Set: %w", unprefixed{err})
	}
	ks, err := jwkSet(m, alg)
	if err != nil {
		return nil, fmt.Errorf("handoff: JWK Set: %w", unprefixed{err})
	}
	return ks, nil
}

// jwkSet reads the keys of a decoded JWK Set, pinned to alg when it is
// not empty.
func jwkSet(v any, alg string) ([]TrustedKey, error) {
	set, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: want a JWK Set object", ErrMalformed)
	}
	list, ok := set["keys"].([]any)
	if !ok {
		return nil, fmt.Errorf("%w: JWK Set without a keys array", ErrMalformed)
	}
	keys := make([]TrustedKey, 0, len(list))
	for i, kv := range list {
		raw, err := json.Marshal(kv)
		if err != nil {
			return nil, fmt.Errorf("%w: key %d: %v", ErrMalformed, i, err)
		}
		k, err := parseJWK(raw, alg)
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", i, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// ParseJWK reads one public JWK as a TrustedKey pinned to its alg (a P-256
// key without "alg" means ES256). A private JWK is refused: a trust
// configuration holds public keys only.
func ParseJWK(raw []byte) (TrustedKey, error) { return parseJWK(raw, "") }

// parseJWK is ParseJWK with the key pinned to pin when it is not empty.
func parseJWK(raw []byte, pin string) (TrustedKey, error) {
	var j jose.JSONWebKey
	if err := j.UnmarshalJSON(raw); err != nil {
		return TrustedKey{}, fmt.Errorf("%w: JWK: %v", ErrMalformed, err)
	}
	if !j.IsPublic() {
		return TrustedKey{}, fmt.Errorf("%w: JWK holds a private key", ErrMalformed)
	}
	alg := j.Algorithm
	switch {
	case pin != "" && alg == "":
		alg = pin
	case pin != "" && alg != pin:
		return TrustedKey{}, fmt.Errorf("%w: JWK alg %q, but the configuration pins %q", ErrMalformed, alg, pin)
	case alg == "":
		if pk, ok := j.Key.(*ecdsa.PublicKey); ok && pk.Curve == elliptic.P256() {
			alg = ES256
		} else {
			return TrustedKey{}, fmt.Errorf("%w: JWK without alg (only a P-256 key may omit it)", ErrMalformed)
		}
	}
	k := TrustedKey{Public: j.Key, Alg: alg, KID: j.KeyID}
	if err := checkKeyAlg(k.Public, k.Alg); err != nil {
		return TrustedKey{}, err
	}
	return k, nil
}

// PublicJWK returns k as a public JWK with its alg and kid.
func (k TrustedKey) PublicJWK() ([]byte, error) {
	kid := k.KID
	if kid == "" {
		var err error
		if kid, err = jws.Thumbprint(k.Public); err != nil {
			return nil, err
		}
	}
	return jose.JSONWebKey{Key: k.Public, Algorithm: k.Alg, KeyID: kid, Use: "sig"}.MarshalJSON()
}

// checkKeyAlg verifies that pub is a usable key of the kind alg needs
// (HC-15, HC-22): the type and curve alg names, and for ECDSA a point on
// the curve, so that no key the trust configuration holds fails later.
func checkKeyAlg(pub crypto.PublicKey, alg string) error {
	if !ecsig.Supported(alg) {
		return fmt.Errorf("%w: unsupported alg %q (asymmetric ES256, ES384 or EdDSA only, HC-15)", ErrMalformed, alg)
	}
	if err := ecsig.CheckKey(pub, alg); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return nil
}

// algFor returns the alg a signing key implies.
func algFor(pub crypto.PublicKey) (string, error) {
	switch pk := pub.(type) {
	case *ecdsa.PublicKey:
		switch pk.Curve {
		case elliptic.P256():
			return ES256, nil
		case elliptic.P384():
			return ES384, nil
		}
	case ed25519.PublicKey:
		return EdDSA, nil
	}
	return "", fmt.Errorf("%w: unsupported key type %T", ErrMalformed, pub)
}
