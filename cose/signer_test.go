package cose_test

import (
	"crypto"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gocose "github.com/veraison/go-cose"

	"github.com/agentproto/handoff/cose"
	"github.com/agentproto/handoff/internal/ecsig"
)

// A Signer writes octet for octet what Sign writes: with deterministic
// signatures (nil rand: RFC 6979 for ECDSA; Ed25519 always) the two are
// equal, and go-cose and Open read the Signer's output (HC-17: tag 18,
// content type, kid in the protected header).
func TestSigner_HC17_SameOctetsAsSign(t *testing.T) {
	for _, alg := range []string{cose.ES256, cose.ES384, cose.EdDSA} {
		key := newKey(t, alg)
		for _, kid := range []string{"k", "a kid of more than twenty-four octets, for a longer head"} {
			s, err := cose.NewSigner(key, alg, kid, nil)
			require.NoError(t, err)
			for _, payload := range [][]byte{testPayload, {0}, make([]byte, 300), make([]byte, 70000)} {
				want, err := cose.Sign(payload, key, alg, kid, nil)
				require.NoError(t, err)
				got, err := s.Sign(payload)
				require.NoError(t, err)
				assert.Equal(t, want, got, "%s, kid %q, payload of %d octets", alg, kid, len(payload))

				var msg gocose.Sign1Message
				require.NoError(t, msg.UnmarshalCBOR(got))
				assert.Equal(t, payload, msg.Payload)
				p, h, err := cose.OpenWith(got, pin(key.Public(), alg), cose.Options{MaxSize: 1 << 20})
				require.NoError(t, err, alg)
				assert.Equal(t, payload, p)
				assert.Equal(t, kid, string(h.KID))
				if alg != cose.EdDSA {
					assert.True(t, ecsig.IsLowS(alg, msg.Signature), "low-S")
				}
			}
		}
	}
}

// NewSigner refuses what Sign refuses, and Signer.Sign an empty payload.
func TestSigner_Refuses(t *testing.T) {
	p256 := newKey(t, cose.ES256)
	ed := newKey(t, cose.EdDSA)
	for name, tc := range map[string]struct {
		key  crypto.Signer
		alg  string
		kid  string
		want error
	}{
		"HS256":            {p256, "HS256", "k", cose.ErrAlg},
		"P-256 as ES384":   {p256, cose.ES384, "k", cose.ErrAlg},
		"Ed25519 as ES256": {ed, cose.ES256, "k", cose.ErrAlg},
		"empty kid":        {p256, cose.ES256, "", nil},
		"nil key":          {nil, cose.ES256, "k", nil},
	} {
		s, err := cose.NewSigner(tc.key, tc.alg, tc.kid, nil)
		assert.Error(t, err, name)
		assert.Nil(t, s, name)
		if tc.want != nil {
			assert.ErrorIs(t, err, tc.want, name)
		}
	}
	s, err := cose.NewSigner(p256, cose.ES256, "k", nil)
	require.NoError(t, err)
	out, err := s.Sign(nil)
	assert.Error(t, err)
	assert.Nil(t, out)
}
