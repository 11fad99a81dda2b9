package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The script tests run the real binary, built once here, as outside test
// suites do.
var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "handoff-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "handoff")
	if runtime.GOOS == "windows" {
		binPath += ".exe"
	}
	build := exec.Command("go", "build", "-o", binPath, ".")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const (
	draftDir  = "../../testdata/draft-00"
	draftHO   = draftDir + "/handoff.json"
	draftTR   = draftDir + "/trust.json"
	draftSelf = "spiffe://b.example/agent/coder"
	// The draft's coder accepts the example at 1793000003; it expires at
	// 1793000120.
	draftNow   = "1793000003"
	draftLate  = "1793000200"
	draftOffer = "kJIcudVNmFFwbYKTXNO3mqC3e9dQSWVXDNbamGeoP18"
	draftChain = "M-OyKnHLAGKpiZKw7sNqAsNKmtfRQ7DUFhtKAL3Slmg"
)

// result is one run of the binary.
type result struct {
	code           int
	stdout, stderr string
}

// cli runs the binary with args, and stdin when not nil. It fails the test
// on a crash: no run may print a Go panic or stack trace.
func cli(t *testing.T, stdin []byte, args ...string) result {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run %v: %v", args, err)
	}
	r := result{code: code, stdout: out.String(), stderr: errb.String()}
	noCrash(t, r.stderr)
	noCrash(t, r.stdout)
	return r
}

func noCrash(t *testing.T, s string) {
	t.Helper()
	for _, bad := range []string{"goroutine ", "panic:", "runtime error"} {
		require.NotContains(t, s, bad, "the command crashed")
	}
}

// mustCode asserts the exit status, showing the output when it differs.
func mustCode(t *testing.T, r result, want int) {
	t.Helper()
	require.Equal(t, want, r.code, "exit status\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
}

// oneObject parses stdout as exactly one JSON object.
func oneObject(t *testing.T, stdout string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.UseNumber()
	var m map[string]any
	require.NoError(t, dec.Decode(&m), "stdout is not a JSON object:\n%s", stdout)
	require.NotNil(t, m, "stdout is JSON null")
	var extra any
	require.ErrorIs(t, dec.Decode(&extra), io.EOF, "more than one JSON value on stdout:\n%s", stdout)
	return m
}

func keysOf(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// verifyFields are the members of verify's output, exactly.
var verifyFields = []string{
	"accepted", "aud", "chain", "checks", "detail", "dialog", "equivocation", "exp", "first_digest",
	"hop", "iat", "iss", "links", "now", "offer_digest", "offer_verified", "reason", "refs",
	"retransmission", "task",
}

// verifyOut runs verify and returns its one output object, checking the
// exit status and the exact set of members.
func verifyOut(t *testing.T, wantCode int, stdin []byte, args ...string) map[string]any {
	t.Helper()
	r := cli(t, stdin, append([]string{"verify"}, args...)...)
	mustCode(t, r, wantCode)
	m := oneObject(t, r.stdout)
	require.Equal(t, verifyFields, keysOf(m))
	// The members' types, whatever the outcome.
	for _, k := range []string{"accepted", "retransmission", "offer_verified"} {
		require.IsType(t, true, m[k], k)
	}
	for _, k := range []string{"reason", "detail", "equivocation", "offer_digest", "first_digest", "chain", "iss", "aud", "hop", "dialog", "task"} {
		require.IsType(t, "", m[k], k)
	}
	for _, k := range []string{"refs", "links", "checks"} {
		require.IsType(t, []any{}, m[k], k)
	}
	require.Equal(t, wantCode == 0, m["accepted"], "accepted and the exit status agree")
	if m["accepted"] == true || m["retransmission"] == true {
		require.Equal(t, "", m["reason"])
	} else {
		require.NotEqual(t, "", m["reason"], "a rejection carries a reason")
	}
	require.Len(t, m["checks"], 7)
	return m
}

// checkResults returns the result of each of the seven checks, in order.
func checkResults(t *testing.T, m map[string]any) []string {
	t.Helper()
	var out []string
	for _, c := range m["checks"].([]any) {
		out = append(out, c.(map[string]any)["result"].(string))
	}
	return out
}

// party is an agent with a key made by keygen in a test directory.
type party struct {
	id  string
	key string // private JWK file
	pub string // public JWK, as keygen printed it
}

func newParty(t *testing.T, dir, name, id, alg string) party {
	t.Helper()
	key := filepath.Join(dir, name+".jwk")
	r := cli(t, nil, "keygen", "--alg", alg, "--out", key)
	mustCode(t, r, 0)
	return party{id: id, key: key, pub: strings.TrimSpace(r.stdout)}
}

// writeTrust writes a trust file binding each party's public key to its
// AgentId.
func writeTrust(t *testing.T, path string, parties ...party) string {
	t.Helper()
	doc := map[string]map[string][]json.RawMessage{}
	for _, p := range parties {
		doc[p.id] = map[string][]json.RawMessage{"keys": {json.RawMessage(p.pub)}}
	}
	b, err := json.Marshal(doc)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path
}

func writeFile(t *testing.T, path string, data []byte) string {
	t.Helper()
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return path
}

// offerFile runs offer with args and writes the Handoff to path.
func offerFile(t *testing.T, path string, args ...string) string {
	t.Helper()
	r := cli(t, nil, append([]string{"offer", "--out", path}, args...)...)
	mustCode(t, r, 0)
	assert.Empty(t, r.stdout, "offer --out prints nothing on stdout")
	return path
}

// world is three (or four) agents with keys and one trust file.
type world struct {
	dir        string
	a, b, c, d party
	trust      string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	dir := t.TempDir()
	w := &world{dir: dir}
	w.a = newParty(t, dir, "a", "spiffe://u.example/agent/assistant", "ES256")
	w.b = newParty(t, dir, "b", "spiffe://a.example/agent/planner", "EdDSA")
	w.c = newParty(t, dir, "c", "spiffe://b.example/agent/coder", "ES384")
	w.d = newParty(t, dir, "d", "spiffe://c.example/agent/tester", "ES256")
	w.trust = writeTrust(t, filepath.Join(dir, "trust.json"), w.a, w.b, w.c, w.d)
	return w
}

func (w *world) path(name string) string { return filepath.Join(w.dir, name) }
