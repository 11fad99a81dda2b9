package jws_test

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff/internal/ecsig"
	"github.com/agentproto/handoff/jws"
)

// fuzzPayload is an offer payload as the root package writes it.
const fuzzPayload = `{"v":1,"type":"offer","hop":"fzhop-jws-00000000001","dialog":"ctx-fuzz",` +
	`"iss":"spiffe://fuzz.example/agent/alpha","aud":"spiffe://b.example/agent/coder","iat":1793000000,"exp":1793000120}`

// fuzzKeys are fixed keys, one per algorithm, whose scalars or seeds are
// SHA-256 of a label, so that the committed corpus stays valid.
func fuzzKeys() map[string]crypto.Signer {
	scalar := func(label string) []byte { d := sha256.Sum256([]byte(label)); return d[:] }
	p256, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), scalar("handoff fuzz jws ES256"))
	if err != nil {
		panic(err)
	}
	p384, err := ecdsa.ParseRawPrivateKey(elliptic.P384(), append(scalar("handoff fuzz jws ES384"), make([]byte, 16)...))
	if err != nil {
		panic(err)
	}
	return map[string]crypto.Signer{
		jws.ES256: p256,
		jws.ES384: p384,
		jws.EdDSA: ed25519.NewKeyFromSeed(scalar("handoff fuzz jws EdDSA")),
	}
}

// fuzzTokens returns the seeds: a deterministic (RFC 6979) token per
// algorithm, the draft-00 example's two tokens, and their trusted keys.
func fuzzTokens(tb testing.TB) (map[string][]byte, []jws.Key) {
	tb.Helper()
	tokens := map[string][]byte{}
	var keys []jws.Key
	for alg, k := range fuzzKeys() {
		kid, err := jws.Thumbprint(k.Public())
		require.NoError(tb, err)
		tok, err := jws.Sign([]byte(fuzzPayload), k, alg, kid, nil)
		require.NoError(tb, err)
		tokens[alg] = tok
		keys = append(keys, jws.Key{Public: k.Public(), Alg: alg})
	}
	var ho struct {
		Offer string   `json:"offer"`
		Chain []string `json:"chain"`
	}
	require.NoError(tb, json.Unmarshal(fuzzReadDraft(tb, "handoff.json"), &ho))
	tokens["draft-offer"], tokens["draft-chain0"] = []byte(ho.Offer), []byte(ho.Chain[0])
	for _, name := range []string{"assistant.jwk", "planner.jwk"} {
		var k jose.JSONWebKey
		require.NoError(tb, json.Unmarshal(fuzzReadDraft(tb, name), &k))
		keys = append(keys, jws.Key{Public: k.Key, Alg: jws.ES256})
	}
	return tokens, keys
}

// fuzzReadDraft reads a file of the draft-00 worked example from the module's
// testdata.
func fuzzReadDraft(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "draft-00", name))
	require.NoError(tb, err)
	return b
}

// fuzzAlg is the algorithm of the seed token of that name.
func fuzzAlg(name string) string {
	if name == jws.ES384 || name == jws.EdDSA {
		return name
	}
	return jws.ES256
}

// twinToken replaces the ECDSA signature of token by its high-S twin.
func twinToken(token []byte, alg string) ([]byte, bool) {
	i := bytes.LastIndexByte(token, '.')
	sig, err := b64.DecodeString(string(token[i+1:]))
	if err != nil {
		return nil, false
	}
	tw, err := ecsig.Twin(alg, sig)
	if err != nil {
		return nil, false
	}
	return append(bytes.Clone(token[:i+1]), b64.EncodeToString(tw)...), true
}

var fuzzSentinels = []error{jws.ErrMalformed, jws.ErrTooLarge, jws.ErrType, jws.ErrCrit,
	jws.ErrEmbeddedKey, jws.ErrAlg, jws.ErrNoKey, jws.ErrSignature}

