package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The conformance command runs the language-neutral vectors of
// testdata/vectors against another implementation's verify command, one
// that follows the contract of "handoff verify" (flags, output object, exit
// status). The contract it relies on is in testdata/vectors/CONFORMANCE-RUNNER.md.

// conformanceVector is the part of a vector file the runner reads (format:
// testdata/vectors/README.md).
type conformanceVector struct {
	Name  string   `json:"name"`
	HC    []string `json:"hc"`
	Input struct {
		HandoffB64 string `json:"handoff_b64"`
	} `json:"input"`
	Trust    json.RawMessage `json:"trust"`
	Receiver struct {
		Self             string   `json:"self"`
		Now              int64    `json:"now"`
		Dialog           string   `json:"dialog"`
		Skew             int64    `json:"skew"`
		MaxLifetime      int64    `json:"max_lifetime"`
		MaxChain         int64    `json:"max_chain"`
		RequireFullChain bool     `json:"require_full_chain"`
		TrustedOrigins   []string `json:"trusted_origins"`
		AllowReentry     []string `json:"allow_reentry"`
		RefsPolicy       string   `json:"refs_policy"`
		RefObjects       map[string]struct {
			OctetsB64 string `json:"octets_b64"`
			SaltB64   string `json:"salt_b64"`
		} `json:"ref_objects"`
		MemoryLostAt int64 `json:"memory_lost_at"`
	} `json:"receiver"`
	Prior    []string `json:"prior"`
	Expected verdict  `json:"expected"`
}

// verdict is what a receiver decided, as the vectors and verify's output
// both spell it.
type verdict struct {
	Accepted       bool     `json:"accepted"`
	Retransmission bool     `json:"retransmission"`
	Reason         string   `json:"reason"`
	Chain          string   `json:"chain"`
	Refs           []string `json:"refs"`
	OfferDigest    string   `json:"offer_digest"`
}

func (v verdict) String() string {
	var b strings.Builder
	switch {
	case v.Accepted:
		b.WriteString("accepted")
	case v.Retransmission:
		b.WriteString("retransmission")
	case v.Reason != "":
		b.WriteString(v.Reason)
	default:
		b.WriteString("not accepted, no reason")
	}
	if v.Chain != "" {
		b.WriteString(" chain=" + v.Chain)
	}
	if len(v.Refs) > 0 {
		b.WriteString(" refs=" + strings.Join(v.Refs, ","))
	}
	return b.String()
}

// Outcomes of one vector.
const (
	vectorPass        = "PASS"
	vectorFail        = "FAIL"
	vectorUnsupported = "SKIP" // needs an optional flag the command refused
)

type vectorResult struct {
	file, status string
	expected     verdict
	actual       string // the actual verdict, or what went wrong
	detail       string
}

