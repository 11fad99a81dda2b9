package main

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentproto/handoff/replay/boltstore"
	"github.com/stretchr/testify/require"
)

func TestVerifyDraft00Accepted(t *testing.T) {
	m := verifyOut(t, 0, nil, "--self", draftSelf, "--trust", draftTR, "--now", draftNow, "--dialog", "ctx-7c1e", draftHO)
	assert.Equal(t, true, m["accepted"])
	assert.Equal(t, false, m["retransmission"])
	assert.Equal(t, "", m["reason"])
	assert.Equal(t, "", m["detail"])
	assert.Equal(t, "", m["equivocation"])
	assert.Equal(t, draftOffer, m["offer_digest"])
	assert.Equal(t, "", m["first_digest"])
	assert.Equal(t, true, m["offer_verified"])
	assert.Equal(t, "full", m["chain"])
	assert.Equal(t, "spiffe://a.example/agent/planner", m["iss"])
	assert.Equal(t, draftSelf, m["aud"])
	assert.Equal(t, "q3Zl0v8bVfQmJm2c4bq1Ww", m["hop"])
	assert.Equal(t, "ctx-7c1e", m["dialog"])
	assert.Equal(t, "task-42", m["task"])
	assert.Equal(t, "1793000000", m["iat"].(interface{ String() string }).String())
	assert.Equal(t, "1793000120", m["exp"].(interface{ String() string }).String())
	assert.Equal(t, "1793000003", m["now"].(interface{ String() string }).String())
	assert.Equal(t, []any{map[string]any{
		"kind": "digest", "alg": "sha-256", "dig": "V_WPM8F9ztg6WxBxj1ZIGnzRbM1Xyp5GVdpEYmwbvuQ",
		"loc": "https://a.example/ctx/9", "outcome": "not checked",
	}}, m["refs"])
	assert.Equal(t, []any{map[string]any{
		"digest": draftChain, "iss": "spiffe://u.example/agent/assistant", "aud": "spiffe://a.example/agent/planner",
		"hop": "Vb3kQx9ZtR2mN8pL4wYc1A", "verified": true,
	}}, m["links"])
	assert.Equal(t, []string{"pass", "pass", "pass", "pass", "pass", "pass", "skipped"}, checkResults(t, m))
}

func TestVerifyDraft00Stale(t *testing.T) {
	m := verifyOut(t, 1, nil, "--self", draftSelf, "--trust", draftTR, "--now", draftLate, "--dialog", "ctx-7c1e", draftHO)
	assert.Equal(t, false, m["accepted"])
	assert.Equal(t, false, m["retransmission"])
	assert.Equal(t, "stale", m["reason"])
	assert.Equal(t, "", m["chain"], "step 6 did not run")
	assert.Equal(t, draftOffer, m["offer_digest"])
	assert.Equal(t, true, m["offer_verified"])
	assert.Equal(t, []any{}, m["links"])
	assert.Equal(t, []string{"pass", "pass", "fail", "not-run", "not-run", "not-run", "not-run"}, checkResults(t, m))
}

func TestVerifyDraft00Rejections(t *testing.T) {
	base := []string{"--trust", draftTR, "--now", draftNow}
	tests := []struct {
		name   string
		args   []string
		reason string
		chain  string
		checks []string
	}{
		{"wrong audience", []string{"--self", "spiffe://b.example/agent/other", draftHO}, "wrong-audience", "",
			[]string{"pass", "fail", "not-run", "not-run", "not-run", "not-run", "not-run"}},
		{"other dialog", []string{"--self", draftSelf, "--dialog", "ctx-other", draftHO}, "policy", "",
			[]string{"pass", "pass", "pass", "pass", "fail", "not-run", "not-run"}},
		{"chain at its limit", []string{"--self", draftSelf, "--max-chain", "1", "--dialog", "ctx-7c1e", draftHO}, "", "full",
			[]string{"pass", "pass", "pass", "pass", "pass", "pass", "skipped"}},
		{"lifetime over the maximum", []string{"--self", draftSelf, "--max-lifetime", "60", draftHO}, "stale", "",
			[]string{"pass", "pass", "fail", "not-run", "not-run", "not-run", "not-run"}},
		{"reference required but not supplied", []string{"--self", draftSelf, "--refs", "required", draftHO}, "unverifiable-ref", "full",
			[]string{"pass", "pass", "pass", "pass", "skipped", "pass", "fail"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code := 1
			if tc.reason == "" {
				code = 0
			}
			m := verifyOut(t, code, nil, append(append([]string{}, base...), tc.args...)...)
			assert.Equal(t, tc.reason, m["reason"])
			assert.Equal(t, tc.chain, m["chain"])
			assert.Equal(t, tc.checks, checkResults(t, m))
		})
	}
}

