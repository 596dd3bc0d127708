// Package layout holds the house to its measures: over the product code in
// handlers/, model/, projections/ and scripts/ (non-test Go), no package
// within a tenth of maxPackageLines (the limit is an alarm, not a target),
// no function over maxFuncLines, no type with more than maxTypeMethodLines
// of methods counted with the struct types it embeds, no interface with
// more than maxInterfaceMethods methods counted with those it embeds, no
// struct embedding two shared types of this tree (types_test.go), no
// package comment over maxDocLines and no file over maxFileLines; the
// ports speak the domain, projections reach no adapter, and no command
// links the testing package. go test -v prints the largest of each.
package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const (
	maxPackageLines = 1600
	// packageRoom is the most a package may hold: a tenth of the limit
	// stays free, so the next feature never starts by moving code away.
	packageRoom         = maxPackageLines - maxPackageLines/10
	maxFuncLines        = 80
	maxTypeMethodLines  = 400
	maxInterfaceMethods = 6
	maxDocLines         = 80
)

type measure struct {
	name string
	n    int
}

type house struct {
	pkgLines, pkgDoc map[string]int
	funcs            []measure
}

func measureHouse(t *testing.T, root string) house {
	t.Helper()
	h := house{pkgLines: map[string]int{}, pkgDoc: map[string]int{}}
	fset := token.NewFileSet()
	for _, top := range []string{"handlers", "model", "projections", "scripts"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			src, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			f, err := parser.ParseFile(fset, p, src, parser.ParseComments)
			if err != nil {
				return err
			}
			dir, _ := filepath.Rel(root, filepath.Dir(p))
			dir = filepath.ToSlash(dir)
			h.pkgLines[dir] += strings.Count(string(src), "\n")
			if f.Doc != nil {
				h.pkgDoc[dir] += lines(fset, f.Doc)
			}
			h.add(fset, dir, f)
			return nil
		})
		if err != nil {
			t.Fatalf("measure %s: %v", top, err)
		}
	}
	return h
}

func lines(fset *token.FileSet, n ast.Node) int {
	return fset.Position(n.End()).Line - fset.Position(n.Pos()).Line + 1
}

func (h *house) add(fset *token.FileSet, dir string, f *ast.File) {
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			name := dir + "." + d.Name.Name
			if d.Recv != nil {
				typ := d.Recv.List[0].Type
				if s, ok := typ.(*ast.StarExpr); ok {
					typ = s.X
				}
				if ix, ok := typ.(*ast.IndexExpr); ok {
					typ = ix.X
				}
				if id, ok := typ.(*ast.Ident); ok {
					name = dir + "." + id.Name + "." + d.Name.Name
				}
			}
			h.funcs = append(h.funcs, measure{name, lines(fset, d)})
		}
	}
}

func sorted(m map[string]int) []measure {
	var out []measure
	for k, v := range m {
		out = append(out, measure{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].n > out[j].n || out[i].n == out[j].n && out[i].name < out[j].name })
	return out
}

func check(t *testing.T, what string, ms []measure, limit func(name string) int) {
	t.Helper()
	sort.Slice(ms, func(i, j int) bool { return ms[i].n > ms[j].n })
	if len(ms) > 0 {
		t.Logf("largest %s: %s %d", what, ms[0].name, ms[0].n)
	}
	for _, m := range ms {
		if l := limit(m.name); m.n > l {
			t.Errorf("%s %s: %d, over %d", what, m.name, m.n, l)
		}
	}
}

func TestTheHouseKeepsItsMeasures(t *testing.T) {
	t.Parallel()
	h := measureHouse(t, filepath.Join("..", ".."))
	if len(h.pkgLines) < 10 || len(h.funcs) < 100 {
		t.Fatalf("measured %d packages and %d functions: the walk did not find the product code", len(h.pkgLines), len(h.funcs))
	}
	check(t, "package (lines)", sorted(h.pkgLines), func(string) int { return packageRoom })
	check(t, "function (lines)", h.funcs, func(string) int { return maxFuncLines })
	check(t, "package comment (lines)", sorted(h.pkgDoc), func(string) int { return maxDocLines })
}
