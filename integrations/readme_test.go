package integrations_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
	goMod := fmt.Sprintf(`module readmesnippets

go 1.26.0

require (
	github.com/agentproto/handoff v0.0.0
	github.com/agentproto/handoff/integrations v0.0.0
	github.com/agentproto/handoff/integrations/a2a1hop v0.0.0
)

replace github.com/agentproto/handoff => %s

replace github.com/agentproto/handoff/integrations => %s

replace github.com/agentproto/handoff/integrations/a2a1hop => %s
`, root, here, filepath.Join(here, "a2a1hop"))
	if err := os.WriteFile(filepath.Join(tmp, "go.mod"), []byte(goMod), 0o644); err != nil {
		t.Fatal(err)
	}
	var sum []byte
	for _, f := range []string{filepath.Join(root, "go.sum"), filepath.Join(here, "go.sum"), filepath.Join(here, "a2a1hop", "go.sum")} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sum = append(sum, b...)
	}
	if err := os.WriteFile(filepath.Join(tmp, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	complete := 0
	for _, b := range blocks {
		if !packageClause.MatchString(b.code) {
			// A fragment (a test to adapt, a call to paste into a body)
			// names code of the reader's; it cannot build on its own.
			t.Logf("%s:%d: a fragment (no package clause), not built", mdPath, b.line)
			continue
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

// TestMarkdown_ProposedIntegrationsSection_Compiles checks the section on the middlewares
// proposed for the README.
func TestMarkdown_ProposedIntegrationsSection_Compiles(t *testing.T) {
	checkBlocks(t, filepath.Join("testdata", "README-integrations.md"))
}

// TestMarkdown_README_GoBlocksCompile builds the README's complete Go
// programs as pasted (its library section), against this tree.
func TestMarkdown_README_GoBlocksCompile(t *testing.T) {
	checkBlocks(t, filepath.Join("..", "README.md"))
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
