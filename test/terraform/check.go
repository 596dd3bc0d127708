package terraform

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/dynblock"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/projections/consumer"
)

// Layout names the folders Check reads under the terraform root.
type Layout struct {
	Tables        string // modules/tables
	Function      string // modules/function
	CommitCollect string // modules/commitcollect
	Envs          string // envs (every sub-folder is an environment root)
}

// DefaultLayout is the layout of terraform/ in this repository.
var DefaultLayout = Layout{
	Tables:        "modules/tables",
	Function:      "modules/function",
	CommitCollect: "modules/commitcollect",
	Envs:          "envs",
}

// Functions are the four Lambdas, by role.
var Functions = []string{"api", "worker", "projector", "sweeper"}

// Routes are the routes the api Lambda serves through the HTTP API.
var Routes = []string{
	"GET /",
	"GET /webhooks/strava", "POST /webhooks/strava",
	"GET /auth/strava/login", "GET /auth/strava/callback", "POST /auth/logout",
	"GET /v1/me", "DELETE /v1/me",
	"GET /v1/models",
	"GET /v1/milestones", "POST /v1/milestones", "GET /v1/milestones/{milestoneId}",
}

// Grants is the least-privilege contract: per function, the resource (as
// written in HCL) → the actions allowed on it. Anything more or less is a
// violation. TransactWriteItems is authorised per item (Put/Update/Delete
// plus ConditionCheckItem); there is no Scan anywhere.
var Grants = map[string]map[string][]string{
	"api": {
		// The outbox claim is one conditional UpdateItem.
		`module.tables.arns["idempotency"]`: {"dynamodb:UpdateItem"},
		`module.tables.arns["sessions"]`:    {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem"},
		`module.tables.arns["main"]`: {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem",
			"dynamodb:Query", "dynamodb:BatchWriteItem", "dynamodb:ConditionCheckItem"},
		`module.tables.arns["audit"]`:        {"dynamodb:PutItem"},
		`module.worker.function_arn`:         {"lambda:InvokeFunction"},
		`var.strava.client_secret_param_arn`: {"ssm:GetParameter"},
		`var.strava.verify_token_param_arn`:  {"ssm:GetParameter"},
		// The optional customer managed key of the SecureString parameters.
		`statement.value`: {"kms:Decrypt"},
		// The key sealing Strava tokens (conditions: checkTokenKey).
		TokenKeyRef: {"kms:GenerateDataKey", "kms:Decrypt"},
	},
	"worker": {
		// Reading and settling its job's outbox item.
		`module.tables.arns["idempotency"]`: {"dynamodb:GetItem", "dynamodb:UpdateItem"},
		`module.tables.arns["main"]`: {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem",
			"dynamodb:Query", "dynamodb:BatchWriteItem", "dynamodb:ConditionCheckItem"},
		`"${module.tables.arns["main"]}/index/GSI1"`: {"dynamodb:Query"},
		`module.tables.arns["audit"]`:                {"dynamodb:PutItem"},
		`var.strava.client_secret_param_arn`:         {"ssm:GetParameter"},
		`statement.value`:                            {"kms:Decrypt"},
		`aws_sqs_queue.worker_dlq.arn`:               {"sqs:SendMessage"},
		TokenKeyRef:                                  {"kms:GenerateDataKey", "kms:Decrypt"},
	},
	"projector": {
		`module.tables.arns["main"]`: {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem",
			"dynamodb:Query", "dynamodb:ConditionCheckItem"},
		`module.tables.stream_arn`:                   {"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"},
		`"${module.tables.arns["main"]}/index/LSI1"`: {"dynamodb:Query"},
		`"${module.tables.arns["main"]}/stream/*"`:   {"dynamodb:ListStreams"},
		`module.tables.arns["audit"]`:                {"dynamodb:PutItem", "dynamodb:Query"},
		`aws_sqs_queue.projector_dlq.arn`:            {"sqs:SendMessage"},
	},
	// The sweeper queries only the sparse pending index (never the table),
	// leases items with a conditional update and invokes only the worker.
	"sweeper": {
		`"${module.tables.arns["idempotency"]}/index/` + store.IndexPending + `"`: {"dynamodb:Query"},
		`module.tables.arns["idempotency"]`:                                       {"dynamodb:UpdateItem"},
		`module.worker.function_arn`:                                              {"lambda:InvokeFunction"},
	},
}

// ProjectorFilters are the event patterns the projector's event source
// mapping must carry, built from the same constants the code uses: workout
// inserts/changes by key prefix, milestone inserts, and milestone changes not
// written by the projector itself (so its own writes never re-trigger it).
func ProjectorFilters() []map[string]any {
	return []map[string]any{
		{
			"eventName": []any{"INSERT", "MODIFY"},
			"dynamodb":  map[string]any{"Keys": map[string]any{"SK": map[string]any{"S": []any{map[string]any{"prefix": model.PrefixWorkoutStrava}}}}},
		},
		{
			"eventName": []any{"INSERT"},
			"dynamodb":  map[string]any{"NewImage": map[string]any{"entityType": map[string]any{"S": []any{string(model.EntityMilestone)}}}},
		},
		{
			"eventName": []any{"MODIFY"},
			"dynamodb": map[string]any{"NewImage": map[string]any{
				"entityType": map[string]any{"S": []any{string(model.EntityMilestone)}},
				"writtenBy":  map[string]any{"S": []any{map[string]any{"anything-but": []any{model.WriterProjector}}}},
			}},
		},
	}
}

// Check loads the modules under root (laid out as l) and returns every
// violated invariant, or an error when the Terraform cannot be read.
func Check(root string, l Layout) ([]string, error) {
	load := func(rel string) (*Module, error) { return LoadModule(filepath.Join(root, rel)) }
	tables, err := load(l.Tables)
	if err != nil {
		return nil, err
	}
	fn, err := load(l.Function)
	if err != nil {
		return nil, err
	}
	cc, err := load(l.CommitCollect)
	if err != nil {
		return nil, err
	}
	envDirs, err := filepath.Glob(filepath.Join(root, l.Envs, "*"))
	if err != nil || len(envDirs) == 0 {
		return nil, fmt.Errorf("no environment roots under %s", filepath.Join(root, l.Envs))
	}
	var envs []*Module
	for _, d := range envDirs {
		if m, err := LoadModule(d); err == nil {
			envs = append(envs, m)
		}
	}
	all := append([]*Module{tables, fn, cc}, envs...)

	var v violations
	checkTables(&v, tables, all)
	checkPolicies(&v, cc, all)
	checkFunction(&v, fn)
	checkFunctionCalls(&v, cc)
	checkWiring(&v, cc)
	checkWorkerAsync(&v, cc)
	checkStreamMapping(&v, cc)
	checkAlarms(&v, cc, fn)
	checkSweeper(&v, cc)
	checkRoutes(&v, cc)
	checkSecrets(&v, all)
	checkTokenKey(&v, cc)
	checkEnvs(&v, envs)
	return v, nil
}

type violations []string

func (v *violations) add(rng hcl.Range, format string, args ...any) {
	*v = append(*v, fmt.Sprintf("%s: %s", rng, fmt.Sprintf(format, args...)))
}

// ------------------------------------------------------------------ tables

// tableView is what one aws_dynamodb_table instance evaluates to.
type tableView struct {
	spec       store.TableSpec
	billing    string
	ttlEnabled bool
	sse        bool
	attrs      map[string]string // attribute name → type
	gsiProj    map[string]string // index name → projection type
	lsiProj    map[string]string // local index name → projection type
}

func checkTables(v *violations, m *Module, all []*Module) {
	for _, mod := range all {
		for _, r := range mod.Resources("aws_dynamodb_table") {
			if mod != m || r.Labels[1] != "this" {
				v.add(r.DefRange(), "aws_dynamodb_table.%s: tables are declared only by %s (aws_dynamodb_table.this)", r.Labels[1], m.Dir)
			}
		}
	}
	r := m.Resource("aws_dynamodb_table", "this")
	if r == nil {
		v.add(hcl.Range{Filename: m.Dir}, "no aws_dynamodb_table.this")
		return
	}
	if a := attr(r, "for_each"); a == nil || m.Text(a.Expr.Range()) != "local.tables" {
		v.add(r.DefRange(), "aws_dynamodb_table.this must use for_each = local.tables")
		return
	}
	const prefix = "chk-"
	vars, err := m.Vars(map[string]cty.Value{"table_prefix": cty.StringVal(prefix)})
	if err != nil {
		v.add(r.DefRange(), "variables: %v", err)
		return
	}
	if dp := vars.GetAttr("deletion_protection"); !dp.IsKnown() || dp.IsNull() || dp.False() {
		v.add(r.DefRange(), "variable deletion_protection must default to true")
	}
	if a := attr(r, "deletion_protection_enabled"); a == nil || m.Text(a.Expr.Range()) != "var.deletion_protection" {
		v.add(r.DefRange(), "deletion_protection_enabled must be var.deletion_protection")
	}
	localExpr := m.Local("tables")
	if localExpr == nil {
		v.add(r.DefRange(), "no local.tables")
		return
	}
	tablesVal, diags := localExpr.Value(evalContext(vars, nil))
	if diags.HasErrors() {
		v.add(localExpr.Range(), "local.tables: %v", diags)
		return
	}
	got := map[string]tableView{}
	for it := tablesVal.ElementIterator(); it.Next(); {
		k, each := it.Element()
		ctx := evalContext(vars, map[string]cty.Value{
			"local": cty.ObjectVal(map[string]cty.Value{"tables": tablesVal}),
			"each":  cty.ObjectVal(map[string]cty.Value{"key": k, "value": each}),
		})
		tv, err := evalTable(r.Body, ctx)
		if err != nil {
			v.add(r.DefRange(), "aws_dynamodb_table.this[%s]: %v", k.AsString(), err)
			continue
		}
		got[tv.spec.Name] = tv
	}
	want := store.Specs(store.TableNames(prefix))
	wantNames, gotNames := []string{}, []string{}
	for _, s := range want {
		wantNames = append(wantNames, s.Name)
	}
	for n := range got {
		gotNames = append(gotNames, n)
	}
	sort.Strings(wantNames)
	sort.Strings(gotNames)
	if !slices.Equal(gotNames, wantNames) {
		v.add(r.DefRange(), "tables (prefix %q): got %v, want %v (model/store/tables.go)", prefix, gotNames, wantNames)
	}
	for _, s := range want {
		t, ok := got[s.Name]
		if !ok {
			continue
		}
		if !reflect.DeepEqual(normSpec(t.spec), normSpec(s)) {
			v.add(r.DefRange(), "table %s: got %+v, want %+v (model/store/tables.go)", s.Name, normSpec(t.spec), normSpec(s))
		}
		if t.billing != "PAY_PER_REQUEST" {
			v.add(r.DefRange(), "table %s: billing_mode %q, want PAY_PER_REQUEST (on-demand)", s.Name, t.billing)
		}
		if s.TTLAttribute != "" && !t.ttlEnabled {
			v.add(r.DefRange(), "table %s: ttl on %s is not enabled", s.Name, s.TTLAttribute)
		}
		if !t.sse {
			v.add(r.DefRange(), "table %s: server_side_encryption must be enabled", s.Name)
		}
		wantAttrs := map[string]string{}
		keys := append([]string{s.HashKey, s.RangeKey}, gsiKeys(s.GSIs)...)
		for _, l := range s.LSIs {
			keys = append(keys, l.RangeKey)
		}
		for _, a := range keys {
			if a != "" {
				wantAttrs[a] = "S"
			}
		}
		if !reflect.DeepEqual(t.attrs, wantAttrs) {
			v.add(r.DefRange(), "table %s: attributes %v, want exactly the key attributes as strings %v", s.Name, t.attrs, wantAttrs)
		}
		for name, p := range t.gsiProj {
			if p != "ALL" {
				v.add(r.DefRange(), "table %s index %s: projection %q, want ALL", s.Name, name, p)
			}
		}
		for name, p := range t.lsiProj {
			if p != "INCLUDE" {
				v.add(r.DefRange(), "table %s local index %s: projection %q, want INCLUDE (the attributes of store.LocalIndexSpec)", s.Name, name, p)
			}
		}
	}
}

func gsiKeys(gs []store.IndexSpec) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.HashKey, g.RangeKey)
	}
	return out
}

