package main

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const vectorsDir = "../../testdata/vectors"

// conformanceLine is one PASS, FAIL or SKIP line.
var conformanceLine = regexp.MustCompile(`^(PASS|FAIL|SKIP) ([0-9]{3}-[a-z0-9-]+): expected (.*); actual (.*)$`)

// conformanceRun runs "handoff conformance" and returns the status of each
// vector by name, and the summary line.
func conformanceRun(t *testing.T, args ...string) (result, map[string]string, string) {
	t.Helper()
	r := cli(t, nil, append([]string{"conformance", "--vectors", vectorsDir}, args...)...)
	status := map[string]string{}
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	require.NotEmpty(t, lines)
	for _, l := range lines[:len(lines)-1] {
		m := conformanceLine.FindStringSubmatch(l)
		require.NotNil(t, m, "not a vector line: %q", l)
		status[m[2]] = m[1]
	}
	return r, status, lines[len(lines)-1]
}

// vectorNames lists the vector files by name, with their expected
// verdicts.
func vectorNames(t *testing.T) map[string]verdict {
	t.Helper()
	files, err := vectorFiles(vectorsDir, nil)
	require.NoError(t, err)
	require.NotEmpty(t, files)
	out := map[string]verdict{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		var v conformanceVector
		require.NoError(t, json.Unmarshal(raw, &v))
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = v.Expected
	}
	return out
}

// ourKnownFailures are the vectors that "handoff verify" does not pass,
// each with the reason. Empty: our own binary reaches the draft's verdict
// on every vector. A vector added to it must say why.
var ourKnownFailures = map[string]string{}

// ourSkips need a flag of the runner's contract that "handoff verify" does
// not have (--trusted-origin, --allow-reentry, --memory-lost-at).
var ourSkips = []string{}

// TestConformance_OwnBinary runs every vector against "handoff verify":
// every vector passes except the known failures and the skips above, and
// a known failure that passes fails the test so that it leaves the list.
func TestConformance_OwnBinary(t *testing.T) {
	r, status, summary := conformanceRun(t, "--", binPath, "verify")
	names := vectorNames(t)
	require.Len(t, status, len(names), "one line per vector")
	for name := range names {
		want := vectorPass
		if _, ok := ourKnownFailures[name]; ok {
			want = vectorFail
		}
		for _, s := range ourSkips {
			if s == name {
				want = vectorUnsupported
			}
		}
		assert.Equal(t, want, status[name], "%s (%s)", name, ourKnownFailures[name])
	}
	for name := range ourKnownFailures {
		assert.Contains(t, names, name, "ourKnownFailures names no vector")
	}
	wantCode := exitOK
	if len(ourKnownFailures) > 0 {
		wantCode = exitNo
	}
	mustCode(t, r, wantCode)
	assert.Regexp(t, fmt.Sprintf(`^%d vectors: %d passed, %d failed, 0 skipped \(optional flags refused\)$`,
		len(names), len(names)-len(ourKnownFailures), len(ourKnownFailures)), summary)
}

// stub writes an executable shell script into a temporary directory.
func stub(t *testing.T, body string) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the stubs are shell scripts")
	}
	path := filepath.Join(t.TempDir(), "verify")
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755))
	return path
}

// TestConformance_AlwaysAcceptStub: a verifier that accepts everything
// (with a well-formed answer) fails every vector that is not accepted, and
// the run fails.
func TestConformance_AlwaysAcceptStub(t *testing.T) {
	s := stub(t, `echo '{"accepted":true,"retransmission":false,"reason":"","chain":"full","refs":[],"offer_digest":""}'
exit 0
`)
	r, status, summary := conformanceRun(t, "--", s)
	mustCode(t, r, exitNo)
	names := vectorNames(t)
	for name, want := range names {
		if !want.Accepted {
			assert.Equal(t, vectorFail, status[name], name)
		}
	}
	assert.Contains(t, summary, "0 passed", "no vector passes without the right offer_digest")
}

// TestConformance_AcceptStubWithDigest: a verifier that accepts
// everything and prints the right offer digest (looked up in a table the
// test writes) passes exactly the vectors whose verdict is accepted with a
// full chain and no references, and fails every other.
func TestConformance_AcceptStubWithDigest(t *testing.T) {
	names := vectorNames(t)
	files, err := vectorFiles(vectorsDir, nil)
	require.NoError(t, err)
	table := filepath.Join(t.TempDir(), "digests")
	var b strings.Builder
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		var v conformanceVector
		require.NoError(t, json.Unmarshal(raw, &v))
		in, err := base64.RawURLEncoding.DecodeString(v.Input.HandoffB64)
		require.NoError(t, err)
		sum := sha256.Sum256(in)
		b.WriteString(hex.EncodeToString(sum[:]) + " " + v.Expected.OfferDigest + "\n")
	}
	require.NoError(t, os.WriteFile(table, []byte(b.String()), 0o644))
	s := stub(t, `for last; do :; done
key=$(sha256sum "$last" | cut -d' ' -f1)
d=$(grep "^$key " `+table+` | head -1 | cut -d' ' -f2)
echo "{\"accepted\":true,\"retransmission\":false,\"reason\":\"\",\"chain\":\"full\",\"refs\":[],\"offer_digest\":\"$d\"}"
exit 0
`)
	r, status, _ := conformanceRun(t, "--", s)
	mustCode(t, r, exitNo)
	for name, want := range names {
		pass := want.Accepted && want.Chain == "full" && len(want.Refs) == 0
		if pass {
			assert.Equal(t, vectorPass, status[name], name)
		} else {
			assert.Equal(t, vectorFail, status[name], name)
		}
	}
}

