package integrations_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// block is one fenced Go block of a Markdown file.
type block struct {
	line int // of the opening fence, 1-based
	code string
}

// goBlocks returns the blocks fenced with ```go, as written.
func goBlocks(md []byte) []block {
	var out []block
	var cur *block
	var b strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(md))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		trim := strings.TrimSpace(l)
		switch {
		case cur == nil && (trim == "```go" || strings.HasPrefix(trim, "```go ")):
			cur = &block{line: n}
			b.Reset()
		case cur != nil && trim == "```":
			cur.code = b.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return out
}

var (
	packageClause = regexp.MustCompile(`(?m)^package [a-z_][a-z0-9_]*\s*$`)
	testFunc      = regexp.MustCompile(`(?m)^func Test[A-Z0-9_]`)
)

// checkBlocks builds and vets every ```go block of a Markdown file that is
// a complete Go file (it has a package clause), each as its own package in
// a temporary module that requires this module and the root module through
// replace, so that a block compiles exactly as a reader would paste it. A
// block with a Test function is compiled as a test file. Fragments are
// listed in the log; at least one block must be complete.
func checkBlocks(t *testing.T, mdPath string) {
	t.Helper()
	if err := buildBlocks(t, mdPath); err != nil {
		t.Error(err)
	}
}

// buildBlocks is checkBlocks, returning the build failure.
func buildBlocks(t *testing.T, mdPath string) error {
	t.Helper()
	md, err := os.ReadFile(mdPath)
	if err != nil {
		t.Fatal(err)
	}
	blocks := goBlocks(md)
	if len(blocks) == 0 {
		t.Fatalf("%s: no ```go block", mdPath)
	}
	here, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(here)
	tmp := t.TempDir()
	// Every module of the repository, required and replaced by its
	// directory, so that a block may import any of them; go.sum is the
	// union of theirs.
	var req, rep strings.Builder
	var sum []byte
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || d.Name() != "go.mod" {
			return nil
		}
		dir := filepath.Dir(p)
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			return err
		}
		if strings.HasPrefix(filepath.ToSlash(rel), "internal/") {
			return nil // the release tool: not a module of the set
		}
		path := "github.com/agentproto/handoff"
		if rel != "." {
			path += "/" + filepath.ToSlash(rel)
		}
		fmt.Fprintf(&req, "\t%s v0.0.0\n", path)
		fmt.Fprintf(&rep, "replace %s => %s\n", path, dir)
		b, err := os.ReadFile(filepath.Join(dir, "go.sum"))
		if err == nil {
			sum = append(sum, b...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	goMod := fmt.Sprintf("module readmesnippets\n\ngo 1.26.5\n\nrequire (\n%s)\n\n%s", req.String(), rep.String())
	if err := os.WriteFile(filepath.Join(tmp, "go.mod"), []byte(goMod), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	complete := 0
	for _, b := range blocks {
		if !packageClause.MatchString(b.code) {
			// Every Go block is a complete file that builds as pasted, so
			// that no guide drifts from the code.
			return fmt.Errorf("%s:%d: a Go block without a package clause: every block must be a complete file", mdPath, b.line)
		}
		complete++
		dir := filepath.Join(tmp, fmt.Sprintf("line%d", b.line))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		name := "main.go"
		if testFunc.MatchString(b.code) {
			name = "block_test.go"
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b.code), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if complete == 0 {
		t.Fatalf("%s: no ```go block is a complete Go file", mdPath)
	}
	cmd := exec.Command("go", "vet", "./...")
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: the Go blocks do not build (directories are named by the line of each block's fence):\n%s", mdPath, out)
	}
	return nil
}

// TestMarkdown_README_GoBlocksCompile builds the README's Go blocks as
// pasted, against this tree.
func TestMarkdown_README_GoBlocksCompile(t *testing.T) {
	checkBlocks(t, filepath.Join("..", "README.md"))
}

// TestMarkdown_Docs_GoBlocksCompile builds the Go blocks of every guide
// under docs/ as pasted, one subtest per guide, so that no guide drifts
// from the code. A guide without a Go block has nothing to build.
func TestMarkdown_Docs_GoBlocksCompile(t *testing.T) {
	for _, g := range guides(t) {
		t.Run(filepath.Base(g), func(t *testing.T) {
			md, err := os.ReadFile(g)
			if err != nil {
				t.Fatal(err)
			}
			if len(goBlocks(md)) == 0 {
				t.Logf("%s has no Go block", g)
				return
			}
			checkBlocks(t, g)
		})
	}
}

// guides returns the guides under docs/.
func guides(t *testing.T) []string {
	t.Helper()
	gs, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(gs) == 0 {
		t.Fatal("no guide under docs/")
	}
	return gs
}

// The README stays a page (at most 250 lines) that links every guide, and
// every guide is linked from it.
func TestMarkdown_README_MapsEveryGuide(t *testing.T) {
	md, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(md), "\n"); n > 250 {
		t.Errorf("README.md has %d lines, more than 250", n)
	}
	linked := map[string]bool{}
	for _, l := range links(md) {
		if p, _, _ := strings.Cut(l, "#"); strings.HasPrefix(p, "docs/") {
			linked[p] = true
		}
	}
	for _, g := range guides(t) {
		if p := "docs/" + filepath.Base(g); !linked[p] {
			t.Errorf("README.md does not link %s", p)
		}
	}
}

// Every relative link of the README, the guides, ROUGH_EDGES.md and
// SECURITY.md names a file of the tree, and an anchor a heading of its
// Markdown file.
func TestMarkdown_Links(t *testing.T) {
	files := append([]string{filepath.Join("..", "README.md"), filepath.Join("..", "ROUGH_EDGES.md"),
		filepath.Join("..", "SECURITY.md")}, guides(t)...)
	for _, f := range files {
		md, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links(md) {
			if strings.Contains(l, "://") || strings.HasPrefix(l, "mailto:") {
				continue
			}
			p, anchor, _ := strings.Cut(l, "#")
			target := f
			if p != "" {
				target = filepath.Join(filepath.Dir(f), filepath.FromSlash(p))
			}
			b, err := os.ReadFile(target)
			if err != nil {
				if st, serr := os.Stat(target); serr == nil && st.IsDir() && anchor == "" {
					continue
				}
				t.Errorf("%s: link %q: %v", f, l, err)
				continue
			}
			if anchor != "" && !slices.Contains(anchors(b), anchor) {
				t.Errorf("%s: link %q: %s has no heading with that anchor", f, l, target)
			}
		}
	}
}

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// prose returns the lines of md outside its fenced code blocks.
func prose(md []byte) []string {
	var out []string
	fenced := false
	for _, l := range strings.Split(string(md), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, l)
		}
	}
	return out
}

