package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestCommittedVectorsUpToDate regenerates the vectors and compares them
// with testdata/vectors: the generator is deterministic, so any difference
// means the committed files are stale (or were edited by hand).
func TestCommittedVectorsUpToDate(t *testing.T) {
	root := filepath.Join("..", "..")
	draft00 = filepath.Join(root, "testdata", "draft-00")
	files, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "testdata", "vectors")
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%s: %v (run go run ./internal/vectorgen -out testdata/vectors)", name, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the generator's output (run go run ./internal/vectorgen -out testdata/vectors)", name)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, ok := files[e.Name()]; !ok && vectorFile.MatchString(e.Name()) {
			t.Errorf("%s: not written by the generator", e.Name())
		}
	}
}

// TestGenerateDeterministic runs the generator twice.
func TestGenerateDeterministic(t *testing.T) {
	draft00 = filepath.Join("..", "..", "testdata", "draft-00")
	a, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	b, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != len(b) {
		t.Fatalf("%d files, then %d", len(a), len(b))
	}
	for name := range a {
		if !bytes.Equal(a[name], b[name]) {
			t.Errorf("%s differs between two runs", name)
		}
	}
}
