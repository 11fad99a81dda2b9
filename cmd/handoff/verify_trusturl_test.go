package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// keyServers serves each agent's JWK Set of the draft's trust document at
// its own path, with max-age 300 and an ETag, counting GETs.
func keyServers(t *testing.T) (srv *httptest.Server, sets map[string]json.RawMessage, gets *atomic.Int64) {
	t.Helper()
	doc, err := os.ReadFile(draftTR)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(doc, &sets))
	gets = &atomic.Int64{}
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gets.Add(1)
		w.Header().Set("Cache-Control", "max-age=300")
		w.Header().Set("ETag", `"v1"`)
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		if r.URL.Path == "/trust.json" {
			w.Write(doc)
			return
		}
		set, ok := sets[strings.TrimPrefix(r.URL.Path, "/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(set)
	}))
	t.Cleanup(srv.Close)
	return srv, sets, gets
}

// verify --trust-url fetches each agent's JWK Set from its URL, and with
// --trust-cache a second run fetches nothing while the sets are fresh.
func TestVerifyTrustURL(t *testing.T) {
	srv, sets, gets := keyServers(t)
	var args []string
	for id := range sets {
		args = append(args, "--trust-url", id+"="+srv.URL+"/"+id)
	}
	cache := filepath.Join(t.TempDir(), "keys.cache")
	base := append(args, "--trust-cache", cache, "--self", draftSelf, "--now", draftNow, draftHO)
	m := verifyOut(t, 0, nil, base...)
	assert.Equal(t, "full", m["chain"])
	assert.Equal(t, int64(len(sets)), gets.Load(), "one fetch per agent")
	b, err := os.ReadFile(cache)
	require.NoError(t, err)
	assert.NotContains(t, string(b), `"d":`, "the cache holds public keys only")

	m = verifyOut(t, 0, nil, base...)
	assert.Equal(t, "full", m["chain"])
	assert.Equal(t, int64(len(sets)), gets.Load(), "fresh in the cache: nothing fetched")

	// Without the cache every run fetches again.
	verifyOut(t, 0, nil, append(args, "--self", draftSelf, "--now", draftNow, draftHO)...)
	assert.Equal(t, int64(2*len(sets)), gets.Load())

	// The whole document at one URL.
	verifyOut(t, 0, nil, "--trust-doc-url", srv.URL+"/trust.json", "--self", draftSelf, "--now", draftNow, draftHO)

	// An agent whose set cannot be fetched has no key: untrusted-key.
	var partial []string
	for id := range sets {
		partial = append(partial, "--trust-url", id+"="+srv.URL+"/missing")
	}
	m = verifyOut(t, 1, nil, append(partial, "--self", draftSelf, "--now", draftNow, draftHO)...)
	assert.Equal(t, "untrusted-key", m["reason"])
	assert.Contains(t, m["detail"], "no JWK Set fetched yet")
}

func TestVerifyTrustURLUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--self", draftSelf, draftHO},
		{"--self", draftSelf, "--trust-url", "nothing", draftHO},
		{"--self", draftSelf, "--trust-url", "A=http://keys.example/jwks", draftHO},
		{"--self", draftSelf, "--trust", draftTR, "--trust-cache", "x", draftHO},
	} {
		r := cli(t, nil, append([]string{"verify"}, args...)...)
		mustCode(t, r, exitUsage)
		assert.Empty(t, r.stdout, "%v", args)
	}
}
