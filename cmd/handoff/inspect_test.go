package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff/digest"
)

func TestInspectDraft00(t *testing.T) {
	r := cli(t, nil, "inspect", "--now", draftNow, draftHO)
	mustCode(t, r, 0)
	out := r.stdout
	assert.True(t, strings.HasPrefix(out, "UNVERIFIED"), "marked at the top:\n%s", out)
	assert.Contains(t, out, "intact")
	assert.NotContains(t, out, "BROKEN")
	for _, want := range []string{
		"chain[0]  spiffe://u.example/agent/assistant -> spiffe://a.example/agent/planner",
		"└── offer  spiffe://a.example/agent/planner -> spiffe://b.example/agent/coder",
		"hop     Vb3kQx9ZtR2mN8pL4wYc1A",
		"hop     q3Zl0v8bVfQmJm2c4bq1Ww",
		"iat     2026-10-26T07:33:20Z (3s ago)",
		"exp     2026-10-26T07:35:20Z (in 1m57s; lifetime 120s)",
		"iat     2026-10-26T07:33:10Z (13s ago)",
		"format  jws, 942 octets, alg ES256, kid lWGFAC8Cpc9fneqXZ3b4aCjtbb7vBoT8RbvJxX61-kQ",
		"digest  " + draftOffer,
		"digest  " + draftChain,
		"prev    " + draftChain + " = digest of chain[0]: intact",
		"link    iss is the aud of chain[0]: intact",
		"prev    none: the start of the chain",
		"obo     u-8f2a (iss https://idp.u.example)",
		"ref     [0] digest sha-256:V_WPM8F9ztg6WxBxj1ZIGnzRbM1Xyp5GVdpEYmwbvuQ loc https://a.example/ctx/9",
	} {
		assert.Contains(t, out, want)
	}
	// Later, the offers show as expired.
	r = cli(t, nil, "inspect", "--now", draftLate, draftHO)
	mustCode(t, r, 0)
	assert.Contains(t, r.stdout, "(1m20s ago, expired; lifetime 120s)")
}

func TestInspectBrokenChain(t *testing.T) {
	w := newWorld(t)
	h1 := offerFile(t, w.path("h1.json"), "--key", w.a.key, "--iss", w.a.id, "--aud", w.b.id, "--dialog", "d")
	h2 := offerFile(t, w.path("h2.json"), "--key", w.b.key, "--iss", w.b.id, "--aud", w.c.id, "--from", h1)
	unrelated := offerFile(t, w.path("x.json"), "--key", w.d.key, "--iss", w.d.id, "--aud", w.c.id, "--dialog", "d")

	r := cli(t, nil, "inspect", h2)
	mustCode(t, r, 0)
	assert.Contains(t, r.stdout, "intact")
	assert.NotContains(t, r.stdout, "BROKEN")

	// The chain element swapped for an unrelated offer.
	doc, err := json.Marshal(map[string]any{"offer": offerElement(t, h2), "chain": []string{offerElement(t, unrelated)}})
	require.NoError(t, err)
	broken := writeFile(t, w.path("broken.json"), doc)
	r = cli(t, nil, "inspect", broken)
	mustCode(t, r, 0)
	assert.True(t, strings.HasPrefix(r.stdout, "UNVERIFIED"))
	assert.Contains(t, r.stdout, "prev    BROKEN")
	assert.Contains(t, r.stdout, "link    BROKEN")
	assert.Contains(t, r.stdout, "a receiver rejects this chain")
	// verify agrees.
	m := verifyOut(t, 1, nil, "--self", w.c.id, "--trust", w.trust, broken)
	assert.Equal(t, "broken-chain", m["reason"])

	// One undecodable element.
	doc, err = json.Marshal(map[string]any{"offer": offerElement(t, h2), "chain": []string{"e30.e30.e30"}})
	require.NoError(t, err)
	bad := writeFile(t, w.path("bad.json"), doc)
	r = cli(t, nil, "inspect", bad)
	mustCode(t, r, 1)
	assert.Contains(t, r.stdout, "UNDECODABLE")
}

func TestInspectSingleElements(t *testing.T) {
	w := newWorld(t)
	h := offerFile(t, w.path("h.json"), "--key", w.a.key, "--iss", w.a.id, "--aud", w.b.id, "--dialog", "d", "--task", "t-9")
	st := statusFile(t, w.path("st.jws"), "--key", w.b.key, "--offer", h, "--state", "rejected", "--reason", "policy")

	r := cli(t, nil, "inspect", st)
	mustCode(t, r, 0)
	assert.True(t, strings.HasPrefix(r.stdout, "UNVERIFIED"))
	assert.Contains(t, r.stdout, "status rejected  "+w.b.id+" -> "+w.a.id)
	assert.Contains(t, r.stdout, "reason  policy")

	// A bare offer element, with a trailing newline, on stdin.
	r = cli(t, []byte(offerElement(t, h)+"\n"), "inspect", "-")
	mustCode(t, r, 0)
	assert.Contains(t, r.stdout, "offer  "+w.a.id+" -> "+w.b.id)
	assert.Contains(t, r.stdout, "task    t-9")
	assert.Contains(t, r.stdout, "prev    none: the start of a chain")

	// Control characters from an element never reach the terminal raw.
	evil := offerFile(t, w.path("evil.json"), "--key", w.a.key, "--iss", w.a.id, "--aud", w.b.id, "--dialog", "d\x1b[2J")
	r = cli(t, nil, "inspect", evil)
	mustCode(t, r, 0)
	assert.NotContains(t, r.stdout, "\x1b")
	assert.Contains(t, r.stdout, `"d\x1b[2J"`)
}

