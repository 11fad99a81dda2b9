package main

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const cardVectors = "../../testdata/agentcard"

const cardAgent = "spiffe://b.example/agent/coder"

const plainCard = `{
  "name": "Go coder",
  "description": "Fixes bugs.",
  "version": "1.0.0",
  "supportedInterfaces": [{"url": "https://b.example/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
  "skills": [{"id": "fix", "name": "Fix", "description": "Fixes a bug.", "tags": ["go"]}]
}`

type cardVector struct {
	Agent   string          `json:"agent"`
	Trust   json.RawMessage `json:"trust"`
	Options struct {
		AllowDroppedEmpty bool `json:"allow_dropped_empty"`
		MaxSize           int  `json:"max_size"`
	} `json:"options"`
	CardB64  string `json:"card_b64"`
	Expected struct {
		Verified   bool   `json:"verified"`
		Error      string `json:"error"`
		Signatures []struct {
			Verified     bool   `json:"verified"`
			Key          string `json:"key"`
			DroppedEmpty bool   `json:"dropped_empty"`
			Error        string `json:"error"`
		} `json:"signatures"`
	} `json:"expected"`
}

// cardVerifyOut runs card verify, checks the exit status and that stdout
// is one JSON object, and returns it decoded.
func cardVerifyOut(t *testing.T, code int, stdin []byte, args ...string) cardOutput {
	t.Helper()
	r := cli(t, stdin, append([]string{"card", "verify"}, args...)...)
	mustCode(t, r, code)
	oneObject(t, r.stdout)
	var out cardOutput
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
	return out
}

// Every vector of testdata/agentcard through card verify: the exit status,
// and the JSON answer's card and signature outcomes.
func TestCardVerifyVectors(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(cardVectors, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	dir := t.TempDir()
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			var v cardVector
			require.NoError(t, json.Unmarshal(b, &v))
			card, err := base64.RawURLEncoding.DecodeString(v.CardB64)
			require.NoError(t, err)
			trust := filepath.Join(dir, filepath.Base(f)+".trust")
			require.NoError(t, os.WriteFile(trust, v.Trust, 0o600))
			args := []string{"--trust", trust, "--agent", v.Agent}
			if v.Options.AllowDroppedEmpty {
				args = append(args, "--allow-dropped-empty")
			}
			if v.Options.MaxSize > 0 {
				args = append(args, "--max-size", strconv.Itoa(v.Options.MaxSize))
			}
			code := exitNo
			if v.Expected.Verified {
				code = exitOK
			}
			out := cardVerifyOut(t, code, card, append(args, "-")...)
			assert.Equal(t, v.Expected.Verified, out.Verified)
			assert.Equal(t, v.Expected.Error, out.Error)
			assert.Equal(t, v.Agent, out.Agent)
			assert.Equal(t, v.Expected.Error == "", out.Detail == "", out.Detail)
			require.Len(t, out.Signatures, len(v.Expected.Signatures))
			for i, want := range v.Expected.Signatures {
				got := out.Signatures[i]
				assert.Equal(t, i, got.Index)
				assert.Equal(t, want.Verified, got.Verified, got.Detail)
				assert.Equal(t, want.Error, got.Error, got.Detail)
				assert.Equal(t, want.Key, got.Key)
				assert.Equal(t, want.DroppedEmpty, got.DroppedEmpty)
			}
		})
	}
}

