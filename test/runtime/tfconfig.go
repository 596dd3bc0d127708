package runtime

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"

	"github.com/commitcollect/backend/test/terraform"
)

// Deployment is what the emulated runtime takes from the Terraform
// configuration (terraform/modules): per function, the names of the
// environment variables Terraform sets; the projector's event source mapping
// filters; the HTTP API's routes. Values that only exist in AWS (ARNs, URLs)
// are the test's to choose; the names and the filters are not.
type Deployment struct {
	// Env maps each function (api, worker, projector) to the sorted names
	// of the environment variables its aws_lambda_function receives.
	Env map[string][]string
	// Filters are the projector mapping's filter_criteria patterns.
	Filters Filters
	// Routes are the HTTP API's route keys ("GET /v1/me", …).
	Routes []string
	// Settings are each function's memory and timeout (the defaults of
	// modules/commitcollect's var.functions).
	Settings map[string]FunctionSettings
	// LogLevel is var.log_level's default (CC_LOG_LEVEL).
	LogLevel string
	// WorkerRetries is var.worker.maximum_retry_attempts's default (the
	// worker's async retries).
	WorkerRetries int
	// webhook holds local.webhook_path and local.webhook_routes
	// (CallbackRoutes).
	webhook map[string]hcl.Expression
}

// FunctionSettings are a function's runtime settings.
type FunctionSettings struct {
	MemoryMB int
	TimeoutS int
}

// Functions are the modules of modules/commitcollect that are Lambdas.
var Functions = []string{"api", "worker", "projector", "sweeper"}

