package handoff

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The conformance matrix, CONFORMANCE.md, names for every item HC-01 ..
// HC-69 of the draft's checklist the code that implements it and the tests
// that drive it to its accepting and to its rejecting outcome. This test
// keeps the matrix honest, so that it cannot drift from the code:
//
//   - every item has exactly one row, in order, with seven cells and a
//     level of MUST, SHOULD, MAY (or several, joined by "/") or "—";
//   - each of the two test cells names at least one test or vector, or says
//     "n/a" with a reason; a row not marked out of scope names at least one
//     test function; a row marked out of scope gives its reason;
//   - every test named anywhere in the file (a backticked Test..., Fuzz...
//     or Example... identifier; unqualified for this package, or
//     `dir/path.TestName` for the package in that directory; a subtest
//     `TestName/Sub` names its function) is a function of that package's
//     _test.go files;
//   - every vector named (#nnn) exists, and in a test cell it lists the
//     row's item among those it exercises, beside `TestVectors`, which
//     runs it;
//   - every backticked .go file exists, every backticked identifier in a
//     "where implemented" cell is declared in the file named before it in
//     that cell, and every other backticked identifier is declared
//     somewhere in the module.

const (
	confFile  = "CONFORMANCE.md"
	confFirst = 1
	confLast  = 69
)

// Columns of a matrix row.
const (
	confColID = iota
	confColLevel
	confColRule
	confColImpl
	confColAccept
	confColReject
	confColNotes
	confCols
)

var (
	confRowID    = regexp.MustCompile(`^HC-([0-9]{2})$`)
	confBacktick = regexp.MustCompile("`([^`\n]+)`")
	confTestName = regexp.MustCompile(`^(?:([a-z0-9_]+(?:/[a-z0-9_]+)*)\.)?((?:Test|Fuzz|Example)[A-Za-z0-9_]*)(?:/[A-Za-z0-9_]+)*$`)
	confGoFile   = regexp.MustCompile(`^[A-Za-z0-9_./-]+\.go$`)
	confIdent    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?$`)
	confVector   = regexp.MustCompile(`#([0-9]{3})\b`)
)

// confRow is one row of the matrix.
type confRow struct {
	line  int
	id    string
	cells []string
}

func (r confRow) outOfScope() bool {
	return strings.HasPrefix(r.cells[confColImpl], "**Out of scope**")
}

