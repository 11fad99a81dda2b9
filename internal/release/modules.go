package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
	goversion "go/version"
	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// rootPath is the module path of the repository's root module; every
// module of the repository has it as a prefix.
const rootPath = "github.com/agentproto/handoff"

// versionsFile is the file that holds the version and the module set.
const versionsFile = "versions.yaml"

// versions is versions.yaml.
type versions struct {
	Version  string   `yaml:"version"`
	Go       string   `yaml:"go"`
	Modules  []string `yaml:"modules"`
	Excluded []string `yaml:"excluded"`
}

// module is one module of the repository.
type module struct {
	Dir  string // relative to the repository's root, "." for the root
	Path string // the module path
	File *modfile.File
	// Siblings are the modules of the repository it requires.
	Siblings []string
	// Replaces says whether its go.mod replaces a sibling with a directory.
	Replaces bool
}

// repo is the repository: its root directory, versions.yaml and modules.
type repo struct {
	Root    string
	V       versions
	Modules []*module // in dependency order: a module after those it requires
	byPath  map[string]*module
}

// loadRepo reads versions.yaml and every go.mod of the module set, checks
// that the tree's go.mod files are exactly the module set and the excluded
// ones, and orders the modules by their requirements.
func loadRepo(root string) (*repo, error) {
	data, err := os.ReadFile(filepath.Join(root, versionsFile))
	if err != nil {
		return nil, err
	}
	var v versions
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%s: %w", versionsFile, err)
	}
	if !semver.IsValid(v.Version) || semver.Canonical(v.Version) != v.Version || semver.Build(v.Version) != "" {
		return nil, fmt.Errorf("%s: version %q is not a canonical semantic version (vX.Y.Z)", versionsFile, v.Version)
	}
	found, err := goModDirs(root)
	if err != nil {
		return nil, err
	}
	listed := append(slices.Clone(v.Modules), v.Excluded...)
	sort.Strings(listed)
	if !slices.Equal(found, listed) {
		return nil, fmt.Errorf("%s: the modules listed (%s) differ from the go.mod files in the tree (%s)",
			versionsFile, strings.Join(listed, " "), strings.Join(found, " "))
	}
	r := &repo{Root: root, V: v, byPath: map[string]*module{}}
	var mods []*module
	for _, dir := range v.Modules {
		m, err := readModule(root, dir)
		if err != nil {
			return nil, err
		}
		want := rootPath
		if dir != "." {
			want = rootPath + "/" + dir
		}
		if m.Path != want {
			return nil, fmt.Errorf("%s/go.mod: module %s, want %s", dir, m.Path, want)
		}
		r.byPath[m.Path] = m
		mods = append(mods, m)
	}
	for _, m := range mods {
		for _, req := range m.File.Require {
			if r.byPath[req.Mod.Path] != nil {
				m.Siblings = append(m.Siblings, req.Mod.Path)
			}
		}
		for _, rep := range m.File.Replace {
			if r.byPath[rep.Old.Path] != nil && rep.New.Version == "" {
				m.Replaces = true
			}
		}
	}
	r.Modules, err = order(mods, r.byPath)
	return r, err
}

