package main

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"go/token"
	"go/types"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"golang.org/x/exp/apidiff"
	"golang.org/x/tools/go/gcexportdata"
	"golang.org/x/tools/go/packages"
)

// apiFile holds the export data of every public package of the module set
// as it was at the last release: a zip with an entry "recorded" (the
// version, and before the first release what the baseline is) and an entry
// "<import path>.x" per package (golang.org/x/tools/go/gcexportdata).
const apiFile = "internal/release/api.zip"

// changelog is the change log every incompatible change must be in.
const changelog = "CHANGELOG.md"

// publicPackages loads, from the workspace, every package of the module
// set that an importer can import: not a main package, not internal.
func (r *repo) publicPackages(fset *token.FileSet) ([]*types.Package, error) {
	cfg := &packages.Config{
		Fset: fset,
		Mode: packages.NeedName | packages.NeedTypes | packages.NeedModule,
		Dir:  r.Root,
		Env:  append(os.Environ(), "GOWORK="+filepath.Join(r.Root, "go.work"), "GOFLAGS=-mod=readonly"),
	}
	loaded, err := packages.Load(cfg, r.patterns()...)
	if err != nil {
		return nil, err
	}
	var out []*types.Package
	var errs []error
	for _, p := range loaded {
		if p.Name == "main" || internal(p.PkgPath) {
			continue
		}
		for _, e := range p.Errors {
			errs = append(errs, fmt.Errorf("%s: %v", p.PkgPath, e))
		}
		if p.Types != nil && p.Module != nil && strings.HasPrefix(p.PkgPath, rootPath) {
			out = append(out, p.Types)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path() < out[j].Path() })
	return out, nil
}

// patterns are the package patterns of every module of the set, for a go
// command run at the root in the workspace.
func (r *repo) patterns() []string {
	var patterns []string
	for _, m := range r.Modules {
		patterns = append(patterns, "./"+filepath.ToSlash(filepath.Join(m.Dir, "..."))) // "./..." for the root
	}
	return patterns
}

func internal(p string) bool {
	return strings.HasSuffix(p, "/internal") || strings.Contains(p, "/internal/")
}

