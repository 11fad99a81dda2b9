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
	"runtime/debug"
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
// status). The contract it relies on is in
// testdata/vectors/CONFORMANCE-RUNNER.md; the vector format in
// testdata/vectors/README.md.
//
// A vector is graded by what the draft fixes, never by this project's own
// answer alone: the outcome must be one of the vector's acceptable ones
// (accepted with a chain state the text allows, refused with one of a set
// of reasons, or a retransmission), the offer digest must be right, and the
// references' outcomes are compared only where they were checked.

// conformanceVector is the part of a vector file the runner reads.
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
	Prior      []string  `json:"prior"`
	Level      string    `json:"level"`
	Requires   []string  `json:"requires"`
	Acceptable []outcome `json:"acceptable"`
	WhyOpen    string    `json:"why_open"`
	Expected   verdict   `json:"expected"`
}

// outcome is one verdict a vector accepts.
type outcome struct {
	Verdict string    `json:"verdict"` // accepted, refused, retransmission
	Reasons []string  `json:"reasons"` // refused: one of these
	Chain   []string  `json:"chain"`   // accepted: one of these; empty: not compared
	Refs    *[]string `json:"refs"`    // compared only when present
}

func (o outcome) String() string {
	s := o.Verdict
	switch {
	case o.Verdict == "refused":
		s = strings.Join(o.Reasons, "|")
	case len(o.Chain) > 0:
		s += " chain=" + strings.Join(o.Chain, "|")
	}
	if o.Refs != nil {
		s += " refs=[" + strings.Join(*o.Refs, ",") + "]"
	}
	return s
}

// matches says whether got is this outcome.
func (o outcome) matches(got verdict) bool {
	switch o.Verdict {
	case "accepted":
		if !got.Accepted || got.Retransmission || (len(o.Chain) > 0 && !slices.Contains(o.Chain, got.Chain)) {
			return false
		}
	case "refused":
		if got.Accepted || got.Retransmission || !slices.Contains(o.Reasons, got.Reason) {
			return false
		}
	case "retransmission":
		return got.Retransmission && !got.Accepted
	default:
		return false
	}
	return o.Refs == nil || slices.Equal(*o.Refs, got.Refs)
}

func acceptableString(list []outcome) string {
	parts := make([]string, len(list))
	for i, o := range list {
		parts[i] = o.String()
	}
	return strings.Join(parts, " or ")
}

// verdict is what a receiver decided, as verify's output spells it.
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
		b.WriteString(" refs=[" + strings.Join(v.Refs, ",") + "]")
	}
	return b.String()
}

// Outcomes of one vector.
const (
	vectorPass = "PASS"
	vectorFail = "FAIL"
	vectorSkip = "SKIP" // needs a feature the command declared it lacks
)

// Levels of a vector, in the order they are reported.
var levels = []string{"MUST", "SHOULD", "MAY", "open"}

// features are the optional features a vector may require and a command
// may declare it lacks.
var featurePattern = regexp.MustCompile(`^(alg:(ES384|EdDSA)|refs:(check-available|required)|ref-kind:[a-z0-9-]+|flag:(trusted-origin|allow-reentry|memory-lost-at))$`)

type vectorResult struct {
	File       string   `json:"file"`
	Level      string   `json:"level"`
	Status     string   `json:"status"`
	Requires   []string `json:"requires"`
	Acceptable string   `json:"acceptable"`
	Actual     string   `json:"actual"` // the actual verdict, or what went wrong
	Problem    string   `json:"problem,omitempty"`
	Detail     string   `json:"detail,omitempty"`
}

// fails says whether r fails the run: a MUST vector that failed, or under
// strict any failure or skip.
func (r vectorResult) fails(strict bool) bool {
	if strict {
		return r.Status != vectorPass
	}
	return r.Status == vectorFail && r.Level == "MUST"
}

// commaList collects the comma-separated values of a repeated flag.
type commaList []string

func (l *commaList) String() string { return strings.Join(*l, ",") }

func (l *commaList) Set(s string) error {
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			*l = append(*l, f)
		}
	}
	return nil
}