// LoadDeployment reads terraform/modules under root (the repository's
// terraform folder).
func LoadDeployment(root string) (Deployment, error) {
	cc, err := terraform.LoadModule(filepath.Join(root, "modules", "commitcollect"))
	if err != nil {
		return Deployment{}, err
	}
	fn, err := terraform.LoadModule(filepath.Join(root, "modules", "function"))
	if err != nil {
		return Deployment{}, err
	}
	d := Deployment{Env: map[string][]string{}, webhook: map[string]hcl.Expression{}}

	// modules/function: aws_lambda_function.this environment.variables is
	// built from var.environment (the caller's map), possibly with more.
	lf := fn.Blocks("resource", "aws_lambda_function", "this")
	if len(lf) != 1 {
		return d, fmt.Errorf("modules/function: want one aws_lambda_function.this, got %d", len(lf))
	}
	var fnVars hclsyntax.Expression
	for _, b := range lf[0].Body.Blocks {
		if b.Type == "environment" {
			if a, ok := b.Body.Attributes["variables"]; ok {
				fnVars = a.Expr
			}
		}
	}
	if fnVars == nil {
		return d, fmt.Errorf("modules/function: aws_lambda_function.this has no environment.variables")
	}

	for _, name := range Functions {
		mb := cc.Blocks("module", name)
		if len(mb) != 1 {
			return d, fmt.Errorf("modules/commitcollect: want one module %q, got %d", name, len(mb))
		}
		a, ok := mb[0].Body.Attributes["environment"]
		if !ok {
			return d, fmt.Errorf("module %s: no environment", name)
		}
		callerKeys, err := envKeys(cc, a.Expr, nil)
		if err != nil {
			return d, fmt.Errorf("module %s environment: %w", name, err)
		}
		keys, err := envKeys(fn, fnVars, callerKeys)
		if err != nil {
			return d, fmt.Errorf("modules/function environment.variables: %w", err)
		}
		d.Env[name] = keys
	}

	esm := cc.Resources("aws_lambda_event_source_mapping")
	if len(esm) != 1 {
		return d, fmt.Errorf("modules/commitcollect: want one aws_lambda_event_source_mapping, got %d", len(esm))
	}
	for _, fc := range esm[0].Body.Blocks {
		if fc.Type != "filter_criteria" {
			continue
		}
		for _, f := range fc.Body.Blocks {
			a, ok := f.Body.Attributes["pattern"]
			if f.Type != "filter" || !ok {
				continue
			}
			v, diags := a.Expr.Value(&hcl.EvalContext{Functions: map[string]function.Function{"jsonencode": stdlib.JSONEncodeFunc}})
			if diags.HasErrors() || v.Type() != cty.String {
				return d, fmt.Errorf("filter pattern at %s is not a static jsonencode(...): %v", a.SrcRange, diags)
			}
			cf, err := CompileFilter(v.AsString())
			if err != nil {
				return d, err
			}
			d.Filters = append(d.Filters, cf)
		}
	}
	if len(d.Filters) == 0 {
		return d, fmt.Errorf("the projector's event source mapping has no filters")
	}

	vars, err := cc.Vars(nil)
	if err != nil {
		return d, fmt.Errorf("modules/commitcollect variables: %w", err)
	}
	num := func(v cty.Value, path ...string) (int, error) {
		for _, p := range path {
			if v.IsNull() || !v.IsKnown() || !v.Type().IsObjectType() || !v.Type().HasAttribute(p) {
				return 0, fmt.Errorf("var.%s has no default", strings.Join(path, "."))
			}
			v = v.GetAttr(p)
		}
		if v.IsNull() || !v.IsKnown() || v.Type() != cty.Number {
			return 0, fmt.Errorf("var.%s is not a known number", strings.Join(path, "."))
		}
		i, _ := v.AsBigFloat().Int64()
		return int(i), nil
	}
	d.Settings = map[string]FunctionSettings{}
	for _, name := range Functions {
		var s FunctionSettings
		if s.MemoryMB, err = num(vars, "functions", name, "memory_mb"); err != nil {
			return d, err
		}
		if s.TimeoutS, err = num(vars, "functions", name, "timeout_s"); err != nil {
			return d, err
		}
		d.Settings[name] = s
	}
	if d.WorkerRetries, err = num(vars, "worker", "maximum_retry_attempts"); err != nil {
		return d, err
	}
	if ll := vars.GetAttr("log_level"); ll.Type() == cty.String && ll.IsKnown() && !ll.IsNull() {
		d.LogLevel = ll.AsString()
	} else {
		return d, fmt.Errorf("var.log_level has no default")
	}

	routes := cc.Local("routes")
	if routes == nil {
		return d, fmt.Errorf("modules/commitcollect: no local.routes")
	}
	rv, diags := routes.Value(nil)
	if diags.HasErrors() || !rv.CanIterateElements() {
		return d, fmt.Errorf("local.routes is not a static list: %v", diags)
	}
	for it := rv.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.Type() != cty.String {
			return d, fmt.Errorf("local.routes holds a %s", e.Type().FriendlyName())
		}
		d.Routes = append(d.Routes, e.AsString())
	}
	for _, name := range []string{"webhook_path", "webhook_routes"} {
		if d.webhook[name] = cc.Local(name); d.webhook[name] == nil {
			return d, fmt.Errorf("modules/commitcollect: no local.%s", name)
		}
	}
	return d, nil
}

// CallbackRoutes are the routes Strava's deliveries take, on the webhook's
// own API (local.webhook_routes: /webhooks/strava/{secret}, evaluated with
// var.strava.callback_path_segment = segment should a route name it).
func (d Deployment) CallbackRoutes(segment string) ([]string, error) {
	vars := &hcl.EvalContext{Variables: map[string]cty.Value{
		"var": cty.ObjectVal(map[string]cty.Value{"strava": cty.ObjectVal(map[string]cty.Value{"callback_path_segment": cty.StringVal(segment)})}),
	}}
	path, diags := d.webhook["webhook_path"].Value(vars)
	if diags.HasErrors() {
		return nil, fmt.Errorf("local.webhook_path: %v", diags)
	}
	locals := &hcl.EvalContext{Variables: map[string]cty.Value{"local": cty.ObjectVal(map[string]cty.Value{"webhook_path": path})}}
	rv, diags := d.webhook["webhook_routes"].Value(locals)
	if diags.HasErrors() || !rv.CanIterateElements() {
		return nil, fmt.Errorf("local.webhook_routes: %v", diags)
	}
	var out []string
	for it := rv.ElementIterator(); it.Next(); {
		_, e := it.Element()
		out = append(out, e.AsString())
	}
	return out, nil
}

