package interop_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const vectorsDir = "../testdata/vectors"

// runnerReport is the part of "handoff conformance --json" these tests read.
type runnerReport struct {
	OK      bool `json:"ok"`
	Vectors []struct {
		File     string   `json:"file"`
		Level    string   `json:"level"`
		Status   string   `json:"status"`
		Requires []string `json:"requires"`
		Actual   string   `json:"actual"`
		Problem  string   `json:"problem"`
	} `json:"vectors"`
}

func runRunner(t *testing.T, args ...string) (runnerReport, ran) {
	t.Helper()
	report := filepath.Join(t.TempDir(), "report.json")
	r := ours(t, append([]string{"conformance", "--vectors", vectorsDir, "--jobs", "2", "--json", report}, args...)...)
	raw, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("%s: exit %d, no report: %v\n%s", r.cmd, r.code, err, r.stderr)
	}
	var rep runnerReport
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	return rep, r
}

// TestConformanceRunnerWithPeer: "handoff conformance" runs every vector
// against the peer's own verify command, as it stands, with no adapter
// and no declared lack: the peer passes every vector, open and SHOULD
// ones included (--strict).
func TestConformanceRunnerWithPeer(t *testing.T) {
	requirePeer(t)
	rep, r := runRunner(t, "--strict", "--", pythonBin, peerScript, "verify")
	if r.code != 0 || !rep.OK {
		t.Errorf("%s: exit %d\n%s%s", r.cmd, r.code, r.stdout, r.stderr)
	}
	if len(rep.Vectors) < 163 {
		t.Errorf("%d vectors run, want every one", len(rep.Vectors))
	}
	for _, v := range rep.Vectors {
		if v.Status != "PASS" {
			t.Errorf("%s %s [%s]: %s; %s", v.Status, v.File, v.Level, v.Actual, v.Problem)
		}
	}
}

// contrarianScript is interop/contrarian/contrarian.py: the peer with
// every choice the draft leaves open made the other way from this
// project, offering only ES256.
var contrarianScript = filepath.Join("contrarian", "contrarian.py")

// TestConformanceRunnerWithContrarian: the conforming contrarian passes
// every MUST vector it can run (it declares that it lacks EdDSA and
// ES384, and only the vectors needing them are skipped), and every other
// vector too, while answering every open vector otherwise than this
// project does: the suite accepts both readings of each open question.
func TestConformanceRunnerWithContrarian(t *testing.T) {
	requirePeer(t)
	script, err := filepath.Abs(contrarianScript)
	if err != nil {
		t.Fatal(err)
	}
	rep, r := runRunner(t, "--capabilities", filepath.Join("contrarian", "capabilities.json"), "--", pythonBin, script, "verify")
	if r.code != 0 || !rep.OK {
		t.Errorf("%s: exit %d\n%s%s", r.cmd, r.code, r.stdout, r.stderr)
	}
	ours := projectVerdicts(t)
	musts, open := 0, 0
	for _, v := range rep.Vectors {
		switch v.Status {
		case "PASS":
		case "SKIP":
			if !onlyAlgs(v.Requires) {
				t.Errorf("%s skipped, but it needs %v, which the contrarian offers", v.File, v.Requires)
			}
			continue
		default:
			t.Errorf("%s %s [%s]: %s; %s", v.Status, v.File, v.Level, v.Actual, v.Problem)
		}
		switch v.Level {
		case "MUST":
			musts++
		case "open":
			open++
			if v.Actual == ours[v.File] {
				t.Errorf("%s: the contrarian answers %q, as this project does: it should take the other reading", v.File, v.Actual)
			}
		}
	}
	if musts < 130 || open < 22 {
		t.Errorf("%d MUST and %d open vectors passed; want every one run", musts, open)
	}
}

func onlyAlgs(req []string) bool {
	if len(req) == 0 {
		return false
	}
	for _, f := range req {
		if !strings.HasPrefix(f, "alg:") {
			return false
		}
	}
	return true
}

// projectVerdicts is this project's answer (expected) per vector file, as
// the runner prints a verdict.
func projectVerdicts(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(vectorsDir, "[0-9][0-9][0-9]-*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no vectors: %v", err)
	}
	out := map[string]string{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Expected struct {
				Accepted       bool     `json:"accepted"`
				Retransmission bool     `json:"retransmission"`
				Reason         string   `json:"reason"`
				Chain          string   `json:"chain"`
				Refs           []string `json:"refs"`
			} `json:"expected"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		e := v.Expected
		s := e.Reason
		switch {
		case e.Accepted:
			s = "accepted"
		case e.Retransmission:
			s = "retransmission"
		}
		if e.Chain != "" && !e.Retransmission {
			s += " chain=" + e.Chain
		}
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = s
	}
	return out
}
