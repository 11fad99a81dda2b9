package ecsig

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/asn1"
	"encoding/hex"
	"encoding/json"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSign_LowSAlways(t *testing.T) {
	for _, tc := range []struct {
		alg   string
		curve elliptic.Curve
	}{{ES256, elliptic.P256()}, {ES384, elliptic.P384()}} {
		t.Run(tc.alg, func(t *testing.T) {
			key, err := ecdsa.GenerateKey(tc.curve, rand.Reader)
			require.NoError(t, err)
			msg := []byte("handoff")
			for range 200 {
				sig, err := Sign(rand.Reader, key, tc.alg, msg)
				require.NoError(t, err)
				require.True(t, IsLowS(tc.alg, sig), "signature is not low-S")
				require.NoError(t, Verify(key.Public(), tc.alg, msg, sig))
			}
		})
	}
}

// highSSigner is a crypto.Signer that always answers with the high-S form,
// as some other signers do, so the normalisation in Sign is exercised on
// every call and not only on the half of signatures that happen to be high.
type highSSigner struct{ *ecdsa.PrivateKey }

func (h highSSigner) Sign(r io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	der, err := h.PrivateKey.Sign(r, digest, opts)
	if err != nil {
		return nil, err
	}
	var rs struct{ R, S *big.Int }
	if _, err := asn1.Unmarshal(der, &rs); err != nil {
		return nil, err
	}
	n := h.Curve.Params().N
	if rs.S.Cmp(new(big.Int).Rsh(n, 1)) <= 0 {
		rs.S.Sub(n, rs.S)
	}
	return asn1.Marshal(rs)
}

func TestSign_NormalisesHighSFromCryptoSigner(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	for range 20 {
		sig, err := Sign(rand.Reader, highSSigner{key}, ES256, []byte("m"))
		require.NoError(t, err)
		assert.True(t, IsLowS(ES256, sig))
		assert.NoError(t, Verify(&key.PublicKey, ES256, []byte("m"), sig))
	}
}

func TestSign_DeterministicWithNilRand(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	a, err := Sign(nil, key, ES256, []byte("m"))
	require.NoError(t, err)
	b, err := Sign(nil, key, ES256, []byte("m"))
	require.NoError(t, err)
	assert.Equal(t, a, b, "RFC 6979 signatures of one message differ")
	assert.True(t, IsLowS(ES256, a))
}

func TestSign_Ed25519PassThrough(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	sig, err := Sign(nil, priv, EdDSA, []byte("m"))
	require.NoError(t, err)
	assert.Equal(t, ed25519.Sign(priv, []byte("m")), sig)
	assert.NoError(t, Verify(pub, EdDSA, []byte("m"), sig))
	assert.ErrorIs(t, Verify(pub, EdDSA, []byte("n"), sig), ErrVerification)
	assert.False(t, IsLowS(EdDSA, sig))
	_, err = Twin(EdDSA, sig)
	assert.ErrorIs(t, err, ErrAlgorithm)
}

// HC-22: a key is used with exactly the algorithm it is pinned to.
func TestCheckKey_HC22_KeyAlgMismatch(t *testing.T) {
	p256, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	require.NoError(t, err)
	edPub, edPriv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)

	assert.NoError(t, CheckKey(&p256.PublicKey, ES256))
	assert.NoError(t, CheckKey(&p384.PublicKey, ES384))
	assert.NoError(t, CheckKey(edPub, EdDSA))
	sig, err := Sign(rand.Reader, p256, ES256, []byte("m"))
	require.NoError(t, err)
	require.NoError(t, VerifyChecked(&p256.PublicKey, ES256, []byte("m"), sig))

	for name, tc := range map[string]struct {
		pub crypto.PublicKey
		alg string
	}{
		"P-384 as ES256":    {&p384.PublicKey, ES256},
		"P-256 as ES384":    {&p256.PublicKey, ES384},
		"Ed25519 as ES256":  {edPub, ES256},
		"P-256 as EdDSA":    {&p256.PublicKey, EdDSA},
		"short Ed25519":     {edPub[:31], EdDSA},
		"nil ECDSA":         {(*ecdsa.PublicKey)(nil), ES256},
		"private as public": {p256, ES256},
		"no coordinates":    {&ecdsa.PublicKey{Curve: elliptic.P256()}, ES256},
		"no Y":              {&ecdsa.PublicKey{Curve: elliptic.P256(), X: p256.X}, ES256},
		"off the curve":     {&ecdsa.PublicKey{Curve: elliptic.P256(), X: p256.X, Y: new(big.Int).Add(p256.Y, big.NewInt(1))}, ES256},
	} {
		assert.ErrorIs(t, CheckKey(tc.pub, tc.alg), ErrKey, name)
		// A key CheckKey refuses never verifies (VerifyChecked's contract):
		// its error is a key error or a failed verification, never a panic.
		assert.Error(t, VerifyChecked(tc.pub, tc.alg, []byte("m"), sig), name)
	}
	assert.ErrorIs(t, CheckKey(&p256.PublicKey, "ES512"), ErrAlgorithm)
	assert.ErrorIs(t, CheckKey(&p256.PublicKey, "HS256"), ErrAlgorithm)

	_, err = Sign(nil, edPriv, ES256, []byte("m"))
	assert.ErrorIs(t, err, ErrKey)
	_, err = Sign(nil, p256, ES384, []byte("m"))
	assert.ErrorIs(t, err, ErrKey)
	_, err = Sign(nil, nil, ES256, []byte("m"))
	assert.ErrorIs(t, err, ErrKey)
}