func TestVerifyDraft00References(t *testing.T) {
	obj := "https://a.example/ctx/9=" + draftDir + "/ref-object.json"
	m := verifyOut(t, 0, nil, "--self", draftSelf, "--trust", draftTR, "--now", draftNow, "--ref-object", obj, draftHO)
	assert.Equal(t, "verified", m["refs"].([]any)[0].(map[string]any)["outcome"])
	assert.Equal(t, "pass", checkResults(t, m)[6])

	wrong := "https://a.example/ctx/9=" + draftDir + "/credential.txt"
	m = verifyOut(t, 1, nil, "--self", draftSelf, "--trust", draftTR, "--now", draftNow, "--ref-object", wrong, draftHO)
	assert.Equal(t, "ref-mismatch", m["reason"])
	assert.Equal(t, "mismatch", m["refs"].([]any)[0].(map[string]any)["outcome"])
}

func TestVerifyDraft00Untrusted(t *testing.T) {
	dir := t.TempDir()
	draft, err := os.ReadFile(draftTR)
	require.NoError(t, err)
	// Only the planner is trusted: the assistant's element cannot be
	// verified.
	plannerOnly := strings.Replace(string(draft), `"spiffe://u.example/agent/assistant"`, `"spiffe://u.example/agent/somebody-else"`, 1)
	tr := writeFile(t, filepath.Join(dir, "planner-only.json"), []byte(plannerOnly))
	m := verifyOut(t, 0, nil, "--self", draftSelf, "--trust", tr, "--now", draftNow, draftHO)
	assert.Equal(t, "unverifiable", m["chain"])
	assert.Equal(t, false, m["links"].([]any)[0].(map[string]any)["verified"])
	m = verifyOut(t, 1, nil, "--self", draftSelf, "--trust", tr, "--now", draftNow, "--require-chain", draftHO)
	assert.Equal(t, "policy", m["reason"])
	assert.Equal(t, "unverifiable", m["chain"])
	assert.Equal(t, "fail", checkResults(t, m)[5])

	// Nobody trusted for the planner: the offer itself.
	nobody := strings.Replace(string(draft), `"spiffe://a.example/agent/planner"`, `"spiffe://a.example/agent/nobody"`, 1)
	tr = writeFile(t, filepath.Join(dir, "no-planner.json"), []byte(nobody))
	m = verifyOut(t, 1, nil, "--self", draftSelf, "--trust", tr, "--now", draftNow, draftHO)
	assert.Equal(t, "untrusted-key", m["reason"])
	assert.Equal(t, false, m["offer_verified"])
	assert.Equal(t, "spiffe://a.example/agent/planner", m["iss"], "shown, marked unverified")
	assert.Equal(t, "fail", checkResults(t, m)[0])
}

