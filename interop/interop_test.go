package interop_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The peer runs under the system interpreter: a python3 found first on
// PATH (pyenv and the like) may not see Debian's packages.
const pythonBin = "/usr/bin/python3"

var (
	handoffBin  string // the CLI, built by TestMain
	peerScript  string // interop/peer/peer.py, absolute
	peerMissing string // why the peer cannot run; "" when it can
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "handoff-interop-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "interop: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)

	// go test puts its own toolchain first on PATH.
	goTool, err := exec.LookPath("go")
	if err != nil {
		fmt.Fprintf(os.Stderr, "interop: no go command to build cmd/handoff: %v\n", err)
		return 1
	}
	handoffBin = filepath.Join(dir, "handoff")
	// cmd/handoff is a module of its own: build it from its directory.
	build := exec.Command(goTool, "build", "-o", handoffBin, ".")
	build.Dir = filepath.Join("..", "cmd", "handoff")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "interop: building cmd/handoff: %v\n%s", err, out)
		return 1
	}
	if peerScript, err = filepath.Abs(filepath.Join("peer", "peer.py")); err != nil {
		fmt.Fprintf(os.Stderr, "interop: %v\n", err)
		return 1
	}
	peerMissing = probePeer()
	code := m.Run()
	stopPeers()
	return code
}

// probePeer says why the peer cannot run, or "" when it can.
func probePeer() string {
	if _, err := os.Stat(pythonBin); err != nil {
		return pythonBin + " is missing"
	}
	out, err := exec.Command(pythonBin, "-c", "import jwcrypto, cbor2, cryptography").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("%s cannot import jwcrypto, cbor2 and cryptography: %s", pythonBin, strings.TrimSpace(string(out)))
	}
	return ""
}

// requirePeer skips the test when the peer cannot run, or fails it in CI
// (CI set) or when HANDOFF_REQUIRE_INTEROP=1.
func requirePeer(t *testing.T) {
	t.Helper()
	if peerMissing == "" {
		return
	}
	msg := "interop peer unavailable: " + peerMissing +
		"; run `bash .ci/interop.sh` (as root) to install python3-jwcrypto, python3-cbor2 and python3-cryptography"
	if os.Getenv("CI") != "" || os.Getenv("HANDOFF_REQUIRE_INTEROP") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// ---------------------------------------------------------------- running

// ran is what one command did.
type ran struct {
	cmd    string
	stdout []byte
	stderr string
	code   int
}

func execute(t *testing.T, name string, args ...string) ran {
	t.Helper()
	cmd := exec.Command(name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := ran{cmd: filepath.Base(name) + " " + strings.Join(args, " "), stdout: stdout.Bytes(), stderr: stderr.String()}
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("%s: %v", r.cmd, err)
		}
		r.code = ee.ExitCode()
	}
	return r
}

// ours runs the handoff CLI.
func ours(t *testing.T, args ...string) ran {
	t.Helper()
	return execute(t, handoffBin, args...)
}

// peer runs a subcommand of the Python peer, in one of the long-running
// `peer.py serve` processes: the same code as a separate run, without the
// interpreter's start-up for each command.
func peer(t *testing.T, args ...string) ran {
	t.Helper()
	peersOnce.Do(startPeers)
	s := <-peers
	defer func() { peers <- s }()
	r, err := s.call(args)
	if err != nil {
		t.Fatalf("%s: %v", r.cmd, err)
	}
	return r
}

// peerServer is one `peer.py serve`: a JSON array of arguments per line
// in, a JSON object per line out.
type peerServer struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	err error // the process is unusable
}

var (
	peers     chan *peerServer
	peersOnce sync.Once
	started   []*peerServer
)

func startPeers() {
	n := min(max(runtime.NumCPU(), 1), 4)
	peers = make(chan *peerServer, n)
	for range n {
		s := &peerServer{cmd: exec.Command(pythonBin, peerScript, "serve")}
		s.cmd.Stderr = os.Stderr
		var out io.ReadCloser
		if s.in, s.err = s.cmd.StdinPipe(); s.err == nil {
			if out, s.err = s.cmd.StdoutPipe(); s.err == nil {
				s.out = bufio.NewReader(out)
				s.err = s.cmd.Start()
			}
		}
		started = append(started, s)
		peers <- s
	}
}

func stopPeers() {
	for _, s := range started {
		if s.in != nil {
			s.in.Close()
		}
		if s.cmd.Process != nil {
			s.cmd.Wait()
		}
	}
}

