// Command gen writes the conformance vectors of testdata/vectors: one JSON
// file per scenario of receiving a Handoff (draft-handoff-01 section 5.1),
// with the Handoff's exact octets, the receiver's trust configuration and
// policy, and the outcome a conforming receiver reaches. It also writes the
// directory's README.md, which describes the format.
//
// It lives beside the vectors it writes, under testdata, so that the go
// tool's ./... patterns leave it out of the module's packages. Run it from
// the module root:
//
//	go run ./testdata/vectors/gen            # write the files
//	go run ./testdata/vectors/gen -check     # compare, write nothing
//
// Every key is derived from a fixed label and every signature is
// deterministic (RFC 6979 ECDSA, Ed25519), so the output is the same on
// every run. The module's vectors_test.go runs -check.
package main

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"text/template"

	"github.com/agentproto/handoff/reason"
)

//go:embed README.md.tmpl
var readmeTemplate string

//go:embed vector.schema.json
var vectorSchema []byte

// handWritten are the files of the suite that are written by hand, not by
// the generator; the manifest covers them too.
var handWritten = []string{"CONFORMANCE-RUNNER.md"}

func main() {
	out := flag.String("out", filepath.Join("testdata", "vectors"), "directory of the vectors")
	check := flag.Bool("check", false, "regenerate twice in memory and compare with -out; write nothing, exit 1 on any difference")
	flag.StringVar(&draft00, "draft00", draft00, "directory of the draft-00 worked example")
	flag.Parse()
	log.SetFlags(0)
	if *check {
		problems, err := checkDir(*out)
		if err != nil {
			log.Fatal(err)
		}
		for _, p := range problems {
			fmt.Fprintln(os.Stderr, p)
		}
		if len(problems) > 0 {
			fmt.Fprintf(os.Stderr, "%d problems; run go run ./testdata/vectors/gen to regenerate\n", len(problems))
			os.Exit(1)
		}
		return
	}
	if err := write(*out); err != nil {
		log.Fatal(err)
	}
}

// checkDir generates the files twice and compares both runs with each other
// and with dir: the generator is deterministic, so any difference means the
// committed files are stale, were edited by hand, or the generator is not
// deterministic.
func checkDir(dir string) ([]string, error) {
	a, err := generate(dir)
	if err != nil {
		return nil, err
	}
	b, err := generate(dir)
	if err != nil {
		return nil, err
	}
	var problems []string
	names := make([]string, 0, len(a))
	for name := range a {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !bytes.Equal(a[name], b[name]) {
			problems = append(problems, name+": differs between two runs of the generator")
		}
		got, err := os.ReadFile(filepath.Join(dir, name))
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: %v", name, err))
		case !bytes.Equal(got, a[name]):
			problems = append(problems, name+": differs from the generator's output")
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if _, ok := a[e.Name()]; !ok && vectorFile.MatchString(e.Name()) {
			problems = append(problems, e.Name()+": not written by the generator")
		}
	}
	return problems, nil
}

var vectorFile = regexp.MustCompile(`^[0-9]{3}-[a-z0-9-]+\.json$`)