func TestVerifyTamperedSignature(t *testing.T) {
	data, err := os.ReadFile(draftHO)
	require.NoError(t, err)
	// Change one character of the offer's signature.
	i := strings.Index(string(data), "aHq9TQ3_SI")
	require.Positive(t, i)
	bad := []byte(string(data[:i]) + "b" + string(data[i+1:]))
	f := writeFile(t, filepath.Join(t.TempDir(), "bad.json"), bad)
	m := verifyOut(t, 1, nil, "--self", draftSelf, "--trust", draftTR, "--now", draftNow, f)
	assert.Equal(t, "bad-signature", m["reason"])
	assert.Equal(t, false, m["offer_verified"])
	assert.Equal(t, []string{"fail", "not-run", "not-run", "not-run", "not-run", "not-run", "not-run"}, checkResults(t, m))

	// The same in a chain element: the offer verifies, the chain does not.
	j := strings.Index(string(data), "3BHyncw224")
	require.Positive(t, j)
	bad = []byte(string(data[:j]) + "4" + string(data[j+1:]))
	f = writeFile(t, filepath.Join(t.TempDir(), "bad-chain.json"), bad)
	m = verifyOut(t, 1, nil, "--self", draftSelf, "--trust", draftTR, "--now", draftNow, f)
	assert.Equal(t, "bad-signature", m["reason"])
	assert.Equal(t, true, m["offer_verified"])
	assert.Equal(t, "", m["chain"])
	assert.Equal(t, "fail", checkResults(t, m)[5])
}

func TestKeygenOfferVerifyAccepted(t *testing.T) {
	w := newWorld(t)
	ctx := writeFile(t, w.path("issue.json"), []byte(`{"issue":9}`))
	h := offerFile(t, w.path("h.json"), "--key", w.a.key, "--iss", w.a.id, "--aud", w.b.id,
		"--dialog", "d-1", "--task", "t-1", "--ref", ctx+"=https://a.example/ctx/9",
		"--obo-sub", "u-1", "--obo-iss", "https://idp.example")
	m := verifyOut(t, 0, nil, "--self", w.b.id, "--trust", w.trust, "--dialog", "d-1", h)
	assert.Equal(t, w.a.id, m["iss"])
	assert.Equal(t, w.b.id, m["aud"])
	assert.Equal(t, "d-1", m["dialog"])
	assert.Equal(t, "t-1", m["task"])
	assert.Equal(t, "full", m["chain"], "a first hop starts its own chain")
	assert.Len(t, m["hop"], 22)

	// The reference is checked against the file it was made from.
	m = verifyOut(t, 0, nil, "--self", w.b.id, "--trust", w.trust, "--refs", "required",
		"--ref-object", "https://a.example/ctx/9="+ctx, h)
	assert.Equal(t, "verified", m["refs"].([]any)[0].(map[string]any)["outcome"])

	// stdin, and flags after the file name.
	data, err := os.ReadFile(h)
	require.NoError(t, err)
	verifyOut(t, 0, data, "-", "--self", w.b.id, "--trust", w.trust)

	// Not for this receiver.
	m = verifyOut(t, 1, nil, "--self", w.c.id, "--trust", w.trust, h)
	assert.Equal(t, "wrong-audience", m["reason"])
}

