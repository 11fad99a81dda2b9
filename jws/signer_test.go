package jws_test

import (
	"crypto"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff/internal/ecsig"
	"github.com/agentproto/handoff/jws"
)

// A Signer writes octet for octet what Sign writes: with deterministic
// signatures (nil rand: RFC 6979 for ECDSA; Ed25519 always) the two are
// equal, and go-jose and Open read the Signer's output. HC-14: the header
// is exactly {"alg","kid","typ"}.
func TestSigner_HC14_SameOctetsAsSign(t *testing.T) {
	for _, alg := range []string{jws.ES256, jws.ES384, jws.EdDSA} {
		key := newKey(t, alg)
		kid, err := jws.Thumbprint(key.Public())
		require.NoError(t, err)
		s, err := jws.NewSigner(key, alg, kid, nil)
		require.NoError(t, err)
		for _, payload := range [][]byte{[]byte(`{"v":1}`), []byte("x"), make([]byte, 1000), []byte(`{"k":"\u00e9<&>"}`)} {
			want, err := jws.Sign(payload, key, alg, kid, nil)
			require.NoError(t, err)
			got, err := s.Sign(payload)
			require.NoError(t, err)
			assert.Equal(t, string(want), string(got), alg)

			obj, err := jose.ParseSignedCompact(string(got), []jose.SignatureAlgorithm{jose.SignatureAlgorithm(alg)})
			require.NoError(t, err, alg)
			p, err := obj.Verify(key.Public())
			require.NoError(t, err, alg)
			assert.Equal(t, payload, p)
			p, h, err := jws.Open(got, pin(key.Public(), alg), 0)
			require.NoError(t, err, alg)
			assert.Equal(t, payload, p)
			assert.Equal(t, jws.Header{Alg: alg, KID: kid}, h)
			if alg != jws.EdDSA {
				assert.True(t, ecsig.IsLowS(alg, decodeSig(t, got)), "low-S")
			}
		}
	}
}

func decodeSig(t *testing.T, token []byte) []byte {
	t.Helper()
	sig, err := jose.ParseSignedCompact(string(token), []jose.SignatureAlgorithm{jose.ES256, jose.ES384})
	require.NoError(t, err)
	return sig.Signatures[0].Signature
}

// NewSigner refuses what Sign refuses, and Signer.Sign an empty payload.
func TestSigner_Refuses(t *testing.T) {
	p256 := newKey(t, jws.ES256)
	ed := newKey(t, jws.EdDSA)
	for name, tc := range map[string]struct {
		key  crypto.Signer
		alg  string
		kid  string
		want error
	}{
		"HS256":            {p256, "HS256", "k", jws.ErrAlg},
		"P-256 as ES384":   {p256, jws.ES384, "k", jws.ErrAlg},
		"Ed25519 as ES256": {ed, jws.ES256, "k", jws.ErrAlg},
		"empty kid":        {p256, jws.ES256, "", nil},
		"nil key":          {nil, jws.ES256, "k", nil},
	} {
		s, err := jws.NewSigner(tc.key, tc.alg, tc.kid, nil)
		assert.Error(t, err, name)
		assert.Nil(t, s, name)
		if tc.want != nil {
			assert.ErrorIs(t, err, tc.want, name)
		}
	}
	s, err := jws.NewSigner(p256, jws.ES256, "k", nil)
	require.NoError(t, err)
	out, err := s.Sign(nil)
	assert.Error(t, err)
	assert.Nil(t, out)
}
