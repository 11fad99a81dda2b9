package agentcard_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/agentcard"
	"github.com/agentproto/handoff/keyset"
)

// vectorDir holds the card signature vectors (testdata/agentcard/README.md).
var vectorDir = filepath.Join("..", "testdata", "agentcard")

type vector struct {
	Description string          `json:"description"`
	Agent       string          `json:"agent"`
	Trust       json.RawMessage `json:"trust"`
	Options     struct {
		AllowDroppedEmpty bool `json:"allow_dropped_empty"`
		MaxSize           int  `json:"max_size"`
	} `json:"options"`
	CardB64  string `json:"card_b64"`
	CardText string `json:"card_text"`
	Expected struct {
		Verified   bool   `json:"verified"`
		Error      string `json:"error"`
		Payload    string `json:"payload"`
		Signatures []struct {
			Index        int    `json:"index"`
			Verified     bool   `json:"verified"`
			Key          string `json:"key"`
			DroppedEmpty bool   `json:"dropped_empty"`
			Error        string `json:"error"`
		} `json:"signatures"`
	} `json:"expected"`
}

type vectorFile struct {
	name string
	v    vector
}

func loadVectors(t testing.TB) []vectorFile {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(vectorDir, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var out []vectorFile
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var v vector
		require.NoError(t, json.Unmarshal(b, &v), f)
		out = append(out, vectorFile{name: filepath.Base(f), v: v})
	}
	return out
}

// cardClass is the vectors' name for the outcome of Verify.
func cardClass(err error) string {
	var ue *agentcard.UnverifiedError
	switch {
	case err == nil:
		return ""
	case errors.Is(err, handoff.ErrTooLarge):
		return "too-large"
	case errors.Is(err, agentcard.ErrUnsigned):
		return "unsigned"
	case errors.As(err, &ue):
		return "unverified"
	case errors.Is(err, handoff.ErrMalformed):
		return "malformed"
	}
	return "other: " + err.Error()
}

// sigClass is the vectors' name for why one signature did not verify.
func sigClass(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, handoff.ErrMalformed):
		return "malformed"
	case errors.Is(err, handoff.ErrUntrustedKey):
		return "untrusted-key"
	case errors.Is(err, handoff.ErrSignature):
		return "bad-signature"
	}
	return "other: " + err.Error()
}

// Every vector: Verify reaches the outcome it states, card and signatures.
func TestVectors(t *testing.T) {
	for _, f := range loadVectors(t) {
		t.Run(f.name, func(t *testing.T) {
			v := f.v
			card, err := base64.RawURLEncoding.Strict().DecodeString(v.CardB64)
			require.NoError(t, err)
			if v.CardText != "" {
				require.Equal(t, v.CardText, string(card), "card_text is card_b64 as text")
			}
			trust, err := keyset.ParseTrust(v.Trust)
			require.NoError(t, err)
			got, err := agentcard.Verify(card, trust, handoff.AgentID(v.Agent),
				agentcard.VerifyOptions{MaxSize: v.Options.MaxSize, AllowDroppedEmpty: v.Options.AllowDroppedEmpty})
			assert.Equal(t, v.Expected.Error, cardClass(err), "%v", err)
			require.Equal(t, v.Expected.Verified, got != nil, "a result only when the card verified: %v", err)
			var sigs []agentcard.Signature
			var ue *agentcard.UnverifiedError
			switch {
			case got != nil:
				sigs = got.Signatures()
				assert.Equal(t, v.Expected.Payload, string(got.Payload()))
				assert.Equal(t, handoff.AgentID(v.Agent), got.Agent())
			case errors.As(err, &ue):
				sigs = ue.Signatures
				assert.Equal(t, handoff.AgentID(v.Agent), ue.Agent)
			}
			require.Len(t, sigs, len(v.Expected.Signatures))
			for i, want := range v.Expected.Signatures {
				s := sigs[i]
				assert.Equal(t, want.Index, s.Index)
				assert.Equal(t, want.Verified, s.Err == nil, "signature %d: %v", i, s.Err)
				assert.Equal(t, want.Error, sigClass(s.Err), "signature %d: %v", i, s.Err)
				assert.Equal(t, want.Key, s.Key.KID, "signature %d", i)
				assert.Equal(t, want.DroppedEmpty, s.DroppedEmpty, "signature %d", i)
			}
		})
	}
}

// The README describes every vector file.
func TestVectorsListedInREADME(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(vectorDir, "README.md"))
	require.NoError(t, err)
	for _, f := range loadVectors(t) {
		assert.Contains(t, string(readme), strings.TrimSuffix(f.name, ".json"), "README.md does not list %s", f.name)
	}
}

// TestVectorsRegenerate runs the generator (testdata/agentcard/gen, a main
// package under testdata and so outside ./...) in its -check mode: it
// regenerates every file twice in memory and fails unless both runs are
// byte-identical to each other and to the committed files.
func TestVectorsRegenerate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the generator")
	}
	goTool, err := exec.LookPath("go") // go test puts its own toolchain first on PATH
	require.NoError(t, err, "the go command is needed to run the generator")
	cmd := exec.Command(goTool, "run", "./testdata/agentcard/gen", "-check")
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go run ./testdata/agentcard/gen -check:\n%s", out)
}