func TestInspectErrors(t *testing.T) {
	dir := t.TempDir()
	draft, err := os.ReadFile(draftHO)
	require.NoError(t, err)
	for name, data := range map[string][]byte{
		"garbage": []byte("garbage"), "empty": {}, "truncated": draft[:100],
	} {
		t.Run(name, func(t *testing.T) {
			f := writeFile(t, filepath.Join(dir, name), data)
			r := cli(t, nil, "inspect", f)
			mustCode(t, r, 1)
			assert.True(t, strings.HasPrefix(r.stdout, "UNVERIFIED"))
		})
	}
	for name, args := range map[string][]string{
		"missing":   {"inspect", filepath.Join(dir, "none")},
		"no file":   {"inspect"},
		"two files": {"inspect", draftHO, draftHO},
		"bad now":   {"inspect", "--now", "x", draftHO},
	} {
		t.Run(name, func(t *testing.T) {
			r := cli(t, nil, args...)
			mustCode(t, r, 2)
			assert.Empty(t, r.stdout)
		})
	}
}

func TestDigestDraft00(t *testing.T) {
	r := cli(t, nil, "digest", draftHO)
	mustCode(t, r, 0)
	assert.Equal(t, "chain[0]   "+draftChain+"\noffer      "+draftOffer+"\n", r.stdout)

	// One element on its own, on stdin.
	r = cli(t, []byte(offerElement(t, draftHO)), "digest", "-")
	mustCode(t, r, 0)
	assert.Equal(t, draftOffer+"\n", r.stdout)

	// --raw: the digest of a file's octets, as grant and refs use it.
	r = cli(t, nil, "digest", "--raw", draftDir+"/credential.txt")
	mustCode(t, r, 0)
	assert.Equal(t, "SKLjsfET5xtZoO5hzIiZFigz2JoYZLmW8Cg8GuYh4o4\n", r.stdout)
	r = cli(t, nil, "digest", "--raw", draftDir+"/ref-object.json")
	mustCode(t, r, 0)
	assert.Equal(t, "V_WPM8F9ztg6WxBxj1ZIGnzRbM1Xyp5GVdpEYmwbvuQ\n", r.stdout)
}

// A COSE element on its own is taken exactly as it is, whatever the length
// of its tag's head (RFC 8949 allows 0xd8 0x12 for 0xd2): never trimmed,
// even when its last octet is white space, and its digest is over all its
// octets. (Such an element then fails its signature check, as its octets
// are not a COSE_Sign1 alone.)
func TestDigestCOSEElementAsIs(t *testing.T) {
	w := newWorld(t)
	h := offerFile(t, w.path("h.json"), "--key", w.a.key, "--iss", w.a.id, "--aud", w.b.id, "--dialog", "d",
		"--format", "cose")
	b64 := offerElement(t, h)
	elem, err := base64.RawURLEncoding.DecodeString(b64)
	require.NoError(t, err)
	require.Equal(t, byte(0xd2), elem[0])
	long := append([]byte{0xd8, 0x12}, elem[1:]...)
	for name, octets := range map[string][]byte{
		"short tag head":                  elem,
		"long tag head":                   long,
		"a trailing octet of white space": append(bytes.Clone(long), '\n'), // kept: the digest covers it
	} {
		r := cli(t, octets, "digest", "-")
		mustCode(t, r, 0)
		assert.Equal(t, digest.SHA256(octets).B64()+"\n", r.stdout, name)
	}
}

func TestDigestErrors(t *testing.T) {
	dir := t.TempDir()
	garbage := writeFile(t, filepath.Join(dir, "garbage"), []byte("garbage"))
	r := cli(t, nil, "digest", garbage)
	mustCode(t, r, 1)
	assert.Empty(t, r.stdout)
	assert.NotEmpty(t, r.stderr)
	empty := writeFile(t, filepath.Join(dir, "empty"), nil)
	mustCode(t, cli(t, nil, "digest", empty), 1)
	for _, args := range [][]string{{"digest"}, {"digest", filepath.Join(dir, "none")}, {"digest", draftHO, draftHO}} {
		r := cli(t, nil, args...)
		mustCode(t, r, 2)
		assert.Empty(t, r.stdout)
	}
}
