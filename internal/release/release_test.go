package main

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/exp/apidiff"
)

// typecheck builds a package of the repository from one source file.
func typecheck(t *testing.T, path, src string) *types.Package {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	conf := types.Config{Importer: importer.Default()}
	p, err := conf.Check(path, fset, []*ast.File{f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The names the change log must give apidiff's incompatible changes.
func TestIncompatibleChangeKeys(t *testing.T) {
	old := typecheck(t, rootPath+"/evidence", `package evidence
type Guard struct{}
func (g *Guard) Do(x int) error { return nil }
type Call struct{ Action string; Args []byte }
var ErrGone = 1
func Keep() {}
`)
	cur := typecheck(t, rootPath+"/evidence", `package evidence
type Guard struct{}
func (g *Guard) Do(x int, y string) error { return nil }
type Call struct{ Action string }
func Keep() {}
func Added() {}
`)
	var keys []string
	for _, c := range apidiff.Changes(old, cur).Changes {
		if c.Compatible {
			continue
		}
		name, _, _ := strings.Cut(c.Message, ": ")
		keys = append(keys, pkgKey(old.Path())+"."+objectKey(name))
	}
	slices.Sort(keys)
	want := []string{"evidence.Call.Args", "evidence.ErrGone", "evidence.Guard.Do"}
	if !slices.Equal(keys, want) {
		t.Fatalf("keys %q, want %q", keys, want)
	}
	if pkgKey(rootPath) != "handoff" {
		t.Fatalf("the root's key is %q", pkgKey(rootPath))
	}
}

func TestChangelogCoversNamesAboveTheRecordedRelease(t *testing.T) {
	dir := t.TempDir()
	log := `# Changelog
## v0.3.0 (unreleased)
### Added
- ` + "`evidence.Added`" + `
### Incompatible changes
- ` + "`evidence.Guard`" + ` takes the call's arguments.
## v0.2.0 (2026-01-02)
### Incompatible changes
- ` + "`handoff.Old`" + ` removed.
`
	if err := os.WriteFile(filepath.Join(dir, changelog), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &repo{Root: dir}
	names, err := r.changelogIncompatible("v0.2.0")
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]bool{
		"evidence.Guard":        true,
		"evidence.Guard.Do":     true,
		"evidence.GuardConfig":  false, // a prefix only at a dot
		"evidence.Added":        false, // not under Incompatible changes
		"handoff.Old":           false, // in the recorded release's own section
		"evidence/authority.Do": false,
	} {
		if got := covered(key, names); got != want {
			t.Errorf("covered(%q) = %v, want %v (names %q)", key, got, want, names)
		}
	}
	if err := r.checkChangelog("v0.3.0"); err == nil {
		t.Error("a release under an \"(unreleased)\" heading was let through")
	}
	if err := r.checkChangelog("v0.4.0"); err == nil {
		t.Error("a release with no section of its own was let through")
	}
}

func TestDisagreements(t *testing.T) {
	high, split := disagreements(map[string]map[string]string{
		"a":           {"x": "v1.2.0", "y": "v0.1.0"},
		"b":           {"x": "v1.10.0", "y": "v0.1.0"},
		"(workspace)": {"x": "v1.10.0", "y": "v0.1.0", "z": "v2.0.0"},
	})
	if high["x"] != "v1.10.0" {
		t.Errorf("the highest x is %s", high["x"])
	}
	if len(split) != 1 || !strings.Contains(split[0], "x: v1.10.0 in (workspace) b; v1.2.0 in a") {
		t.Errorf("split %q", split)
	}
}

func TestValidNext(t *testing.T) {
	for v, ok := range map[string]bool{"v0.1.0": true, "v0.2.0": true, "v1.0.0": true, "v0.0.9": false, "0.2.0": false, "v0.2": false, "v2.0.0": false, "v0.2.0+x": false} {
		if err := validNext("v0.1.0", v); (err == nil) != ok {
			t.Errorf("validNext(v0.1.0, %s): %v", v, err)
		}
	}
}

// The repository's own versions.yaml names every module and orders the
// root first and cmd/handoff after the modules it requires.
func TestRepositoryModules(t *testing.T) {
	r, err := loadRepo(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	pos := map[string]int{}
	for i, m := range r.Modules {
		pos[m.Dir] = i
	}
	if pos["."] != 0 {
		t.Errorf("the root is tagged at %d, not first", pos["."])
	}
	for _, m := range r.Modules {
		for _, s := range m.Siblings {
			if pos[r.byPath[s].Dir] > pos[m.Dir] {
				t.Errorf("%s is tagged before %s, which it requires", m.Dir, r.byPath[s].Dir)
			}
		}
	}
	if err := r.checkRequirements(); err != nil {
		t.Error(err)
	}
	if tag(r.byPath[rootPath+"/replay/boltstore"], "v0.1.0") != "replay/boltstore/v0.1.0" {
		t.Error("a nested module's tag is not <dir>/<version>")
	}
}

// Every "go mod edit -require=..." line of the README is what
// "release replaces" prints for the module it requires.
func TestREADMEReplaceLines(t *testing.T) {
	r, err := loadRepo(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(r.Root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(md), "\n") {
		if !strings.HasPrefix(l, "go mod edit -require="+rootPath) {
			continue
		}
		n++
		req := strings.Fields(l)[3] // -require=PATH@VERSION
		p, _, _ := strings.Cut(strings.TrimPrefix(req, "-require="), "@")
		dir := strings.TrimPrefix(strings.TrimPrefix(p, rootPath), "/")
		if dir == "" {
			dir = "."
		}
		want, err := r.replaces(dir, "../handoff")
		if err != nil {
			t.Fatal(err)
		}
		if l != want {
			t.Errorf("README:\n%s\nrelease replaces %s:\n%s", l, dir, want)
		}
	}
	if n == 0 {
		t.Fatal("the README has no go mod edit line")
	}
}

func TestOneOpenTelemetrySet(t *testing.T) {
	if err := oneSet(map[string]string{"go.opentelemetry.io/otel": "v1.45.0", "go.opentelemetry.io/otel/sdk": "v1.45.0",
		"go.opentelemetry.io/otel/log": "v0.20.0", "go.opentelemetry.io/auto/sdk": "v1.2.1"}); err != nil {
		t.Error(err)
	}
	if err := oneSet(map[string]string{"go.opentelemetry.io/otel": "v1.45.0", "go.opentelemetry.io/otel/sdk": "v1.44.0"}); err == nil {
		t.Error("two releases of the stable modules were let through")
	}
}
