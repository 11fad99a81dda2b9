package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/keyset"
)

// remoteTrust is what --trust-url, --trust-doc-url and --trust-cache ask
// for: a keyset.Source over the URLs (with base, from --trust, for the
// agents no URL covers), its state kept in cacheFile between runs so that
// a set still fresh is not fetched again. Call done once the trust has
// been used: it waits for a refresh an unknown kid started and saves the
// cache.
func remoteTrust(ctx context.Context, base *handoff.Trust, urls []string, doc, cacheFile string, stderr io.Writer) (
	trust *handoff.Trust, done func() error, err error) {
	agents := map[handoff.AgentID]keyset.Endpoint{}
	for _, spec := range urls {
		id, u, ok := cutSpec(spec)
		if !ok || id == "" || u == "" {
			return nil, nil, fmt.Errorf("--trust-url %q: want AGENT=URL", spec)
		}
		if _, dup := agents[handoff.AgentID(id)]; dup {
			return nil, nil, fmt.Errorf("--trust-url: %s given twice", id)
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
			return nil, nil, fmt.Errorf("--trust-cache: %v", err)
		}
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	src, err := keyset.New(keyset.Config{Agents: agents, Document: doc, Base: base, State: state, Logger: log})
	if err != nil {
		return nil, nil, err
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
	return src.Trust(), done, nil
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
