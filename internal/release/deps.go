package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// deps checks that every module that two or more of the repository's
// modules have in their build lists is selected at one version in each of
// them, on its own (GOWORK=off, as an importer builds it), and in the
// workspace (go.work, as the repository's commands build it): the tests
// then build the graph the importers build. With fix, it raises each
// module's requirement to the highest version selected, until they agree.
func (r *repo) deps(fix bool) error {
	if err := r.checkWorkspace(); err != nil {
		return err
	}
	for round := 0; ; round++ {
		if fix {
			if err := r.tidyAll(); err != nil {
				return err
			}
		}
		err := r.withProxy(func(proxy string) error {
			lists := map[string]map[string]string{} // module dir -> dep -> version
			for _, m := range r.Modules {
				l, err := r.buildList(filepath.Join(r.Root, m.Dir), proxyEnv(proxy), "./...")
				if err != nil {
					return fmt.Errorf("%s: %w", m.Dir, err)
				}
				lists[m.Dir] = l
			}
			ws, err := r.buildList(r.Root, append(os.Environ(), "GOWORK="+filepath.Join(r.Root, "go.work")), r.patterns()...)
			if err != nil {
				return fmt.Errorf("the workspace: %w", err)
			}
			lists["(workspace)"] = ws
			high, split := disagreements(lists)
			if len(split) == 0 {
				return oneSet(ws)
			}
			if !fix || round == 5 {
				return fmt.Errorf("these dependencies are selected at more than one version:\n%s\nrun ./release.sh deps -fix", strings.Join(split, "\n"))
			}
			for _, m := range r.Modules {
				var gets []string
				for dep, v := range lists[m.Dir] {
					if semver.Compare(v, high[dep]) < 0 {
						gets = append(gets, dep+"@"+high[dep])
					}
				}
				if len(gets) == 0 {
					continue
				}
				sort.Strings(gets)
				if !m.Replaces {
					// The go.sum lines of its siblings hash their zips
					// as the proxy serves them now.
					if err := r.tidy(m, proxy); err != nil {
						return err
					}
				}
				if err := r.goCmd(m, proxy, append([]string{"get"}, gets...)...); err != nil {
					return err
				}
			}
			return errAgain
		})
		if err != errAgain {
			return err
		}
		// The go.mod files changed: read them again.
		nr, err := loadRepo(r.Root)
		if err != nil {
			return err
		}
		*r = *nr
	}
}

// tidyAll runs go mod tidy in every module: first in those that reach
// their siblings through replace directives, then, against a proxy of the
// tree as those left it, in the others (whose go.sum hashes the siblings'
// zips).
func (r *repo) tidyAll() error {
	for _, second := range []bool{false, true} {
		err := r.withProxy(func(proxy string) error {
			for _, m := range r.Modules {
				if (!m.Replaces && len(m.Siblings) > 0) != second {
					continue
				}
				if err := r.tidy(m, proxy); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// errAgain says that deps -fix changed requirements and checks again.
var errAgain = errors.New("again")

// oneSet checks that OpenTelemetry-Go's stable modules (go.opentelemetry.io/otel
// and the modules below it at a v1 version) are selected at one version:
// the project released them together, and a graph that mixes two of their
// releases builds what neither release tested.
func oneSet(list map[string]string) error {
	var first, firstPath string
	for p, v := range list {
		if p != "go.opentelemetry.io/otel" && !strings.HasPrefix(p, "go.opentelemetry.io/otel/") {
			continue
		}
		if semver.Major(v) != "v1" {
			continue // an experimental module set (v0), versioned apart
		}
		if first == "" {
			first, firstPath = v, p
		} else if v != first {
			return fmt.Errorf("OpenTelemetry's stable modules are selected at more than one version: %s %s, %s %s", firstPath, first, p, v)
		}
	}
	return nil
}

// disagreements returns the highest version of each dependency and a line
// for each one selected at more than one version.
func disagreements(lists map[string]map[string]string) (map[string]string, []string) {
	high := map[string]string{}
	seen := map[string]map[string][]string{} // dep -> version -> where
	for where, l := range lists {
		for dep, v := range l {
			if seen[dep] == nil {
				seen[dep] = map[string][]string{}
			}
			seen[dep][v] = append(seen[dep][v], where)
			if semver.Compare(v, high[dep]) > 0 {
				high[dep] = v
			}
		}
	}
	var split []string
	for dep, vs := range seen {
		if len(vs) < 2 {
			continue
		}
		var parts []string
		for v, where := range vs {
			sort.Strings(where)
			parts = append(parts, fmt.Sprintf("%s in %s", v, strings.Join(where, " ")))
		}
		sort.Strings(parts)
		split = append(split, fmt.Sprintf("  %s: %s", dep, strings.Join(parts, "; ")))
	}
	sort.Strings(split)
	return high, split
}

// buildList lists the modules that provide the packages, tests included,
// of the module in dir (or, in the workspace, of every module of the set),
// with their selected versions, but the repository's own. A module of the
// graph that provides no package builds nothing, and go mod tidy drops a
// requirement on it: it is not compared.
func (r *repo) buildList(dir string, env []string, patterns ...string) (map[string]string, error) {
	args := append([]string{"list", "-deps", "-test", "-f", "{{with .Module}}{{.Path}} {{.Version}}{{end}}"}, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -deps -test: %w", err)
	}
	l := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		p, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || v == "" || p == rootPath || strings.HasPrefix(p, rootPath+"/") {
			continue
		}
		l[p] = v
	}
	return l, nil
}

// checkWorkspace says whether go.work uses exactly the module set.
func (r *repo) checkWorkspace() error {
	name := filepath.Join(r.Root, "go.work")
	data, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	wf, err := modfile.ParseWork(name, data, nil)
	if err != nil {
		return err
	}
	var used []string
	for _, u := range wf.Use {
		used = append(used, filepath.ToSlash(filepath.Clean(u.Path)))
	}
	sort.Strings(used)
	want := slices.Clone(r.V.Modules)
	sort.Strings(want)
	if !slices.Equal(used, want) {
		return fmt.Errorf("go.work uses %s; versions.yaml's modules are %s", strings.Join(used, " "), strings.Join(want, " "))
	}
	return nil
}
