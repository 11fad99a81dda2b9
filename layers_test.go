package handoff

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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// layers is the order of the package's files, from the role verbs down
// to the codecs, as doc.go gives it: a file calls only the files below
// it, so that an offer's bytes go down the layers once (envelope,
// signature, payload, rules) and a shared helper sits below its callers.
var layers = []string{
	"delegate.go", "delegator.go",
	"receive.go", "agent.go",
	"chain.go", "refs.go", "cache.go", "lifecycle.go", "hoplock.go",
	"verify.go", "handoff.go", "wire.go", "forms.go", "peek.go", "sign.go", "trust.go",
	"status.go", "payload.go", "offer.go", "members.go", "digest.go",
	"compact.go", "cbor.go", "json.go", "codec.go", "limits.go", "errors.go",
	"doc.go",
}

// No function calls a function or method declared in a file above its
// own, and every file of the package has its place in layers. The
// package is type-checked from source, so that each call names the
// declaration it reaches.
func TestLayers_CallsGoDown(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	var syntax []*ast.File
	for _, fn := range files {
		if strings.HasSuffix(fn, "_test.go") {
			continue
		}
		require.Contains(t, layers, fn, "%s has no place in the layers", fn)
		f, err := parser.ParseFile(fset, fn, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		syntax = append(syntax, f)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	pkg, err := conf.Check("github.com/agentproto/handoff", fset, syntax, info)
	require.NoError(t, err)
	rank := func(fn string) int { return slices.Index(layers, fn) }
	for _, f := range syntax {
		fn := filepath.Base(fset.Position(f.Pos()).Filename)
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				id, ok := n.(*ast.Ident)
				if !ok {
					return true
				}
				fun, ok := info.Uses[id].(*types.Func)
				if !ok || fun.Pkg() != pkg {
					return true
				}
				if in := filepath.Base(fset.Position(fun.Pos()).Filename); rank(in) < rank(fn) {
					assert.Failf(t, "a call goes up", "%s: %s uses %s, declared in %s above it",
						fset.Position(id.Pos()), fd.Name.Name, fun.Name(), in)
				}
				return true
			})
		}
	}
}

// doc.go lists every file of the package in the order of layers.
func TestLayers_DocWalkNamesEveryFile(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	last := -1
	for _, fn := range layers[:len(layers)-1] {
		i := strings.Index(string(doc), "//\t"+fn)
		require.GreaterOrEqual(t, i, 0, "doc.go does not list %s", fn)
		assert.Greater(t, i, last, "doc.go lists %s out of the layers' order", fn)
		last = i
	}
}

// No file of the package is over 600 lines, and no function takes more
// than six parameters (issue 21): a file a reader takes in whole, a call
// a reader reads at a glance.
func TestLayout_FileAndParameterSizes(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	for _, fn := range files {
		if strings.HasSuffix(fn, "_test.go") {
			continue
		}
		src, err := os.ReadFile(fn)
		require.NoError(t, err)
		assert.LessOrEqual(t, strings.Count(string(src), "\n"), 600, "%s is over 600 lines", fn)
		f, err := parser.ParseFile(fset, fn, src, parser.SkipObjectResolution)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			var ft *ast.FuncType
			switch d := n.(type) {
			case *ast.FuncDecl:
				ft = d.Type
			case *ast.FuncLit:
				ft = d.Type
			default:
				return true
			}
			params := 0
			for _, p := range ft.Params.List {
				params += max(len(p.Names), 1)
			}
			assert.LessOrEqual(t, params, 6, "%s: a function with %d parameters", fset.Position(n.Pos()), params)
			return true
		})
	}
}
