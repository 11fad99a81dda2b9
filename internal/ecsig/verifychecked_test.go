package ecsig

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// VerifyChecked decides as Verify does for a checked key, and refuses a key
// of the wrong type or curve with ErrKey instead of panicking, should a
// caller skip CheckKey.
func TestVerifyChecked(t *testing.T) {
	p256, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	require.NoError(t, err)
	edPub, edKey, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	msg := []byte("payload")
	for _, tc := range []struct {
		alg string
		pub any
	}{
		{ES256, &p256.PublicKey},
		{ES384, &p384.PublicKey},
		{EdDSA, edPub},
	} {
		var sig []byte
		switch tc.alg {
		case EdDSA:
			sig, err = Sign(nil, edKey, tc.alg, msg)
		case ES256:
			sig, err = Sign(rand.Reader, p256, tc.alg, msg)
		default:
			sig, err = Sign(rand.Reader, p384, tc.alg, msg)
		}
		require.NoError(t, err)
		assert.NoError(t, VerifyChecked(tc.pub, tc.alg, msg, sig), tc.alg)
		assert.ErrorIs(t, VerifyChecked(tc.pub, tc.alg, []byte("other"), sig), ErrVerification, tc.alg)
		assert.Equal(t, Verify(tc.pub, tc.alg, msg, sig), VerifyChecked(tc.pub, tc.alg, msg, sig), tc.alg)
	}
	sig, err := Sign(rand.Reader, p256, ES256, msg)
	require.NoError(t, err)
	for name, pub := range map[string]any{
		"nil":              nil,
		"nil ECDSA":        (*ecdsa.PublicKey)(nil),
		"P-384 for ES256":  &p384.PublicKey,
		"Ed25519 as ECDSA": edPub,
	} {
		assert.ErrorIs(t, VerifyChecked(pub, ES256, msg, sig), ErrKey, name)
	}
	assert.ErrorIs(t, VerifyChecked(&p256.PublicKey, EdDSA, msg, sig), ErrKey)
	assert.ErrorIs(t, VerifyChecked(ed25519.PublicKey(edPub[:31]), EdDSA, msg, sig), ErrKey)
	assert.ErrorIs(t, VerifyChecked(&p256.PublicKey, "HS256", msg, sig), ErrAlgorithm)
}

// SignChecked signs as Sign does for a checked key: low-S, verifying.
func TestSignChecked(t *testing.T) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	msg := []byte("payload")
	for range 8 {
		sig, err := SignChecked(rand.Reader, k, ES256, msg)
		require.NoError(t, err)
		assert.True(t, IsLowS(ES256, sig))
		assert.NoError(t, Verify(&k.PublicKey, ES256, msg, sig))
	}
	det, err := SignChecked(nil, k, ES256, msg)
	require.NoError(t, err)
	want, err := Sign(nil, k, ES256, msg)
	require.NoError(t, err)
	assert.Equal(t, want, det, "deterministic signatures agree with Sign")
	_, err = SignChecked(rand.Reader, nil, ES256, msg)
	assert.ErrorIs(t, err, ErrKey)
	_, err = SignChecked(rand.Reader, k, "HS256", msg)
	assert.ErrorIs(t, err, ErrAlgorithm)
}
