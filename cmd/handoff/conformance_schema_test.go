package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestVectorSchema validates every vector file against the suite's JSON
// schema (vector.schema.json, JSON Schema 2020-12), as a project that
// vendors the suite can, and checks the rules the schema cannot state: a
// vector's level is "open" exactly when it says why, and this project's
// own answer is one of its acceptable outcomes.
func TestVectorSchema(t *testing.T) {
	c := jsonschema.NewCompiler()
	schema, err := c.Compile(filepath.Join(vectorsDir, "vector.schema.json"))
	require.NoError(t, err)
	files, err := vectorFiles(vectorsDir, nil)
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		require.NoError(t, err, f)
		assert.NoError(t, schema.Validate(doc), f)
	}

	// The schema refuses what it should: a vector without acceptable
	// outcomes, an unknown level, a refusal without reasons.
	raw, err := os.ReadFile(files[0])
	require.NoError(t, err)
	for name, edit := range map[string]func(m map[string]any){
		"no acceptable":        func(m map[string]any) { delete(m, "acceptable") },
		"unknown level":        func(m map[string]any) { m["level"] = "RECOMMENDED" },
		"refusal, no reason":   func(m map[string]any) { m["acceptable"] = []any{map[string]any{"verdict": "refused"}} },
		"unknown feature":      func(m map[string]any) { m["requires"] = []any{"alg:RS256"} },
		"open without why":     func(m map[string]any) { m["level"] = "open" },
		"why on a MUST vector": func(m map[string]any) { m["why_open"] = "because" },
	} {
		var m map[string]any
		require.NoError(t, json.Unmarshal(raw, &m))
		edit(m)
		b, err := json.Marshal(m)
		require.NoError(t, err)
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		require.NoError(t, err)
		assert.Error(t, schema.Validate(doc), name)
	}
}

// TestVectorManifest: manifest.json lists the SHA-256 of every file of the
// suite, and VERSION is the manifest's version.
func TestVectorManifest(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(vectorsDir, "manifest.json"))
	require.NoError(t, err)
	var m struct {
		Suite   string            `json:"suite"`
		Version string            `json:"version"`
		SHA256  map[string]string `json:"sha256"`
	}
	require.NoError(t, json.Unmarshal(raw, &m))
	assert.Equal(t, strings.TrimSpace(readFile(t, filepath.Join(vectorsDir, "VERSION"))), m.Version)
	entries, err := os.ReadDir(vectorsDir)
	require.NoError(t, err)
	n := 0
	for _, e := range entries {
		if e.IsDir() || e.Name() == "manifest.json" {
			continue
		}
		n++
		b, err := os.ReadFile(filepath.Join(vectorsDir, e.Name()))
		require.NoError(t, err)
		sum := sha256.Sum256(b)
		assert.Equal(t, hex.EncodeToString(sum[:]), m.SHA256[e.Name()], "manifest.json: %s", e.Name())
	}
	assert.Len(t, m.SHA256, n, "manifest.json lists a file that is not in the suite")
}
