package main

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const vectorsDir = "../../testdata/vectors"

// conformanceLine is one PASS, FAIL or SKIP line.
var conformanceLine = regexp.MustCompile(`^(PASS|FAIL|SKIP) ([0-9]{3}-[a-z0-9-]+) \[(MUST|SHOULD|MAY|open)\]: acceptable (.*); actual (.*)$`)

// conformanceRun runs "handoff conformance" and returns the status of each
// vector by name, and the summary line.
func conformanceRun(t *testing.T, args ...string) (result, map[string]string, string) {
	t.Helper()
	r := cli(t, nil, append([]string{"conformance", "--vectors", vectorsDir}, args...)...)
	status := map[string]string{}
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	require.NotEmpty(t, lines)
	for _, l := range lines[:len(lines)-1] {
		if m := conformanceLine.FindStringSubmatch(l); m != nil {
			status[m[2]] = m[1]
			continue
		}
		require.Regexp(t, `^(MUST|SHOULD|MAY|open) +[0-9]+ vectors: `, l, "not a vector or level line")
	}
	return r, status, lines[len(lines)-1]
}

// vectorNames lists the vector files by name, as the runner reads them.
func vectorNames(t *testing.T) map[string]conformanceVector {
	t.Helper()
	files, err := vectorFiles(vectorsDir, nil)
	require.NoError(t, err)
	require.NotEmpty(t, files)
	out := map[string]conformanceVector{}
	for _, f := range files {
		v, err := readVector(f)
		require.NoError(t, err, f)
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = v
	}
	return out
}