// Other signers emit high-S signatures; ECDSA accepts them and so do we.
func TestVerify_HighSTwinVerifies(t *testing.T) {
	for _, tc := range []struct {
		alg   string
		curve elliptic.Curve
	}{{ES256, elliptic.P256()}, {ES384, elliptic.P384()}} {
		key, err := ecdsa.GenerateKey(tc.curve, rand.Reader)
		require.NoError(t, err)
		sig, err := Sign(rand.Reader, key, tc.alg, []byte("m"))
		require.NoError(t, err)
		twin, err := Twin(tc.alg, sig)
		require.NoError(t, err)
		assert.False(t, IsLowS(tc.alg, twin))
		assert.NotEqual(t, sig, twin)
		assert.NoError(t, Verify(&key.PublicKey, tc.alg, []byte("m"), twin), tc.alg)
		back, err := Twin(tc.alg, twin)
		require.NoError(t, err)
		assert.Equal(t, sig, back)
	}
}

func TestVerify_RawFormOnly(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	msg := []byte("m")
	sig, err := Sign(rand.Reader, key, ES256, msg)
	require.NoError(t, err)
	r := new(big.Int).SetBytes(sig[:32])
	s := new(big.Int).SetBytes(sig[32:])
	der, err := asn1.Marshal(struct{ R, S *big.Int }{r, s})
	require.NoError(t, err)

	n := elliptic.P256().Params().N
	withR := func(v *big.Int) []byte {
		out := append([]byte(nil), sig...)
		v.FillBytes(out[:32])
		return out
	}
	withS := func(v *big.Int) []byte {
		out := append([]byte(nil), sig...)
		v.FillBytes(out[32:])
		return out
	}
	for name, bad := range map[string][]byte{
		"DER":          der,
		"r=0":          withR(big.NewInt(0)),
		"s=0":          withS(big.NewInt(0)),
		"r=n":          withR(n),
		"r=2^256-1":    withR(new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))),
		"s=n":          withS(n),
		"leading zero": append([]byte{0}, sig...),
		"truncated":    sig[:63],
		"empty":        nil,
	} {
		assert.ErrorIs(t, Verify(&key.PublicKey, ES256, msg, bad), ErrVerification, name)
	}
	assert.ErrorIs(t, Verify(&key.PublicKey, ES256, []byte("other"), sig), ErrVerification, "other message")
	assert.NoError(t, Verify(&key.PublicKey, ES256, msg, sig))
}

type wycheproofFile struct {
	NumberOfTests int `json:"numberOfTests"`
	TestGroups    []struct {
		PublicKey struct {
			Curve        string `json:"curve"`
			Uncompressed string `json:"uncompressed"`
		} `json:"publicKey"`
		SHA   string `json:"sha"`
		Tests []struct {
			TcID    int      `json:"tcId"`
			Comment string   `json:"comment"`
			Flags   []string `json:"flags"`
			Msg     string   `json:"msg"`
			Sig     string   `json:"sig"`
			Result  string   `json:"result"`
		} `json:"tests"`
	} `json:"testGroups"`
}

func loadWycheproof(t *testing.T, name string) wycheproofFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "wycheproof", name))
	require.NoError(t, err)
	var f wycheproofFile
	require.NoError(t, json.Unmarshal(b, &f))
	return f
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	require.NoError(t, err)
	return b
}