func normSpec(s store.TableSpec) store.TableSpec {
	s.GSIs = slices.Clone(s.GSIs)
	sort.Slice(s.GSIs, func(i, j int) bool { return s.GSIs[i].Name < s.GSIs[j].Name })
	if len(s.GSIs) == 0 {
		s.GSIs = nil
	}
	lsis := make([]store.LocalIndexSpec, 0, len(s.LSIs))
	for _, l := range s.LSIs {
		l.NonKeyAttributes = slices.Sorted(slices.Values(l.NonKeyAttributes))
		lsis = append(lsis, l)
	}
	sort.Slice(lsis, func(i, j int) bool { return lsis[i].Name < lsis[j].Name })
	s.LSIs = nil
	if len(lsis) > 0 {
		s.LSIs = lsis
	}
	return s
}

var tableSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "name"}, {Name: "billing_mode"}, {Name: "hash_key"}, {Name: "range_key"},
		{Name: "stream_enabled"}, {Name: "stream_view_type"},
	},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "attribute"}, {Type: "global_secondary_index"}, {Type: "local_secondary_index"}, {Type: "ttl"},
		{Type: "point_in_time_recovery"}, {Type: "server_side_encryption"},
	},
}

// evalTable expands the dynamic blocks of one table instance and reads it.
func evalTable(body hcl.Body, ctx *hcl.EvalContext) (tableView, error) {
	tv := tableView{attrs: map[string]string{}, gsiProj: map[string]string{}, lsiProj: map[string]string{}}
	content, _, diags := dynblock.Expand(body, ctx).PartialContent(tableSchema)
	if diags.HasErrors() {
		return tv, diags
	}
	var errs []string
	str := func(attrs hcl.Attributes, name string) string {
		a, ok := attrs[name]
		if !ok {
			return ""
		}
		val, diags := a.Expr.Value(ctx)
		if diags.HasErrors() {
			errs = append(errs, diags.Error())
			return ""
		}
		if val.IsNull() {
			return ""
		}
		if !val.IsKnown() {
			errs = append(errs, name+" is not static")
			return ""
		}
		if val.Type() == cty.Bool {
			if val.True() {
				return "true"
			}
			return "false"
		}
		return val.AsString()
	}
	sub := func(b *hcl.Block, names ...string) hcl.Attributes {
		s := &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "key_schema"}}}
		for _, n := range names {
			s.Attributes = append(s.Attributes, hcl.AttributeSchema{Name: n})
		}
		c, _, d := b.Body.PartialContent(s)
		if d.HasErrors() {
			errs = append(errs, d.Error())
		}
		return c.Attributes
	}
	a := content.Attributes
	tv.spec.Name = str(a, "name")
	tv.billing = str(a, "billing_mode")
	tv.spec.HashKey = str(a, "hash_key")
	tv.spec.RangeKey = str(a, "range_key")
	if str(a, "stream_enabled") == "true" {
		tv.spec.StreamView = types.StreamViewType(str(a, "stream_view_type"))
	}
	for _, b := range content.Blocks {
		switch b.Type {
		case "attribute":
			at := sub(b, "name", "type")
			tv.attrs[str(at, "name")] = str(at, "type")
		case "ttl":
			at := sub(b, "attribute_name", "enabled")
			tv.spec.TTLAttribute = str(at, "attribute_name")
			tv.ttlEnabled = str(at, "enabled") == "true"
		case "point_in_time_recovery":
			tv.spec.PITR = str(sub(b, "enabled"), "enabled") == "true"
		case "server_side_encryption":
			tv.sse = str(sub(b, "enabled"), "enabled") == "true"
		case "global_secondary_index":
			c, _, d := b.Body.PartialContent(&hcl.BodySchema{
				Attributes: []hcl.AttributeSchema{{Name: "name"}, {Name: "projection_type"}, {Name: "hash_key"}, {Name: "range_key"}},
				Blocks:     []hcl.BlockHeaderSchema{{Type: "key_schema"}},
			})
			if d.HasErrors() {
				errs = append(errs, d.Error())
				continue
			}
			g := store.IndexSpec{Name: str(c.Attributes, "name"), HashKey: str(c.Attributes, "hash_key"), RangeKey: str(c.Attributes, "range_key")}
			for _, ks := range c.Blocks {
				at := sub(ks, "attribute_name", "key_type")
				switch str(at, "key_type") {
				case "HASH":
					g.HashKey = str(at, "attribute_name")
				case "RANGE":
					g.RangeKey = str(at, "attribute_name")
				default:
					errs = append(errs, "key_schema key_type must be HASH or RANGE")
				}
			}
			tv.gsiProj[g.Name] = str(c.Attributes, "projection_type")
			tv.spec.GSIs = append(tv.spec.GSIs, g)
		case "local_secondary_index":
			at := sub(b, "name", "range_key", "projection_type", "non_key_attributes")
			l := store.LocalIndexSpec{Name: str(at, "name"), RangeKey: str(at, "range_key")}
			if a, ok := at["non_key_attributes"]; ok {
				val, d := a.Expr.Value(ctx)
				switch {
				case d.HasErrors():
					errs = append(errs, d.Error())
				case !val.IsWhollyKnown() || val.IsNull() || !val.CanIterateElements():
					errs = append(errs, "non_key_attributes is not a static list")
				default:
					for it := val.ElementIterator(); it.Next(); {
						_, e := it.Element()
						l.NonKeyAttributes = append(l.NonKeyAttributes, e.AsString())
					}
				}
			}
			tv.lsiProj[l.Name] = str(at, "projection_type")
			tv.spec.LSIs = append(tv.spec.LSIs, l)
		}
	}
	if len(errs) > 0 {
		return tv, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return tv, nil
}

