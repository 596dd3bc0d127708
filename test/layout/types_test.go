package layout

import (
	"go/ast"
	"go/types"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/tools/go/packages"
)

// The measures that need types: an interface counted with everything it
// embeds, a type's methods counted with the struct types of this tree it
// embeds, and what a struct may embed. They read the product code the way
// the compiler does (go/packages), so an embedded port is never "one
// method" and a type split in two and glued back with embedding is still
// one type.

var (
	loadOnce sync.Once
	loaded   []*packages.Package
	loadErr  error
)

// productPackages loads handlers/, model/, projections/ and scripts/
// (without their tests) with types and syntax, once per test binary.
func productPackages(t *testing.T) []*packages.Package {
	t.Helper()
	loadOnce.Do(func() {
		cfg := &packages.Config{Mode: packages.NeedName | packages.NeedTypes | packages.NeedSyntax | packages.NeedTypesInfo |
			packages.NeedFiles, Dir: filepath.Join("..", "..")}
		loaded, loadErr = packages.Load(cfg, "./handlers/...", "./model/...", "./projections/...", "./scripts/...")
	})
	if loadErr != nil {
		t.Fatalf("load the product code: %v", loadErr)
	}
	if len(loaded) < 10 {
		t.Fatalf("loaded %d packages: the walk did not find the product code", len(loaded))
	}
	for _, p := range loaded {
		for _, err := range p.Errors {
			t.Fatalf("load %s: %v", p.PkgPath, err)
		}
	}
	return loaded
}

// ours reports whether a named type is declared in this module.
func ours(n *types.Named) bool {
	return n.Obj().Pkg() != nil && strings.HasPrefix(n.Obj().Pkg().Path(), module)
}

// short names a declared type by its folder and name (model/store.Workouts).
func short(n *types.Named) string {
	return strings.TrimPrefix(n.Obj().Pkg().Path(), module) + "." + n.Obj().Name()
}

// TestPortsAreSmallCountedInFull: no interface of the product code, named
// or written inline in a struct's field, has more than maxInterfaceMethods
// methods, counting every method of the interfaces it embeds. A port that
// grows by embedding another is as wide as both.
func TestPortsAreSmallCountedInFull(t *testing.T) {
	t.Parallel()
	var ms []measure
	for _, p := range productPackages(t) {
		for _, f := range p.Syntax {
			ast.Inspect(f, func(n ast.Node) bool {
				it, ok := n.(*ast.InterfaceType)
				if !ok {
					return true
				}
				iface, ok := p.TypesInfo.TypeOf(it).(*types.Interface)
				if !ok {
					return true
				}
				pos := p.Fset.Position(it.Pos())
				name := strings.TrimPrefix(p.PkgPath, module) + ":" + filepath.Base(pos.Filename) + ":" + strconv.Itoa(pos.Line)
				ms = append(ms, measure{name, iface.NumMethods()})
				return true
			})
		}
	}
	if len(ms) < 50 {
		t.Fatalf("measured %d interfaces: the walk did not find the ports", len(ms))
	}
	check(t, "interface (methods, embedded ones counted)", ms, func(string) int { return maxInterfaceMethods })
}

// TestTypesAreSmallCountedWithWhatTheyEmbed: no type has more than
// maxTypeMethodLines lines of methods, counting the methods of every
// struct type of this tree it embeds (by value or by pointer, through
// any depth): an object cut in two and glued back with embedding is one
// object.
func TestTypesAreSmallCountedWithWhatTheyEmbed(t *testing.T) {
	t.Parallel()
	pkgs := productPackages(t)
	own := map[*types.TypeName]int{} // lines of methods declared on each type
	var structs []*types.Named
	for _, p := range pkgs {
		for _, f := range p.Syntax {
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Recv == nil {
					continue
				}
				if n := receiverNamed(p.TypesInfo.TypeOf(fd.Recv.List[0].Type)); n != nil {
					own[n.Obj()] += lines(p.Fset, fd)
				}
			}
		}
		sc := p.Types.Scope()
		for _, name := range sc.Names() {
			if tn, ok := sc.Lookup(name).(*types.TypeName); ok && !tn.IsAlias() {
				if n, ok := tn.Type().(*types.Named); ok {
					if _, ok := n.Underlying().(*types.Struct); ok {
						structs = append(structs, n)
					}
				}
			}
		}
	}
	var ms []measure
	for _, n := range structs {
		total := 0
		for tn := range embeddedClosure(n) {
			total += own[tn]
		}
		ms = append(ms, measure{short(n), total})
	}
	check(t, "type (lines of methods, embedded types counted)", ms, func(string) int { return maxTypeMethodLines })
}

// TestStructsEmbedAtMostOneSharedType: a struct embeds at most one
// interface or pointer of this tree: one base it delegates to (a client,
// the DB) is allowed, gluing use cases or adapters together is not. A
// struct embedded by value is a group of fields copied in (the domain's
// records compose their stored attributes that way), not a shared object.
func TestStructsEmbedAtMostOneSharedType(t *testing.T) {
	t.Parallel()
	for _, p := range productPackages(t) {
		sc := p.Types.Scope()
		for _, name := range sc.Names() {
			tn, ok := sc.Lookup(name).(*types.TypeName)
			if !ok || tn.IsAlias() {
				continue
			}
			st, ok := tn.Type().Underlying().(*types.Struct)
			if !ok {
				continue
			}
			if shared := sharedEmbeds(st); len(shared) > 1 {
				t.Errorf("%s.%s embeds %s: hand it each as a named field, or give it one port of its own",
					strings.TrimPrefix(p.PkgPath, module), name, strings.Join(shared, ", "))
			}
		}
	}
}

// sharedEmbeds lists the interfaces and pointers of this tree st embeds.
func sharedEmbeds(st *types.Struct) []string {
	var out []string
	for i := range st.NumFields() {
		f := st.Field(i)
		if !f.Embedded() {
			continue
		}
		typ, pointer := f.Type(), false
		if pt, ok := typ.(*types.Pointer); ok {
			typ, pointer = pt.Elem(), true
		}
		n, ok := typ.(*types.Named)
		if !ok || !ours(n) {
			continue
		}
		if _, iface := n.Underlying().(*types.Interface); iface || pointer {
			out = append(out, short(n))
		}
	}
	return out
}

// receiverNamed is the named type of a method's receiver (through a
// pointer and type arguments).
func receiverNamed(t types.Type) *types.Named {
	if pt, ok := t.(*types.Pointer); ok {
		t = pt.Elem()
	}
	n, _ := t.(*types.Named)
	if n != nil {
		n = n.Origin()
	}
	return n
}

// embeddedClosure is n with every struct type of this tree it embeds, at
// any depth.
func embeddedClosure(n *types.Named) map[*types.TypeName]bool {
	seen := map[*types.TypeName]bool{}
	var walk func(n *types.Named)
	walk = func(n *types.Named) {
		if seen[n.Obj()] || !ours(n) {
			return
		}
		seen[n.Obj()] = true
		st, ok := n.Underlying().(*types.Struct)
		if !ok {
			return
		}
		for i := range st.NumFields() {
			if f := st.Field(i); f.Embedded() {
				if e := receiverNamed(f.Type()); e != nil {
					walk(e)
				}
			}
		}
	}
	walk(n)
	return seen
}
