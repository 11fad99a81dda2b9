// Command exports counts the exported identifiers of a Go package as the
// project tracks the size of its root API: types, functions, methods on
// exported types, constants and variables, each declared name once. Struct
// fields, interface methods and test files are not counted.
//
//	go run ./internal/exports [-list] [DIR]
//
// prints the counts of the package in DIR (default "."), and with -list
// each name, by kind.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// Kind is one class of exported identifier.
type Kind string

// The kinds, in the order they are printed.
const (
	Type     Kind = "types"
	Func     Kind = "functions"
	Method   Kind = "methods"
	Const    Kind = "constants"
	Var      Kind = "variables"
	numKinds      = 5
)

var kinds = [numKinds]Kind{Type, Func, Method, Const, Var}

// Count is the exported identifiers of one package, by kind.
type Count map[Kind][]string

// Total is the number of identifiers counted.
func (c Count) Total() int {
	n := 0
	for _, k := range kinds {
		n += len(c[k])
	}
	return n
}

// Summary is one line: the total, then each kind.
func (c Count) Summary() string {
	s := fmt.Sprintf("%d exported identifiers:", c.Total())
	for i, k := range kinds {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprintf(" %d %s", len(c[k]), k)
	}
	return s
}

// CountDir counts the package in dir: the files go/build selects for the
// current platform, test files excluded.
func CountDir(dir string) (Count, error) {
	pkg, err := build.ImportDir(dir, 0)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	c := Count{}
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		countFile(f, c)
	}
	for _, k := range kinds {
		sort.Strings(c[k])
	}
	return c, nil
}

func countFile(f *ast.File, c Count) {
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			if d.Recv == nil {
				c[Func] = append(c[Func], d.Name.Name)
				continue
			}
			if recv := receiverType(d.Recv.List[0].Type); ast.IsExported(recv) {
				c[Method] = append(c[Method], recv+"."+d.Name.Name)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						c[Type] = append(c[Type], s.Name.Name)
					}
				case *ast.ValueSpec:
					k := Var
					if d.Tok == token.CONST {
						k = Const
					}
					for _, n := range s.Names {
						if n.IsExported() {
							c[k] = append(c[k], n.Name)
						}
					}
				}
			}
		}
	}
}

// receiverType is the name of a method's receiver base type: T for T,
// *T, T[P] and *T[P].
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("exports", flag.ContinueOnError)
	fs.SetOutput(stderr)
	list := fs.Bool("list", false, "list each name, by kind")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	dir := "."
	switch fs.NArg() {
	case 0:
	case 1:
		dir = fs.Arg(0)
	default:
		fmt.Fprintln(stderr, "usage: exports [-list] [DIR]")
		return 2
	}
	c, err := CountDir(dir)
	if err != nil {
		fmt.Fprintf(stderr, "exports: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, c.Summary())
	if *list {
		for _, k := range kinds {
			fmt.Fprintf(stdout, "\n%s (%d):\n", k, len(c[k]))
			for _, n := range c[k] {
				fmt.Fprintf(stdout, "  %s\n", n)
			}
		}
	}
	return 0
}
