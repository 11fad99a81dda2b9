package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/keyset"
)

// trustFlags are the flags that say which keys to trust, as verify and card
// verify take them: a trust file, the URLs where agents publish their JWK
// Sets or a trust document, and a cache of what was fetched.
type trustFlags struct {
	path, docURL, cache *string
	urls                listFlag
	// src, once load has run, is the source of the keys the URLs publish,
	// for a command that runs long enough to follow its updates; nil
	// without a URL.
	src *keyset.Source
}

func addTrustFlags(fs *flag.FlagSet) *trustFlags {
	t := &trustFlags{}
	t.path = fs.String("trust", "", "trust file: each AgentId -> JWK Set of public keys (`TRUST.json`; required unless a trust URL is given)")
	fs.Var(&t.urls, "trust-url", "trust the JWK Set AGENT publishes at URL, fetched and cached by its HTTP headers (`AGENT=URL`, repeatable; "+
		"https, or http to loopback)")
	t.docURL = fs.String("trust-doc-url", "", "trust the trust document (each AgentId -> JWK Set) published at `URL`")
	t.cache = fs.String("trust-cache", "", "`FILE` keeping the fetched sets between runs, so that a set still fresh is not fetched again")
	return t
}

// problem says what is wrong with the trust flags given, or "".
func (t *trustFlags) problem() string {
	switch {
	case *t.path == "" && len(t.urls) == 0 && *t.docURL == "":
		return "--trust, --trust-url or --trust-doc-url is required"
	case *t.cache != "" && len(t.urls) == 0 && *t.docURL == "":
		return "--trust-cache needs --trust-url or --trust-doc-url"
	}
	return ""
}

// load reads the trust file and the sets the URLs publish. On failure it
// has reported the error and returns the exit status; else call done once
// the trust has been used (it saves the cache).
func (t *trustFlags) load(e *env, cmd string) (trust *handoff.Trust, done func(), code int, ok bool) {
	done = func() {}
	if *t.path != "" {
		doc, err := os.ReadFile(*t.path)
		if err != nil {
			return nil, nil, e.failf(cmd, "--trust: %v", err), false
		}
		if trust, err = keyset.ParseTrust(doc); err != nil {
			return nil, nil, e.failf(cmd, "--trust %s: %v", *t.path, err), false
		}
	}
	if len(t.urls) > 0 || *t.docURL != "" {
		remote, src, save, err := remoteTrust(context.Background(), trust, t.urls, *t.docURL, *t.cache, e.stderr)
		if err != nil {
			return nil, nil, e.usagef(cmd, "%v", err), false
		}
		done = func() {
			if err := save(); err != nil {
				fmt.Fprintf(e.stderr, "handoff %s: %v\n", cmd, err)
			}
		}
		trust, t.src = remote, src
	}
	return trust, done, 0, true
}

// remoteTrust is what --trust-url, --trust-doc-url and --trust-cache ask
// for: a keyset.Source over the URLs (with base, from --trust, for the
// agents no URL covers), its state kept in cacheFile between runs so that
// a set still fresh is not fetched again. Call done once the trust has
// been used: it waits for a refresh an unknown kid started and saves the
// cache.
func remoteTrust(ctx context.Context, base *handoff.Trust, urls []string, doc, cacheFile string, stderr io.Writer) (
	trust *handoff.Trust, src *keyset.Source, done func() error, err error) {
	agents := map[handoff.AgentID]keyset.Endpoint{}
	for _, spec := range urls {
		id, u, ok := cutSpec(spec)
		if !ok || id == "" || u == "" {
			return nil, nil, nil, fmt.Errorf("--trust-url %q: want AGENT=URL", spec)
		}
		if _, dup := agents[handoff.AgentID(id)]; dup {
			return nil, nil, nil, fmt.Errorf("--trust-url: %s given twice", id)
		}
		agents[handoff.AgentID(id)] = keyset.Endpoint{URL: u}
	}
	var state []byte
	if cacheFile != "" {
		state, err = os.ReadFile(cacheFile)
		if errors.Is(err, fs.ErrNotExist) {
			state, err = nil, nil
		}
		if err != nil {
			return nil, nil, nil, fmt.Errorf("--trust-cache: %v", err)
		}
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	src, err = keyset.New(keyset.Config{Agents: agents, Document: doc, Base: base, State: state, Logger: log})
	if err != nil {
		return nil, nil, nil, err
	}
	// A failed refresh is not fatal: the cached set serves until it is
	// stale, and an agent without keys is refused as untrusted-key.
	src.Update(ctx)
	done = func() error {
		src.Close()
		if cacheFile == "" {
			return nil
		}
		b, err := src.State()
		if err != nil {
			return err
		}
		return writeFileAtomic(cacheFile, b)
	}
	return src.Trust(), src, done, nil
}

// writeFileAtomic replaces path with b, never leaving a half-written file.
func writeFileAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".trust-cache-*")
	if err != nil {
		return fmt.Errorf("--trust-cache: %v", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("--trust-cache: %v", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--trust-cache: %v", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("--trust-cache: %v", err)
	}
	return nil
}
