package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// verify --summary prints exactly one line, with the same exit status as
// the JSON object: the verdict first, then what decided it.
func TestVerifySummary_OneLine(t *testing.T) {
	db := filepath.Join(t.TempDir(), "seen.db")
	base := []string{"verify", "--self", draftSelf, "--trust", draftTR, "--summary"}
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"accepted", []string{"--now", draftNow, "--dialog", "ctx-7c1e", "--replay-db", db, draftHO}, 0,
			"accepted: offer " + draftOffer + " from spiffe://a.example/agent/planner to " + draftSelf + ", hop q3Zl0v8bVfQmJm2c4bq1Ww, chain full"},
		{"retransmission", []string{"--now", draftNow, "--dialog", "ctx-7c1e", "--replay-db", db, draftHO}, 1,
			"retransmission: offer " + draftOffer + " from spiffe://a.example/agent/planner to " + draftSelf + ", hop q3Zl0v8bVfQmJm2c4bq1Ww, already received; not processed again"},
		{"stale", []string{"--now", draftLate, draftHO}, 1,
			"refused: stale at check 3 (freshness): "},
		{"other dialog", []string{"--now", draftNow, "--dialog", "ctx-other", draftHO}, 1,
			"refused: policy at check 5 (dialog): "},
		{"origin not trusted", []string{"--now", draftNow, "--trusted-origin", "spiffe://x.example/agent", draftHO}, 1,
			`refused: policy at check 6 (chain): chain[0]: the chain's origin "spiffe://u.example/agent/assistant" is not one of ChainPolicy.TrustedOrigins`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := cli(t, nil, append(base, c.args...)...)
			mustCode(t, r, c.code)
			require.True(t, strings.HasSuffix(r.stdout, "\n"), "a line: %q", r.stdout)
			line := strings.TrimSuffix(r.stdout, "\n")
			assert.NotContains(t, line, "\n", "exactly one line")
			assert.True(t, strings.HasPrefix(line, c.want), "%q does not begin with %q", line, c.want)
			assert.Empty(t, r.stderr)
		})
	}
	// Input that does not decode is a refusal at check 1, on one line too.
	r := cli(t, []byte(`{"offer":"x.y.z"}`), "verify", "--self", draftSelf, "--trust", draftTR, "--summary", "-")
	mustCode(t, r, 1)
	assert.Equal(t, 1, strings.Count(r.stdout, "\n"))
	assert.True(t, strings.HasPrefix(r.stdout, "refused: bad-signature at check 1 (signature): "), r.stdout)
}

// Text from the input with a control character is quoted, so that it
// cannot break the line; an offer whose signature did not verify is
// marked so.
func TestVerifySummary_Safe(t *testing.T) {
	line := summaryLine(&verifyOutput{Reason: "policy", Detail: "two\nlines\x1b[2J",
		Checks: []checkOut{{Step: 1, Check: "signature", Result: "pass"}, {Step: 2, Check: "audience", Result: "fail"}}})
	assert.Equal(t, `refused: policy at check 2 (audience): "two\nlines\x1b[2J"`, line)
	line = summaryLine(&verifyOutput{Retransmission: true, OfferDigest: "D", Iss: "a\rb", Aud: "c", Hop: "h"})
	assert.Equal(t, `retransmission: offer D from "a\rb" to c, hop h (UNVERIFIED), already received; not processed again`, line)
}

// A JWK given as --trust is named for what it is, and the message says
// "handoff" once.
func TestVerify_JWKAsTrustFile(t *testing.T) {
	dir := t.TempDir()
	r := cli(t, nil, "keygen", "--out", filepath.Join(dir, "k.jwk"))
	mustCode(t, r, 0)
	pub := writeFile(t, filepath.Join(dir, "k.pub.jwk"), []byte(r.stdout))
	r = cli(t, nil, "verify", "--self", draftSelf, "--trust", pub, draftHO)
	mustCode(t, r, 2)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, `this is a JWK (it has "kty"), not a trust document`)
	assert.Equal(t, 1, strings.Count(r.stderr, "handoff"), r.stderr)
}
