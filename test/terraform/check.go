package terraform

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	goversion "github.com/hashicorp/go-version"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/dynblock"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/tableadmin"
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

// ProjectorFilters are the event patterns the projector's event source
// mapping must carry, built from the same constants the code uses: workout
// inserts/changes/removals (TTL) by key prefix, sync state writes (a page's
// end), milestone inserts, and milestone changes not
// written by the projector itself (so its own writes never re-trigger it).
func ProjectorFilters() []map[string]any {
	return []map[string]any{
		{
			"eventName": []any{"INSERT", "MODIFY", "REMOVE"},
			"dynamodb":  map[string]any{"Keys": map[string]any{"SK": map[string]any{"S": []any{map[string]any{"prefix": keys.PrefixWorkoutStrava}}}}},
		},
		{
			"eventName": []any{"INSERT", "MODIFY"},
			"dynamodb":  map[string]any{"Keys": map[string]any{"SK": map[string]any{"S": []any{keys.SKSyncStrava}}}},
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
// violated invariant, or an error when the Terraform cannot be read. What
// Terraform computes (roles, policies, the stream mapping, async config,
// routes, alarms, function settings, environment) is checked on the plan
// instead (plancheck.go); this keeps what only the source shows: tables
// against tableadmin.Specs, how policies are written, secrets and env roots.
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
	checkPolicySources(&v, all)
	checkSecrets(&v, all)
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
	spec       tableadmin.TableSpec
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
	want := tableadmin.Specs(dynamo.TableNames(prefix))
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
		v.add(r.DefRange(), "tables (prefix %q): got %v, want %v (model/store/dynamo/tables.go)", prefix, gotNames, wantNames)
	}
	for _, s := range want {
		t, ok := got[s.Name]
		if !ok {
			continue
		}
		if !reflect.DeepEqual(normSpec(t.spec), normSpec(s)) {
			v.add(r.DefRange(), "table %s: got %+v, want %+v (model/store/dynamo/tables.go)", s.Name, normSpec(t.spec), normSpec(s))
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
			if p != "ALL" && p != "INCLUDE" && p != "KEYS_ONLY" {
				v.add(r.DefRange(), "table %s index %s: projection %q, want ALL, INCLUDE or KEYS_ONLY (tableadmin.IndexSpec)", s.Name, name, p)
			}
		}
		for name, p := range t.lsiProj {
			if p != "INCLUDE" {
				v.add(r.DefRange(), "table %s local index %s: projection %q, want INCLUDE (the attributes of tableadmin.LocalIndexSpec)", s.Name, name, p)
			}
		}
	}
}

func gsiKeys(gs []tableadmin.IndexSpec) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.HashKey, g.RangeKey)
	}
	return out
}

func normSpec(s tableadmin.TableSpec) tableadmin.TableSpec {
	s.GSIs = slices.Clone(s.GSIs)
	for i, g := range s.GSIs {
		g.Projection = g.ProjectionType()
		g.NonKeyAttributes = slices.Sorted(slices.Values(g.NonKeyAttributes))
		if len(g.NonKeyAttributes) == 0 {
			g.NonKeyAttributes = nil
		}
		s.GSIs[i] = g
	}
	sort.Slice(s.GSIs, func(i, j int) bool { return s.GSIs[i].Name < s.GSIs[j].Name })
	if len(s.GSIs) == 0 {
		s.GSIs = nil
	}
	lsis := make([]tableadmin.LocalIndexSpec, 0, len(s.LSIs))
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
				Attributes: []hcl.AttributeSchema{{Name: "name"}, {Name: "projection_type"}, {Name: "hash_key"}, {Name: "range_key"},
					{Name: "non_key_attributes"}},
				Blocks: []hcl.BlockHeaderSchema{{Type: "key_schema"}},
			})
			if d.HasErrors() {
				errs = append(errs, d.Error())
				continue
			}
			g := tableadmin.IndexSpec{Name: str(c.Attributes, "name"), HashKey: str(c.Attributes, "hash_key"), RangeKey: str(c.Attributes, "range_key")}
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
			g.Projection = types.ProjectionType(tv.gsiProj[g.Name])
			if a, ok := c.Attributes["non_key_attributes"]; ok {
				nk, err := staticList(a, ctx)
				if err != nil {
					errs = append(errs, err.Error())
				}
				g.NonKeyAttributes = nk
			}
			tv.spec.GSIs = append(tv.spec.GSIs, g)
		case "local_secondary_index":
			at := sub(b, "name", "range_key", "projection_type", "non_key_attributes")
			l := tableadmin.LocalIndexSpec{Name: str(at, "name"), RangeKey: str(at, "range_key")}
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