func TestVerifyThreeHopChain(t *testing.T) {
	w := newWorld(t)
	h1 := offerFile(t, w.path("h1.json"), "--key", w.a.key, "--iss", w.a.id, "--aud", w.b.id, "--dialog", "d-3", "--task", "t")
	// The middle hop in COSE and CBOR: chains may mix forms.
	h2 := offerFile(t, w.path("h2.cbor"), "--key", w.b.key, "--iss", w.b.id, "--aud", w.c.id, "--from", h1,
		"--format", "cose", "--encoding", "cbor")
	h3 := offerFile(t, w.path("h3.json"), "--key", w.c.key, "--iss", w.c.id, "--aud", w.d.id, "--from", h2)

	m := verifyOut(t, 0, nil, "--self", w.d.id, "--trust", w.trust, "--dialog", "d-3", "--require-chain", h3)
	assert.Equal(t, "full", m["chain"])
	assert.Equal(t, "d-3", m["dialog"], "the dialog follows --from")
	links := m["links"].([]any)
	require.Len(t, links, 2)
	for i, want := range [][2]string{{w.a.id, w.b.id}, {w.b.id, w.c.id}} {
		l := links[i].(map[string]any)
		assert.Equal(t, want[0], l["iss"])
		assert.Equal(t, want[1], l["aud"])
		assert.Equal(t, true, l["verified"])
	}
	// The chain's links are the offers given with --from.
	dg := cli(t, nil, "digest", h2)
	mustCode(t, dg, 0)
	assert.Contains(t, dg.stdout, links[1].(map[string]any)["digest"].(string))

	// The middle hop verifies at its own receiver, CBOR on stdin.
	data, err := os.ReadFile(h2)
	require.NoError(t, err)
	m = verifyOut(t, 0, data, "--self", w.c.id, "--trust", w.trust, "--require-chain", "-")
	assert.Equal(t, "full", m["chain"])

	// Without the chain (prev kept), a receiver that requires it refuses.
	h3b := offerFile(t, w.path("h3b.json"), "--key", w.c.key, "--iss", w.c.id, "--aud", w.d.id, "--from", h2, "--omit-chain")
	m = verifyOut(t, 0, nil, "--self", w.d.id, "--trust", w.trust, h3b)
	assert.Equal(t, "absent", m["chain"])
	m = verifyOut(t, 1, nil, "--self", w.d.id, "--trust", w.trust, "--require-chain", h3b)
	assert.Equal(t, "policy", m["reason"])
	assert.Equal(t, "absent", m["chain"])

	// A chain longer than the receiver's limit.
	m = verifyOut(t, 1, nil, "--self", w.d.id, "--trust", w.trust, "--max-chain", "1", h3)
	assert.Equal(t, "too-deep", m["reason"])

	// --from also takes a single signed offer: a chain of one element.
	single := writeFile(t, w.path("h1-offer.jws"), []byte(offerElement(t, h1)))
	h2b := offerFile(t, w.path("h2b.json"), "--key", w.b.key, "--iss", w.b.id, "--aud", w.c.id, "--from", single)
	m = verifyOut(t, 0, nil, "--self", w.c.id, "--trust", w.trust, "--require-chain", h2b)
	assert.Equal(t, "full", m["chain"])
	assert.Len(t, m["links"], 1)

	// Passing on an offer addressed to someone else is refused.
	r := cli(t, nil, "offer", "--key", w.c.key, "--iss", w.c.id, "--aud", w.d.id, "--from", h1)
	mustCode(t, r, 2)
	assert.Empty(t, r.stdout)
}

// --structure-first: a chain whose first element's signature was altered
// (which breaks the next link too) is refused as bad-signature in the
// draft's order and as broken-chain in the profile, which checks the links
// before any element's signature.
func TestVerifyStructureFirst(t *testing.T) {
	w := newWorld(t)
	h1 := offerFile(t, w.path("h1.json"), "--key", w.a.key, "--iss", w.a.id, "--aud", w.b.id, "--dialog", "d")
	h2 := offerFile(t, w.path("h2.json"), "--key", w.b.key, "--iss", w.b.id, "--aud", w.c.id, "--from", h1)
	h3 := offerFile(t, w.path("h3.json"), "--key", w.c.key, "--iss", w.c.id, "--aud", w.d.id, "--from", h2)
	raw, err := os.ReadFile(h3)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(raw, &doc))
	first := doc["chain"].([]any)[0].(string)
	flip := map[byte]byte{'A': 'B'}[first[len(first)-3]]
	if flip == 0 {
		flip = 'A'
	}
	doc["chain"].([]any)[0] = first[:len(first)-3] + string(flip) + first[len(first)-2:]
	raw, err = json.Marshal(doc)
	require.NoError(t, err)
	tampered := writeFile(t, w.path("h3-tampered.json"), raw)

	m := verifyOut(t, 1, nil, "--self", w.d.id, "--trust", w.trust, tampered)
	assert.Equal(t, "bad-signature", m["reason"])
	m = verifyOut(t, 1, nil, "--self", w.d.id, "--trust", w.trust, "--structure-first", tampered)
	assert.Equal(t, "broken-chain", m["reason"])
	m = verifyOut(t, 0, nil, "--self", w.d.id, "--trust", w.trust, "--structure-first", "--require-chain", h3)
	assert.Equal(t, "full", m["chain"])
}

