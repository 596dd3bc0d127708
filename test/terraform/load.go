// Package terraform checks the Terraform under terraform/ against the
// invariants the Go code relies on, without AWS, a registry or the provider:
// it parses the HCL (hashicorp/hcl/v2), evaluates what is static (locals,
// variable defaults, dynamic blocks, jsonencode) and compares the result with
// the Go sources of truth (tableadmin.Specs for tables, model's key prefixes and
// writer markers for the stream filter). Check returns every violation; the
// tests in this package run it on the real tree and on mutated copies.
package terraform

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// Module is one parsed Terraform module (the *.tf files of one folder).
type Module struct {
	Dir    string
	blocks []*hclsyntax.Block
	src    map[string][]byte // file name → bytes, for source text of expressions
}

// LoadModule parses every *.tf file in dir. It returns an error when the
// folder holds no Terraform or a file does not parse.
func LoadModule(dir string) (*Module, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.tf"))
	if err != nil {
		return nil, fmt.Errorf("load module %s: %w", dir, err)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("load module %s: no .tf files", dir)
	}
	sort.Strings(paths)
	m := &Module{Dir: dir, src: map[string][]byte{}}
	p := hclparse.NewParser()
	for _, path := range paths {
		f, diags := p.ParseHCLFile(path)
		if diags.HasErrors() {
			return nil, fmt.Errorf("load module %s: %w", dir, diags)
		}
		m.src[path] = f.Bytes
		m.blocks = append(m.blocks, f.Body.(*hclsyntax.Body).Blocks...)
	}
	return m, nil
}

// Blocks returns the top-level blocks of a type ("resource", "data",
// "module", "variable", "locals", …) whose first labels match labels.
func (m *Module) Blocks(typ string, labels ...string) []*hclsyntax.Block {
	var out []*hclsyntax.Block
	for _, b := range m.blocks {
		if b.Type != typ || len(b.Labels) < len(labels) {
			continue
		}
		match := true
		for i, l := range labels {
			if b.Labels[i] != l {
				match = false
			}
		}
		if match {
			out = append(out, b)
		}
	}
	return out
}

// Resources returns the managed resources of a type.
func (m *Module) Resources(typ string) []*hclsyntax.Block { return m.Blocks("resource", typ) }

// Resource returns the resource typ.name, or nil.
func (m *Module) Resource(typ, name string) *hclsyntax.Block {
	if bs := m.Blocks("resource", typ, name); len(bs) == 1 {
		return bs[0]
	}
	return nil
}

// Local returns the expression of local.name, or nil.
func (m *Module) Local(name string) hcl.Expression {
	for _, b := range m.Blocks("locals") {
		if a, ok := b.Body.Attributes[name]; ok {
			return a.Expr
		}
	}
	return nil
}

// Text returns the source text of an expression (or any ranged node) with
// all white space removed, e.g. `module.tables.arns["main"]`.
func (m *Module) Text(rng hcl.Range) string {
	return strings.Join(strings.Fields(string(rng.SliceBytes(m.src[rng.Filename]))), "")
}

// Vars evaluates the module's variables the way Terraform does for a caller
// that sets only overrides: the default with optional() defaults applied,
// converted to the declared type. A variable with neither default nor
// override is unknown.
func (m *Module) Vars(overrides map[string]cty.Value) (cty.Value, error) {
	vars := map[string]cty.Value{}
	for _, b := range m.Blocks("variable") {
		name := b.Labels[0]
		ty, defaults := cty.DynamicPseudoType, (*typeexpr.Defaults)(nil)
		if a, ok := b.Body.Attributes["type"]; ok {
			var diags hcl.Diagnostics
			ty, defaults, diags = typeexpr.TypeConstraintWithDefaults(a.Expr)
			if diags.HasErrors() {
				return cty.NilVal, fmt.Errorf("variable %s type: %w", name, diags)
			}
		}
		val, given := overrides[name]
		if !given {
			a, ok := b.Body.Attributes["default"]
			if !ok {
				vars[name] = cty.UnknownVal(ty)
				continue
			}
			v, diags := a.Expr.Value(nil)
			if diags.HasErrors() {
				return cty.NilVal, fmt.Errorf("variable %s default: %w", name, diags)
			}
			val = v
		}
		if defaults != nil && !val.IsNull() {
			val = defaults.Apply(val)
		}
		cv, err := convert.Convert(val, ty)
		if err != nil {
			return cty.NilVal, fmt.Errorf("variable %s: %w", name, err)
		}
		vars[name] = cv
	}
	return cty.ObjectVal(vars), nil
}

// functions are the Terraform functions the checked expressions use.
var functions = map[string]function.Function{
	"compact":    stdlib.CompactFunc,
	"concat":     stdlib.ConcatFunc,
	"distinct":   stdlib.DistinctFunc,
	"flatten":    stdlib.FlattenFunc,
	"jsonencode": stdlib.JSONEncodeFunc,
	"merge":      stdlib.MergeFunc,
	"join":       stdlib.JoinFunc,
}

// evalContext builds an evaluation context with the given variables (an
// object value) and extra top-level names (local, each, …).
func evalContext(vars cty.Value, extra map[string]cty.Value) *hcl.EvalContext {
	v := map[string]cty.Value{"var": vars}
	for k, x := range extra {
		v[k] = x
	}
	return &hcl.EvalContext{Variables: v, Functions: functions}
}

// attr returns a block body's attribute, or nil.
func attr(b *hclsyntax.Block, name string) *hclsyntax.Attribute {
	if b == nil {
		return nil
	}
	return b.Body.Attributes[name]
}

// child returns the nested blocks of a type.
func child(b *hclsyntax.Block, typ string) []*hclsyntax.Block {
	var out []*hclsyntax.Block
	for _, c := range b.Body.Blocks {
		if c.Type == typ {
			out = append(out, c)
		}
	}
	return out
}