func runConformance(e *env, args []string) int {
	fset := newFlagSet("conformance")
	dir := fset.String("vectors", filepath.Join("testdata", "vectors"), "`DIR` holding the vector files nnn-*.json")
	only := fset.String("run", "", "run only the vectors whose file name matches `REGEXP`")
	timeout := fset.Duration("timeout", 30*time.Second, "longest one run of COMMAND may take")
	strict := fset.Bool("strict", false, "count a vector whose optional flags COMMAND refused (SKIP) as a failure")
	jobs := fset.Int("jobs", runtime.NumCPU(), "how many vectors to run at once (each vector's runs stay in order)")
	usage := func() string {
		return usageText(fset, `Usage: handoff conformance [--vectors DIR] [--run REGEXP] [--timeout 30s] [--jobs N] [--strict]
                           -- COMMAND [ARGS...]

Runs every conformance vector (testdata/vectors, format in its README.md)
against another implementation's verify command and prints PASS, FAIL or
SKIP per vector with the expected and actual verdicts, then a summary line.

COMMAND must follow the contract of "handoff verify" (the whole contract:
testdata/vectors/CONFORMANCE-RUNNER.md). For each vector it is run as

  COMMAND [ARGS...] --self ID --trust TRUST.json --now UNIX --skew S
      --max-lifetime S --max-chain N --refs not-checked|available|required
      [--dialog ID] [--require-chain] [--ref-object LOC=FILE]...
      [--ref-salt LOC=SALT]... [--replay-db FILE]
      [--trusted-origin ID]... [--allow-reentry ID]... [--memory-lost-at UNIX]
      HANDOFF_FILE

once for each earlier Handoff of the vector ("prior"), with the same
--replay-db file, then for its input. It must print one JSON object with
"accepted", "retransmission", "reason", "chain", "refs" (objects with
"outcome") and "offer_digest", and exit 0 when accepted, 1 when not, 2 on a
usage error. The last three flags are passed only to the vectors that need
them; a command that exits 2 on those is reported SKIP, not FAIL.

Exit status: 0 every vector passed (SKIPs allowed unless --strict); 1 a
vector failed; 2 usage error, or no vector found.`, `  handoff conformance -- ./other-verify
  handoff conformance -- handoff verify
  handoff conformance --run 'surrogate|unknown' -- python3 peer.py verify
  handoff conformance --vectors ../handoff/testdata/vectors -- java -jar verifier.jar verify`)
	}
	pos, code, ok := e.parse(fset, usage, args)
	if !ok {
		return code
	}
	const cmd = "conformance"
	if len(pos) == 0 {
		return e.usagef(cmd, "COMMAND is required: handoff conformance -- COMMAND [ARGS...]")
	}
	var filter *regexp.Regexp
	if *only != "" {
		var err error
		if filter, err = regexp.Compile(*only); err != nil {
			return e.usagef(cmd, "--run: %v", err)
		}
	}
	if *timeout <= 0 {
		return e.usagef(cmd, "--timeout must be positive")
	}
	if *jobs < 1 {
		return e.usagef(cmd, "--jobs must be at least 1")
	}
	files, err := vectorFiles(*dir, filter)
	if err != nil {
		return e.failf(cmd, "%v", err)
	}
	if len(files) == 0 {
		return e.failf(cmd, "no vector files nnn-*.json in %s", *dir)
	}
	work, err := os.MkdirTemp("", "handoff-conformance-")
	if err != nil {
		return e.failf(cmd, "%v", err)
	}
	defer os.RemoveAll(work)

	// Vectors are independent (each has its own directory and memory);
	// they run jobs at a time and are reported in file order.
	results := make([]vectorResult, len(files))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(*jobs, len(files)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i] = runVector(files[i], filepath.Join(work, strconv.Itoa(i)), pos, *timeout)
			}
		}()
	}
	for i := range files {
		next <- i
	}
	close(next)
	wg.Wait()

	counts := map[string]int{}
	var failed []string
	for _, r := range results {
		counts[r.status]++
		if r.status == vectorFail || (r.status == vectorUnsupported && *strict) {
			failed = append(failed, r.file)
		}
		line := fmt.Sprintf("%s %s: expected %s; actual %s", r.status, r.file, r.expected, r.actual)
		if r.detail != "" && r.status != vectorPass {
			line += " (" + oneLine(r.detail, 160) + ")"
		}
		fmt.Fprintln(e.stdout, line)
	}
	fmt.Fprintf(e.stdout, "%d vectors: %d passed, %d failed, %d skipped (optional flags refused)\n",
		len(files), counts[vectorPass], counts[vectorFail], counts[vectorUnsupported])
	if len(failed) > 0 {
		return exitNo
	}
	return exitOK
}

var conformanceFile = regexp.MustCompile(`^[0-9]{3}-[a-z0-9-]+\.json$`)

func vectorFiles(dir string, filter *regexp.Regexp) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("--vectors: %w", err)
	}
	var out []string
	for _, en := range entries {
		if en.IsDir() || !conformanceFile.MatchString(en.Name()) {
			continue
		}
		if filter != nil && !filter.MatchString(en.Name()) {
			continue
		}
		out = append(out, filepath.Join(dir, en.Name()))
	}
	sort.Strings(out)
	return out, nil
}