// FuzzOpen mutates valid tokens. Open never panics, in either profile; an
// error wraps one of the package's sentinels and comes with a nil payload
// and a zero header; the strict profile opens nothing the default does not;
// and a token that opens is one of the seeds, byte for byte, or the seed
// with its ECDSA signature replaced by the high-S twin (r, n-s), which
// verifies too (Wycheproof marks it valid; the root package treats it as
// equivocation, HC-53). So a one-octet change anywhere in a signed token
// never verifies, and no other octet string verifies for the same payload.
// UnsafePayload agrees with Open on the payload.
func FuzzOpen(f *testing.F) {
	tokens, keys := fuzzTokens(f)
	verifies := map[string]bool{}
	for name, tok := range tokens {
		f.Add(tok)
		verifies[string(tok)] = true
		if alg := fuzzAlg(name); alg != jws.EdDSA {
			tw, ok := twinToken(tok, alg)
			require.True(f, ok, name)
			verifies[string(tw)] = true
		}
	}
	f.Add([]byte("e30.e30.AAAA"))
	f.Add([]byte(""))
	lookup := func(jws.Header, []byte) ([]jws.Key, error) { return keys, nil }
	f.Fuzz(func(t *testing.T, token []byte) {
		// The strict profile only adds checks: whatever it opens, the
		// default profile opens the same way.
		strictPayload, strictHeader, strictErr := jws.OpenWith(token, lookup, jws.Options{MaxSize: 4096, Strict: true})
		payload, h, err := jws.Open(token, lookup, 4096)
		if strictErr == nil && (err != nil || !bytes.Equal(strictPayload, payload) || strictHeader != h) {
			t.Fatalf("strict opens %q, default gives %q, %v, %v", token, payload, h, err)
		}
		if strictErr != nil && (strictPayload != nil || strictHeader != (jws.Header{})) {
			t.Fatalf("strict error %v with payload %q, header %v", strictErr, strictPayload, strictHeader)
		}
		if err != nil {
			if payload != nil || h != (jws.Header{}) {
				t.Fatalf("error %v with payload %q, header %v", err, payload, h)
			}
			for _, s := range fuzzSentinels {
				if errors.Is(err, s) {
					return
				}
			}
			t.Fatalf("error wraps no sentinel: %v", err)
		}
		if !verifies[string(token)] {
			t.Fatalf("a token that was never signed opens: %q", token)
		}
		unsafe, err := jws.UnsafePayload(token, 4096)
		if err != nil || !bytes.Equal(unsafe, payload) {
			t.Fatalf("UnsafePayload = %q, %v; Open = %q", unsafe, err, payload)
		}
	})
}

// TestOpen_HC20_OneOctetChanges is FuzzOpen's property made exhaustive for
// small edits: every one-octet substitution, deletion and insertion at
// every position of each seed token fails to open. Substitutions try the
// neighbouring base64url characters (so the decoded octets change by one
// bit or stay the same with a stray low bit set) and a few other octets.
func TestOpen_HC20_OneOctetChanges(t *testing.T) {
	if testing.Short() {
		t.Skip("exhaustive")
	}
	tokens, keys := fuzzTokens(t)
	lookup := func(jws.Header, []byte) ([]jws.Key, error) { return keys, nil }
	names := make([]string, 0, len(tokens))
	for name := range tokens {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		tok := tokens[name]
		_, _, err := jws.Open(tok, lookup, 4096)
		require.NoError(t, err, name)
		tried := 0
		try := func(variant []byte, what string) {
			tried++
			if _, _, err := jws.Open(variant, lookup, 4096); err == nil {
				t.Fatalf("%s: %s opens: %q", name, what, variant)
			}
		}
		for i := range tok {
			for _, c := range []byte{tok[i] ^ 1, tok[i] ^ 2, tok[i] ^ 0x20, '.', '=', ' ', '\n', 0} {
				if c == tok[i] {
					continue
				}
				v := bytes.Clone(tok)
				v[i] = c
				try(v, fmt.Sprintf("octet %d set to %q", i, c))
			}
			try(append(bytes.Clone(tok[:i]), tok[i+1:]...), fmt.Sprintf("octet %d deleted", i))
			for _, c := range []byte{'A', '.', '\n'} {
				try(append(append(bytes.Clone(tok[:i]), c), tok[i:]...), fmt.Sprintf("%q inserted at %d", c, i))
			}
		}
		require.Greater(t, tried, 10*len(tok))
	}
}

// TestWriteFuzzCorpus writes the seeds of FuzzOpen as its committed corpus,
// only when HANDOFF_WRITE_FUZZ_CORPUS is set.
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("HANDOFF_WRITE_FUZZ_CORPUS") == "" {
		t.Skip("set HANDOFF_WRITE_FUZZ_CORPUS=1 to regenerate testdata/fuzz")
	}
	tokens, _ := fuzzTokens(t)
	dir := filepath.Join("testdata", "fuzz", "FuzzOpen")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for name, tok := range tokens {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", tok)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "seed-"+strings.ToLower(name)), []byte(body), 0o644))
	}
}