// ---------------------------------------------------------------- policies

// statement is one IAM policy statement as written.
type statement struct {
	rng       hcl.Range
	actions   []string
	resources []string // source text of each element
}

func statements(m *Module, doc *hclsyntax.Block, v *violations) []statement {
	var blocks []*hclsyntax.Block
	blocks = append(blocks, child(doc, "statement")...)
	for _, d := range child(doc, "dynamic") {
		if len(d.Labels) == 1 && d.Labels[0] == "statement" {
			blocks = append(blocks, child(d, "content")...)
		}
	}
	var out []statement
	for _, s := range blocks {
		st := statement{rng: s.DefRange()}
		if a := attr(s, "not_actions"); a != nil {
			v.add(a.SrcRange, "not_actions grants everything else: list actions instead")
		}
		if a := attr(s, "not_resources"); a != nil {
			v.add(a.SrcRange, "not_resources grants everything else: list resources instead")
		}
		if e := attr(s, "effect"); e != nil {
			if val, err := literal(e.Expr); err == nil && val.Type() == cty.String && val.AsString() == "Deny" {
				continue // a deny statement only ever removes privilege
			}
		}
		a := attr(s, "actions")
		if a == nil {
			v.add(s.DefRange(), "statement without actions")
			continue
		}
		val, err := literal(a.Expr)
		if err == nil {
			st.actions, err = stringList(val)
		}
		if err != nil {
			v.add(a.SrcRange, "actions must be a literal list of strings so they can be checked: %v", err)
		}
		for _, act := range st.actions {
			if strings.Contains(act, "*") {
				v.add(a.SrcRange, "wildcard action %q: list the actions the function needs", act)
			}
			if strings.EqualFold(act, "dynamodb:Scan") {
				v.add(a.SrcRange, "dynamodb:Scan is forbidden: query by key instead")
			}
		}
		if r := attr(s, "resources"); r != nil {
			if tup, ok := r.Expr.(*hclsyntax.TupleConsExpr); ok {
				for _, e := range tup.Exprs {
					st.resources = append(st.resources, m.Text(e.Range()))
				}
			} else {
				st.resources = append(st.resources, m.Text(r.Expr.Range()))
			}
			for _, res := range st.resources {
				if res == `"*"` {
					v.add(r.SrcRange, `resource "*": name the resources`)
				}
			}
		}
		out = append(out, st)
	}
	return out
}

