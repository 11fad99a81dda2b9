package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	modpkg "golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// buildProxy writes, under dir, a module proxy (the GOPROXY protocol, for
// a file:// URL) that serves every module of the set at the tree's version
// as the module proxy would serve it once tagged: the zip holds the files
// git tracks (and the new files it does not ignore) of the module's
// directory, without its nested modules (golang.org/x/mod/zip), the .mod
// file is its go.mod, and @v/list names the version.
func (r *repo) buildProxy(dir string) error {
	files, err := r.treeFiles()
	if err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{r.V.Version, time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return err
	}
	for _, m := range r.Modules {
		esc, err := modpkg.EscapePath(m.Path)
		if err != nil {
			return err
		}
		vdir := filepath.Join(dir, filepath.FromSlash(esc), "@v")
		if err := os.MkdirAll(vdir, 0o755); err != nil {
			return err
		}
		var mfiles []zip.File
		prefix := m.Dir + "/"
		for _, f := range files {
			if m.Dir == "." {
				mfiles = append(mfiles, treeFile{root: r.Root, rel: f, path: f})
			} else if rest, ok := strings.CutPrefix(f, prefix); ok {
				mfiles = append(mfiles, treeFile{root: r.Root, rel: f, path: rest})
			}
		}
		mv := modpkg.Version{Path: m.Path, Version: r.V.Version}
		var buf bytes.Buffer
		if err := zip.Create(&buf, mv, mfiles); err != nil {
			return fmt.Errorf("%s: %w", m.Dir, err)
		}
		gomod, err := os.ReadFile(filepath.Join(r.Root, m.Dir, "go.mod"))
		if err != nil {
			return err
		}
		for name, data := range map[string][]byte{
			r.V.Version + ".zip":  buf.Bytes(),
			r.V.Version + ".mod":  gomod,
			r.V.Version + ".info": info,
			"list":                []byte(r.V.Version + "\n"),
		} {
			if err := os.WriteFile(filepath.Join(vdir, name), data, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// treeFiles lists the files of the repository as a commit of the working
// tree would hold them: tracked and not deleted, or new and not ignored;
// slash-separated paths relative to the root.
func (r *repo) treeFiles() ([]string, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = r.Root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %w", err)
	}
	var files []string
	seen := map[string]bool{}
	for _, f := range strings.Split(string(out), "\x00") {
		if f == "" || seen[f] {
			continue
		}
		seen[f] = true
		fi, err := os.Lstat(filepath.Join(r.Root, filepath.FromSlash(f)))
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the working tree, or a link
		}
		files = append(files, f)
	}
	return files, nil
}

// treeFile is a file of the tree as zip.Create takes it.
type treeFile struct{ root, rel, path string }

func (f treeFile) Path() string { return f.path }
func (f treeFile) Lstat() (fs.FileInfo, error) {
	return os.Lstat(filepath.Join(f.root, filepath.FromSlash(f.rel)))
}
func (f treeFile) Open() (io.ReadCloser, error) {
	return os.Open(filepath.Join(f.root, filepath.FromSlash(f.rel)))
}

// forgetCached removes the repository's modules from the module cache, so
// that the next go command fetches them from the proxy just built rather
// than use a copy of an earlier tree at the same version.
func forgetCached() error {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		return fmt.Errorf("go env GOMODCACHE: %w", err)
	}
	cache := strings.TrimSpace(string(out))
	esc, err := modpkg.EscapePath(rootPath)
	if err != nil {
		return err
	}
	parent, base := filepath.Split(filepath.FromSlash(esc))
	for _, d := range []string{filepath.Join(cache, parent), filepath.Join(cache, "cache", "download", parent)} {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range entries {
			// The root's own directories (handoff@v…) and its nested
			// modules' (handoff/…), nothing else of its owner.
			if e.Name() != base && !strings.HasPrefix(e.Name(), base+"@") {
				continue
			}
			p := filepath.Join(d, e.Name())
			_ = filepath.WalkDir(p, func(q string, _ fs.DirEntry, _ error) error {
				_ = os.Chmod(q, 0o755)
				return nil
			})
			if err := os.RemoveAll(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// proxyEnv is the environment of a go command that resolves the
// repository's modules through the proxy at dir, and every other module
// through the GOPROXY in effect; the checksum database is not asked for
// the repository's modules, which it does not know before they are tagged.
func proxyEnv(dir string) []string {
	upstream := os.Getenv("GOPROXY")
	if upstream == "" {
		if out, err := exec.Command("go", "env", "GOPROXY").Output(); err == nil {
			upstream = strings.TrimSpace(string(out))
		}
	}
	env := os.Environ()
	env = append(env,
		"GOPROXY=file://"+filepath.ToSlash(dir)+","+upstream,
		"GONOSUMDB="+rootPath,
		"GOWORK=off",
		"GOFLAGS=-modcacherw "+os.Getenv("GOFLAGS"),
		"GODEBUG="+noIndex(os.Getenv("GODEBUG")),
	)
	return env
}

// noIndex adds goindex=0 to a GODEBUG value. The go command keeps an index
// of each module in the module cache, keyed by its path and version (a
// version's files never change once published); a proxy of the tree serves
// other files under the same version at each change, so the index of an
// earlier tree would hide new packages. The index is only a cache.
func noIndex(godebug string) string {
	if godebug == "" {
		return "goindex=0"
	}
	return godebug + ",goindex=0"
}