func TestVerifyCycle(t *testing.T) {
	w := newWorld(t)
	h1 := offerFile(t, w.path("h1.json"), "--key", w.a.key, "--iss", w.a.id, "--aud", w.b.id, "--dialog", "d")
	h2 := offerFile(t, w.path("h2.json"), "--key", w.b.key, "--iss", w.b.id, "--aud", w.a.id, "--from", h1)
	m := verifyOut(t, 1, nil, "--self", w.a.id, "--trust", w.trust, h2)
	assert.Equal(t, "cycle", m["reason"])
}

func TestVerifyReplayAcrossInvocations(t *testing.T) {
	w := newWorld(t)
	h := offerFile(t, w.path("h.json"), "--key", w.a.key, "--iss", w.a.id, "--aud", w.b.id, "--dialog", "d")
	db := w.path("seen.db")
	args := []string{"--self", w.b.id, "--trust", w.trust, "--replay-db", db, h}

	first := verifyOut(t, 0, nil, args...)
	assert.Equal(t, false, first["retransmission"])
	_, err := os.Stat(db)
	require.NoError(t, err, "the replay database is created")

	second := verifyOut(t, 1, nil, args...)
	assert.Equal(t, false, second["accepted"])
	assert.Equal(t, true, second["retransmission"])
	assert.Equal(t, "", second["reason"])
	assert.Equal(t, "", second["equivocation"])
	assert.Equal(t, first["offer_digest"], second["first_digest"])
	assert.Equal(t, first["offer_digest"], second["offer_digest"])
	assert.Equal(t, []string{"pass", "pass", "skipped", "retransmission", "not-run", "not-run", "not-run"}, checkResults(t, second))

	// Without --replay-db the memory lasts one run: accepted again.
	verifyOut(t, 0, nil, "--self", w.b.id, "--trust", w.trust, h)
	// A fresh database has no history.
	verifyOut(t, 0, nil, "--self", w.b.id, "--trust", w.trust, "--replay-db", w.path("other.db"), h)
}

func TestVerifyEquivocationAcrossInvocations(t *testing.T) {
	w := newWorld(t)
	hop := "EquivocationTestHop0123"
	common := []string{"--key", w.a.key, "--iss", w.a.id, "--aud", w.b.id, "--dialog", "d", "--hop", hop}
	h1 := offerFile(t, w.path("first.json"), append(common, "--task", "first")...)
	h2 := offerFile(t, w.path("second.json"), append(common, "--task", "second")...)
	db := w.path("seen.db")

	first := verifyOut(t, 0, nil, "--self", w.b.id, "--trust", w.trust, "--replay-db", db, h1)
	second := verifyOut(t, 1, nil, "--self", w.b.id, "--trust", w.trust, "--replay-db", db, h2)
	assert.Equal(t, false, second["accepted"])
	assert.Equal(t, false, second["retransmission"])
	assert.Equal(t, "equivocation", second["reason"])
	assert.Equal(t, "reject-first", second["equivocation"], "the first offer was never answered")
	assert.Equal(t, first["offer_digest"], second["first_digest"])
	assert.NotEqual(t, first["offer_digest"], second["offer_digest"])
	assert.Equal(t, hop, second["hop"])
	assert.Equal(t, "fail", checkResults(t, second)[3])

	// The first offer, sent again, is still a retransmission.
	again := verifyOut(t, 1, nil, "--self", w.b.id, "--trust", w.trust, "--replay-db", db, h1)
	assert.Equal(t, true, again["retransmission"])
}