// envKeys returns the keys of a map expression built from merge(),
// object constructors, locals, for expressions keyed by their collection's
// keys, and var.environment (given as varEnv). Anything else is an error:
// the keys must be knowable without AWS.
func envKeys(m *terraform.Module, e hcl.Expression, varEnv []string) ([]string, error) {
	set := map[string]bool{}
	var walk func(e hcl.Expression) error
	walk = func(e hcl.Expression) error {
		switch x := e.(type) {
		case *hclsyntax.FunctionCallExpr:
			if x.Name != "merge" {
				return fmt.Errorf("%s: function %s() is not followed", x.Range(), x.Name)
			}
			for _, arg := range x.Args {
				if err := walk(arg); err != nil {
					return err
				}
			}
		case *hclsyntax.ObjectConsExpr:
			for _, it := range x.Items {
				k, err := objectKey(it.KeyExpr)
				if err != nil {
					return err
				}
				set[k] = true
			}
		case *hclsyntax.ScopeTraversalExpr:
			tr := x.Traversal
			if len(tr) != 2 {
				return fmt.Errorf("%s: reference %s is not followed", x.SrcRange, hclTraversalText(tr))
			}
			attr, ok := tr[1].(hcl.TraverseAttr)
			if !ok {
				return fmt.Errorf("%s: reference is not followed", x.SrcRange)
			}
			switch tr.RootName() {
			case "local":
				l := m.Local(attr.Name)
				if l == nil {
					return fmt.Errorf("%s: local.%s not found", x.SrcRange, attr.Name)
				}
				return walk(l)
			case "var":
				if attr.Name != "environment" || varEnv == nil {
					return fmt.Errorf("%s: var.%s is not followed", x.SrcRange, attr.Name)
				}
				for _, k := range varEnv {
					set[k] = true
				}
			default:
				return fmt.Errorf("%s: reference %s is not followed", x.SrcRange, hclTraversalText(tr))
			}
		case *hclsyntax.ForExpr:
			// { for k, v in COLL : k => … if … }: the keys are (a subset of)
			// COLL's; Terraform may drop some (the condition), so they are
			// the names that can be set.
			if x.KeyExpr == nil {
				return fmt.Errorf("%s: a for expression building a list", x.SrcRange)
			}
			if ref, ok := x.KeyExpr.(*hclsyntax.ScopeTraversalExpr); !ok || ref.Traversal.RootName() != x.KeyVar {
				return fmt.Errorf("%s: a for expression with computed keys", x.SrcRange)
			}
			return walk(x.CollExpr)
		case *hclsyntax.ParenthesesExpr:
			return walk(x.Expression)
		default:
			return fmt.Errorf("%s: %T is not followed", e.Range(), e)
		}
		return nil
	}
	if err := walk(e); err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return slices.Compact(keys), nil
}

// objectKey reads a literal object key (a bare name or a string).
func objectKey(e hclsyntax.Expression) (string, error) {
	if k := hcl.ExprAsKeyword(e); k != "" {
		return k, nil
	}
	v, diags := e.Value(nil)
	if diags.HasErrors() || v.Type() != cty.String || !v.IsKnown() {
		return "", fmt.Errorf("%s: object key is not a literal", e.Range())
	}
	return v.AsString(), nil
}

func hclTraversalText(tr hcl.Traversal) string {
	s := tr.RootName()
	for _, t := range tr[1:] {
		if a, ok := t.(hcl.TraverseAttr); ok {
			s += "." + a.Name
		}
	}
	return s
}