// TestConformance_OwnBinary runs every vector against "handoff verify",
// which offers every optional feature: every vector passes.
func TestConformance_OwnBinary(t *testing.T) {
	r, status, summary := conformanceRun(t, "--strict", "--", binPath, "verify")
	names := vectorNames(t)
	require.Len(t, status, len(names), "one line per vector")
	for name := range names {
		assert.Equal(t, vectorPass, status[name], name)
	}
	mustCode(t, r, exitOK)
	assert.Equal(t, fmt.Sprintf("%d vectors: %d passed, 0 failed (0 MUST), 0 skipped (features the command lacks): conforming on every vector run",
		len(names), len(names)), summary)
	// Our own answer is one of the acceptable outcomes of every vector.
	for name, v := range names {
		assert.True(t, slices.ContainsFunc(v.Acceptable, func(o outcome) bool { return o.matches(v.Expected) }),
			"%s: expected is not acceptable", name)
	}
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

// mustRefused says whether a vector is a MUST vector that every
// acceptable outcome refuses (or answers as a retransmission).
func mustRefused(v conformanceVector) bool {
	return v.Level == "MUST" && !slices.ContainsFunc(v.Acceptable, func(o outcome) bool { return o.Verdict == "accepted" })
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
	for name, v := range vectorNames(t) {
		if mustRefused(v) {
			assert.Equal(t, vectorFail, status[name], name)
		}
	}
	assert.Contains(t, summary, " 0 passed", "no vector passes without the right offer_digest")
	assert.Contains(t, summary, "NOT conforming")
}

// TestConformance_AcceptStubWithDigest: a verifier that accepts
// everything and prints the right offer digest (looked up in a table the
// test writes) passes exactly the vectors that accept an accepted offer
// with a full chain and no checked reference, and fails every other.
func TestConformance_AcceptStubWithDigest(t *testing.T) {
	names := vectorNames(t)
	files, err := vectorFiles(vectorsDir, nil)
	require.NoError(t, err)
	table := filepath.Join(t.TempDir(), "digests")
	var b strings.Builder
	for _, f := range files {
		v, err := readVector(f)
		require.NoError(t, err)
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
	passes := 0
	for name, v := range names {
		pass := slices.ContainsFunc(v.Acceptable, func(o outcome) bool {
			return o.Verdict == "accepted" && (len(o.Chain) == 0 || slices.Contains(o.Chain, "full")) && (o.Refs == nil || len(*o.Refs) == 0)
		})
		if pass {
			passes++
			assert.Equal(t, vectorPass, status[name], name)
		} else {
			assert.Equal(t, vectorFail, status[name], name)
		}
	}
	assert.Positive(t, passes)
}

// TestConformance_UsageErrorStub: a command that refuses every call fails
// every vector, those that need an optional feature included: a feature
// is skipped only when declared missing.
func TestConformance_UsageErrorStub(t *testing.T) {
	s := stub(t, "echo 'no such flag' >&2\nexit 2\n")
	r, status, summary := conformanceRun(t, "--", s)
	mustCode(t, r, exitNo)
	for name := range vectorNames(t) {
		assert.Equal(t, vectorFail, status[name], name)
	}
	assert.Contains(t, summary, " 0 passed")

	// 008 needs flag:memory-lost-at and 018 flag:allow-reentry; declared
	// missing, they are skipped, which fails only under --strict.
	r, status, summary = conformanceRun(t, "--run", "^(008|018)-", "--lacks", "flag:memory-lost-at,flag:allow-reentry", "--", s)
	mustCode(t, r, exitOK)
	assert.Equal(t, vectorSkip, status["008-accept-issued-at-memory-loss"])
	assert.Equal(t, vectorSkip, status["018-chain-reentry-allowed"])
	assert.Contains(t, summary, "2 vectors: 0 passed, 0 failed (0 MUST), 2 skipped")
	r, _, _ = conformanceRun(t, "--strict", "--run", "^(008|018)-", "--lacks", "flag:memory-lost-at", "--lacks", "flag:allow-reentry", "--", s)
	mustCode(t, r, exitNo)
	// Declared in a capabilities file instead.
	caps := filepath.Join(t.TempDir(), "caps.json")
	require.NoError(t, os.WriteFile(caps, []byte(`{"lacks":["flag:memory-lost-at","flag:allow-reentry"]}`), 0o644))
	r, _, summary = conformanceRun(t, "--run", "^(008|018)-", "--capabilities", caps, "--", s)
	mustCode(t, r, exitOK)
	assert.Contains(t, summary, "2 skipped")
}

// TestConformance_LevelsDecideTheRun: a verifier that fails only a
// SHOULD vector (it does not refuse cycles) passes the run, with the
// failure reported; --strict fails it. A MUST failure fails the run.
func TestConformance_LevelsDecideTheRun(t *testing.T) {
	names := vectorNames(t)
	v := names["061-cycle-repeated-issuer"]
	require.Equal(t, "SHOULD", v.Level)
	accept := stub(t, `echo '{"accepted":true,"retransmission":false,"reason":"","chain":"full","offer_digest":"`+v.Expected.OfferDigest+`"}'
exit 0
`)
	r, status, summary := conformanceRun(t, "--run", "^061-", "--", accept)
	mustCode(t, r, exitOK)
	assert.Equal(t, vectorFail, status["061-cycle-repeated-issuer"])
	assert.Contains(t, summary, "1 failed (0 MUST)")
	assert.Contains(t, r.stdout, "SHOULD 1 vectors: 0 passed, 1 failed, 0 skipped (not met: reported, not failed)")
	r, _, _ = conformanceRun(t, "--strict", "--run", "^061-", "--", accept)
	mustCode(t, r, exitNo)

	w := names["032-bad-signature-jws-signature-altered"]
	require.Equal(t, "MUST", w.Level)
	accept = stub(t, `echo '{"accepted":true,"retransmission":false,"reason":"","chain":"full","offer_digest":"`+w.Expected.OfferDigest+`"}'
exit 0
`)
	r, _, summary = conformanceRun(t, "--run", "^032-", "--", accept)
	mustCode(t, r, exitNo)
	assert.Contains(t, summary, "1 failed (1 MUST)")
}

// TestConformance_OnlyWhatTheTextFixes: the conventions the draft leaves
// open are not compared. A chain state "absent" for an offer with neither
// prev nor chain passes, as does "full"; a rejection's chain and its
// unchecked references are not looked at; a reason outside the vector's
// set fails.
func TestConformance_OnlyWhatTheTextFixes(t *testing.T) {
	names := vectorNames(t)
	d1 := names["001-accept-jws-json"].Expected.OfferDigest
	for _, chain := range []string{"absent", "full"} {
		s := stub(t, `echo '{"accepted":true,"retransmission":false,"reason":"","chain":"`+chain+`","refs":[],"offer_digest":"`+d1+`"}'
exit 0
`)
		r, status, _ := conformanceRun(t, "--run", "^001-", "--", s)
		mustCode(t, r, exitOK)
		assert.Equal(t, vectorPass, status["001-accept-jws-json"], chain)
	}
	s := stub(t, `echo '{"accepted":true,"retransmission":false,"reason":"","chain":"partial","offer_digest":"`+d1+`"}'
exit 0
`)
	r, _, _ := conformanceRun(t, "--run", "^001-", "--", s)
	mustCode(t, r, exitNo)

	// 078 refuses with broken-chain under refs required: neither its
	// chain nor its references (not checked) are compared.
	d78 := names["078-order-chain-before-refs"].Expected.OfferDigest
	s = stub(t, `echo '{"accepted":false,"retransmission":false,"reason":"broken-chain","chain":"partial","refs":[{"outcome":"verified"}],"offer_digest":"`+d78+`"}'
exit 1
`)
	r, status, _ := conformanceRun(t, "--run", "^078-", "--", s)
	mustCode(t, r, exitOK)
	assert.Equal(t, vectorPass, status["078-order-chain-before-refs"])
	s = stub(t, `echo '{"accepted":false,"retransmission":false,"reason":"policy","offer_digest":"`+d78+`"}'
exit 1
`)
	r, _, _ = conformanceRun(t, "--run", "^078-", "--", s)
	mustCode(t, r, exitNo)

	// 020 checks references: their outcomes are compared.
	d20 := names["020-refs-check-available-verified"].Expected.OfferDigest
	s = stub(t, `echo '{"accepted":true,"retransmission":false,"reason":"","chain":"full","refs":[{"outcome":"verified"},{"outcome":"unverifiable"}],"offer_digest":"`+d20+`"}'
exit 0
`)
	r, _, _ = conformanceRun(t, "--run", "^020-", "--", s)
	mustCode(t, r, exitNo)
}

// TestConformance_JSONAndJUnit: the machine-readable reports carry the
// same results as the text.
func TestConformance_JSONAndJUnit(t *testing.T) {
	dir := t.TempDir()
	jsonFile, junitFile := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.xml")
	s := stub(t, "echo 'no such flag' >&2\nexit 2\n")
	r, _, _ := conformanceRun(t, "--run", "^(001|008|061)-", "--lacks", "flag:memory-lost-at",
		"--json", jsonFile, "--junit", junitFile, "--", s)
	mustCode(t, r, exitNo)

	raw, err := os.ReadFile(jsonFile)
	require.NoError(t, err)
	var rep conformanceReport
	require.NoError(t, json.Unmarshal(raw, &rep))
	assert.False(t, rep.OK)
	assert.Equal(t, levelCount{Vectors: 3, Failed: 2, Skipped: 1}, rep.Total)
	assert.Equal(t, levelCount{Vectors: 1, Failed: 1}, *rep.Levels["MUST"])
	assert.Equal(t, levelCount{Vectors: 2, Failed: 1, Skipped: 1}, *rep.Levels["SHOULD"])
	require.Len(t, rep.Vectors, 3)
	assert.Equal(t, []string{"flag:memory-lost-at"}, rep.Vectors[1].Requires)
	assert.Equal(t, strings.TrimSpace(readFile(t, filepath.Join(vectorsDir, "VERSION"))), rep.SuiteVersion)

	raw, err = os.ReadFile(junitFile)
	require.NoError(t, err)
	var ju junitSuites
	require.NoError(t, xml.Unmarshal(raw, &ju))
	assert.Equal(t, 3, ju.Tests)
	assert.Equal(t, 1, ju.Failures, "only the MUST failure is a <failure>")
	assert.Equal(t, 2, ju.Skipped, "the skip, and the SHOULD vector not met")

	// - writes to standard output instead of the text.
	r = cli(t, nil, "conformance", "--vectors", vectorsDir, "--run", "^001-", "--json", "-", "--", s)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	assert.Len(t, rep.Vectors, 1)
}

// TestConformance_BadOutputs: answers that break the contract fail.
func TestConformance_BadOutputs(t *testing.T) {
	d := vectorNames(t)["032-bad-signature-jws-signature-altered"].Expected.OfferDigest
	for name, body := range map[string]string{
		"not JSON":            "echo accepted\nexit 0\n",
		"two objects":         `echo '{"accepted":false,"retransmission":false,"reason":"bad-signature","chain":""}{}'` + "\nexit 1\n",
		"no reason":           `echo '{"accepted":false,"retransmission":false,"chain":""}'` + "\nexit 1\n",
		"exit 0 not accepted": `echo '{"accepted":false,"retransmission":false,"reason":"bad-signature","chain":"","refs":[]}'` + "\nexit 0\n",
		"wrong digest":        `echo '{"accepted":false,"retransmission":false,"reason":"bad-signature","offer_digest":"AAAA"}'` + "\nexit 1\n",
		"crash":               "kill -SEGV $$\n",
	} {
		t.Run(name, func(t *testing.T) {
			// 032 expects bad-signature, which these answers claim.
			r, status, summary := conformanceRun(t, "--run", "^032-", "--", stub(t, body))
			mustCode(t, r, exitNo)
			assert.Equal(t, vectorFail, status["032-bad-signature-jws-signature-altered"])
			assert.Contains(t, summary, "1 vectors: 0 passed, 1 failed (1 MUST), 0 skipped")
		})
	}
	// The same answer, with the right exit status, passes: the cases above
	// fail for what they break. No digest is allowed for a bad-signature.
	for _, digest := range []string{"", d} {
		ok := stub(t, `echo '{"accepted":false,"retransmission":false,"reason":"bad-signature","chain":"","refs":[],"offer_digest":"`+digest+`"}'`+"\nexit 1\n")
		r, status, _ := conformanceRun(t, "--run", "^032-", "--", ok)
		mustCode(t, r, exitOK)
		assert.Equal(t, vectorPass, status["032-bad-signature-jws-signature-altered"])
	}
}

// TestConformance_ArgumentsOfTheContract: the flags the runner passes,
// seen by a stub that records them: only those each vector uses.
func TestConformance_ArgumentsOfTheContract(t *testing.T) {
	for _, tc := range []struct {
		run       string
		want, not []string
	}{
		// 001: core flags only; no reference, prior or optional flag.
		{"^001-", []string{"--self\nspiffe://r.example/agent/coder\n", "--now\n1793000060\n", "--skew\n60\n",
			"--max-lifetime\n300\n", "--max-chain\n16\n", "--dialog\nctx-vectors\n", "--trust\n"},
			[]string{"--refs", "--ref-object", "--replay-db", "--require-chain", "--allow-reentry", "--trusted-origin", "--memory-lost-at"}},
		// 020: references with a salt.
		{"^020-", []string{"--refs\navailable\n", "--ref-object\nhttps://p.example/ctx/1=", "--ref-salt\nhttps://p.example/ctx/2="}, []string{"--replay-db"}},
		// 024: a prior, so --replay-db.
		{"^024-", []string{"--replay-db\n"}, []string{"--refs"}},
		// 018: an allowed re-entry; 137 a zero skew; 019 trusted origins.
		{"^018-", []string{"--allow-reentry\nspiffe://a.example/agent/assistant\n"}, []string{"--refs"}},
		{"^137-", []string{"--skew\n0\n"}, nil},
		{"^019-", []string{"--require-chain\n", "--trusted-origin\nspiffe://a.example/agent/assistant\n"}, nil},
	} {
		dir := t.TempDir()
		s := stub(t, `printf '%s\n' "$@" >> `+dir+`/args
echo '{"accepted":false,"retransmission":false,"reason":"x","chain":""}'
exit 1
`)
		conformanceRun(t, "--jobs", "1", "--run", tc.run, "--", s)
		args := readFile(t, filepath.Join(dir, "args"))
		for _, w := range tc.want {
			assert.Contains(t, args, w, tc.run)
		}
		for _, n := range tc.not {
			assert.NotContains(t, args, n, tc.run)
		}
		if tc.run == "^024-" {
			// 024 runs twice (prior, then input) with the same --replay-db.
			assert.Equal(t, 2, strings.Count(args, "replay.db\n"))
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
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
	r = cli(t, nil, "conformance", "--lacks", "alg:RS256", "--", "true")
	mustCode(t, r, exitUsage)
	assert.Contains(t, r.stderr, "unknown feature")
	r = cli(t, nil, "conformance", "--json", "-", "--junit", "-", "--", "true")
	mustCode(t, r, exitUsage)
	r = cli(t, nil, "conformance", "--capabilities", filepath.Join(t.TempDir(), "none"), "--", "true")
	mustCode(t, r, exitUsage)
}