func TestVerifyRemembersRejectedAfterCheck3(t *testing.T) {
	w := newWorld(t)
	h := offerFile(t, w.path("h.json"), "--key", w.a.key, "--iss", w.a.id, "--aud", w.b.id, "--dialog", "d-1")
	db := w.path("seen.db")
	m := verifyOut(t, 1, nil, "--self", w.b.id, "--trust", w.trust, "--replay-db", db, "--dialog", "d-other", h)
	assert.Equal(t, "policy", m["reason"])
	// Checks 1-3 passed, so the hop is remembered: the same octets again
	// are a retransmission, even with the right dialog.
	m = verifyOut(t, 1, nil, "--self", w.b.id, "--trust", w.trust, "--replay-db", db, "--dialog", "d-1", h)
	assert.Equal(t, true, m["retransmission"])

	// A rejection before check 3 is not remembered.
	h2 := offerFile(t, w.path("h2.json"), "--key", w.a.key, "--iss", w.a.id, "--aud", w.b.id, "--dialog", "d-1")
	m = verifyOut(t, 1, nil, "--self", w.c.id, "--trust", w.trust, "--replay-db", db, h2)
	assert.Equal(t, "wrong-audience", m["reason"])
	verifyOut(t, 0, nil, "--self", w.b.id, "--trust", w.trust, "--replay-db", db, h2)
}

func TestVerifyFreshnessWithNow(t *testing.T) {
	w := newWorld(t)
	h := offerFile(t, w.path("h.json"), "--key", w.a.key, "--iss", w.a.id, "--aud", w.b.id, "--dialog", "d",
		"--now", "1800000000", "--ttl", "120")
	base := []string{"--self", w.b.id, "--trust", w.trust}
	verifyOut(t, 0, nil, append(base, "--now", "1800000010", h)...)
	m := verifyOut(t, 1, nil, append(base, "--now", "1800000120", h)...)
	assert.Equal(t, "stale", m["reason"], "expired at exp")
	m = verifyOut(t, 1, nil, append(base, "--now", "1799999000", h)...)
	assert.Equal(t, "stale", m["reason"], "issued in the future")
	verifyOut(t, 0, nil, append(base, "--now", "1799999950", h)...) // within the 60 s skew
	m = verifyOut(t, 1, nil, append(base, "--now", "1799999950", "--skew", "10", h)...)
	assert.Equal(t, "stale", m["reason"])

	// With a replay database and --now, the memory uses the same clock.
	db := w.path("seen.db")
	verifyOut(t, 0, nil, append(base, "--now", "1800000010", "--replay-db", db, h)...)
	m = verifyOut(t, 1, nil, append(base, "--now", "1800000011", "--replay-db", db, h)...)
	assert.Equal(t, true, m["retransmission"])

	// A long-lived offer is refused as stale.
	long := offerFile(t, w.path("long.json"), "--key", w.a.key, "--iss", w.a.id, "--aud", w.b.id, "--dialog", "d", "--ttl", "10m")
	m = verifyOut(t, 1, nil, append(base, long)...)
	assert.Equal(t, "stale", m["reason"])
	verifyOut(t, 0, nil, append(base, "--max-lifetime", "600", long)...)
}

func TestVerifySaltedReference(t *testing.T) {
	w := newWorld(t)
	secret := writeFile(t, w.path("prompt.txt"), []byte("a prompt that stays private\n"))
	r := cli(t, nil, "offer", "--key", w.a.key, "--iss", w.a.id, "--aud", w.b.id, "--dialog", "d",
		"--ref", secret+"=https://a.example/p/1", "--salted")
	mustCode(t, r, 0)
	// The salt goes to stderr only.
	fields := strings.Fields(r.stderr)
	require.GreaterOrEqual(t, len(fields), 2, r.stderr)
	salt := fields[len(fields)-1]
	assert.Len(t, salt, 43, "32 octets in base64url")
	h := writeFile(t, w.path("h.json"), []byte(r.stdout))
	insp := cli(t, nil, "inspect", h)
	mustCode(t, insp, 0)
	assert.Contains(t, insp.stdout, "salted-digest")
	assert.NotContains(t, insp.stdout, salt)
	assert.NotContains(t, decodedPayloads(t, h), salt, "HC-09: the salt is never in the element")

	m := verifyOut(t, 0, nil, "--self", w.b.id, "--trust", w.trust, "--refs", "required",
		"--ref-object", "https://a.example/p/1="+secret, "--ref-salt", "https://a.example/p/1="+salt, h)
	ref := m["refs"].([]any)[0].(map[string]any)
	assert.Equal(t, "salted-digest", ref["kind"])
	assert.Equal(t, "verified", ref["outcome"])
	// Without the salt the reference cannot be checked.
	m = verifyOut(t, 1, nil, "--self", w.b.id, "--trust", w.trust, "--refs", "required",
		"--ref-object", "https://a.example/p/1="+secret, h)
	assert.Equal(t, "unverifiable-ref", m["reason"])
}

