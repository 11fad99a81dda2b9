package keyset

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
)

// testKey is a fresh P-256 key as a trust configuration holds it.
func testKey(t *testing.T) handoff.TrustedKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	s, err := handoff.NewSigner(k, handoff.JWS, nil)
	require.NoError(t, err)
	return s.Key()
}

// saysOnce checks that a message names each package once.
func saysOnce(t *testing.T, err error) {
	t.Helper()
	for _, p := range []string{"keyset: ", "handoff: "} {
		assert.LessOrEqual(t, strings.Count(err.Error(), p), 1, "%q says %q more than once", err, p)
	}
}

// A bare JWK or JWK Set given where a trust document belongs is named for
// what it is.
func TestMessage_JWKIsNotATrustDocument(t *testing.T) {
	jwk, err := PublicJWK(testKey(t))
	require.NoError(t, err)
	for name, doc := range map[string]string{
		"JWK":     string(jwk),
		"JWK Set": `{"keys": [` + string(jwk) + `]}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseTrust([]byte(doc))
			require.ErrorIs(t, err, handoff.ErrMalformed)
			assert.Contains(t, err.Error(), "this is a "+name+" (it has ")
			assert.Contains(t, err.Error(), "not a trust document, which maps each AgentID to a JWK Set")
			saysOnce(t, err)
		})
	}
	// A trust document with one bad member is told about that member.
	_, err = ParseTrust([]byte(`{"spiffe://a.example/x": {"keys": [` + string(jwk) + `]}, "spiffe://b.example/y": 1}`))
	require.ErrorIs(t, err, handoff.ErrMalformed)
	assert.Contains(t, err.Error(), `"spiffe://b.example/y": malformed input: want a JWK Set object`)
	assert.NotContains(t, err.Error(), "not a trust document")
	saysOnce(t, err)
}

// ParseJWKSet validates as ParseTrust does; a pinned alg names the alg of
// a key without one and refuses a key naming another.
func TestParseJWKSet(t *testing.T) {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	x := base64.RawURLEncoding.EncodeToString(pub)
	okp := `{"kty":"OKP","crv":"Ed25519","x":"` + x + `"}`
	p256, err := PublicJWK(testKey(t))
	require.NoError(t, err)

	ks, err := ParseJWKSet([]byte(`{"keys":[`+string(p256)+`]}`), "")
	require.NoError(t, err)
	require.Len(t, ks, 1)
	assert.Equal(t, handoff.ES256, ks[0].Alg)

	_, err = ParseJWKSet([]byte(`{"keys":[`+okp+`]}`), "")
	assert.ErrorIs(t, err, handoff.ErrMalformed, "an Ed25519 key without alg and no pin")
	ks, err = ParseJWKSet([]byte(`{"keys":[`+okp+`]}`), handoff.EdDSA)
	require.NoError(t, err)
	assert.Equal(t, handoff.EdDSA, ks[0].Alg)
	_, err = ParseJWKSet([]byte(`{"keys":[`+string(p256)+`]}`), handoff.EdDSA)
	assert.ErrorIs(t, err, handoff.ErrMalformed, "the key names handoff.ES256, the configuration pins EdDSA")
	_, err = ParseJWKSet([]byte(`{"keys":[`+okp+`]}`), handoff.ES256)
	assert.ErrorIs(t, err, handoff.ErrMalformed, "an Ed25519 key pinned to handoff.ES256: the key type is checked")
	_, err = ParseJWKSet([]byte(`{"keys":[`+okp+`]}`), "HS256")
	assert.ErrorIs(t, err, handoff.ErrMalformed, "a symmetric pin")

	for name, doc := range map[string]string{
		"not a set":    `[]`,
		"no keys":      `{"key":[]}`,
		"keys not arr": `{"keys":{}}`,
		"duplicate":    `{"keys":[],"keys":[]}`,
		"private":      `{"keys":[{"kty":"OKP","crv":"Ed25519","alg":"EdDSA","x":"` + x + `","d":"` + x + `"}]}`,
		"symmetric":    `{"keys":[{"kty":"oct","alg":"HS256","k":"` + x + `"}]}`,
		"bad curve":    `{"keys":[{"kty":"EC","crv":"P-256","alg":"ES384","x":"AA","y":"AA"}]}`,
		"trailing":     `{"keys":[]} {}`,
	} {
		_, err := ParseJWKSet([]byte(doc), "")
		assert.Error(t, err, name)
	}
}

// A trust document that is not one is refused as malformed, whatever its
// shape: empty, truncated, duplicated names (RFC 7493 section 2.3), deep
// nesting, wrong types, a trailing value (section 3.4 of the draft: the
// receiver's own configuration, read strictly).
func TestParseTrust_Hostile(t *testing.T) {
	jwk, err := PublicJWK(testKey(t))
	require.NoError(t, err)
	set := `{"keys":[` + string(jwk) + `]}`
	for name, doc := range map[string]string{
		"empty":           ``,
		"truncated":       `{"spiffe://a.example/x": ` + set[:len(set)/2],
		"duplicate agent": `{"spiffe://a.example/x": ` + set + `, "spiffe://a.example/x": ` + set + `}`,
		"duplicate keys":  `{"spiffe://a.example/x": {"keys":[], "keys":[]}}`,
		"deep":            strings.Repeat(`{"a":`, 20000) + `1` + strings.Repeat(`}`, 20000),
		"not an object":   `[` + set + `]`,
		"set not object":  `{"spiffe://a.example/x": "keys"}`,
		"keys not array":  `{"spiffe://a.example/x": {"keys": {}}}`,
		"key not object":  `{"spiffe://a.example/x": {"keys": [1]}}`,
		"trailing":        `{"spiffe://a.example/x": ` + set + `} {}`,
		"invalid UTF-8":   "{\"spiffe://a.example/\xff\": " + set + `}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseTrust([]byte(doc))
			require.ErrorIs(t, err, handoff.ErrMalformed)
		})
	}
	tr, err := ParseTrust([]byte(`{"spiffe://a.example/x": ` + set + `}`))
	require.NoError(t, err)
	assert.Len(t, tr.Keys("spiffe://a.example/x"), 1)
}