func checkPolicies(v *violations, cc *Module, all []*Module) {
	for _, m := range all {
		for _, doc := range m.Blocks("data", "aws_iam_policy_document") {
			statements(m, doc, v) // wildcard, Scan and not_* checks everywhere
		}
		for _, typ := range []string{"aws_iam_role_policy_attachment", "aws_iam_policy_attachment", "aws_iam_policy"} {
			for _, r := range m.Resources(typ) {
				v.add(r.DefRange(), "%s: attach nothing managed; each role gets its own inline least-privilege policy", typ)
			}
		}
		for _, r := range m.Resources("aws_iam_role") {
			if attr(r, "managed_policy_arns") != nil || len(child(r, "inline_policy")) > 0 {
				v.add(r.DefRange(), "aws_iam_role.%s: policies go through aws_iam_role_policy with an aws_iam_policy_document", r.Labels[1])
			}
		}
		for _, r := range m.Resources("aws_iam_role_policy") {
			a := attr(r, "policy")
			if a == nil {
				continue
			}
			if _, ok := a.Expr.(*hclsyntax.ScopeTraversalExpr); !ok {
				v.add(a.SrcRange, "aws_iam_role_policy.%s: policy must reference an aws_iam_policy_document (or the variable carrying one), not inline JSON", r.Labels[1])
			}
		}
	}
	for _, fn := range Functions {
		docs := cc.Blocks("data", "aws_iam_policy_document", fn)
		if len(docs) != 1 {
			v.add(hcl.Range{Filename: cc.Dir}, "no aws_iam_policy_document.%s for the %s function", fn, fn)
			continue
		}
		got := map[string][]string{}
		for _, st := range statements(cc, docs[0], &violations{}) {
			for _, res := range st.resources {
				got[res] = append(got[res], st.actions...)
			}
		}
		want := Grants[fn]
		for res := range mergeKeys(got, want) {
			g, w := sorted(got[res]), sorted(want[res])
			if !slices.Equal(g, w) {
				v.add(docs[0].DefRange(), "%s policy on %s: got %v, want %v", fn, res, g, w)
			}
		}
	}
}

