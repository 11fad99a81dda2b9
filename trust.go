package handoff

import (
	"crypto"
	"encoding/base64"
	"fmt"
	"slices"
	"sort"

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

// bindsSigner reports, as an ErrConfig naming the fields to set, a trust
// configuration that does not bind s's key, with its alg, to id, unless
// lacks says that is meant: id bound to other keys only (the Signer is
// another agent's key, or t is out of date), or to no key.
func (t *Trust) bindsSigner(id AgentID, s *Signer, lacks bool) error {
	bound := t.keys[id]
	switch {
	case lacks || t.binds(id, keyRef{thumb: s.kid, alg: s.alg}):
		return nil
	case len(bound) > 0:
		return fmt.Errorf("%w: Config.Trust binds %d key(s) to Config.ID %q, none of them Config.Signer's (kid %s, %s): "+
			"the Signer is another agent's key, or the Trust is out of date; set Config.TrustLacksSigner only for an agent that signs "+
			"nothing its peers must verify", ErrConfig, len(bound), id, s.kid, s.alg)
	}
	return fmt.Errorf("%w: Config.Trust binds no key to Config.ID %q, so a peer that shares it cannot verify this agent's offers and statuses: "+
		"add Config.Signer.Key() under that ID, or set Config.TrustLacksSigner if the Trust lists the peers only", ErrConfig, id)
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