func TestConformance_Matrix(t *testing.T) {
	raw, err := os.ReadFile(confFile)
	if err != nil {
		t.Fatalf("reading the matrix: %v", err)
	}
	doc := string(raw)
	rows := confRows(t, doc)
	tests := confTestFuncs(t)
	decls, global := confDecls(t)
	vectors := confVectors(t)

	t.Run("rows", func(t *testing.T) {
		var ids []string
		for _, r := range rows {
			ids = append(ids, r.id)
		}
		var want []string
		for i := confFirst; i <= confLast; i++ {
			want = append(want, fmt.Sprintf("HC-%02d", i))
		}
		if !slices.Equal(ids, want) {
			t.Errorf("rows are %v; want exactly one per item, in order: %v", ids, want)
		}
		for _, r := range rows {
			confCheckLevel(t, r)
			if r.cells[confColRule] == "" {
				t.Errorf("line %d: %s: no rule text", r.line, r.id)
			}
			if r.cells[confColImpl] == "" {
				t.Errorf("line %d: %s: no \"where implemented\"", r.line, r.id)
			}
			named := 0
			for _, c := range []int{confColAccept, confColReject} {
				n := len(confTestsIn(r.cells[c]))
				named += n
				if n == 0 && len(confVector.FindAllString(r.cells[c], -1)) == 0 && !confNA(r.cells[c]) {
					t.Errorf("line %d: %s: column %d names no test and does not say \"n/a\" with a reason: %q",
						r.line, r.id, c+1, r.cells[c])
				}
			}
			switch {
			case r.outOfScope() && len(strings.TrimSpace(r.cells[confColNotes])) < 20:
				t.Errorf("line %d: %s: marked out of scope without a reason in its notes", r.line, r.id)
			case !r.outOfScope() && named == 0:
				t.Errorf("line %d: %s: not marked out of scope, and names no test", r.line, r.id)
			}
		}
	})

	t.Run("tests exist", func(t *testing.T) {
		for _, name := range confTestsIn(doc) {
			dir, fn := confSplitTest(name)
			if !tests[dir][fn] {
				t.Errorf("the matrix cites %s, but no _test.go file in %q declares func %s", name, dir, fn)
			}
		}
	})

	t.Run("vectors", func(t *testing.T) {
		for _, m := range confVector.FindAllStringSubmatch(doc, -1) {
			if _, ok := vectors[m[1]]; !ok {
				t.Errorf("the matrix cites vector #%s, which is not in testdata/vectors", m[1])
			}
		}
		for _, r := range rows {
			for _, c := range []int{confColAccept, confColReject} {
				ms := confVector.FindAllStringSubmatch(r.cells[c], -1)
				if len(ms) > 0 && !slices.Contains(confTestsIn(r.cells[c]), "TestVectors") {
					t.Errorf("line %d: %s: column %d cites vectors without `TestVectors`, which runs them", r.line, r.id, c+1)
				}
				for _, m := range ms {
					if hc, ok := vectors[m[1]]; ok && !slices.Contains(hc, r.id) {
						t.Errorf("line %d: %s: vector #%s exercises %v, not %s", r.line, r.id, m[1], hc, r.id)
					}
				}
			}
		}
	})

	t.Run("files and identifiers", func(t *testing.T) {
		inImpl := map[int]bool{}
		for _, r := range rows {
			inImpl[r.line] = true
			confCheckImpl(t, r, decls)
		}
		for i, line := range strings.Split(doc, "\n") {
			for _, m := range confBacktick.FindAllStringSubmatch(line, -1) {
				tok := m[1]
				switch {
				case confGoFile.MatchString(tok):
					if _, err := os.Stat(filepath.FromSlash(tok)); err != nil {
						t.Errorf("line %d: file `%s` does not exist", i+1, tok)
					}
				case confTestName.MatchString(tok):
					// Checked above.
				case confIdent.MatchString(tok):
					if inImpl[i+1] && strings.Contains(confCell(line, confColImpl), m[0]) {
						continue // checked against its file by confCheckImpl
					}
					if !global[tok] {
						t.Errorf("line %d: `%s` is declared nowhere in the module", i+1, tok)
					}
				}
			}
		}
	})
}

// confRows returns the rows of the matrix: the table lines whose first cell
// is an item number.
func confRows(t *testing.T, doc string) []confRow {
	t.Helper()
	var rows []confRow
	for i, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(line, "| HC-") {
			continue
		}
		cells := confSplit(line)
		if !confRowID.MatchString(cells[0]) {
			continue // the header row
		}
		if len(cells) != confCols {
			t.Errorf("line %d: %s has %d cells, want %d (a \"|\" inside a cell?)", i+1, cells[0], len(cells), confCols)
			continue
		}
		rows = append(rows, confRow{line: i + 1, id: cells[0], cells: cells})
	}
	if len(rows) == 0 {
		t.Fatalf("%s holds no matrix rows", confFile)
	}
	return rows
}