func mergeKeys(a, b map[string][]string) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return slices.Compact(s)
}

// --------------------------------------------------------------- functions

func checkFunction(v *violations, fn *Module) {
	fns := fn.Resources("aws_lambda_function")
	if len(fns) != 1 {
		v.add(hcl.Range{Filename: fn.Dir}, "the function module must declare exactly one aws_lambda_function, got %d", len(fns))
		return
	}
	f := fns[0]
	for name, want := range map[string]string{"runtime": `"provided.al2023"`, "architectures": `["arm64"]`, "handler": `"bootstrap"`} {
		if a := attr(f, name); a == nil || fn.Text(a.Expr.Range()) != want {
			v.add(f.DefRange(), "aws_lambda_function: %s must be %s", name, want)
		}
	}
	if a := attr(f, "source_code_hash"); a == nil {
		v.add(f.DefRange(), "aws_lambda_function: source_code_hash must track the zip")
	}
	lcs := child(f, "logging_config")
	if len(lcs) != 1 || attr(lcs[0], "log_group") == nil {
		v.add(f.DefRange(), "aws_lambda_function: logging_config.log_group must name the module's log group")
	}
	lgs := fn.Resources("aws_cloudwatch_log_group")
	if len(lgs) != 1 || attr(lgs[0], "retention_in_days") == nil {
		v.add(f.DefRange(), "the function module needs one log group with retention_in_days")
	}
	if len(fn.Resources("aws_iam_role")) != 1 {
		v.add(f.DefRange(), "each function must have its own aws_iam_role")
	}
}

func checkFunctionCalls(v *violations, cc *Module) {
	for _, name := range Functions {
		calls := cc.Blocks("module", name)
		if len(calls) != 1 {
			v.add(hcl.Range{Filename: cc.Dir}, "no module %q (the %s Lambda)", name, name)
			continue
		}
		c := calls[0]
		if a := attr(c, "source"); a == nil || cc.Text(a.Expr.Range()) != `"../function"` {
			v.add(c.DefRange(), "module %s must use ../function", name)
		}
		if a := attr(c, "policy_json"); a == nil || cc.Text(a.Expr.Range()) != "data.aws_iam_policy_document."+name+".json" {
			v.add(c.DefRange(), "module %s: policy_json must be data.aws_iam_policy_document.%s.json", name, name)
		}
		if a := attr(c, "zip_path"); a == nil || !strings.HasSuffix(cc.Text(a.Expr.Range()), "/"+name+`.zip"`) {
			v.add(c.DefRange(), "module %s: zip_path must be <artifacts_dir>/%s.zip", name, name)
		}
	}
}