// writeAPI records the current API as the last release's, under the tree's
// version.
func (r *repo) writeAPI() error {
	fset := token.NewFileSet()
	pkgs, err := r.publicPackages(fset)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	e, err := w.Create("recorded")
	if err != nil {
		return err
	}
	if _, err := io.WriteString(e, r.V.Version); err != nil {
		return err
	}
	for _, p := range pkgs {
		e, err := w.Create(p.Path() + ".x")
		if err != nil {
			return err
		}
		if err := gcexportdata.Write(e, fset, p); err != nil {
			return fmt.Errorf("%s: %w", p.Path(), err)
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	fmt.Printf("release: recorded the API of %d packages as %s's in %s\n", len(pkgs), r.V.Version, apiFile)
	return os.WriteFile(filepath.Join(r.Root, apiFile), buf.Bytes(), 0o644)
}

// readAPI reads the recorded API: what it records, and its packages.
func (r *repo) readAPI(fset *token.FileSet) (string, map[string]*types.Package, error) {
	z, err := zip.OpenReader(filepath.Join(r.Root, apiFile))
	if err != nil {
		return "", nil, err
	}
	defer z.Close()
	recorded := ""
	pkgs := map[string]*types.Package{}
	for _, f := range z.File {
		rc, err := f.Open()
		if err != nil {
			return "", nil, err
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return "", nil, err
		}
		if f.Name == "recorded" {
			recorded = strings.TrimSpace(string(data))
			continue
		}
		path, ok := strings.CutSuffix(f.Name, ".x")
		if !ok {
			return "", nil, fmt.Errorf("%s: unexpected entry %q", apiFile, f.Name)
		}
		p, err := gcexportdata.Read(bytes.NewReader(data), fset, map[string]*types.Package{}, path)
		if err != nil {
			return "", nil, fmt.Errorf("%s: %s: %w", apiFile, path, err)
		}
		pkgs[path] = p
	}
	if recorded == "" {
		return "", nil, fmt.Errorf("%s: no entry says what it records", apiFile)
	}
	return recorded, pkgs, nil
}

// apiChange is one change apidiff reports, with the name the change log
// must give it: the package's path in the repository ("handoff" for the
// root) and the object, as in `evidence.Guard.Authorize`.
type apiChange struct {
	Key, Message string
	Compatible   bool
}

// diffAPI compares the current API with the recorded one.
func (r *repo) diffAPI() (string, []apiChange, error) {
	fset := token.NewFileSet()
	recorded, old, err := r.readAPI(fset)
	if err != nil {
		return "", nil, err
	}
	cur, err := r.publicPackages(fset)
	if err != nil {
		return "", nil, err
	}
	now := map[string]*types.Package{}
	for _, p := range cur {
		now[p.Path()] = p
	}
	var out []apiChange
	for path, op := range old {
		np, ok := now[path]
		if !ok {
			out = append(out, apiChange{Key: pkgKey(path), Message: "package removed"})
			continue
		}
		for _, c := range apidiff.Changes(op, np).Changes {
			name, _, _ := strings.Cut(c.Message, ": ")
			out = append(out, apiChange{Key: pkgKey(path) + "." + objectKey(name), Message: c.Message, Compatible: c.Compatible})
		}
	}
	for path := range now {
		if old[path] == nil {
			out = append(out, apiChange{Key: pkgKey(path), Message: "package added", Compatible: true})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key+out[i].Message < out[j].Key+out[j].Message })
	return recorded, out, nil
}

// pkgKey names a package of the repository by its path below the root,
// and the root as "handoff".
func pkgKey(path string) string {
	if path == rootPath {
		return "handoff"
	}
	return strings.TrimPrefix(path, rootPath+"/")
}

// objectKey turns apidiff's name of an object ("(*Guard).Do", "Call.Args",
// "ErrX") into a dotted one ("Guard.Do").
func objectKey(name string) string {
	name = strings.TrimPrefix(name, "./")
	r := strings.NewReplacer("(*", "", "(", "", ")", "", "*", "")
	return r.Replace(name)
}

// checkAPI lists the changes since the recorded API and fails when an
// incompatible one is not in the change log: named, in backquotes, in an
// "### Incompatible changes" part of a section above the recorded
// version's (a name covers the names below it: `evidence.Guard` covers
// `evidence.Guard.Do`).
func (r *repo) checkAPI() error {
	recorded, changes, err := r.diffAPI()
	if err != nil {
		return err
	}
	names, err := r.changelogIncompatible(strings.Fields(recorded)[0])
	if err != nil {
		return err
	}
	var missing []string
	n := 0
	for _, c := range changes {
		if c.Compatible {
			continue
		}
		n++
		ok := covered(c.Key, names)
		mark := "recorded in " + changelog
		if !ok {
			mark = "NOT IN " + changelog
			missing = append(missing, c.Key)
		}
		fmt.Printf("incompatible: %s: %s (%s)\n", c.Key, c.Message, mark)
	}
	fmt.Printf("release: %d incompatible changes since %s, %d not in %s\n", n, recorded, len(missing), changelog)
	if len(missing) > 0 {
		return fmt.Errorf("incompatible changes not in %s's \"### Incompatible changes\": %s", changelog, strings.Join(missing, ", "))
	}
	return nil
}

func covered(key string, names []string) bool {
	for _, n := range names {
		if key == n || strings.HasPrefix(key, n+".") {
			return true
		}
	}
	return false
}

var backquoted = regexp.MustCompile("`([^`]+)`")

// changelogIncompatible returns the names in backquotes in the
// "### Incompatible changes" parts of the change log's sections above the
// one whose heading starts with "## <recorded>".
func (r *repo) changelogIncompatible(recorded string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(r.Root, changelog))
	if err != nil {
		return nil, err
	}
	var names []string
	in := false
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "## ") {
			if strings.HasPrefix(l, "## "+recorded+" ") || strings.TrimSpace(l) == "## "+recorded {
				break
			}
			in = false
			continue
		}
		if strings.HasPrefix(l, "### ") {
			in = strings.HasPrefix(strings.ToLower(l), "### incompatible")
			continue
		}
		if in {
			for _, m := range backquoted.FindAllStringSubmatch(l, -1) {
				names = append(names, m[1])
			}
		}
	}
	return names, nil
}

// checkChangelog says whether the change log's first section is v's.
func (r *repo) checkChangelog(v string) error {
	data, err := os.ReadFile(filepath.Join(r.Root, changelog))
	if err != nil {
		return err
	}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "## ") {
			mine := strings.HasPrefix(l, "## "+v+" ") || strings.TrimSpace(l) == "## "+v
			if mine && !strings.Contains(strings.ToLower(l), "unreleased") {
				return nil
			}
			return fmt.Errorf("%s: the first section is %q; head it \"## %s (YYYY-MM-DD)\" before the release", changelog, strings.TrimSpace(l), v)
		}
	}
	return fmt.Errorf("%s has no section", changelog)
}
