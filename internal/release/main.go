// Command release versions, checks and tags the modules of the repository
// together, at the one version versions.yaml holds (RELEASING.md).
//
//	release vX.Y.Z        the release: set, sync, check -test, api -write, tags
//	release set vX.Y.Z    every go.mod requires its siblings at vX.Y.Z
//	release sync          refresh the go.sum of each module that requires a sibling
//	                      directives (cmd/handoff, the demo, examples) from
//	                      a proxy of the tree, after a sibling changed
//	release proxy DIR     a GOPROXY directory of every module at the version
//	release check [-test] each module on its own (GOWORK=off) against that
//	                      proxy: go.mod as versions.yaml says, go mod tidy
//	                      -diff, go build (and go test)
//	release deps [-fix]   every dependency the modules share is selected at
//	                      one version in each, and in the workspace
//	release api [-write]  apidiff of every public package against the API
//	                      recorded at the last release; each incompatible
//	                      change must be in CHANGELOG.md
//	release tags          the tags to push, in dependency order
//	release modules       the module directories, in dependency order
//	release replaces DIR [CHECKOUT]
//	                      the go mod edit line that points another module
//	                      at DIR's module of a checkout (default ../handoff)
//	                      and at every module of it that DIR requires
//	release forget        remove the repository's modules from the module
//	                      cache (a proxy of another tree served them)
//
// It runs from anywhere inside the repository, with GOWORK=off (the module
// is not part of the workspace): ./release.sh at the root does that.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/mod/semver"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func usage() error {
	return errors.New("usage: release vX.Y.Z | set vX.Y.Z | sync [-check] | proxy DIR | check [-test] | deps [-fix] | api [-write] | tags | modules | replaces DIR [CHECKOUT] | forget")
}