// TestConformance_UsageErrorStub: a command that refuses every call fails
// the vectors that use only the contract's required flags, and is SKIP
// only where the vector needs an optional flag.
func TestConformance_UsageErrorStub(t *testing.T) {
	s := stub(t, "echo 'no such flag' >&2\nexit 2\n")
	r, status, summary := conformanceRun(t, "--", s)
	mustCode(t, r, exitNo)
	for _, name := range ourSkips {
		assert.Equal(t, vectorUnsupported, status[name], name)
	}
	assert.Contains(t, summary, "0 passed")

	// --strict counts those SKIPs as failures; here they are the only
	// vectors run.
	r, _, summary = conformanceRun(t, "--strict", "--run", "^(008|018)-", "--", s)
	mustCode(t, r, exitNo)
	assert.Equal(t, "2 vectors: 0 passed, 0 failed, 2 skipped (optional flags refused)", summary)
	r, _, _ = conformanceRun(t, "--run", "^(008|018)-", "--", s)
	mustCode(t, r, exitOK)
}

// TestConformance_BadOutputs: answers that break the contract fail.
func TestConformance_BadOutputs(t *testing.T) {
	for name, body := range map[string]string{
		"not JSON":            "echo accepted\nexit 0\n",
		"two objects":         `echo '{"accepted":false,"retransmission":false,"reason":"bad-signature","chain":""}{}'` + "\nexit 1\n",
		"no reason":           `echo '{"accepted":false,"retransmission":false,"chain":""}'` + "\nexit 1\n",
		"exit 0 not accepted": `echo '{"accepted":false,"retransmission":false,"reason":"bad-signature","chain":"","refs":[]}'` + "\nexit 0\n",
		"crash":               "kill -SEGV $$\n",
	} {
		t.Run(name, func(t *testing.T) {
			// 032 expects bad-signature, which these answers claim.
			r, status, summary := conformanceRun(t, "--run", "^032-", "--", stub(t, body))
			mustCode(t, r, exitNo)
			assert.Equal(t, vectorFail, status["032-bad-signature-jws-signature-altered"])
			assert.Equal(t, "1 vectors: 0 passed, 1 failed, 0 skipped (optional flags refused)", summary)
		})
	}
	// The same answer, with the right exit status, passes: the cases above
	// fail for what they break.
	ok := stub(t, `echo '{"accepted":false,"retransmission":false,"reason":"bad-signature","chain":"","refs":[]}'`+"\nexit 1\n")
	r, status, _ := conformanceRun(t, "--run", "^032-", "--", ok)
	mustCode(t, r, exitOK)
	assert.Equal(t, vectorPass, status["032-bad-signature-jws-signature-altered"])
}

// TestConformance_ArgumentsOfTheContract: the flags the runner passes,
// seen by a stub that records them.
func TestConformance_ArgumentsOfTheContract(t *testing.T) {
	dir := t.TempDir()
	s := stub(t, `printf '%s\n' "$@" >> `+dir+`/args
echo '{"accepted":false,"retransmission":false,"reason":"x","chain":""}'
exit 1
`)
	// 020 has references with a salt; 024 a prior; 018 an allowed
	// re-entry; 137 a zero skew.
	conformanceRun(t, "--jobs", "1", "--run", "^(018|020|024|137)-", "--", s)
	raw, err := os.ReadFile(filepath.Join(dir, "args"))
	require.NoError(t, err)
	args := string(raw)
	for _, want := range []string{
		"--self\nspiffe://r.example/agent/coder\n", "--now\n1793000060\n", "--skew\n60\n", "--skew\n0\n",
		"--max-lifetime\n300\n", "--max-chain\n16\n", "--dialog\nctx-vectors\n", "--refs\navailable\n",
		"--refs\nnot-checked\n", "--ref-object\nhttps://p.example/ctx/1=", "--ref-salt\nhttps://p.example/ctx/2=",
		"--replay-db\n", "--allow-reentry\nspiffe://a.example/agent/assistant\n", "--trust\n",
	} {
		assert.Contains(t, args, want)
	}
	// 024 runs twice (prior, then input) with the same --replay-db.
	assert.Equal(t, 2, strings.Count(args, "replay.db\n"))
}

func TestConformance_Usage(t *testing.T) {
	r := cli(t, nil, "conformance")
	mustCode(t, r, exitUsage)
	assert.Contains(t, r.stderr, "COMMAND is required")
	r = cli(t, nil, "conformance", "--run", "(", "--", "true")
	mustCode(t, r, exitUsage)
	r = cli(t, nil, "conformance", "--vectors", t.TempDir(), "--", "true")
	mustCode(t, r, exitUsage)
	assert.Contains(t, r.stderr, "no vector files")
	r = cli(t, nil, "conformance", "--jobs", "0", "--", "true")
	mustCode(t, r, exitUsage)
}