// confSplit splits a table line into its trimmed cells.
func confSplit(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	line = strings.TrimSuffix(line, "|")
	cells := strings.Split(line, "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells
}

// confCell returns cell col of a table line, or "".
func confCell(line string, col int) string {
	cells := confSplit(line)
	if col < len(cells) {
		return cells[col]
	}
	return ""
}

func confCheckLevel(t *testing.T, r confRow) {
	t.Helper()
	lv := r.cells[confColLevel]
	if lv == "—" {
		return
	}
	for _, p := range strings.Split(lv, "/") {
		switch p {
		case "MUST", "SHOULD", "MAY":
		default:
			t.Errorf("line %d: %s: level %q: want MUST, SHOULD, MAY, several joined by \"/\", or \"—\"", r.line, r.id, lv)
			return
		}
	}
}

// confNA reports whether a test cell says "n/a" and gives a reason.
func confNA(cell string) bool {
	rest, ok := strings.CutPrefix(cell, "n/a")
	return ok && len(strings.Trim(rest, " —-:")) >= 10
}

// confTestsIn returns the backticked test names in s, in order.
func confTestsIn(s string) []string {
	var out []string
	for _, m := range confBacktick.FindAllStringSubmatch(s, -1) {
		if confTestName.MatchString(m[1]) {
			out = append(out, m[1])
		}
	}
	return out
}

// confSplitTest splits "dir/path.TestName" into its directory ("." when
// unqualified) and function name.
func confSplitTest(name string) (dir, fn string) {
	m := confTestName.FindStringSubmatch(name)
	if m[1] == "" {
		return ".", m[2]
	}
	return m[1], m[2]
}

// confCheckImpl checks a "where implemented" cell: each backticked .go file
// exists, and each backticked identifier after it is declared in it.
func confCheckImpl(t *testing.T, r confRow, decls map[string]map[string]bool) {
	t.Helper()
	file := ""
	for _, m := range confBacktick.FindAllStringSubmatch(r.cells[confColImpl], -1) {
		tok := m[1]
		switch {
		case confGoFile.MatchString(tok):
			file = tok
			if decls[file] == nil {
				t.Errorf("line %d: %s: `%s` is not a Go source file of the module", r.line, r.id, tok)
			}
		case confIdent.MatchString(tok) && !confTestName.MatchString(tok):
			switch {
			case file == "":
				t.Errorf("line %d: %s: `%s` is not preceded by the file that declares it", r.line, r.id, tok)
			case decls[file] != nil && !decls[file][tok]:
				t.Errorf("line %d: %s: `%s` is not declared in %s", r.line, r.id, tok, file)
			}
		}
	}
}

// confWalk calls fn for every .go file of the module, skipping the
// examples module, test data and hidden directories.
func confWalk(t *testing.T, fn func(path string)) {
	t.Helper()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != "." && (name == "examples" || name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") {
			fn(filepath.ToSlash(path))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking the module: %v", err)
	}
}

// confTestFuncs returns, by directory, the top-level functions of the
// module's _test.go files.
func confTestFuncs(t *testing.T) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	fset := token.NewFileSet()
	confWalk(t, func(path string) {
		if !strings.HasSuffix(path, "_test.go") {
			return
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parsing %s: %v", path, err)
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		if out[dir] == nil {
			out[dir] = map[string]bool{}
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil {
				out[dir][fd.Name.Name] = true
			}
		}
	})
	return out
}

// confDecls returns what each non-test .go file of the module declares, and
// the union over the module: top-level names, "Type.Method", "Type.Field",
// and, for the global set, "pkg.Name" for each top-level name.
func confDecls(t *testing.T) (byFile map[string]map[string]bool, global map[string]bool) {
	t.Helper()
	byFile, global = map[string]map[string]bool{}, map[string]bool{}
	fset := token.NewFileSet()
	confWalk(t, func(path string) {
		if strings.HasSuffix(path, "_test.go") {
			return
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parsing %s: %v", path, err)
		}
		names := map[string]bool{}
		top := func(n string) {
			names[n] = true
			global[f.Name.Name+"."+n] = true
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					top(d.Name.Name)
				} else if len(d.Recv.List) == 1 {
					names[confRecvName(d.Recv.List[0].Type)+"."+d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						top(s.Name.Name)
						confMembers(s, names)
					case *ast.ValueSpec:
						for _, n := range s.Names {
							top(n.Name)
						}
					}
				}
			}
		}
		byFile[path] = names
		for n := range names {
			global[n] = true
		}
	})
	return byFile, global
}

// confMembers adds "Type.Field" for the fields of a struct type and
// "Type.Method" for the methods of an interface type.
func confMembers(s *ast.TypeSpec, names map[string]bool) {
	var fields *ast.FieldList
	switch tt := s.Type.(type) {
	case *ast.StructType:
		fields = tt.Fields
	case *ast.InterfaceType:
		fields = tt.Methods
	default:
		return
	}
	for _, fl := range fields.List {
		for _, n := range fl.Names {
			names[s.Name.Name+"."+n.Name] = true
		}
	}
}

// confRecvName returns the type name of a method receiver.
func confRecvName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return confRecvName(e.X)
	case *ast.IndexExpr:
		return confRecvName(e.X)
	case *ast.IndexListExpr:
		return confRecvName(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// confVectors returns, by number, the items each vector of testdata/vectors
// says it exercises.
func confVectors(t *testing.T) map[string][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "vectors", "[0-9][0-9][0-9]-*.json"))
	if err != nil {
		t.Fatalf("listing vectors: %v", err)
	}
	out := map[string][]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("reading %s: %v", f, err)
		}
		var v struct {
			HC []string `json:"hc"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("decoding %s: %v", f, err)
		}
		out[filepath.Base(f)[:3]] = v.HC
	}
	return out
}
