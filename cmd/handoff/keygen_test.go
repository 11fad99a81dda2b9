package main

import (
	"crypto"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKeygen(t *testing.T) {
	for _, alg := range []string{"ES256", "ES384", "EdDSA"} {
		t.Run(alg, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "k.jwk")
			r := cli(t, nil, "keygen", "--alg", alg, "--out", out)
			mustCode(t, r, 0)

			pub := oneObject(t, r.stdout)
			assert.Equal(t, alg, pub["alg"])
			assert.NotContains(t, pub, "d", "stdout holds the public key only")
			var pj jose.JSONWebKey
			require.NoError(t, pj.UnmarshalJSON([]byte(r.stdout)))
			require.True(t, pj.IsPublic())
			tp, err := pj.Thumbprint(crypto.SHA256)
			require.NoError(t, err)
			assert.Equal(t, base64.RawURLEncoding.EncodeToString(tp), pub["kid"], "kid is the RFC 7638 thumbprint")

			st, err := os.Stat(out)
			require.NoError(t, err)
			if runtime.GOOS != "windows" {
				assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
			}
			var priv jose.JSONWebKey
			require.NoError(t, priv.UnmarshalJSON([]byte(mustRead(t, out))))
			assert.False(t, priv.IsPublic(), "the file holds the private key")
			assert.Equal(t, alg, priv.Algorithm)
			assert.Equal(t, pub["kid"], priv.KeyID)

			// The printed key is accepted in a trust file.
			tr := writeFile(t, filepath.Join(t.TempDir(), "trust.json"), []byte(`{"x":{"keys":[`+r.stdout+`]}}`))
			v := cli(t, nil, "verify", "--self", "x", "--trust", tr, draftHO)
			mustCode(t, v, 1)
		})
	}
}

func TestKeygenRefusesOverwrite(t *testing.T) {
	out := filepath.Join(t.TempDir(), "k.jwk")
	mustCode(t, cli(t, nil, "keygen", "--out", out), 0)
	before := mustRead(t, out)

	r := cli(t, nil, "keygen", "--out", out)
	mustCode(t, r, 2)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, "--force")
	assert.Equal(t, before, mustRead(t, out), "the existing key is kept")

	r = cli(t, nil, "keygen", "--out", out, "--force")
	mustCode(t, r, 0)
	assert.NotEqual(t, before, mustRead(t, out))
	st, err := os.Stat(out)
	require.NoError(t, err)
	if runtime.GOOS != "windows" {
		assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	}
}

func TestKeygenUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for name, args := range map[string][]string{
		"no out":        {"keygen"},
		"bad alg":       {"keygen", "--alg", "RS256", "--out", filepath.Join(dir, "a.jwk")},
		"argument":      {"keygen", "--out", filepath.Join(dir, "b.jwk"), "extra"},
		"missing dir":   {"keygen", "--out", filepath.Join(dir, "no", "such", "c.jwk")},
		"dir and force": {"keygen", "--out", dir, "--force"},
	} {
		t.Run(name, func(t *testing.T) {
			r := cli(t, nil, args...)
			mustCode(t, r, 2)
			assert.Empty(t, r.stdout)
			assert.NotEmpty(t, r.stderr)
		})
	}
}

func TestOfferKeyErrors(t *testing.T) {
	dir := t.TempDir()
	pubOnly := writeFile(t, filepath.Join(dir, "pub.jwk"), []byte(mustRead(t, draftDir+"/planner.jwk")))
	notJWK := writeFile(t, filepath.Join(dir, "not.jwk"), []byte("hello"))
	key := filepath.Join(dir, "k.jwk")
	mustCode(t, cli(t, nil, "keygen", "--out", key), 0)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(mustRead(t, key)), &m))
	m["alg"] = "EdDSA"
	b, err := json.Marshal(m)
	require.NoError(t, err)
	wrongAlg := writeFile(t, filepath.Join(dir, "wrong-alg.jwk"), b)

	base := []string{"offer", "--iss", "a", "--aud", "b", "--dialog", "d"}
	for name, args := range map[string][]string{
		"no key":         append([]string{}, base...),
		"public key":     append(append([]string{}, base...), "--key", pubOnly),
		"not a JWK":      append(append([]string{}, base...), "--key", notJWK),
		"alg mismatch":   append(append([]string{}, base...), "--key", wrongAlg),
		"missing key":    append(append([]string{}, base...), "--key", filepath.Join(dir, "none.jwk")),
		"no iss":         {"offer", "--key", key, "--aud", "b", "--dialog", "d"},
		"no aud":         {"offer", "--key", key, "--iss", "a", "--dialog", "d"},
		"no dialog":      {"offer", "--key", key, "--iss", "a", "--aud", "b"},
		"bad format":     append(append([]string{}, base...), "--key", key, "--format", "jwt"),
		"bad encoding":   append(append([]string{}, base...), "--key", key, "--encoding", "xml"),
		"zero ttl":       append(append([]string{}, base...), "--key", key, "--ttl", "0"),
		"bad hop":        append(append([]string{}, base...), "--key", key, "--hop", "short"),
		"obo-iss alone":  append(append([]string{}, base...), "--key", key, "--obo-iss", "https://idp"),
		"omit w/o from":  append(append([]string{}, base...), "--key", key, "--omit-chain"),
		"missing ref":    append(append([]string{}, base...), "--key", key, "--ref", filepath.Join(dir, "none")),
		"missing grant":  append(append([]string{}, base...), "--key", key, "--grant-credential-file", filepath.Join(dir, "none")),
		"missing from":   append(append([]string{}, base...), "--key", key, "--from", filepath.Join(dir, "none")),
		"garbage from":   append(append([]string{}, base...), "--key", key, "--from", notJWK),
		"stray argument": append(append([]string{}, base...), "--key", key, "extra"),
	} {
		t.Run(name, func(t *testing.T) {
			r := cli(t, nil, args...)
			mustCode(t, r, 2)
			assert.Empty(t, r.stdout)
			assert.NotEmpty(t, r.stderr)
		})
	}
}

func TestOfferGrantAndCBOR(t *testing.T) {
	w := newWorld(t)
	cred := draftDir + "/credential.txt"
	h := offerFile(t, w.path("h.cbor"), "--key", w.a.key, "--iss", w.a.id, "--aud", w.b.id, "--dialog", "d",
		"--grant-credential-file", cred, "--format", "cose", "--encoding", "cbor", "--now", "1800000000", "--ttl", "2m")
	raw, err := os.ReadFile(h)
	require.NoError(t, err)
	require.NotEqual(t, byte('{'), raw[0], "a CBOR Handoff object")

	insp := cli(t, nil, "inspect", "--now", "1800000001", h)
	mustCode(t, insp, 0)
	// HC-03: grant is the digest of the credential's exact octets.
	assert.Contains(t, insp.stdout, "grant   sha-256:SKLjsfET5xtZoO5hzIiZFigz2JoYZLmW8Cg8GuYh4o4")
	assert.Contains(t, insp.stdout, "Handoff object (cbor)")
	assert.Contains(t, insp.stdout, "format  cose")
	assert.Contains(t, insp.stdout, "lifetime 120s")
	assert.NotContains(t, string(raw), "example access token", "the credential itself is never in the offer")

	m := verifyOut(t, 0, nil, "--self", w.b.id, "--trust", w.trust, "--now", "1800000001", h)
	assert.Equal(t, "full", m["chain"])
}