func run(args []string) error {
	if len(args) == 0 {
		return usage()
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	r, err := loadRepo(root)
	if err != nil {
		return err
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	test := fs.Bool("test", false, "check: run each module's tests too")
	fix := fs.Bool("fix", false, "deps: raise each module's requirements to the version selected elsewhere")
	write := fs.Bool("write", false, "api: record the current API as the last release's")
	checkOnly := fs.Bool("check", false, "sync: only say whether a go.sum is stale")
	if err := fs.Parse(args); err != nil {
		return err
	}
	args = fs.Args()
	switch {
	case semver.IsValid(cmd) && len(args) == 0:
		return r.release(cmd)
	case cmd == "set" && len(args) == 1:
		if err := validNext(r.V.Version, args[0]); err != nil {
			return err
		}
		return r.setVersion(args[0])
	case cmd == "sync" && len(args) == 0:
		return r.withProxy(func(dir string) error { return r.sync(dir, *checkOnly) })
	case cmd == "proxy" && len(args) == 1:
		dir, err := filepath.Abs(args[0])
		if err != nil {
			return err
		}
		if err := r.buildProxy(dir); err != nil {
			return err
		}
		return forgetCached()
	case cmd == "check" && len(args) == 0:
		return r.withProxy(func(dir string) error { return r.check(dir, *test) })
	case cmd == "deps" && len(args) == 0:
		return r.deps(*fix)
	case cmd == "api" && len(args) == 0:
		if *write {
			return r.writeAPI()
		}
		return r.checkAPI()
	case cmd == "tags" && len(args) == 0:
		r.printTags()
		return nil
	case cmd == "replaces" && (len(args) == 1 || len(args) == 2):
		checkout := "../handoff"
		if len(args) == 2 {
			checkout = args[1]
		}
		line, err := r.replaces(args[0], checkout)
		if err != nil {
			return err
		}
		fmt.Println(line)
		return nil
	case cmd == "forget" && len(args) == 0:
		return forgetCached()
	case cmd == "modules" && len(args) == 0:
		for _, m := range r.Modules {
			fmt.Println(m.Dir)
		}
		return nil
	}
	return usage()
}

// release is the whole release of version v: every go.mod at v, the go.sum
// of each module without replace directives refreshed, every module built
// and tested on its own against a proxy of the tree, the API recorded as
// v's, and the tags printed. It changes files only; it commits and tags
// nothing (RELEASING.md).
func (r *repo) release(v string) error {
	if err := validNext(r.V.Version, v); err != nil {
		return err
	}
	if err := r.checkChangelog(v); err != nil {
		return err
	}
	if err := r.checkAPI(); err != nil {
		return err
	}
	if err := r.setVersion(v); err != nil {
		return err
	}
	if err := r.deps(false); err != nil {
		return err
	}
	err := r.withProxy(func(dir string) error {
		if err := r.sync(dir, false); err != nil {
			return err
		}
		return r.check(dir, true)
	})
	if err != nil {
		return err
	}
	if err := r.writeAPI(); err != nil {
		return err
	}
	fmt.Printf("\nrelease: every module is at %s and passes on its own. Commit, then push these tags in this order:\n\n", v)
	r.printTags()
	return nil
}

// validNext accepts v as the next version after cur: canonical, and not
// lower (the tree sits at the version it is released at next, so the first
// release of a version is at that version).
func validNext(cur, v string) error {
	if !semver.IsValid(v) || semver.Canonical(v) != v || semver.Build(v) != "" {
		return fmt.Errorf("%q is not a canonical semantic version (vX.Y.Z)", v)
	}
	if semver.Major(v) != "v0" && semver.Major(v) != "v1" {
		return fmt.Errorf("%s: a major version above v1 needs a /vN module path in every go.mod", v)
	}
	if semver.Compare(v, cur) < 0 {
		return fmt.Errorf("%s is lower than the tree's version %s", v, cur)
	}
	return nil
}

func (r *repo) printTags() {
	var tags []string
	for _, m := range r.Modules {
		tags = append(tags, tag(m, r.V.Version))
		fmt.Printf("git tag -a %s -m '%s %s'\n", tag(m, r.V.Version), m.Path, r.V.Version)
	}
	fmt.Printf("git push origin %s\n", strings.Join(tags, " "))
}

// withProxy builds a proxy of the tree in a temporary directory, removes
// the repository's modules from the module cache, and calls f with the
// proxy's directory.
func (r *repo) withProxy(f func(dir string) error) error {
	dir, err := os.MkdirTemp("", "handoff-proxy-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := r.buildProxy(dir); err != nil {
		return err
	}
	if err := forgetCached(); err != nil {
		return err
	}
	defer forgetCached()
	return f(dir)
}

// sync tidies every module that requires a sibling: in a module that
// reaches its siblings through the proxy (no replace directive) the
// go.sum lines of the repository's modules are the hashes of the
// siblings' zips, which change with their files; in one that replaces
// them by their directories, a sibling's new requirement adds go.sum
// lines. With check, it only reports a stale go.sum.
func (r *repo) sync(proxy string, check bool) error {
	var stale []string
	for _, m := range r.Modules {
		if len(m.Siblings) == 0 {
			continue
		}
		name := filepath.Join(r.Root, m.Dir, "go.sum")
		old, err := os.ReadFile(name)
		if err != nil && !os.IsNotExist(err) {
			return err
		}
		if err := r.tidy(m, proxy); err != nil {
			_ = os.WriteFile(name, old, 0o644)
			return err
		}
		cur, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		if string(cur) != string(old) {
			stale = append(stale, m.Dir)
			if check {
				_ = os.WriteFile(name, old, 0o644)
			}
		}
	}
	if len(stale) == 0 {
		return nil
	}
	if check {
		return fmt.Errorf("the go.sum of %s does not hold the hashes of the tree's modules: run ./release.sh sync", strings.Join(stale, ", "))
	}
	fmt.Printf("release: refreshed the go.sum of %s\n", strings.Join(stale, ", "))
	return nil
}

// tidy runs go mod tidy in module m against the proxy. For a module that
// reaches its siblings through the proxy, the go.sum lines of the
// repository's modules go first: they hash an earlier tree.
func (r *repo) tidy(m *module, proxy string) error {
	if !m.Replaces {
		name := filepath.Join(r.Root, m.Dir, "go.sum")
		old, err := os.ReadFile(name)
		if err != nil && !os.IsNotExist(err) {
			return err
		}
		var kept []string
		for _, l := range strings.SplitAfter(string(old), "\n") {
			if !strings.HasPrefix(l, rootPath+" ") && !strings.HasPrefix(l, rootPath+"/") {
				kept = append(kept, l)
			}
		}
		if err := os.WriteFile(name, []byte(strings.Join(kept, "")), 0o644); err != nil {
			return err
		}
	}
	return r.goCmd(m, proxy, "mod", "tidy")
}

// check builds every module on its own against the proxy at dir: its
// go.mod requires its siblings at the version, go mod tidy -diff is
// clean, it builds, and with test its tests pass.
func (r *repo) check(proxy string, test bool) error {
	if err := r.checkRequirements(); err != nil {
		return err
	}
	var failed []string
	for _, m := range r.Modules {
		steps := [][]string{{"mod", "tidy", "-diff"}, {"build", "./..."}}
		if test {
			steps = append(steps, []string{"test", "-count=1", "./..."})
		}
		for _, s := range steps {
			if err := r.goCmd(m, proxy, s...); err != nil {
				failed = append(failed, m.Dir)
				break
			}
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("these modules fail on their own: %s", strings.Join(failed, ", "))
	}
	return nil
}

// goCmd runs the go command in module m's directory, on its own, with the
// repository's modules from the proxy at dir.
func (r *repo) goCmd(m *module, proxy string, args ...string) error {
	fmt.Fprintf(os.Stderr, "release: %s: go %s\n", m.Dir, strings.Join(args, " "))
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Join(r.Root, m.Dir)
	cmd.Env = proxyEnv(proxy)
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: go %s: %w", m.Dir, strings.Join(args, " "), err)
	}
	return nil
}

// repoRoot finds the directory that holds versions.yaml, from the working
// directory up.
func repoRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, versionsFile)); err == nil {
			return d, nil
		}
		up := filepath.Dir(d)
		if up == d {
			return "", fmt.Errorf("no %s in the working directory or above it", versionsFile)
		}
		d = up
	}
}
