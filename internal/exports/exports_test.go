package main

import (
	"bytes"
	"go/ast"
	"go/build"
	"go/doc"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// The fixture's exported identifiers, each kind exactly: no fields, no
// interface methods, no methods of unexported types, nothing from test
// files or files the build excludes.
func TestCountDir_Fixture(t *testing.T) {
	c, err := CountDir(filepath.Join("testdata", "sample"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[Kind]string{
		Type:   "G I T T0",
		Func:   "F",
		Method: "G.M T.M T.N",
		Const:  "C1 C2 C4",
		Var:    "V1 V3",
	}
	for k, w := range want {
		if got := strings.Join(c[k], " "); got != w {
			t.Errorf("%s: %q, want %q", k, got, w)
		}
	}
	if c.Total() != 13 {
		t.Errorf("total %d, want 13", c.Total())
	}
	if got := c.Summary(); got != "13 exported identifiers: 4 types, 1 functions, 3 methods, 3 constants, 2 variables" {
		t.Errorf("summary %q", got)
	}
}

// The root package's count, printed for the record (go test -v -run
// TestCountDir_Root ./internal/exports), and checked against go/doc, an
// independent reading of the same files.
func TestCountDir_Root(t *testing.T) {
	root := filepath.Join("..", "..")
	c, err := CountDir(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the root package: %s", c.Summary())

	pkg, err := build.ImportDir(root, 0)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(root, name), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	d, err := doc.NewFromFiles(fset, files, "github.com/agentproto/handoff")
	if err != nil {
		t.Fatal(err)
	}
	n := map[Kind]int{Type: len(d.Types), Func: len(d.Funcs)}
	values := func(vs []*doc.Value, k Kind) {
		for _, v := range vs {
			for _, s := range v.Decl.Specs {
				for _, name := range s.(*ast.ValueSpec).Names {
					if name.IsExported() {
						n[k]++
					}
				}
			}
		}
	}
	values(d.Consts, Const)
	values(d.Vars, Var)
	for _, ty := range d.Types {
		n[Func] += len(ty.Funcs) // constructors go/doc files under their type
		for _, m := range ty.Methods {
			if m.Level == 0 { // declared on the type, not promoted
				n[Method]++
			}
		}
		values(ty.Consts, Const)
		values(ty.Vars, Var)
	}
	for _, k := range kinds {
		if n[k] != len(c[k]) {
			t.Errorf("%s: %d, go/doc counts %d", k, len(c[k]), n[k])
		}
	}
}

func TestRun(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-list", filepath.Join("testdata", "sample")}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.HasPrefix(out.String(), "13 exported identifiers") || !strings.Contains(out.String(), "\nmethods (3):\n  G.M\n  T.M\n  T.N\n") {
		t.Errorf("output:\n%s", out.String())
	}
	if code := run([]string{"a", "b"}, &out, &errb); code != 2 {
		t.Errorf("two directories: exit %d, want 2", code)
	}
}