// checkWiring ties the functions' environment to the resources it names:
// the table prefix the tables module uses, and the worker the api invokes.
func checkWiring(v *violations, cc *Module) {
	tables := cc.Blocks("module", "tables")
	env := cc.Local("common_env")
	if len(tables) != 1 || env == nil {
		v.add(hcl.Range{Filename: cc.Dir}, "want module \"tables\" and local.common_env")
		return
	}
	prefix := attr(tables[0], "table_prefix")
	obj, ok := env.(*hclsyntax.ObjectConsExpr)
	if prefix == nil || !ok {
		v.add(env.Range(), "local.common_env must be an object and module tables must set table_prefix")
		return
	}
	found := false
	for _, item := range obj.Items {
		if cc.Text(item.KeyExpr.Range()) == "CC_TABLE_PREFIX" {
			found = cc.Text(item.ValueExpr.Range()) == cc.Text(prefix.Expr.Range())
		}
	}
	if !found {
		v.add(env.Range(), "CC_TABLE_PREFIX in local.common_env must be the tables module's table_prefix (%s)", cc.Text(prefix.Expr.Range()))
	}
	if api := cc.Blocks("module", "api"); len(api) == 1 {
		if e := attr(api[0], "environment"); e == nil || !strings.Contains(cc.Text(e.Expr.Range()), "CC_WORKER_FUNCTION=module.worker.function_name") {
			v.add(api[0].DefRange(), "the api's CC_WORKER_FUNCTION must be module.worker.function_name")
		}
	}
}

// ------------------------------------------------------- async and stream

func checkWorkerAsync(v *violations, cc *Module) {
	r := cc.Resource("aws_lambda_function_event_invoke_config", "worker")
	if r == nil {
		v.add(hcl.Range{Filename: cc.Dir}, "no aws_lambda_function_event_invoke_config.worker")
		return
	}
	vars, err := cc.Vars(nil)
	if err != nil {
		v.add(r.DefRange(), "variables: %v", err)
		return
	}
	if a := attr(r, "function_name"); a == nil || cc.Text(a.Expr.Range()) != "module.worker.function_name" {
		v.add(r.DefRange(), "async invoke config must target module.worker")
	}
	bounded(v, cc, r, vars, "maximum_retry_attempts", 0, 2)
	bounded(v, cc, r, vars, "maximum_event_age_in_seconds", 60, 21600)
	onFailure(v, cc, r, "destination")
}

// onFailure requires destination_config.on_failure.<attrName> to be an SQS queue ARN.
func onFailure(v *violations, m *Module, r *hclsyntax.Block, attrName string) {
	for _, dc := range child(r, "destination_config") {
		for _, of := range child(dc, "on_failure") {
			if a := attr(of, attrName); a != nil && regexp.MustCompile(`^aws_sqs_queue\.[a-z_]+\.arn$`).MatchString(m.Text(a.Expr.Range())) {
				return
			}
		}
	}
	v.add(r.DefRange(), "%s.%s: destination_config.on_failure must send to an SQS queue (DLQ)", r.Labels[0], r.Labels[1])
}

// bounded evaluates an attribute with the module's variable defaults and
// requires a known number in [lo, hi].
func bounded(v *violations, m *Module, r *hclsyntax.Block, vars cty.Value, name string, lo, hi int64) {
	a := attr(r, name)
	if a == nil {
		v.add(r.DefRange(), "%s.%s: %s must be set (bounded)", r.Labels[0], r.Labels[1], name)
		return
	}
	val, diags := a.Expr.Value(evalContext(vars, nil))
	if diags.HasErrors() || !val.IsKnown() || val.IsNull() || val.Type() != cty.Number {
		v.add(a.SrcRange, "%s: not a known number with the variable defaults", name)
		return
	}
	n, _ := val.AsBigFloat().Int64()
	if n < lo || n > hi {
		v.add(a.SrcRange, "%s = %d, want between %d and %d (bounded)", name, n, lo, hi)
	}
}

func checkStreamMapping(v *violations, cc *Module) {
	esms := cc.Resources("aws_lambda_event_source_mapping")
	if len(esms) != 1 {
		v.add(hcl.Range{Filename: cc.Dir}, "want exactly one aws_lambda_event_source_mapping (the projector's), got %d", len(esms))
		return
	}
	r := esms[0]
	vars, err := cc.Vars(nil)
	if err != nil {
		v.add(r.DefRange(), "variables: %v", err)
		return
	}
	text := func(name string) string {
		if a := attr(r, name); a != nil {
			return cc.Text(a.Expr.Range())
		}
		return ""
	}
	for name, want := range map[string]string{
		"function_name":                  "module.projector.function_arn",
		"event_source_arn":               "module.tables.stream_arn",
		"function_response_types":        `["ReportBatchItemFailures"]`,
		"bisect_batch_on_function_error": "true",
	} {
		if got := text(name); got != want {
			v.add(r.DefRange(), "projector event source mapping: %s = %q, want %s", name, got, want)
		}
	}
	for _, name := range []string{"batch_size", "maximum_batching_window_in_seconds"} {
		if !strings.HasPrefix(text(name), "var.") {
			v.add(r.DefRange(), "projector event source mapping: %s must come from a variable", name)
		}
	}
	bounded(v, cc, r, vars, "maximum_retry_attempts", 0, 10000)
	bounded(v, cc, r, vars, "maximum_record_age_in_seconds", 60, 604800)
	onFailure(v, cc, r, "destination_arn")

	var got []string
	for _, fc := range child(r, "filter_criteria") {
		for _, f := range child(fc, "filter") {
			a := attr(f, "pattern")
			if a == nil {
				continue
			}
			val, err := literal(a.Expr)
			if err != nil || val.Type() != cty.String {
				v.add(a.SrcRange, "filter pattern must be a static jsonencode(...): %v", err)
				continue
			}
			got = append(got, canonicalJSON(val.AsString()))
		}
	}
	var want []string
	for _, p := range ProjectorFilters() {
		b, _ := json.Marshal(p)
		want = append(want, string(b))
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		v.add(r.DefRange(), "projector filter_criteria:\n  got  %s\n  want %s", strings.Join(got, "\n       "), strings.Join(want, "\n       "))
	}
}

