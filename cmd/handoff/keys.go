package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"os"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/jws"
)

// generateKey returns a new private key for alg.
func generateKey(alg string) (crypto.Signer, error) {
	switch alg {
	case handoff.ES256:
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case handoff.ES384:
		return ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case handoff.EdDSA:
		_, k, err := ed25519.GenerateKey(rand.Reader)
		return k, err
	}
	return nil, fmt.Errorf("--alg %q: want ES256, ES384 or EdDSA", alg)
}

// keyAlg returns the alg a public key implies, as the library's Signer
// picks it.
func keyAlg(pub crypto.PublicKey) (string, error) {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return handoff.ES256, nil
		case elliptic.P384():
			return handoff.ES384, nil
		}
		return "", fmt.Errorf("unsupported curve %s (want P-256 or P-384)", k.Curve.Params().Name)
	case ed25519.PublicKey:
		return handoff.EdDSA, nil
	}
	return "", fmt.Errorf("unsupported key type %T (want EC P-256, P-384 or Ed25519)", pub)
}

// privateJWK encodes key as a private JWK naming its alg and with its RFC
// 7638 thumbprint as kid.
func privateJWK(key crypto.Signer) ([]byte, handoff.TrustedKey, error) {
	s, err := handoff.NewSigner(key, handoff.JWS, nil)
	if err != nil {
		return nil, handoff.TrustedKey{}, err
	}
	tk := s.Key()
	b, err := jose.JSONWebKey{Key: key, KeyID: tk.KID, Algorithm: tk.Alg, Use: "sig"}.MarshalJSON()
	if err != nil {
		return nil, handoff.TrustedKey{}, err
	}
	return b, tk, nil
}

// loadSigner reads a private JWK (as keygen writes it) and returns a
// Signer for it in the given format. A warning is returned, not an error,
// when the JWK's kid is not its thumbprint: the signer always names the key
// by its thumbprint (HC-16), so a trust file must hold that kid.
func loadSigner(path string, format handoff.Format) (s *handoff.Signer, warning string, err error) {
	key, warning, err := loadKey(path)
	if err != nil {
		return nil, "", err
	}
	s, err = handoff.NewSigner(key, format, nil)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %v", path, err)
	}
	return s, warning, nil
}

// loadKey reads a private JWK (as keygen writes it): a P-256, P-384 or
// Ed25519 key, whose "alg", if any, fits it. The warning is loadSigner's.
func loadKey(path string) (key crypto.Signer, warning string, err error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	var j jose.JSONWebKey
	if err := j.UnmarshalJSON(raw); err != nil {
		return nil, "", fmt.Errorf("%s: not a JWK: %v", path, err)
	}
	if j.IsPublic() {
		return nil, "", fmt.Errorf("%s holds a public key; signing needs the private JWK that keygen wrote", path)
	}
	key, ok := j.Key.(crypto.Signer)
	if !ok {
		return nil, "", fmt.Errorf("%s: key type %T cannot sign", path, j.Key)
	}
	alg, err := keyAlg(key.Public())
	if err != nil {
		return nil, "", fmt.Errorf("%s: %v", path, err)
	}
	if j.Algorithm != "" && j.Algorithm != alg {
		return nil, "", fmt.Errorf("%s: alg %q does not fit its %s key", path, j.Algorithm, alg)
	}
	thumb, err := jws.Thumbprint(key.Public())
	if err != nil {
		return nil, "", fmt.Errorf("%s: %v", path, err)
	}
	if j.KeyID != "" && j.KeyID != thumb {
		warning = fmt.Sprintf("%s: kid %q is not the key's thumbprint; messages name the key %q", path, j.KeyID, thumb)
	}
	return key, warning, nil
}