func runConformance(e *env, args []string) int {
	fset := newFlagSet("conformance")
	dir := fset.String("vectors", "", "`DIR` holding the vector files nnn-*.json (default: testdata/vectors, else the vectors of the module this binary was built from, in the module cache)")
	only := fset.String("run", "", "run only the vectors whose file name matches `REGEXP`")
	timeout := fset.Duration("timeout", 30*time.Second, "longest one run of COMMAND may take")
	strict := fset.Bool("strict", false, "fail the run on any failure (SHOULD, MAY and open included) and on any skip")
	jobs := fset.Int("jobs", runtime.NumCPU(), "how many vectors to run at once (each vector's runs stay in order)")
	var lacks commaList
	fset.Var(&lacks, "lacks", "`FEATURES` COMMAND does not offer, comma-separated (alg:EdDSA, alg:ES384, refs:check-available, refs:required, ref-kind:KIND, flag:trusted-origin, flag:allow-reentry, flag:memory-lost-at); vectors that need one are skipped")
	capFile := fset.String("capabilities", "", "`FILE`: a JSON object {\"lacks\": [FEATURE, ...]}, as --lacks")
	jsonOut := fset.String("json", "", "also write the results as JSON to `FILE` (- for standard output, instead of the text)")
	junitOut := fset.String("junit", "", "also write the results as JUnit XML to `FILE` (- for standard output, instead of the text)")
	usage := func() string {
		return usageText(fset, `Usage: handoff conformance [--vectors DIR] [--run REGEXP] [--timeout 30s] [--jobs N]
                           [--lacks FEATURES] [--capabilities FILE] [--strict]
                           [--json FILE] [--junit FILE] -- COMMAND [ARGS...]

Runs every conformance vector (testdata/vectors, format in its README.md;
an installed handoff finds its own version's in the module cache)
against another implementation's verify command and prints PASS, FAIL or
SKIP per vector with its level and the acceptable and actual verdicts, a
summary per level, then a summary line.

COMMAND must follow the contract of "handoff verify" (the whole contract:
testdata/vectors/CONFORMANCE-RUNNER.md). For each vector it is run as

  COMMAND [ARGS...] --self ID --trust TRUST.json --now UNIX --skew S
      --max-lifetime S --max-chain N [--dialog ID] [--require-chain]
      [--replay-db FILE] [--refs available|required [--ref-object LOC=FILE]...
      [--ref-salt LOC=SALT]...] [--trusted-origin ID]... [--allow-reentry ID]...
      [--memory-lost-at UNIX] HANDOFF_FILE

with only the flags the vector uses, once for each earlier Handoff of the
vector ("prior"), with the same --replay-db file, then for its input. It
must print one JSON object with "accepted", "retransmission", "reason",
"chain", "refs" (objects with "outcome") and "offer_digest", and exit 0
when accepted, 1 when not, 2 on a usage error.

A vector passes when the answer is one of its acceptable outcomes: the
verdict, the reason within its set, the chain state only where the text
fixes it, the references only where they were checked, and the offer
digest. A vector that needs a feature named in --lacks is SKIP.

Exit status: 0 no MUST vector failed (SHOULD, MAY and open results and
SKIPs are reported; with --strict they fail too); 1 a vector failed;
2 usage error, or no vector found.`, `  handoff conformance -- ./other-verify
  handoff conformance -- handoff verify
  handoff conformance --lacks alg:EdDSA,alg:ES384 --junit report.xml -- ./other-verify
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
	if *jsonOut == "-" && *junitOut == "-" {
		return e.usagef(cmd, "--json and --junit cannot both write to standard output")
	}
	if *capFile != "" {
		raw, err := os.ReadFile(*capFile)
		if err != nil {
			return e.usagef(cmd, "--capabilities: %v", err)
		}
		var caps struct {
			Lacks []string `json:"lacks"`
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&caps); err != nil {
			return e.usagef(cmd, "--capabilities %s: %v", *capFile, err)
		}
		lacks = append(lacks, caps.Lacks...)
	}
	lacking := map[string]bool{}
	for _, f := range lacks {
		if !featurePattern.MatchString(f) {
			return e.usagef(cmd, "--lacks: unknown feature %q (alg:EdDSA, alg:ES384, refs:check-available, refs:required, ref-kind:KIND, flag:trusted-origin, flag:allow-reentry, flag:memory-lost-at)", f)
		}
		lacking[f] = true
	}
	if *dir == "" {
		var err error
		if *dir, err = defaultVectors(); err != nil {
			return e.failf(cmd, "%v", err)
		}
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
				results[i] = runVector(files[i], filepath.Join(work, strconv.Itoa(i)), pos, *timeout, lacking)
			}
		}()
	}
	for i := range files {
		next <- i
	}
	close(next)
	wg.Wait()

	rep := newReport(results, *strict, suiteVersion(*dir), pos, lacks)
	if *jsonOut != "-" && *junitOut != "-" {
		rep.text(e.stdout)
	}
	for _, out := range []struct {
		file  string
		write func(*bytes.Buffer) error
	}{{*jsonOut, rep.json}, {*junitOut, rep.junit}} {
		if out.file == "" {
			continue
		}
		var buf bytes.Buffer
		if err := out.write(&buf); err != nil {
			return e.failf(cmd, "%v", err)
		}
		if out.file == "-" {
			if _, err := e.stdout.Write(buf.Bytes()); err != nil {
				return e.failf(cmd, "%v", err)
			}
		} else if err := os.WriteFile(out.file, buf.Bytes(), 0o644); err != nil {
			return e.failf(cmd, "%v", err)
		}
	}
	if !rep.OK {
		return exitNo
	}
	return exitOK
}

// suiteVersion reads the suite's VERSION file, or "" when it has none.
// defaultVectors is where --vectors looks when it is not given:
// testdata/vectors below the working directory (a checkout), else the
// vectors of the github.com/agentproto/handoff module this binary was built
// from, in the module cache, where "go install ...@VERSION" put them.
func defaultVectors() (string, error) {
	local := filepath.Join("testdata", "vectors")
	if fi, err := os.Stat(local); err == nil && fi.IsDir() {
		return local, nil
	}
	const root = "github.com/agentproto/handoff"
	version := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == root && d.Replace == nil {
				version = d.Version
			}
		}
	}
	if version == "" || version == "(devel)" {
		return "", errors.New("no testdata/vectors here, and this binary was not built from a released module: give --vectors DIR")
	}
	cache := os.Getenv("GOMODCACHE")
	if cache == "" {
		gopath := os.Getenv("GOPATH")
		if gopath == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("no module cache to find the vectors in (%v): give --vectors DIR", err)
			}
			gopath = filepath.Join(home, "go")
		}
		cache = filepath.Join(filepath.SplitList(gopath)[0], "pkg", "mod")
	}
	dir := filepath.Join(cache, filepath.FromSlash(root)+"@"+version, "testdata", "vectors")
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("the vectors of %s@%s are not in the module cache (%v): run \"go mod download %s@%s\" or give --vectors DIR", root, version, err, root, version)
	}
	return dir, nil
}

func suiteVersion(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "VERSION"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
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

// readVector reads and checks one vector file.
func readVector(file string) (conformanceVector, error) {
	var v conformanceVector
	raw, err := os.ReadFile(file)
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, err
	}
	if !slices.Contains(levels, v.Level) {
		return v, fmt.Errorf("level %q", v.Level)
	}
	if len(v.Acceptable) == 0 {
		return v, errors.New("no acceptable outcome")
	}
	for _, f := range v.Requires {
		if !featurePattern.MatchString(f) {
			return v, fmt.Errorf("requires unknown feature %q", f)
		}
	}
	return v, nil
}

// runVector runs one vector in its own directory work.
func runVector(file, work string, command []string, timeout time.Duration, lacking map[string]bool) vectorResult {
	r := vectorResult{File: strings.TrimSuffix(filepath.Base(file), ".json"), Status: vectorFail, Level: "MUST"}
	fail := func(format string, args ...any) vectorResult {
		r.Actual = fmt.Sprintf(format, args...)
		return r
	}
	v, err := readVector(file)
	if err != nil {
		return fail("cannot read the vector: %v", err)
	}
	r.Level, r.Requires, r.Acceptable = v.Level, v.Requires, acceptableString(v.Acceptable)
	if r.Requires == nil {
		r.Requires = []string{}
	}
	var missing []string
	for _, f := range v.Requires {
		if lacking[f] {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		r.Status = vectorSkip
		return fail("not run: the command lacks %s", strings.Join(missing, ", "))
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return fail("%v", err)
	}
	args, err := vectorArgs(v, work)
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
	hint := func(code int) string {
		if code == exitUsage && len(v.Requires) > 0 {
			return fmt.Sprintf("; if the command does not offer %s, declare it with --lacks", strings.Join(v.Requires, ", "))
		}
		return ""
	}
	for i, p := range v.Prior {
		out, err := run(fmt.Sprintf("prior-%d.handoff", i), p)
		if err != nil {
			return fail("%v", err)
		}
		if out.err != nil || (out.code != exitOK && out.code != exitNo) {
			r.Detail = out.stderr
			return fail("prior[%d]: %s%s", i, out.describe(), hint(out.code))
		}
	}
	out, err := run("input.handoff", v.Input.HandoffB64)
	if err != nil {
		return fail("%v", err)
	}
	if out.err != nil || (out.code != exitOK && out.code != exitNo) {
		r.Detail = out.stderr
		return fail("%s%s", out.describe(), hint(out.code))
	}
	got, detail, err := parseVerdict(out.stdout)
	r.Detail = detail
	if err != nil {
		return fail("output is not the verify contract's JSON object: %v", err)
	}
	r.Actual = got.String()
	if problem := compareVerdict(v, got, out.code); problem != "" {
		r.Problem = problem
		return r
	}
	r.Status = vectorPass
	return r
}

// vectorArgs writes the vector's trust and reference objects into work and
// returns the flags for its receiver: the core flags, and the others only
// when the vector uses them.
func vectorArgs(v conformanceVector, work string) ([]string, error) {
	rc := v.Receiver
	trust := filepath.Join(work, "trust.json")
	if err := os.WriteFile(trust, v.Trust, 0o644); err != nil {
		return nil, err
	}
	args := []string{
		"--self", rc.Self, "--trust", trust, "--now", strconv.FormatInt(rc.Now, 10),
		"--skew", strconv.FormatInt(rc.Skew, 10), "--max-lifetime", strconv.FormatInt(rc.MaxLifetime, 10),
		"--max-chain", strconv.FormatInt(rc.MaxChain, 10),
	}
	if rc.Dialog != "" {
		args = append(args, "--dialog", rc.Dialog)
	}
	if rc.RequireFullChain || len(rc.TrustedOrigins) > 0 {
		args = append(args, "--require-chain")
	}
	if len(v.Prior) > 0 {
		args = append(args, "--replay-db", filepath.Join(work, "replay.db"))
	}
	switch rc.RefsPolicy {
	case "not-checked":
		// References are not checked: no reference flag at all.
	case "check-available", "required":
		policy := map[string]string{"check-available": "available", "required": "required"}[rc.RefsPolicy]
		args = append(args, "--refs", policy)
		locs := make([]string, 0, len(rc.RefObjects))
		for loc := range rc.RefObjects {
			locs = append(locs, loc)
		}
		sort.Strings(locs)
		for i, loc := range locs {
			o := rc.RefObjects[loc]
			octets, err := base64.RawURLEncoding.DecodeString(o.OctetsB64)
			if err != nil {
				return nil, fmt.Errorf("ref_objects[%q]: %v", loc, err)
			}
			path := filepath.Join(work, fmt.Sprintf("ref-%d", i))
			if err := os.WriteFile(path, octets, 0o644); err != nil {
				return nil, err
			}
			args = append(args, "--ref-object", loc+"="+path)
			if o.SaltB64 != "" {
				args = append(args, "--ref-salt", loc+"="+o.SaltB64)
			}
		}
	default:
		return nil, fmt.Errorf("refs_policy %q", rc.RefsPolicy)
	}
	for _, id := range rc.TrustedOrigins {
		args = append(args, "--trusted-origin", id)
	}
	for _, id := range rc.AllowReentry {
		args = append(args, "--allow-reentry", id)
	}
	if rc.MemoryLostAt != 0 {
		args = append(args, "--memory-lost-at", strconv.FormatInt(rc.MemoryLostAt, 10))
	}
	return args, nil
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

// parseVerdict reads verify's output object. accepted, retransmission and
// reason are required; chain and refs may be left out where they mean
// nothing (a rejection before step 6, an offer without references).
func parseVerdict(stdout []byte) (verdict, string, error) {
	var out struct {
		Accepted       *bool   `json:"accepted"`
		Retransmission *bool   `json:"retransmission"`
		Reason         *string `json:"reason"`
		Chain          string  `json:"chain"`
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
	}
	v := verdict{Accepted: *out.Accepted, Retransmission: *out.Retransmission, Reason: *out.Reason, Chain: out.Chain, OfferDigest: out.OfferDigest}
	for _, r := range out.Refs {
		v.Refs = append(v.Refs, r.Outcome)
	}
	return v, out.Detail, nil
}

// compareVerdict says how got differs from what the vector accepts, or ""
// when it does not. The exit status must agree with "accepted".
func compareVerdict(v conformanceVector, got verdict, code int) string {
	var diffs []string
	match := slices.ContainsFunc(v.Acceptable, func(o outcome) bool { return o.matches(got) })
	if !match {
		diffs = append(diffs, "not an acceptable outcome")
	}
	if got.Accepted && got.Retransmission {
		diffs = append(diffs, "accepted and a retransmission at once")
	}
	// An implementation that could not take the Handoff apart may print
	// no digest; one it prints must be right.
	want := v.Expected.OfferDigest
	if got.OfferDigest != want && (got.OfferDigest != "" || got.Accepted || got.Retransmission || got.Reason != "bad-signature") {
		diffs = append(diffs, fmt.Sprintf("offer_digest %q, want %q", got.OfferDigest, want))
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