func canonicalJSON(s string) string {
	var x any
	if err := json.Unmarshal([]byte(s), &x); err != nil {
		return "invalid JSON: " + s
	}
	b, _ := json.Marshal(x) // maps marshal with sorted keys
	return string(b)
}

// ------------------------------------------------------------------ alarms

// alarm is one aws_cloudwatch_metric_alarm as written.
type alarm struct {
	block                         *hclsyntax.Block
	namespace, metric, dimensions string
}

func alarms(m *Module) []alarm {
	var out []alarm
	for _, r := range m.Resources("aws_cloudwatch_metric_alarm") {
		t := func(n string) string {
			if a := attr(r, n); a != nil {
				return m.Text(a.Expr.Range())
			}
			return ""
		}
		out = append(out, alarm{block: r, namespace: t("namespace"), metric: t("metric_name"), dimensions: t("dimensions")})
	}
	return out
}

func checkAlarms(v *violations, cc, fn *Module) {
	need := func(m *Module, what, ns, metric, dimContains string) {
		for _, a := range alarms(m) {
			if a.namespace == ns && a.metric == metric && strings.Contains(a.dimensions, dimContains) {
				return
			}
		}
		v.add(hcl.Range{Filename: m.Dir}, "missing alarm: %s (%s %s)", what, ns, metric)
	}
	need(cc, "projector stream iterator age", `"AWS/Lambda"`, `"IteratorAge"`, "module.projector.function_name")
	need(cc, "milestones truncated by the guardrail", strconv.Quote(consumer.MetricsNamespace),
		strconv.Quote(consumer.MetricMilestonesTruncated), `"projector"`)
	need(fn, "function errors", `"AWS/Lambda"`, `"Errors"`, "FunctionName")
	need(fn, "function throttles", `"AWS/Lambda"`, `"Throttles"`, "FunctionName")
	dlq := false
	for _, a := range alarms(cc) {
		if a.namespace != `"AWS/SQS"` || a.metric != `"ApproximateNumberOfMessagesVisible"` {
			continue
		}
		fe := attr(a.block, "for_each")
		th := attr(a.block, "threshold")
		if fe != nil && th != nil && cc.Text(th.Expr.Range()) == "0" &&
			strings.Contains(cc.Text(fe.Expr.Range()), "aws_sqs_queue.worker_dlq") &&
			strings.Contains(cc.Text(fe.Expr.Range()), "aws_sqs_queue.projector_dlq") {
			dlq = true
		}
	}
	if !dlq {
		v.add(hcl.Range{Filename: cc.Dir}, "missing alarm: DLQ depth > 0 on both the worker and projector DLQs (AWS/SQS ApproximateNumberOfMessagesVisible)")
	}
	for _, m := range []*Module{cc, fn} {
		for _, a := range alarms(m) {
			act := attr(a.block, "alarm_actions")
			if act == nil || !strings.Contains(m.Text(act.Expr.Range()), "var.alarms.topic_arn") {
				v.add(a.block.DefRange(), "alarm %s must notify var.alarms.topic_arn", a.block.Labels[1])
			}
		}
	}
}

// ----------------------------------------------------------------- sweeper

