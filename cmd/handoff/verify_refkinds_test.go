package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/keyset"
	"github.com/agentproto/handoff/ref"
)

// refVector is a file of scitt/testdata/vectors or learnlog/testdata/vectors.
type refVector struct {
	Ref         map[string]any `json:"ref"`
	Statement   string         `json:"statement"`
	TrustedKeys []struct {
		KID string         `json:"kid"`
		JWK map[string]any `json:"jwk"`
	} `json:"trusted_keys"`
	Outcome string `json:"outcome"`
}

func loadRefVector(t *testing.T, kind, name string) refVector {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", kind, "testdata", "vectors", name+".json"))
	require.NoError(t, err)
	var v refVector
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&v))
	return v
}

// contextRef is the vector's reference as the library takes it.
func (v refVector) contextRef(t *testing.T) ref.Ref {
	t.Helper()
	dig := v.Ref["dig"].(map[string]any)
	val, err := base64.RawURLEncoding.DecodeString(dig["val"].(string))
	require.NoError(t, err)
	ref := ref.Ref{Kind: v.Ref["kind"].(string), Dig: digest.Digest{Alg: dig["alg"].(string), Val: val}}
	ref.Loc, _ = v.Ref["loc"].(string)
	switch p := v.Ref["proof"].(type) {
	case string: // a receipt: bytes, written as base64url text in JSON
		ref.Proof, err = base64.RawURLEncoding.DecodeString(p)
		require.NoError(t, err)
	case nil:
	default:
		ref.Proof = p
	}
	return ref
}

// keyFile writes the vector's first trusted key as a public JWK, with the
// COSE kid as its kid when the vector has one.
func (v refVector) keyFile(t *testing.T, path string) string {
	t.Helper()
	jwk := v.TrustedKeys[0].JWK
	if v.TrustedKeys[0].KID != "" {
		jwk["kid"] = v.TrustedKeys[0].KID
	}
	b, err := json.Marshal(jwk)
	require.NoError(t, err)
	return writeFile(t, path, b)
}

// offerWithRef writes a Handoff from w.a to w.d carrying ref, signed now.
func offerWithRef(t *testing.T, w *world, name string, r ref.Ref, enc handoff.Encoding) string {
	t.Helper()
	signer, _, err := loadSigner(w.a.key, handoff.JWS)
	require.NoError(t, err)
	doc, err := os.ReadFile(w.trust)
	require.NoError(t, err)
	trust, err := keyset.ParseTrust(doc)
	require.NoError(t, err)
	a, err := handoff.NewAgent(handoff.Config{ID: handoff.AgentID(w.a.id), Signer: signer, Trust: trust})
	require.NoError(t, err)
	out, err := a.Offer(context.Background(), handoff.OfferParams{To: handoff.AgentID(w.d.id), Dialog: "d", Refs: []ref.Ref{r}})
	require.NoError(t, err)
	msg, err := out.Handoff.Encode(enc)
	require.NoError(t, err)
	return writeFile(t, w.path(name), msg)
}

// handoff verify checks "scitt-receipt" references given --scitt-key and
// the statement by --ref-object (HC-68, HC-11).
func TestVerifySCITTReceipt_HC68_HC11(t *testing.T) {
	w := newWorld(t)
	valid := loadRefVector(t, "scitt", "valid")
	tsKey := valid.keyFile(t, w.path("ts.jwk"))
	stmt, err := base64.RawURLEncoding.DecodeString(valid.Statement)
	require.NoError(t, err)
	stmtFile := writeFile(t, w.path("statement.cbor"), stmt)
	loc := valid.Ref["loc"].(string)
	base := []string{"--self", w.d.id, "--trust", w.trust, "--ref-object", loc + "=" + stmtFile}

	cases := []struct {
		vector, reason, outcome string
		code                    int
	}{
		{"valid", "", "verified", 0},
		{"wrong-digest", "ref-mismatch", "mismatch", 1},
		{"wrong-index", "unverifiable-ref", "unverifiable", 1},
		{"wrong-ts-key", "unverifiable-ref", "unverifiable", 1},
		{"truncated-receipt", "unverifiable-ref", "unverifiable", 1},
	}
	for _, c := range cases {
		for _, enc := range []handoff.Encoding{handoff.JSON, handoff.CBOR} {
			t.Run(c.vector, func(t *testing.T) {
				v := loadRefVector(t, "scitt", c.vector)
				require.Equal(t, c.outcome, v.Outcome)
				h := offerWithRef(t, w, c.vector+".handoff", v.contextRef(t), enc)
				m := verifyOut(t, c.code, nil, append(append([]string{}, base...), "--refs", "required", "--scitt-key", tsKey, h)...)
				assert.Equal(t, c.reason, m["reason"])
				ref := m["refs"].([]any)[0].(map[string]any)
				assert.Equal(t, "scitt-receipt", ref["kind"])
				assert.Equal(t, c.outcome, ref["outcome"])
			})
		}
	}

	h := offerWithRef(t, w, "valid.json", valid.contextRef(t), handoff.JSON)
	t.Run("the key flag alone makes the policy available", func(t *testing.T) {
		m := verifyOut(t, 0, nil, append(append([]string{}, base...), "--scitt-key", tsKey, h)...)
		assert.Equal(t, "verified", m["refs"].([]any)[0].(map[string]any)["outcome"])
	})
	t.Run("without --scitt-key the kind is unverifiable", func(t *testing.T) {
		m := verifyOut(t, 1, nil, append(append([]string{}, base...), "--refs", "required", h)...)
		assert.Equal(t, "unverifiable-ref", m["reason"])
	})
	t.Run("without the statement the reference is unverifiable", func(t *testing.T) {
		m := verifyOut(t, 1, nil, "--self", w.d.id, "--trust", w.trust, "--refs", "required", "--scitt-key", tsKey, h)
		assert.Equal(t, "unverifiable-ref", m["reason"])
	})
	t.Run("another transparency-service key is unverifiable", func(t *testing.T) {
		other := loadRefVector(t, "learnlog", "valid").keyFile(t, w.path("other.jwk"))
		m := verifyOut(t, 1, nil, append(append([]string{}, base...), "--refs", "required", "--scitt-key", other, h)...)
		assert.Equal(t, "unverifiable-ref", m["reason"])
	})
}