func (s *peerServer) call(args []string) (ran, error) {
	r := ran{cmd: "peer.py " + strings.Join(args, " ")}
	if s.err != nil {
		return r, s.err
	}
	line, err := json.Marshal(args)
	if err != nil {
		return r, err
	}
	if _, err := s.in.Write(append(line, '\n')); err != nil {
		s.err = fmt.Errorf("peer.py serve: %w", err)
		return r, s.err
	}
	answer, err := s.out.ReadBytes('\n')
	if err != nil {
		s.err = fmt.Errorf("peer.py serve: %w", err)
		return r, s.err
	}
	var a struct {
		Code   int    `json:"code"`
		Stdout []byte `json:"stdout"` // base64
		Stderr string `json:"stderr"`
	}
	if err := json.Unmarshal(answer, &a); err != nil {
		s.err = fmt.Errorf("peer.py serve: %w: %q", err, answer)
		return r, s.err
	}
	r.stdout, r.stderr, r.code = a.Stdout, a.Stderr, a.Code
	return r, nil
}

// must fails the test unless r exited 0.
func must(t *testing.T, r ran) ran {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("%s: exit %d\nstdout: %s\nstderr: %s", r.cmd, r.code, r.stdout, r.stderr)
	}
	return r
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// ---------------------------------------------------------------- verdicts

// verdict is the JSON object that both verifiers print (the peer prints a
// subset of the members).
type verdict struct {
	Accepted       bool   `json:"accepted"`
	Retransmission bool   `json:"retransmission"`
	Reason         string `json:"reason"`
	Detail         string `json:"detail"`
	Equivocation   string `json:"equivocation"`
	OfferDigest    string `json:"offer_digest"`
	Chain          string `json:"chain"`
	Iss            string `json:"iss"`
	Aud            string `json:"aud"`
	Hop            string `json:"hop"`
	Dialog         string `json:"dialog"`
	Refs           []struct {
		Kind    string `json:"kind"`
		Alg     string `json:"alg"`
		Dig     string `json:"dig"`
		Outcome string `json:"outcome"`
	} `json:"refs"`
}

// statusVerdict is what verify-status prints (both tools).
type statusVerdict struct {
	Valid  bool   `json:"valid"`
	Reason string `json:"reason"`
	Detail string `json:"detail"`
	State  string `json:"state"`
	Iss    string `json:"iss"`
	Aud    string `json:"aud"`
	Offer  string `json:"offer"`
}

// decode parses the one JSON object a verifier printed.
func decode[T any](t *testing.T, r ran) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(bytes.NewReader(r.stdout))
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: exit %d, stdout is not one JSON object: %v\nstdout: %s\nstderr: %s", r.cmd, r.code, err, r.stdout, r.stderr)
	}
	if dec.More() {
		t.Fatalf("%s: more than one JSON value on stdout:\n%s", r.cmd, r.stdout)
	}
	return v
}

// want is an expected verdict: reason "" means accepted. chain, when set,
// is the expected chain state.
type want struct {
	reason string
	chain  string
}

func accept(chain string) want  { return want{chain: chain} }
func reject(reason string) want { return want{reason: reason} }

// check asserts a verify run: the reason, the chain state, and the exit
// status that goes with them (0 accepted, 1 not).
func check(t *testing.T, who string, r ran, w want) verdict {
	t.Helper()
	v := decode[verdict](t, r)
	code := 1
	if w.reason == "" {
		code = 0
	}
	if v.Accepted != (w.reason == "") || v.Reason != w.reason || r.code != code {
		t.Errorf("%s verify: accepted=%v reason=%q exit %d (detail %q); want reason %q exit %d\n  %s",
			who, v.Accepted, v.Reason, r.code, v.Detail, w.reason, code, r.cmd)
	}
	if w.chain != "" && v.Chain != w.chain {
		t.Errorf("%s verify: chain %q, want %q (reason %q, detail %q)", who, v.Chain, w.chain, v.Reason, v.Detail)
	}
	return v
}

// b64sha256 is a handoff digest's val: SHA-256, base64url without padding.
func b64sha256(b []byte) string {
	s := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(s[:])
}

// thumbprint is the RFC 7638 thumbprint of a public EC JWK, computed here
// from the members' required order, independently of both tools.
func thumbprint(t *testing.T, pub []byte) string {
	t.Helper()
	var k struct{ Kty, Crv, X, Y string }
	if err := json.Unmarshal(pub, &k); err != nil {
		t.Fatalf("public JWK: %v\n%s", err, pub)
	}
	if k.Kty != "EC" || k.Crv != "P-256" {
		t.Fatalf("public JWK is not EC P-256: %s", pub)
	}
	canon := fmt.Sprintf(`{"crv":%q,"kty":%q,"x":%q,"y":%q}`, k.Crv, k.Kty, k.X, k.Y)
	return b64sha256([]byte(canon))
}