// checkSweeper: a schedule invokes the sweeper (rule → target → permission
// scoped to that rule), the sweeper dispatches to the worker, and an alarm
// watches the outbox backlog the sweeper reports.
func checkSweeper(v *violations, cc *Module) {
	text := func(b *hclsyntax.Block, name string) string {
		if b == nil {
			return ""
		}
		if a := attr(b, name); a != nil {
			return cc.Text(a.Expr.Range())
		}
		return ""
	}
	rule := cc.Resource("aws_cloudwatch_event_rule", "sweeper")
	if rule == nil || !strings.HasPrefix(text(rule, "schedule_expression"), "var.") {
		v.add(hcl.Range{Filename: cc.Dir}, "want aws_cloudwatch_event_rule.sweeper with schedule_expression from a variable")
	}
	target := cc.Resource("aws_cloudwatch_event_target", "sweeper")
	if text(target, "rule") != "aws_cloudwatch_event_rule.sweeper.name" || text(target, "arn") != "module.sweeper.function_arn" {
		v.add(hcl.Range{Filename: cc.Dir}, "the sweeper schedule must target module.sweeper.function_arn (aws_cloudwatch_event_target.sweeper)")
	}
	perm := false
	for _, p := range cc.Resources("aws_lambda_permission") {
		if text(p, "function_name") == "module.sweeper.function_name" && text(p, "principal") == `"events.amazonaws.com"` &&
			text(p, "source_arn") == "aws_cloudwatch_event_rule.sweeper.arn" && text(p, "action") == `"lambda:InvokeFunction"` {
			perm = true
		}
	}
	if !perm {
		v.add(hcl.Range{Filename: cc.Dir}, "want an aws_lambda_permission letting events.amazonaws.com invoke module.sweeper from aws_cloudwatch_event_rule.sweeper only")
	}
	if sw := cc.Blocks("module", "sweeper"); len(sw) == 1 {
		if e := attr(sw[0], "environment"); e == nil || !strings.Contains(strings.Join(strings.Fields(cc.Text(e.Expr.Range())), ""), "CC_WORKER_FUNCTION=module.worker.function_name") {
			v.add(sw[0].DefRange(), "the sweeper's CC_WORKER_FUNCTION must be module.worker.function_name")
		}
	}
	backlog := false
	for _, a := range alarms(cc) {
		if a.namespace == `"`+ingest.SweeperMetricsNamespace+`"` && a.metric == `"OutboxDue"` && strings.Contains(a.dimensions, "sweeper") {
			backlog = true
		}
	}
	if !backlog {
		v.add(hcl.Range{Filename: cc.Dir}, "missing alarm: outbox backlog (%s OutboxDue, Service = sweeper)", ingest.SweeperMetricsNamespace)
	}
}

// ------------------------------------------------------------------ routes

func checkRoutes(v *violations, cc *Module) {
	e := cc.Local("routes")
	r := cc.Resource("aws_apigatewayv2_route", "api")
	if e == nil || r == nil {
		v.add(hcl.Range{Filename: cc.Dir}, "want local.routes and aws_apigatewayv2_route.api")
		return
	}
	val, err := literal(e)
	var got []string
	if err == nil {
		got, err = stringList(val)
	}
	if err != nil {
		v.add(e.Range(), "local.routes must be a literal list: %v", err)
	}
	if g, w := sorted(got), sorted(Routes); !slices.Equal(g, w) {
		v.add(e.Range(), "routes: got %v, want %v", g, w)
	}
	if a := attr(r, "for_each"); a == nil || cc.Text(a.Expr.Range()) != "toset(local.routes)" {
		v.add(r.DefRange(), "aws_apigatewayv2_route.api must use for_each = toset(local.routes)")
	}
	ig := cc.Resource("aws_apigatewayv2_integration", "api")
	if a := attr(ig, "integration_uri"); a == nil || cc.Text(a.Expr.Range()) != "module.api.invoke_arn" {
		v.add(hcl.Range{Filename: cc.Dir}, "aws_apigatewayv2_integration.api must invoke module.api")
	}
	if a := attr(ig, "payload_format_version"); a == nil || cc.Text(a.Expr.Range()) != `"2.0"` {
		v.add(hcl.Range{Filename: cc.Dir}, "aws_apigatewayv2_integration.api must use payload format 2.0")
	}
}

// ----------------------------------------------------------------- secrets

var plainSecret = regexp.MustCompile(`(?m)^\s*"?(STRAVA_CLIENT_SECRET|STRAVA_VERIFY_TOKEN)"?\s*=`)

func checkSecrets(v *violations, all []*Module) {
	for _, m := range all {
		for _, typ := range []string{"aws_ssm_parameter", "aws_secretsmanager_secret_version"} {
			for _, b := range append(m.Blocks("resource", typ), m.Blocks("data", typ)...) {
				v.add(b.DefRange(), "%s %s would put a secret value in state: pass the parameter ARN instead", b.Type, typ)
			}
		}
		for file, src := range m.src {
			if loc := plainSecret.FindIndex(src); loc != nil {
				v.add(hcl.Range{Filename: file}, "plain secret environment variable %q: pass an SSM parameter ARN as *_PARAM", strings.TrimSpace(string(src[loc[0]:loc[1]])))
			}
		}
	}
}

// -------------------------------------------------------------------- envs

func checkEnvs(v *violations, envs []*Module) {
	for _, e := range envs {
		calls := e.Blocks("module", "commitcollect")
		if len(calls) != 1 || attr(calls[0], "source") == nil || e.Text(attr(calls[0], "source").Expr.Range()) != `"../../modules/commitcollect"` {
			v.add(hcl.Range{Filename: e.Dir}, "an environment root calls module commitcollect from ../../modules/commitcollect")
		}
		backend := false
		for _, tf := range e.Blocks("terraform") {
			for _, b := range child(tf, "backend") {
				backend = true
				if len(b.Body.Attributes) > 0 {
					v.add(b.DefRange(), "backend settings belong to each engineer's --backend-config, not the repository")
				}
			}
		}
		if !backend {
			v.add(hcl.Range{Filename: e.Dir}, "an environment root declares a (partial) backend block")
		}
		for _, p := range e.Blocks("provider", "aws") {
			for _, k := range []string{"access_key", "secret_key", "token", "profile"} {
				if attr(p, k) != nil {
					v.add(p.DefRange(), "provider aws: %s does not belong in the repository", k)
				}
			}
		}
	}
}