// handoff verify checks "learnlog-head" references given --learnlog-key
// (HC-69, HC-11).
func TestVerifyLearnlogHead_HC69_HC11(t *testing.T) {
	w := newWorld(t)
	producer := loadRefVector(t, "learnlog", "valid").keyFile(t, w.path("producer.jwk"))
	cases := []struct {
		vector, reason, outcome string
		code                    int
	}{
		{"valid", "", "verified", 0},
		{"wrong-digest", "ref-mismatch", "mismatch", 1},
		{"untrusted-key", "unverifiable-ref", "unverifiable", 1},
		{"non-thumbprint-kid", "unverifiable-ref", "unverifiable", 1},
	}
	for _, c := range cases {
		for _, enc := range []handoff.Encoding{handoff.JSON, handoff.CBOR} {
			t.Run(c.vector, func(t *testing.T) {
				v := loadRefVector(t, "learnlog", c.vector)
				require.Equal(t, c.outcome, v.Outcome)
				h := offerWithRef(t, w, c.vector+".handoff", v.contextRef(t), enc)
				m := verifyOut(t, c.code, nil, "--self", w.d.id, "--trust", w.trust, "--refs", "required", "--learnlog-key", producer, h)
				assert.Equal(t, c.reason, m["reason"])
				ref := m["refs"].([]any)[0].(map[string]any)
				assert.Equal(t, "learnlog-head", ref["kind"])
				assert.Equal(t, c.outcome, ref["outcome"])
			})
		}
	}
	h := offerWithRef(t, w, "valid.json", loadRefVector(t, "learnlog", "valid").contextRef(t), handoff.JSON)
	t.Run("without --learnlog-key the kind is unverifiable", func(t *testing.T) {
		m := verifyOut(t, 1, nil, "--self", w.d.id, "--trust", w.trust, "--refs", "required", h)
		assert.Equal(t, "unverifiable-ref", m["reason"])
	})
	t.Run("a JWK Set works as well", func(t *testing.T) {
		b, err := os.ReadFile(producer)
		require.NoError(t, err)
		set := writeFile(t, w.path("set.json"), append(append([]byte(`{"keys":[`), b...), "]}"...))
		m := verifyOut(t, 0, nil, "--self", w.d.id, "--trust", w.trust, "--refs", "required", "--learnlog-key", set, h)
		assert.Equal(t, "verified", m["refs"].([]any)[0].(map[string]any)["outcome"])
	})
}

// Bad key files are usage errors: nothing on stdout, exit 2.
func TestVerifyRefKeyFlagErrors(t *testing.T) {
	w := newWorld(t)
	h := offerWithRef(t, w, "h.json", loadRefVector(t, "learnlog", "valid").contextRef(t), handoff.JSON)
	badKid := writeFile(t, w.path("badkid.jwk"), []byte(`{"kty":"EC","crv":"P-256","kid":"not base64url!",`+
		`"x":"r1tjiH6cebNDl9V6riuiFWNERYRGrhaut6xZyasVgzs","y":"_py2JvbUbc_2AcRkG3lBABJAXmSm7hPIdcJ969Junn8"}`))
	hs := writeFile(t, w.path("hs.jwk"), []byte(`{"kty":"oct","k":"c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"}`))
	for name, args := range map[string][]string{
		"private key":     {"--learnlog-key", w.a.key},
		"missing file":    {"--scitt-key", w.path("absent.jwk")},
		"not JSON":        {"--scitt-key", h + "x"},
		"bad scitt kid":   {"--scitt-key", badKid},
		"symmetric key":   {"--learnlog-key", hs},
		"empty key set":   {"--learnlog-key", writeFile(t, w.path("empty.json"), []byte(`{"keys":[]}`))},
		"unsupported alg": {"--scitt-key", writeFile(t, w.path("rs.jwk"), []byte(`{"kty":"EC","crv":"P-256","alg":"RS256","x":"r1tjiH6cebNDl9V6riuiFWNERYRGrhaut6xZyasVgzs","y":"_py2JvbUbc_2AcRkG3lBABJAXmSm7hPIdcJ969Junn8"}`))},
	} {
		t.Run(name, func(t *testing.T) {
			r := cli(t, nil, append([]string{"verify", "--self", w.d.id, "--trust", w.trust}, append(args, h)...)...)
			mustCode(t, r, exitUsage)
			assert.Empty(t, r.stdout)
			assert.NotEmpty(t, r.stderr)
		})
	}
}