func TestVerifyMalformedInputs(t *testing.T) {
	dir := t.TempDir()
	draft, err := os.ReadFile(draftHO)
	require.NoError(t, err)
	inputs := map[string][]byte{
		"garbage":      []byte("this is not a handoff\n"),
		"truncated":    draft[:len(draft)/2],
		"empty":        {},
		"json array":   []byte(`["offer"]`),
		"no offer":     []byte(`{"chain":[]}`),
		"offer number": []byte(`{"offer": 7}`),
		"binary":       {0xd2, 0x84, 0x40, 0xa0, 0xff, 0x00, 0x01},
		"cbor map":     {0xa1, 0x65, 'o', 'f', 'f', 'e', 'r', 0x01},
		"bad jws":      []byte(`{"offer":"a.b.c"}`),
		"huge":         []byte(strings.Repeat(" ", 600<<10) + "{}"),
	}
	for name, data := range inputs {
		t.Run(name, func(t *testing.T) {
			f := writeFile(t, filepath.Join(dir, strings.ReplaceAll(name, " ", "-")), data)
			m := verifyOut(t, 1, nil, "--self", draftSelf, "--trust", draftTR, f)
			assert.Equal(t, "bad-signature", m["reason"])
			assert.Equal(t, false, m["offer_verified"])
			assert.NotEmpty(t, m["detail"])
			// The same on stdin.
			m = verifyOut(t, 1, data, "--self", draftSelf, "--trust", draftTR, "-")
			assert.Equal(t, "bad-signature", m["reason"])
		})
	}
}