// checkPolicySources: every policy is an aws_iam_policy_document attached
// inline through aws_iam_role_policy (what the documents grant is checked on
// the plan and against the code's calls, iam_test.go).
func checkPolicySources(v *violations, all []*Module) {
	for _, m := range all {
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
}

func canonicalJSON(s string) string {
	var x any
	if err := json.Unmarshal([]byte(s), &x); err != nil {
		return "invalid JSON: " + s
	}
	b, _ := json.Marshal(x) // maps marshal with sorted keys
	return string(b)
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
		checkRequiredVersion(v, e)
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

// featureVersions are Terraform features an environment may use, how to
// spot them (in the root's files, backend.hcl.example included) and the
// first Terraform release that has them.
var featureVersions = []struct {
	feature string
	used    *regexp.Regexp
	since   string
}{
	{"optional() attributes with defaults", regexp.MustCompile(`optional\([^)]*,`), "1.3.0"},
	{"S3 backend native locking (use_lockfile)", regexp.MustCompile(`(?m)^\s*use_lockfile\s*=\s*true`), "1.11.0"},
}

// checkRequiredVersion: an environment root's required_version must not
// admit a Terraform older than a feature it (or the modules it calls) uses.
func checkRequiredVersion(v *violations, e *Module) {
	var req string
	for _, tf := range e.Blocks("terraform") {
		if a := attr(tf, "required_version"); a != nil {
			req = strings.Trim(e.Text(a.Expr.Range()), `"`)
		}
	}
	if req == "" {
		v.add(hcl.Range{Filename: e.Dir}, "an environment root sets terraform.required_version")
		return
	}
	c, err := goversion.NewConstraint(req)
	if err != nil {
		v.add(hcl.Range{Filename: e.Dir}, "required_version %q: %v", req, err)
		return
	}
	var src strings.Builder
	for _, b := range e.src {
		src.Write(b)
	}
	extra, _ := filepath.Glob(filepath.Join(e.Dir, "*.hcl*"))
	mods, _ := filepath.Glob(filepath.Join(e.Dir, "..", "..", "modules", "*", "*.tf"))
	for _, f := range append(extra, mods...) {
		if b, err := os.ReadFile(f); err == nil {
			src.Write(b)
		}
	}
	for _, f := range featureVersions {
		if !f.used.MatchString(src.String()) {
			continue
		}
		since := goversion.Must(goversion.NewVersion(f.since))
		older := goversion.Must(goversion.NewVersion(fmt.Sprintf("%d.%d.99", since.Segments()[0], since.Segments()[1]-1)))
		if c.Check(older) {
			v.add(hcl.Range{Filename: e.Dir}, "required_version %q admits Terraform %s, but %s needs %s", req, older, f.feature, f.since)
		}
	}
}

// staticList evaluates an attribute that must be a static list of strings
// (null: none).
func staticList(a *hcl.Attribute, ctx *hcl.EvalContext) ([]string, error) {
	val, d := a.Expr.Value(ctx)
	switch {
	case d.HasErrors():
		return nil, d
	case val.IsNull():
		return nil, nil
	case !val.IsWhollyKnown() || !val.CanIterateElements():
		return nil, fmt.Errorf("%s is not a static list", a.Name)
	}
	var out []string
	for it := val.ElementIterator(); it.Next(); {
		_, e := it.Element()
		out = append(out, e.AsString())
	}
	return out, nil
}