// links returns the targets of the inline links of md, outside code blocks.
func links(md []byte) []string {
	var out []string
	for _, l := range prose(md) {
		for _, m := range linkRE.FindAllStringSubmatch(l, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// anchors returns the anchors GitHub gives the headings of md: lower case,
// punctuation other than hyphens and underscores dropped, spaces made
// hyphens.
func anchors(md []byte) []string {
	var out []string
	for _, l := range prose(md) {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(strings.TrimLeft(l, "#"))) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		out = append(out, b.String())
	}
	return out
}

func TestMarkdown_Anchors(t *testing.T) {
	md := "# A title\n```sh\n# not a heading\n```\n## An agent in any language: `handoff gateway`\n### Signed AgentCards (`agentcard`)\n"
	got := anchors([]byte(md))
	want := []string{"a-title", "an-agent-in-any-language-handoff-gateway", "signed-agentcards-agentcard"}
	if !slices.Equal(got, want) {
		t.Fatalf("anchors = %q, want %q", got, want)
	}
}

func TestMarkdown_GoBlocks_Parser(t *testing.T) {
	md := "text\n```go\npackage main\n\nfunc main() {}\n```\n```sh\nls\n```\n  ```go\nx := 1\n  ```\n"
	got := goBlocks([]byte(md))
	if len(got) != 2 || got[0].line != 2 || got[0].code != "package main\n\nfunc main() {}\n" || got[1].code != "x := 1\n" {
		t.Fatalf("goBlocks = %+v", got)
	}
}

// A block that does not compile is reported, with its line.
func TestMarkdown_BrokenBlock_Fails(t *testing.T) {
	md := filepath.Join(t.TempDir(), "x.md")
	body := "# x\n\n```go\npackage main\n\nfunc main() {}\n```\n\n```go\npackage main\n\nimport \"github.com/agentproto/handoff\"\n\nfunc main() { _ = handoff.NoSuchThing }\n```\n"
	if err := os.WriteFile(md, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	err := buildBlocks(t, md)
	if err == nil || !strings.Contains(err.Error(), "line9") || !strings.Contains(err.Error(), "NoSuchThing") {
		t.Fatalf("buildBlocks = %v, want a failure naming line9 and NoSuchThing", err)
	}
}
