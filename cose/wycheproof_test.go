package cose

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gocose "github.com/veraison/go-cose"
)

// TestWycheproof_VerifierAgreesWithGoCose runs every ECDSA P-256/SHA-256
// P1363 vector through the verifier Open hands to go-cose (which calls
// ecsig.Verify) and through go-cose's own ES256 verifier: both take the
// message itself and hash it, so the Wycheproof msg goes in unchanged. Both
// accept every "valid" vector and refuse every "invalid" one. The file has no
// "acceptable" vectors (see testdata/wycheproof/README.md).
func TestWycheproof_VerifierAgreesWithGoCose(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "testdata", "wycheproof", "ecdsa_secp256r1_sha256_p1363_test.json"))
	require.NoError(t, err)
	var f struct {
		TestGroups []struct {
			PublicKey struct {
				Uncompressed string `json:"uncompressed"`
			} `json:"publicKey"`
			Tests []struct {
				TcID   int    `json:"tcId"`
				Msg    string `json:"msg"`
				Sig    string `json:"sig"`
				Result string `json:"result"`
			} `json:"tests"`
		} `json:"testGroups"`
	}
	require.NoError(t, json.Unmarshal(b, &f))
	unhex := func(s string) []byte {
		b, err := hex.DecodeString(s)
		require.NoError(t, err)
		return b
	}
	count := map[string]int{}
	for _, g := range f.TestGroups {
		pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), unhex(g.PublicKey.Uncompressed))
		require.NoError(t, err)
		ours := verifier{pub: pub, alg: ES256, id: gocose.AlgorithmES256}
		theirs, err := gocose.NewVerifier(gocose.AlgorithmES256, pub)
		require.NoError(t, err)
		for _, tc := range g.Tests {
			count[tc.Result]++
			msg, sig := unhex(tc.Msg), unhex(tc.Sig)
			errOurs, errTheirs := ours.Verify(msg, sig), theirs.Verify(msg, sig)
			switch tc.Result {
			case "valid":
				assert.NoError(t, errOurs, "tcId %d", tc.TcID)
				assert.NoError(t, errTheirs, "tcId %d", tc.TcID)
			case "invalid":
				assert.Error(t, errOurs, "tcId %d", tc.TcID)
				assert.Error(t, errTheirs, "tcId %d", tc.TcID)
			default:
				t.Errorf("tcId %d: unexpected result %q", tc.TcID, tc.Result)
			}
		}
	}
	assert.Equal(t, map[string]int{"valid": 173, "invalid": 89}, count)
}
