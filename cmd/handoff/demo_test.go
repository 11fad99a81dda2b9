package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDemo(t *testing.T) {
	for _, args := range [][]string{
		{"demo"},
		{"demo", "--format", "cose", "--encoding", "cbor"},
		{"demo", "--format", "cose"},
		{"demo", "--encoding", "cbor"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := cli(t, nil, args...)
			mustCode(t, r, 0)
			assert.Empty(t, r.stderr)
			for _, want := range []string{
				"planner verifies it: accepted, chain full",
				"coder verifies it", "accepted, chain full",
				"hop now completed",
				"retransmission",
				"rejected, reason bad-signature",
				"Every step went as the draft says.",
			} {
				assert.Contains(t, r.stdout, want)
			}
			assert.NotContains(t, r.stdout, "UNEXPECTED")
		})
	}
}

// The files the demo saves work with the other commands.
func TestDemoSave(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	r := cli(t, nil, "demo", "--now", "1800000000", "--save", dir)
	mustCode(t, r, 0)
	trust := filepath.Join(dir, "trust.json")
	h2 := filepath.Join(dir, "planner-to-coder.json")
	m := verifyOut(t, 0, nil, "--self", "spiffe://b.example/agent/coder", "--trust", trust, "--now", "1800000010",
		"--dialog", "demo-7c1e", "--require-chain", h2)
	assert.Equal(t, "full", m["chain"])
	assert.Equal(t, "summarize-issue-9", m["task"])

	m = verifyOut(t, 1, nil, "--self", "spiffe://b.example/agent/coder", "--trust", trust, "--now", "1800000010",
		filepath.Join(dir, "tampered.json"))
	assert.Equal(t, "bad-signature", m["reason"])

	for _, st := range []string{"accepted.jws", "completed.jws"} {
		m = verifyStatusOut(t, 0, nil, "--trust", trust, "--offer", h2, filepath.Join(dir, st))
		assert.Equal(t, strings.TrimSuffix(st, ".jws"), m["state"])
	}
	st, err := os.Stat(filepath.Join(dir, "coder.jwk"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	// A saved key signs for its agent.
	h3 := offerFile(t, filepath.Join(dir, "h3.json"), "--key", filepath.Join(dir, "coder.jwk"),
		"--iss", "spiffe://b.example/agent/coder", "--aud", "spiffe://u.example/agent/assistant", "--dialog", "x")
	verifyOut(t, 0, nil, "--self", "spiffe://u.example/agent/assistant", "--trust", trust, h3)
}

// The run function is what the binary calls; run it in the test process
// too, so that the race detector sees it.
func TestRunInProcess(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"demo"}, strings.NewReader(""), &out, &errb)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out.String(), errb.String())

	out.Reset()
	errb.Reset()
	code = run([]string{"verify", "--self", draftSelf, "--trust", draftTR, "--now", draftNow, "--dialog", "ctx-7c1e", draftHO},
		strings.NewReader(""), &out, &errb)
	require.Equal(t, 0, code, errb.String())
	m := oneObject(t, out.String())
	assert.Equal(t, true, m["accepted"])
	assert.Equal(t, "full", m["chain"])
}

// Every one-octet change to the draft's Handoff object is either still
// accepted (white space) or rejected with a reason: never a crash, never
// a usage error.
func TestVerifyMutationsInProcess(t *testing.T) {
	data, err := os.ReadFile(draftHO)
	require.NoError(t, err)
	step := len(data) / 300
	if testing.Short() {
		step = len(data) / 40
	}
	for i := 0; i < len(data); i += step {
		for _, c := range []byte{'A', '"', '{', 0x00, 0xff} {
			if data[i] == c {
				continue
			}
			mut := bytes.Clone(data)
			mut[i] = c
			var out, errb bytes.Buffer
			code := run([]string{"verify", "--self", draftSelf, "--trust", draftTR, "--now", draftNow, "-"},
				bytes.NewReader(mut), &out, &errb)
			require.Contains(t, []int{0, 1}, code, "offset %d octet %#x: %s", i, c, errb.String())
			m := oneObject(t, out.String())
			if code == 1 {
				require.NotEmpty(t, m["reason"], "offset %d", i)
			}
		}
	}
}