// runVector runs one vector in its own directory work.
func runVector(file, work string, command []string, timeout time.Duration) vectorResult {
	r := vectorResult{file: strings.TrimSuffix(filepath.Base(file), ".json"), status: vectorFail}
	fail := func(format string, args ...any) vectorResult {
		r.actual = fmt.Sprintf(format, args...)
		return r
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return fail("cannot read the vector: %v", err)
	}
	var v conformanceVector
	if err := json.Unmarshal(raw, &v); err != nil {
		return fail("cannot parse the vector: %v", err)
	}
	r.expected = v.Expected
	if err := os.MkdirAll(work, 0o755); err != nil {
		return fail("%v", err)
	}
	args, optional, err := vectorArgs(v, work)
	if err != nil {
		return fail("cannot prepare the vector: %v", err)
	}
	run := func(name string, b64 string) (ran, error) {
		data, err := base64.RawURLEncoding.DecodeString(b64)
		if err != nil {
			return ran{}, fmt.Errorf("%s: not base64url: %v", name, err)
		}
		path := filepath.Join(work, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return ran{}, err
		}
		return runCommand(command, append(slices.Clone(args), path), timeout), nil
	}
	for i, p := range v.Prior {
		out, err := run(fmt.Sprintf("prior-%d.handoff", i), p)
		if err != nil {
			return fail("%v", err)
		}
		if out.err != nil || (out.code != exitOK && out.code != exitNo) {
			if out.code == exitUsage && len(optional) > 0 {
				r.status = vectorUnsupported
				r.detail = out.stderr
				return fail("the command refused %s (exit 2) on prior[%d]", strings.Join(optional, ", "), i)
			}
			r.detail = out.stderr
			return fail("prior[%d]: %s", i, out.describe())
		}
	}
	out, err := run("input.handoff", v.Input.HandoffB64)
	if err != nil {
		return fail("%v", err)
	}
	if out.err != nil || (out.code != exitOK && out.code != exitNo) {
		r.detail = out.stderr
		if out.code == exitUsage && len(optional) > 0 {
			r.status = vectorUnsupported
			return fail("the command refused %s (exit 2)", strings.Join(optional, ", "))
		}
		return fail("%s", out.describe())
	}
	got, detail, err := parseVerdict(out.stdout)
	r.detail = detail
	if err != nil {
		return fail("output is not the verify contract's JSON object: %v", err)
	}
	r.actual = got.String()
	if problem := compareVerdict(v.Expected, got, out.code); problem != "" {
		r.actual += "; " + problem
		return r
	}
	r.status = vectorPass
	return r
}

// vectorArgs writes the vector's trust and reference objects into work and
// returns the flags for its receiver, and the optional flags it needs.
func vectorArgs(v conformanceVector, work string) (args, optional []string, err error) {
	rc := v.Receiver
	trust := filepath.Join(work, "trust.json")
	if err := os.WriteFile(trust, v.Trust, 0o644); err != nil {
		return nil, nil, err
	}
	policy := map[string]string{"not-checked": "not-checked", "check-available": "available", "required": "required"}[rc.RefsPolicy]
	if policy == "" {
		return nil, nil, fmt.Errorf("refs_policy %q", rc.RefsPolicy)
	}
	args = []string{
		"--self", rc.Self, "--trust", trust, "--now", strconv.FormatInt(rc.Now, 10),
		"--skew", strconv.FormatInt(rc.Skew, 10), "--max-lifetime", strconv.FormatInt(rc.MaxLifetime, 10),
		"--max-chain", strconv.FormatInt(rc.MaxChain, 10), "--refs", policy,
	}
	if rc.Dialog != "" {
		args = append(args, "--dialog", rc.Dialog)
	}
	if rc.RequireFullChain || len(rc.TrustedOrigins) > 0 {
		args = append(args, "--require-chain")
	}
	locs := make([]string, 0, len(rc.RefObjects))
	for loc := range rc.RefObjects {
		locs = append(locs, loc)
	}
	sort.Strings(locs)
	for i, loc := range locs {
		o := rc.RefObjects[loc]
		octets, err := base64.RawURLEncoding.DecodeString(o.OctetsB64)
		if err != nil {
			return nil, nil, fmt.Errorf("ref_objects[%q]: %v", loc, err)
		}
		path := filepath.Join(work, fmt.Sprintf("ref-%d", i))
		if err := os.WriteFile(path, octets, 0o644); err != nil {
			return nil, nil, err
		}
		args = append(args, "--ref-object", loc+"="+path)
		if o.SaltB64 != "" {
			args = append(args, "--ref-salt", loc+"="+o.SaltB64)
		}
	}
	if len(v.Prior) > 0 {
		args = append(args, "--replay-db", filepath.Join(work, "replay.db"))
	}
	for _, id := range rc.TrustedOrigins {
		args = append(args, "--trusted-origin", id)
	}
	if len(rc.TrustedOrigins) > 0 {
		optional = append(optional, "--trusted-origin")
	}
	for _, id := range rc.AllowReentry {
		args = append(args, "--allow-reentry", id)
	}
	if len(rc.AllowReentry) > 0 {
		optional = append(optional, "--allow-reentry")
	}
	if rc.MemoryLostAt != 0 {
		args = append(args, "--memory-lost-at", strconv.FormatInt(rc.MemoryLostAt, 10))
		optional = append(optional, "--memory-lost-at")
	}
	return args, optional, nil
}

