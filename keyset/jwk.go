package keyset

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"fmt"
	"strings"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/internal/ecsig"
	"github.com/agentproto/handoff/jws"
)

// The documents keys are read from (section 3.4 of the draft: the
// receiver's own trust configuration, never keys carried in messages,
// HC-21). A document is JSON as RFC 8259 defines it, with unique member
// names and valid UTF-8 (RFC 7493 sections 2.1 and 2.3); its size is the
// caller's to bound (Config.MaxSize for a fetched set).

// ParseTrust reads a trust configuration from a JSON object mapping each
// AgentID to a JWK Set ({"keys": [JWK, ...]}) of public keys. Each key is
// pinned to its "alg"; a P-256 key without "alg" means ES256, and any other
// key must name its alg. A JWK "kid" is kept; without one the key is named
// by its thumbprint. Errors wrap handoff.ErrMalformed.
func ParseTrust(doc []byte) (*handoff.Trust, error) {
	var m map[string]jsontext.Value
	if err := json.Unmarshal(doc, &m); err != nil {
		return nil, fmt.Errorf("keyset: trust document: %w", malformed("%v", err))
	}
	keys := map[handoff.AgentID][]handoff.TrustedKey{}
	for id, v := range m {
		ks, err := jwkSet(v, "")
		if err != nil {
			if what := notTrustDocument(m); what != "" {
				return nil, fmt.Errorf("%w: trust document: this is %s, not a trust document, which maps each AgentID to a JWK Set: "+
					`{"spiffe://example.org/agent": {"keys": [JWK, ...]}}`, handoff.ErrMalformed, what)
			}
			return nil, fmt.Errorf("keyset: trust document: %q: %w", id, unprefixed{err})
		}
		keys[handoff.AgentID(id)] = ks
	}
	return handoff.NewTrust(keys)
}

// notTrustDocument says what a document that ParseTrust refuses is
// instead, when it is a bare JWK or a JWK Set: "" otherwise. It is asked
// only once a member failed, so it never refuses a trust document.
func notTrustDocument(m map[string]jsontext.Value) string {
	if m["kty"].Kind() == '"' {
		return "a JWK (it has \"kty\")"
	}
	if m["keys"].Kind() == '[' && len(m) == 1 {
		return "a JWK Set (it has \"keys\")"
	}
	return ""
}

// ParseJWKSet reads a JWK Set ({"keys": [JWK, ...]}) of public keys, each
// validated as ParseTrust validates it. A non-empty alg pins every key to
// it: a key without "alg" takes it, and a key naming another alg is
// refused. With alg empty, a P-256 key without "alg" means ES256 and any
// other key must name its alg, as in ParseTrust.
func ParseJWKSet(doc []byte, alg string) ([]handoff.TrustedKey, error) {
	if alg != "" && !ecsig.Supported(alg) {
		return nil, malformed("JWK Set: unsupported alg %q (asymmetric ES256, ES384 or EdDSA only, HC-15)", alg)
	}
	var v jsontext.Value
	if err := json.Unmarshal(doc, &v); err != nil {
		return nil, fmt.Errorf("keyset: JWK Set: %w", malformed("%v", err))
	}
	ks, err := jwkSet(v, alg)
	if err != nil {
		return nil, fmt.Errorf("keyset: JWK Set: %w", unprefixed{err})
	}
	return ks, nil
}

// jwkSet reads the keys of a JWK Set, pinned to alg when it is not empty.
func jwkSet(v jsontext.Value, alg string) ([]handoff.TrustedKey, error) {
	if v.Kind() != '{' {
		return nil, malformed("want a JWK Set object")
	}
	var set map[string]jsontext.Value
	if err := json.Unmarshal(v, &set); err != nil {
		return nil, malformed("%v", err)
	}
	var list []jsontext.Value
	if set["keys"].Kind() != '[' || json.Unmarshal(set["keys"], &list) != nil {
		return nil, malformed("JWK Set without a keys array")
	}
	keys := make([]handoff.TrustedKey, 0, len(list))
	for i, raw := range list {
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
func ParseJWK(raw []byte) (handoff.TrustedKey, error) { return parseJWK(raw, "") }

// parseJWK is ParseJWK with the key pinned to pin when it is not empty.
func parseJWK(raw []byte, pin string) (handoff.TrustedKey, error) {
	var j jose.JSONWebKey
	if err := j.UnmarshalJSON(raw); err != nil {
		return handoff.TrustedKey{}, malformed("JWK: %v", err)
	}
	if !j.IsPublic() {
		return handoff.TrustedKey{}, malformed("JWK holds a private key")
	}
	alg := j.Algorithm
	switch {
	case pin != "" && alg == "":
		alg = pin
	case pin != "" && alg != pin:
		return handoff.TrustedKey{}, malformed("JWK alg %q, but the configuration pins %q", alg, pin)
	case alg == "":
		if pk, ok := j.Key.(*ecdsa.PublicKey); ok && pk.Curve == elliptic.P256() {
			alg = handoff.ES256
		} else {
			return handoff.TrustedKey{}, malformed("JWK without alg (only a P-256 key may omit it)")
		}
	}
	// The key type and curve must suit the alg (HC-15, HC-22), as
	// handoff.NewTrust checks too: refused here, it is refused with the
	// key's place in the document.
	if !ecsig.Supported(alg) {
		return handoff.TrustedKey{}, malformed("unsupported alg %q (asymmetric ES256, ES384 or EdDSA only, HC-15)", alg)
	}
	if err := ecsig.CheckKey(j.Key, alg); err != nil {
		return handoff.TrustedKey{}, malformed("%v", err)
	}
	return handoff.TrustedKey{Public: j.Key, Alg: alg, KID: j.KeyID}, nil
}

// PublicJWK returns k as a public JWK with its alg and kid; a key without
// KID is named by its RFC 7638 thumbprint.
func PublicJWK(k handoff.TrustedKey) ([]byte, error) {
	kid := k.KID
	if kid == "" {
		var err error
		if kid, err = jws.Thumbprint(k.Public); err != nil {
			return nil, err
		}
	}
	return jose.JSONWebKey{Key: k.Public, Algorithm: k.Alg, KeyID: kid, Use: "sig"}.MarshalJSON()
}

// malformed is an error of a key document, wrapping handoff.ErrMalformed.
func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", handoff.ErrMalformed, fmt.Sprintf(format, args...))
}

// unprefixed is err without the root package's "handoff: ", for an error
// printed after this package's own prefix. errors.Is and errors.As see
// err.
type unprefixed struct{ err error }

func (u unprefixed) Error() string { return strings.TrimPrefix(u.err.Error(), "handoff: ") }
func (u unprefixed) Unwrap() error { return u.err }