func TestVerifyUsageAndIOErrors(t *testing.T) {
	dir := t.TempDir()
	garbage := writeFile(t, filepath.Join(dir, "garbage.json"), []byte("{not json"))
	private := filepath.Join(dir, "k.jwk")
	mustCode(t, cli(t, nil, "keygen", "--out", private), 0)
	privTrust := writeFile(t, filepath.Join(dir, "priv-trust.json"), []byte(`{"x":{"keys":[`+mustRead(t, private)+`]}}`))
	tests := map[string][]string{
		"no file":              {"--self", draftSelf, "--trust", draftTR},
		"two files":            {"--self", draftSelf, "--trust", draftTR, draftHO, draftHO},
		"no self":              {"--trust", draftTR, draftHO},
		"no trust":             {"--self", draftSelf, draftHO},
		"missing file":         {"--self", draftSelf, "--trust", draftTR, filepath.Join(dir, "nope.json")},
		"directory":            {"--self", draftSelf, "--trust", draftTR, dir},
		"missing trust":        {"--self", draftSelf, "--trust", filepath.Join(dir, "nope.json"), draftHO},
		"malformed trust":      {"--self", draftSelf, "--trust", garbage, draftHO},
		"private key in trust": {"--self", draftSelf, "--trust", privTrust, draftHO},
		"unknown flag":         {"--self", draftSelf, "--trust", draftTR, "--bogus", draftHO},
		"bad now":              {"--self", draftSelf, "--trust", draftTR, "--now", "yesterday", draftHO},
		"negative now":         {"--self", draftSelf, "--trust", draftTR, "--now", "-5", draftHO},
		"negative chain":       {"--self", draftSelf, "--trust", draftTR, "--max-chain", "-1", draftHO},
		"bad refs policy":      {"--self", draftSelf, "--trust", draftTR, "--refs", "sometimes", draftHO},
		"bad ref object":       {"--self", draftSelf, "--trust", draftTR, "--ref-object", "nolocation", draftHO},
		"replay db directory":  {"--self", draftSelf, "--trust", draftTR, "--replay-db", dir, draftHO},
		"replay db not bolt":   {"--self", draftSelf, "--trust", draftTR, "--replay-db", garbage, draftHO},
	}
	for name, args := range tests {
		t.Run(name, func(t *testing.T) {
			r := cli(t, nil, append([]string{"verify"}, args...)...)
			mustCode(t, r, 2)
			assert.Empty(t, r.stdout, "nothing on stdout for a usage or I/O error")
			assert.NotEmpty(t, r.stderr)
		})
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// decodedPayloads returns the decoded JWS payloads of a JSON Handoff
// object's elements, concatenated.
func decodedPayloads(t *testing.T, path string) string {
	t.Helper()
	var h struct {
		Offer string   `json:"offer"`
		Chain []string `json:"chain"`
	}
	require.NoError(t, json.Unmarshal([]byte(mustRead(t, path)), &h))
	var b strings.Builder
	for _, e := range append(h.Chain, h.Offer) {
		parts := strings.Split(e, ".")
		require.Len(t, parts, 3)
		p, err := base64.RawURLEncoding.DecodeString(parts[1])
		require.NoError(t, err)
		b.Write(p)
	}
	return b.String()
}

// Issue 35, finding 7: with --now past 2^62 seconds the replay database
// stored exp plus the skew clamped to 2^62, so the record was expired when
// written and the same offer was accepted on every run. It is kept now,
// and the second run is a retransmission, up to the largest --now.
func TestVerifyReplayPast2Pow62(t *testing.T) {
	w := newWorld(t)
	for _, now := range []uint64{1<<62 + 1000, math.MaxInt64 - 200} {
		iat := strconv.FormatUint(now, 10)
		h := offerFile(t, w.path(iat+".json"), "--key", w.a.key, "--iss", w.a.id, "--aud", w.b.id, "--dialog", "d", "--now", iat)
		args := []string{"--self", w.b.id, "--trust", w.trust, "--replay-db", w.path(iat + ".db"), "--now", strconv.FormatUint(now+5, 10), h}
		verifyOut(t, 0, nil, args...)
		second := verifyOut(t, 1, nil, args...)
		assert.Equal(t, true, second["retransmission"], "--now %d", now)
	}
}

func TestVerifyReplayDBLocked(t *testing.T) {
	w := newWorld(t)
	h := offerFile(t, w.path("h.json"), "--key", w.a.key, "--iss", w.a.id, "--aud", w.b.id, "--dialog", "d")
	db := w.path("seen.db")
	held, err := boltstore.Open(db, boltstore.Options{ReclaimEvery: -1})
	require.NoError(t, err)
	defer held.Close()
	r := cli(t, nil, "verify", "--self", w.b.id, "--trust", w.trust, "--replay-db", db, h)
	mustCode(t, r, 2)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, "--replay-db")
}

// Issue of exactness, point 8: zero is a valid bound. The draft bounds the
// skew only from above; a chain limit of zero accepts no chain.
func TestVerifyZeroBounds(t *testing.T) {
	m := verifyOut(t, 0, nil, "--self", draftSelf, "--trust", draftTR, "--now", draftNow, "--skew", "0", draftHO)
	assert.Equal(t, true, m["accepted"])
	m = verifyOut(t, 1, nil, "--self", draftSelf, "--trust", draftTR, "--now", draftNow, "--max-chain", "0", draftHO)
	assert.Equal(t, "too-deep", m["reason"])
	m = verifyOut(t, 1, nil, "--self", draftSelf, "--trust", draftTR, "--now", draftNow, "--max-lifetime", "0", draftHO)
	assert.Equal(t, "stale", m["reason"])
}