// ran is what one run of the command did.
type ran struct {
	stdout []byte
	stderr string
	code   int
	err    error // it could not run, or ran out of time
}

func (r ran) describe() string {
	if r.err != nil {
		return r.err.Error()
	}
	return fmt.Sprintf("exit status %d, want 0 (accepted) or 1 (not accepted)", r.code)
}

func runCommand(command []string, args []string, timeout time.Duration) ran {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c := exec.CommandContext(ctx, command[0], append(slices.Clone(command[1:]), args...)...)
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	r := ran{stdout: stdout.Bytes(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		r.err = fmt.Errorf("no answer within %s", timeout)
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		r.err = fmt.Errorf("cannot run %s: %v", command[0], err)
	}
	return r
}

// parseVerdict reads verify's output object.
func parseVerdict(stdout []byte) (verdict, string, error) {
	var out struct {
		Accepted       *bool   `json:"accepted"`
		Retransmission *bool   `json:"retransmission"`
		Reason         *string `json:"reason"`
		Chain          *string `json:"chain"`
		Detail         string  `json:"detail"`
		OfferDigest    string  `json:"offer_digest"`
		Refs           []struct {
			Outcome string `json:"outcome"`
		} `json:"refs"`
	}
	dec := json.NewDecoder(bytes.NewReader(stdout))
	if err := dec.Decode(&out); err != nil {
		return verdict{}, "", err
	}
	if dec.More() {
		return verdict{}, "", errors.New("more than one JSON value")
	}
	switch {
	case out.Accepted == nil:
		return verdict{}, out.Detail, errors.New(`no "accepted" member`)
	case out.Retransmission == nil:
		return verdict{}, out.Detail, errors.New(`no "retransmission" member`)
	case out.Reason == nil:
		return verdict{}, out.Detail, errors.New(`no "reason" member`)
	case out.Chain == nil:
		return verdict{}, out.Detail, errors.New(`no "chain" member`)
	}
	v := verdict{Accepted: *out.Accepted, Retransmission: *out.Retransmission, Reason: *out.Reason, Chain: *out.Chain, OfferDigest: out.OfferDigest}
	for _, r := range out.Refs {
		v.Refs = append(v.Refs, r.Outcome)
	}
	return v, out.Detail, nil
}

// compareVerdict says how got differs from want, or "" when it does not.
// The exit status must agree with "accepted".
func compareVerdict(want, got verdict, code int) string {
	var diffs []string
	if got.Accepted != want.Accepted {
		diffs = append(diffs, fmt.Sprintf("accepted %v, want %v", got.Accepted, want.Accepted))
	}
	if got.Retransmission != want.Retransmission {
		diffs = append(diffs, fmt.Sprintf("retransmission %v, want %v", got.Retransmission, want.Retransmission))
	}
	if got.Reason != want.Reason {
		diffs = append(diffs, fmt.Sprintf("reason %q, want %q", got.Reason, want.Reason))
	}
	if got.Chain != want.Chain {
		diffs = append(diffs, fmt.Sprintf("chain %q, want %q", got.Chain, want.Chain))
	}
	if !slices.Equal(got.Refs, want.Refs) {
		diffs = append(diffs, fmt.Sprintf("refs %v, want %v", got.Refs, want.Refs))
	}
	// An implementation that could not take the Handoff apart may print
	// no digest; one it prints must be right.
	if got.OfferDigest != want.OfferDigest && (got.OfferDigest != "" || want.Reason != "bad-signature") {
		diffs = append(diffs, fmt.Sprintf("offer_digest %q, want %q", got.OfferDigest, want.OfferDigest))
	}
	if (code == exitOK) != got.Accepted {
		diffs = append(diffs, fmt.Sprintf("exit status %d with accepted %v", code, got.Accepted))
	}
	return strings.Join(diffs, "; ")
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}