// goModDirs lists the directories of the tree that hold a go.mod, sorted,
// skipping .git and node_modules.
func goModDirs(root string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && d.Name() == "go.mod" {
			rel, err := filepath.Rel(root, filepath.Dir(p))
			if err != nil {
				return err
			}
			dirs = append(dirs, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(dirs)
	return dirs, err
}

func readModule(root, dir string) (*module, error) {
	name := filepath.Join(root, dir, "go.mod")
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	f, err := modfile.Parse(name, data, nil)
	if err != nil {
		return nil, err
	}
	if f.Module == nil {
		return nil, fmt.Errorf("%s: no module line", name)
	}
	return &module{Dir: dir, Path: f.Module.Mod.Path, File: f}, nil
}

// order returns mods with each module after the siblings it requires, the
// root first; ties in the order of versions.yaml. A cycle is an error.
func order(mods []*module, byPath map[string]*module) ([]*module, error) {
	var out []*module
	state := map[*module]int{} // 1 visiting, 2 done
	var visit func(m *module, stack []string) error
	visit = func(m *module, stack []string) error {
		switch state[m] {
		case 1:
			return fmt.Errorf("the modules require each other in a cycle: %s", strings.Join(append(stack, m.Path), " -> "))
		case 2:
			return nil
		}
		state[m] = 1
		for _, s := range m.Siblings {
			if err := visit(byPath[s], append(stack, m.Path)); err != nil {
				return err
			}
		}
		state[m] = 2
		out = append(out, m)
		return nil
	}
	for _, m := range mods {
		if err := visit(m, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// tag is the git tag of module m at version v: "vX.Y.Z" for the root,
// "<dir>/vX.Y.Z" for a nested module.
func tag(m *module, v string) string {
	if m.Dir == "." {
		return v
	}
	return path.Join(m.Dir, v)
}

// setVersion makes every go.mod require its siblings at v, and writes
// versions.yaml with v. It leaves replace directives as they are.
func (r *repo) setVersion(v string) error {
	for _, m := range r.Modules {
		changed := false
		for _, req := range m.File.Require {
			if r.byPath[req.Mod.Path] != nil && req.Mod.Version != v {
				if err := m.File.AddRequire(req.Mod.Path, v); err != nil {
					return err
				}
				changed = true
			}
		}
		if !changed {
			continue
		}
		m.File.Cleanup()
		out, err := m.File.Format()
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(r.Root, m.Dir, "go.mod"), out, 0o644); err != nil {
			return err
		}
	}
	name := filepath.Join(r.Root, versionsFile)
	data, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	var lines []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "version:") {
			l = "version: " + v
		}
		lines = append(lines, l)
	}
	if err := os.WriteFile(name, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		return err
	}
	r.V.Version = v
	return nil
}

// checkRequirements reports each go.mod that requires a sibling at another
// version than versions.yaml's, and each module that must be installable
// (a main package without replace directives is how a user installs it)
// but has a replace directive.
func (r *repo) checkRequirements() error {
	var errs []string
	for _, m := range r.Modules {
		if m.File.Go == nil || goversion.Lang("go"+m.File.Go.Version) != "go"+r.V.Go {
			errs = append(errs, fmt.Sprintf("%s/go.mod: the go line must name Go %s, the minimum (versions.yaml)", m.Dir, r.V.Go))
		}
		for _, req := range m.File.Require {
			if r.byPath[req.Mod.Path] != nil && req.Mod.Version != r.V.Version {
				errs = append(errs, fmt.Sprintf("%s/go.mod requires %s %s, not %s", m.Dir, req.Mod.Path, req.Mod.Version, r.V.Version))
			}
		}
		if m.Dir == "." {
			errs = append(errs, r.rootReplaces(m)...)
		}
		if installable(m) && len(m.File.Replace) > 0 {
			errs = append(errs, fmt.Sprintf("%s/go.mod has replace directives: go install refuses them", m.Dir))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return nil
}

// installable says whether users go install or go run the module's
// programs by version, so that its go.mod must have no replace directive.
func installable(m *module) bool {
	switch m.Dir {
	case "cmd/handoff", "integrations/cmd/handoff-demo", "examples":
		return true
	}
	return false
}

// replaces is the go mod edit command that makes a module outside the
// repository require the module in dir at the tree's version and replace
// it, and every module of the repository it requires (transitively), with
// its directory in a checkout at checkout.
func (r *repo) replaces(dir, checkout string) (string, error) {
	var m *module
	for _, x := range r.Modules {
		if x.Dir == path.Clean(dir) {
			m = x
		}
	}
	if m == nil {
		return "", fmt.Errorf("%s is not a module of %s", dir, versionsFile)
	}
	need := map[string]bool{}
	var walk func(*module)
	walk = func(x *module) {
		for _, s := range x.Siblings {
			if !need[s] {
				need[s] = true
				walk(r.byPath[s])
			}
		}
	}
	walk(m)
	dirOf := func(x *module) string {
		if x.Dir == "." {
			return checkout
		}
		return checkout + "/" + x.Dir
	}
	line := fmt.Sprintf("go mod edit -require=%s@%s -replace=%s=%s", m.Path, r.V.Version, m.Path, dirOf(m))
	// The siblings nearest the module first: the reverse of the order they
	// are tagged in.
	for i := len(r.Modules) - 1; i >= 0; i-- {
		if x := r.Modules[i]; need[x.Path] {
			line += fmt.Sprintf(" -replace=%s=%s", x.Path, dirOf(x))
		}
	}
	return line, nil
}

// rootReplaces checks that the root's go.mod replaces every other module of
// the set by its directory ("./<dir>"). Importers ignore the directives; in
// a workspace that uses the root they make a requirement on any sibling at
// a version not yet published resolve to the checkout, where the go
// command would otherwise fetch that version's go.mod to build the graph.
func (r *repo) rootReplaces(root *module) []string {
	have := map[string]string{}
	for _, rep := range root.File.Replace {
		have[rep.Old.Path] = rep.New.Path
	}
	var errs []string
	for _, m := range r.Modules {
		if m.Dir == "." {
			continue
		}
		if want := "./" + m.Dir; have[m.Path] != want {
			errs = append(errs, fmt.Sprintf("go.mod (the root) must replace %s => %s (a workspace resolves the module to the checkout only then)", m.Path, want))
		}
	}
	return errs
}