// write generates every vector and the README into dir, removing vectors
// of earlier runs first.
func write(dir string) error {
	files, err := generate(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range old {
		if vectorFile.MatchString(e.Name()) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// row is one line of the README's list of cases.
type row struct {
	File, Level, Outcome, Chain, HC, Description string
}

// exampleOf picks from the first vector the values the README's abridged
// example shows, so that the example matches the file.
func exampleOf(file []byte) (map[string]any, error) {
	var v struct {
		Input struct {
			HandoffB64  string `json:"handoff_b64"`
			HandoffText string `json:"handoff_text"`
			Decoded     struct {
				Offer struct {
					Digest    string
					Size      int
					Protected struct{ KID string }
					Payload   struct{ Hop string }
				}
			}
		}
		Trust map[string]struct {
			Keys []struct{ KID, X, Y string }
		}
	}
	if err := json.Unmarshal(file, &v); err != nil {
		return nil, err
	}
	off := v.Input.Decoded.Offer
	k := v.Trust[string(planner.id)].Keys[0]
	return map[string]any{
		"B64": v.Input.HandoffB64[:56], "Text": strings.ReplaceAll(v.Input.HandoffText[:48], `"`, `\"`),
		"Size": off.Size, "Digest": off.Digest, "KID": off.Protected.KID, "Hop": off.Payload.Hop,
		"X": k.X, "Y": k.Y,
	}, nil
}

// coverage lists, for each reason code and chain state, the files that
// expect it.
func coverage(rows []row) []row {
	var out []row
	add := func(label string, match func(r row) bool) {
		var files []string
		for _, r := range rows {
			if match(r) {
				files = append(files, strings.TrimSuffix(r.File, ".json"))
			}
		}
		out = append(out, row{Outcome: label, File: strings.Join(files, ", ")})
	}
	add("accepted", func(r row) bool { return r.Outcome == "accepted" })
	add("retransmission", func(r row) bool { return r.Outcome == "retransmission" })
	for _, reason := range reason.All() {
		add("`"+string(reason)+"`", func(r row) bool { return r.Outcome == "`"+string(reason)+"`" })
	}
	for _, st := range []string{absent, partial, full, unverif} {
		add("chain "+st, func(r row) bool { return r.Chain == st })
	}
	return out
}

// generate returns every file of the vectors directory by name; dir is
// where the hand-written files are read from for the manifest.
func generate(dir string) (map[string][]byte, error) {
	files := map[string][]byte{}
	var rows []row
	var example map[string]any
	seen := map[string]bool{}
	for i, d := range cases {
		if seen[d.slug] {
			return nil, fmt.Errorf("duplicate slug %q", d.slug)
		}
		seen[d.slug] = true
		c := &Case{Slug: d.slug, Trust: baseTrust, Receiver: defaultReceiver()}
		d.build(&builder{slug: d.slug}, c)
		if c.Description == "" || len(c.HC) == 0 || c.Input == nil {
			return nil, fmt.Errorf("%s: incomplete case", d.slug)
		}
		b, err := render(c)
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("%03d-%s.json", i+1, d.slug)
		if !vectorFile.MatchString(name) {
			return nil, fmt.Errorf("bad file name %q", name)
		}
		files[name] = b
		outcome := "accepted"
		switch {
		case c.Expected.Retransmission:
			outcome = "retransmission"
		case !c.Expected.Accepted:
			outcome = "`" + c.Expected.Reason + "`"
		}
		chain := c.Expected.Chain
		if chain == "" {
			chain = "-"
		}
		rows = append(rows, row{File: name, Level: c.Level, Outcome: outcome, Chain: chain, HC: strings.Join(c.HC, ", "),
			Description: strings.ReplaceAll(c.Description, "|", `\|`)})
		if i == 0 {
			if example, err = exampleOf(b); err != nil {
				return nil, err
			}
		}
	}
	var buf bytes.Buffer
	t := template.Must(template.New("README").Parse(readmeTemplate))
	data := map[string]any{"Rows": rows, "Count": len(rows), "Coverage": coverage(rows), "Ex": example}
	if err := t.Execute(&buf, data); err != nil {
		return nil, err
	}
	files["README.md"] = buf.Bytes()
	files["vector.schema.json"] = vectorSchema
	files["VERSION"] = []byte(suiteVersion + "\n")
	m, err := manifest(dir, files)
	if err != nil {
		return nil, err
	}
	files["manifest.json"] = m
	return files, nil
}

// manifest lists the SHA-256 of every file of the suite: what the
// generator writes and the hand-written files, read from dir.
func manifest(dir string, files map[string][]byte) ([]byte, error) {
	all := map[string][]byte{}
	for name, b := range files {
		all[name] = b
	}
	for _, name := range handWritten {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		all[name] = b
	}
	sums := map[string]string{}
	for name, b := range all {
		sum := sha256.Sum256(b)
		sums[name] = hex.EncodeToString(sum[:])
	}
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetIndent("", "  ")
	err := e.Encode(struct {
		Suite   string            `json:"suite"`
		Version string            `json:"version"`
		Files   map[string]string `json:"sha256"`
	}{"handoff-conformance-vectors", suiteVersion, sums})
	return buf.Bytes(), err
}