// keygen, card sign, card verify: the round trip a user makes, and the
// refusals around it.
func TestCardSignVerify(t *testing.T) {
	dir := t.TempDir()
	key, pub := filepath.Join(dir, "coder.jwk"), filepath.Join(dir, "coder.pub.jwk")
	r := cli(t, nil, "keygen", "--out", key)
	mustCode(t, r, 0)
	require.NoError(t, os.WriteFile(pub, []byte(r.stdout), 0o600))
	var jwk map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &jwk))
	trust := filepath.Join(dir, "trust.json")
	require.NoError(t, os.WriteFile(trust, []byte(`{"`+cardAgent+`":{"keys":[`+r.stdout+`]}}`), 0o600))
	cardFile := filepath.Join(dir, "card.json")
	require.NoError(t, os.WriteFile(cardFile, []byte(plainCard), 0o600))

	r = cli(t, nil, "card", "sign", "--key", key, cardFile)
	mustCode(t, r, 0)
	assert.Empty(t, r.stderr)
	signed := []byte(r.stdout)
	assert.False(t, strings.HasSuffix(r.stdout, "\n"), "the signed card is written exactly")
	out := cardVerifyOut(t, 0, signed, "--trust", trust, "--agent", cardAgent, "-")
	assert.True(t, out.Verified)
	assert.Equal(t, jwk["kid"], out.Signatures[0].Key)
	assert.Equal(t, jwk["kid"], out.Signatures[0].KID)
	assert.Equal(t, "ES256", out.Signatures[0].Alg)

	// --out, stdin, --kid and --jku.
	outFile := filepath.Join(dir, "signed.json")
	r = cli(t, []byte(plainCard), "card", "sign", "--key", key, "--kid", "coder-1", "--jku", "https://b.example/jwks.json", "--out", outFile, "-")
	mustCode(t, r, 0)
	assert.Empty(t, r.stdout)
	out = cardVerifyOut(t, 0, nil, "--trust", trust, "--agent", cardAgent, outFile)
	assert.Equal(t, "coder-1", out.Signatures[0].KID)
	assert.Equal(t, jwk["kid"], out.Signatures[0].Key)

	// Altered after signing; verified for another agent.
	altered := strings.Replace(string(signed), "Fixes bugs.", "Deletes files.", 1)
	out = cardVerifyOut(t, 1, []byte(altered), "--trust", trust, "--agent", cardAgent, "-")
	assert.Equal(t, "unverified", out.Error)
	assert.Equal(t, "bad-signature", out.Signatures[0].Error)
	out = cardVerifyOut(t, 1, signed, "--trust", trust, "--agent", "spiffe://c.example/agent/other", "-")
	assert.Equal(t, "untrusted-key", out.Signatures[0].Error)
	out = cardVerifyOut(t, 1, []byte(plainCard), "--trust", trust, "--agent", cardAgent, "-")
	assert.Equal(t, "unsigned", out.Error)
	assert.Empty(t, out.Signatures)
	out = cardVerifyOut(t, 1, signed, "--trust", trust, "--agent", cardAgent, "--max-size", "100", "-")
	assert.Equal(t, "too-large", out.Error)

	// --drop-empty makes a card with empty members verify under both readings.
	withEmpty := strings.Replace(plainCard, `"version": "1.0.0",`, `"version": "1.0.0", "iconUrl": "", "securitySchemes": {},`, 1)
	r = cli(t, []byte(withEmpty), "card", "sign", "--key", key, "--drop-empty", "-")
	mustCode(t, r, 0)
	assert.NotContains(t, r.stdout, "iconUrl")
	cardVerifyOut(t, 0, []byte(r.stdout), "--trust", trust, "--agent", cardAgent, "-")

	// Usage and I/O errors: exit 2, nothing on stdout.
	for _, args := range [][]string{
		{"card", "sign", cardFile},
		{"card", "sign", "--key", key},
		{"card", "sign", "--key", key, cardFile, cardFile},
		{"card", "sign", "--key", pub, cardFile},
		{"card", "sign", "--key", filepath.Join(dir, "missing.jwk"), cardFile},
		{"card", "sign", "--key", key, filepath.Join(dir, "missing.json")},
		{"card", "verify", "--trust", trust, cardFile},
		{"card", "verify", "--agent", cardAgent, cardFile},
		{"card", "verify", "--agent", cardAgent, "--trust", trust},
		{"card", "verify", "--agent", cardAgent, "--trust", trust, "--max-size", "0", cardFile},
		{"card", "verify", "--agent", cardAgent, "--trust", filepath.Join(dir, "missing.json"), cardFile},
		{"card", "verify", "--agent", cardAgent, "--trust", cardFile, cardFile},
		{"card", "verify", "--agent", cardAgent, "--trust", trust, "--trust-cache", "x", cardFile},
		{"card", "frobnicate"},
		{"card"},
	} {
		r := cli(t, nil, args...)
		mustCode(t, r, 2)
		assert.Empty(t, r.stdout, "%v", args)
		assert.NotEmpty(t, r.stderr, "%v", args)
	}
	r = cli(t, []byte(`[1]`), "card", "sign", "--key", key, "-")
	mustCode(t, r, 2)
	assert.Contains(t, r.stderr, "malformed")
}

// card verify takes its keys from where the agent publishes them, as
// verify does (--trust-url).
func TestCardVerifyTrustURL(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "coder.jwk")
	r := cli(t, nil, "keygen", "--out", key)
	mustCode(t, r, 0)
	set := `{"keys":[` + r.stdout + `]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(set)) }))
	t.Cleanup(srv.Close)
	r = cli(t, []byte(plainCard), "card", "sign", "--key", key, "-")
	mustCode(t, r, 0)
	out := cardVerifyOut(t, 0, []byte(r.stdout), "--trust-url", cardAgent+"="+srv.URL+"/jwks.json", "--agent", cardAgent, "-")
	assert.True(t, out.Verified)
}