// TestVerify_WycheproofP1363 runs every ECDSA P-256/SHA-256 vector in IEEE
// P1363 (raw r||s) form through Verify, the function jws.Open and cose.Open
// hand to go-jose and go-cose as their verifier. Every "valid" vector
// verifies and every "invalid" one fails. The file at the pinned commit has
// no "acceptable" vectors; any that appear are reported with their outcome
// and must be listed in testdata/wycheproof/README.md.
func TestVerify_WycheproofP1363(t *testing.T) {
	f := loadWycheproof(t, "ecdsa_secp256r1_sha256_p1363_test.json")
	counts := map[string]int{}
	for _, g := range f.TestGroups {
		require.Equal(t, "secp256r1", g.PublicKey.Curve)
		require.Equal(t, "SHA-256", g.SHA)
		pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), unhex(t, g.PublicKey.Uncompressed))
		require.NoError(t, err)
		for _, tc := range g.Tests {
			counts[tc.Result]++
			err := Verify(pub, ES256, unhex(t, tc.Msg), unhex(t, tc.Sig))
			switch tc.Result {
			case "valid":
				assert.NoError(t, err, "tcId %d (%s)", tc.TcID, tc.Comment)
			case "invalid":
				assert.Error(t, err, "tcId %d (%s)", tc.TcID, tc.Comment)
			case "acceptable":
				t.Logf("acceptable tcId %d (%s, %v): verifies=%v", tc.TcID, tc.Comment, tc.Flags, err == nil)
			default:
				t.Fatalf("tcId %d: unknown result %q", tc.TcID, tc.Result)
			}
		}
	}
	assert.Equal(t, f.NumberOfTests, counts["valid"]+counts["invalid"]+counts["acceptable"])
	assert.Equal(t, 173, counts["valid"])
	assert.Equal(t, 89, counts["invalid"])
	assert.Equal(t, 0, counts["acceptable"])
}

// TestVerify_WycheproofDERRefused runs the same curve's ASN.1 DER vectors:
// no DER signature is accepted as a raw signature, valid or not, and each
// "valid" one, once converted to r||s, verifies.
func TestVerify_WycheproofDERRefused(t *testing.T) {
	f := loadWycheproof(t, "ecdsa_secp256r1_sha256_test.json")
	counts := map[string]int{}
	for _, g := range f.TestGroups {
		pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), unhex(t, g.PublicKey.Uncompressed))
		require.NoError(t, err)
		for _, tc := range g.Tests {
			counts[tc.Result]++
			msg, sig := unhex(t, tc.Msg), unhex(t, tc.Sig)
			if len(sig) != 64 {
				assert.Error(t, Verify(pub, ES256, msg, sig), "tcId %d (%s)", tc.TcID, tc.Comment)
			}
			if tc.Result != "valid" {
				continue
			}
			var rs struct{ R, S *big.Int }
			rest, err := asn1.Unmarshal(sig, &rs)
			require.NoError(t, err, "tcId %d", tc.TcID)
			require.Empty(t, rest)
			raw := make([]byte, 64)
			rs.R.FillBytes(raw[:32])
			rs.S.FillBytes(raw[32:])
			assert.NoError(t, Verify(pub, ES256, msg, raw), "tcId %d (%s)", tc.TcID, tc.Comment)
		}
	}
	assert.Equal(t, f.NumberOfTests, counts["valid"]+counts["invalid"]+counts["acceptable"])
	assert.Equal(t, 174, counts["valid"])
	assert.Equal(t, 310, counts["invalid"])
}

// Tally counts the keys pinned to an alg and those of them CheckKey
// accepts, and keeps the last refusal.
func TestTally(t *testing.T) {
	p256, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	type key struct {
		pub crypto.PublicKey
		alg string
	}
	of := func(k key) (crypto.PublicKey, string) { return k.pub, k.alg }
	bad := &ecdsa.PublicKey{Curve: elliptic.P256()}
	keys := []key{{&p256.PublicKey, ES256}, {bad, ES256}, {&p256.PublicKey, ES384}}
	pinned, usable, refusal := Tally(keys, ES256, of)
	assert.Equal(t, 2, pinned)
	assert.Equal(t, 1, usable)
	assert.ErrorIs(t, refusal, ErrKey)
	pinned, usable, refusal = Tally(keys, EdDSA, of)
	assert.Zero(t, pinned)
	assert.Zero(t, usable)
	assert.NoError(t, refusal)
	_, usable, refusal = Tally(keys, ES384, of)
	assert.Zero(t, usable, "a P-256 key pinned to ES384 cannot verify")
	assert.ErrorIs(t, refusal, ErrKey)
}
