package interop_test

import (
	"regexp"
	"strings"
	"testing"
)

// conformanceSubset picks vectors for TestConformanceRunnerWithPeer that
// exercise every flag of the runner's contract: each optional flag
// (--memory-lost-at, --allow-reentry, --trusted-origin), references with a
// salt, --replay-db across prior runs (retransmission, equivocation), zero
// bounds, times past 2^63, and a sample of the exactness cases. Every
// vector reaches the peer's receiver in TestVectorsWithPeer as well; this
// test is about the command-line path, one process per run, so it runs a
// subset to stay quick.
const conformanceSubset = `^(008|018|019|020|024|025|026|027|052|069|080|088|098|104|110|112|114|117|121|125|131|132|135|137|138|141|142|143|146|147|150|157)-`

// TestConformanceRunnerWithPeer: "handoff conformance" runs the vectors
// against the peer's verify command, which follows the same contract, and
// the peer passes every one: no FAIL and no SKIP.
func TestConformanceRunnerWithPeer(t *testing.T) {
	requirePeer(t)
	r := ours(t, "conformance", "--vectors", "../testdata/vectors", "--strict", "--run", conformanceSubset,
		"--", pythonBin, peerScript, "verify")
	out := string(r.stdout)
	if r.code != 0 {
		t.Errorf("%s: exit %d\n%s%s", r.cmd, r.code, out, r.stderr)
	}
	want := regexp.MustCompile(`(?m)^32 vectors: 32 passed, 0 failed, 0 skipped \(optional flags refused\)$`)
	if !want.MatchString(out) {
		t.Errorf("summary: want 32 vectors all passed; got\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "FAIL") || strings.HasPrefix(line, "SKIP") {
			t.Errorf("%s", line)
		}
	}
}
