package terraform

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/commitcollect/backend/handlers/bff"
	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/budget"
	"github.com/commitcollect/backend/handlers/ingest/handoff"
	"github.com/commitcollect/backend/handlers/ingest/intake"
	"github.com/commitcollect/backend/handlers/ingest/runner"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/projections/consumer"
)

// The checks in this file read what Terraform itself computed: the plan of
// envs/example (terraform show -json) applied with the schema-only provider
// (test/terraform/schemaprovider), whose state is that plan with the values
// unknown at plan time (ARNs, ids and the policy documents that name them)
// filled in the way AWS shapes them. They replace the hand-parsed HCL checks
// for roles, policies, the stream mapping, the worker's async config, routes,
// alarms, function settings and environment variables: whatever expression,
// module or for_each produces a value, the check sees the value.

// Resource is one resource instance of the applied plan.
type Resource struct {
	Address string
	Type    string
	Values  map[string]any
}

// Str returns a top-level string attribute ("" when absent or null).
func (r Resource) Str(name string) string {
	s, _ := r.Values[name].(string)
	return s
}

// Num returns a top-level number attribute (-1 when absent or null).
func (r Resource) Num(name string) float64 {
	switch n := r.Values[name].(type) {
	case float64:
		return n
	case json.Number:
		if f, err := n.Float64(); err == nil {
			return f
		}
	}
	return -1
}

// Block returns the first element of a nested block (nil when absent).
func (r Resource) Block(path ...string) map[string]any {
	var cur any = r.Values
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
		if l, ok := cur.([]any); ok {
			if len(l) == 0 {
				return nil
			}
			cur = l[0]
		}
	}
	m, _ := cur.(map[string]any)
	return m
}

// Resources flattens every resource instance of a state, modules included.
func Resources(st *tfjson.State) []Resource {
	var out []Resource
	var walk func(m *tfjson.StateModule)
	walk = func(m *tfjson.StateModule) {
		if m == nil {
			return
		}
		for _, r := range m.Resources {
			if r.Mode != tfjson.ManagedResourceMode {
				continue
			}
			out = append(out, Resource{Address: r.Address, Type: r.Type, Values: r.AttributeValues})
		}
		for _, c := range m.ChildModules {
			walk(c)
		}
	}
	if st != nil && st.Values != nil {
		walk(st.Values.RootModule)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Address < out[j].Address })
	return out
}

// Deployed indexes the resources by type and the facts the checks share.
type Deployed struct {
	All       []Resource
	byType    map[string][]Resource
	Functions map[string]Resource // role (api, worker, …: the name after commitcollect-<env>-) → aws_lambda_function
	Tables    map[string]Resource // table name → aws_dynamodb_table
}

// FunctionRoles are the functions whose code iam_test.go runs and records;
// every deployed function must be one of them.
var FunctionRoles = []string{"api", "worker", "projector", "sweeper"}

// NewDeployed indexes a state.
func NewDeployed(st *tfjson.State) *Deployed {
	d := &Deployed{All: Resources(st), byType: map[string][]Resource{}, Functions: map[string]Resource{}, Tables: map[string]Resource{}}
	for _, r := range d.All {
		d.byType[r.Type] = append(d.byType[r.Type], r)
	}
	for _, f := range d.byType["aws_lambda_function"] {
		// commitcollect-<environment>-<role>
		if parts := strings.SplitN(f.Str("function_name"), "-", 3); len(parts) == 3 {
			d.Functions[parts[2]] = f
		} else {
			d.Functions[f.Str("function_name")] = f
		}
	}
	for _, t := range d.byType["aws_dynamodb_table"] {
		d.Tables[t.Str("name")] = t
	}
	return d
}

// Of returns the resources of a type.
func (d *Deployed) Of(typ string) []Resource { return d.byType[typ] }

// Find returns the resource of typ whose attribute equals value.
func (d *Deployed) Find(typ, attr, value string) (Resource, bool) {
	for _, r := range d.byType[typ] {
		if r.Str(attr) == value {
			return r, true
		}
	}
	return Resource{}, false
}

// Policy is an IAM policy document as AWS reads it.
type Policy struct {
	Version   string
	Statement []PolicyStatement
}

// PolicyStatement is one statement; Action/Resource are normalised to lists.
type PolicyStatement struct {
	Sid         string
	Effect      string
	Action      StringOrList
	NotAction   StringOrList
	Resource    StringOrList
	NotResource StringOrList
	Principal   json.RawMessage
	Condition   map[string]map[string]StringOrList
}

// StringOrList is IAM's "one string or a list of strings".
type StringOrList []string

// UnmarshalJSON accepts either form.
func (s *StringOrList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = []string{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*s = many
	return nil
}

// RolePolicies returns, per function role, the inline policies attached to
// its execution role, parsed.
func (d *Deployed) RolePolicies() (map[string][]Policy, error) {
	out := map[string][]Policy{}
	for role, fn := range d.Functions {
		roleRes, ok := d.Find("aws_iam_role", "arn", fn.Str("role"))
		if !ok {
			return nil, fmt.Errorf("function %s: no aws_iam_role with arn %s", role, fn.Str("role"))
		}
		for _, rp := range d.Of("aws_iam_role_policy") {
			if rp.Str("role") != roleRes.Str("name") && rp.Str("role") != roleRes.Str("id") {
				continue
			}
			var p Policy
			if err := json.Unmarshal([]byte(rp.Str("policy")), &p); err != nil {
				return nil, fmt.Errorf("%s: policy is not JSON: %w", rp.Address, err)
			}
			out[role] = append(out[role], p)
		}
	}
	return out, nil
}

// CheckDeployed returns every violated invariant of the applied plan.
func CheckDeployed(d *Deployed, topicARN string) []string {
	var v []string
	add := func(format string, args ...any) { v = append(v, fmt.Sprintf(format, args...)) }
	for _, role := range FunctionRoles {
		if _, ok := d.Functions[role]; !ok {
			add("no aws_lambda_function named *-%s", role)
		}
	}
	checkRolesAndPolicies(d, add)
	checkKMS(d, add)
	checkTokenKey(d, add)
	checkFunctionsDeployed(d, add)
	checkEnvironment(d, add)
	checkStreamMappingDeployed(d, add)
	checkWorkerAsyncDeployed(d, add)
	checkRoutesDeployed(d, add)
	checkAPIThrottling(d, add)
	checkSecretNeverLogged(d, add)
	checkTokenKeyPolicy(d, add)
	checkWorkerConcurrency(d, add)
	checkSweeperDeployed(d, add)
	checkAlarmsDeployed(d, topicARN, add)
	checkDashboardDeployed(d, add)
	return v
}

type addFunc func(format string, args ...any)

// ------------------------------------------------------ roles and policies

func checkRolesAndPolicies(d *Deployed, add addFunc) {
	for _, typ := range []string{"aws_iam_role_policy_attachment", "aws_iam_policy_attachment", "aws_iam_policy"} {
		for _, r := range d.Of(typ) {
			add("%s: attach nothing managed; each role gets its own inline least-privilege policy", r.Address)
		}
	}
	used := map[string]bool{}
	for _, fn := range d.Functions {
		used[fn.Str("role")] = true
	}
	for _, r := range d.Of("aws_iam_role") {
		if !used[r.Str("arn")] {
			add("%s: role used by no function (one role per function)", r.Address)
		}
		var trust Policy
		if err := json.Unmarshal([]byte(r.Str("assume_role_policy")), &trust); err != nil {
			add("%s: assume_role_policy is not JSON: %v", r.Address, err)
			continue
		}
		for _, st := range trust.Statement {
			var compact bytes.Buffer
			_ = json.Compact(&compact, st.Principal)
			if st.Effect == "Allow" && compact.String() != `{"Service":"lambda.amazonaws.com"}` {
				add("%s: trust policy lets %s assume the role, want only lambda.amazonaws.com", r.Address, st.Principal)
			}
		}
	}
	if len(d.Functions) > 0 && len(used) != len(d.Functions) {
		add("functions share execution roles: want one role per function")
	}
	pols, err := d.RolePolicies()
	if err != nil {
		add("%v", err)
		return
	}
	for role, ps := range pols {
		for _, p := range ps {
			for _, st := range p.Statement {
				if len(st.NotAction) > 0 || len(st.NotResource) > 0 {
					add("%s policy statement %q: NotAction/NotResource grant everything else", role, st.Sid)
				}
				if st.Effect != "Allow" {
					continue
				}
				for _, a := range st.Action {
					if strings.Contains(a, "*") {
						add("%s policy statement %q: wildcard action %q", role, st.Sid, a)
					}
					if a == "dynamodb:Scan" {
						add("%s policy statement %q: dynamodb:Scan is forbidden (no Scan in any request path)", role, st.Sid)
					}
				}
				for _, res := range st.Resource {
					if res == "*" {
						add("%s policy statement %q: resource \"*\"", role, st.Sid)
					}
				}
			}
		}
	}
}

// checkKMS: with a customer managed key on the tables, every function may
// decrypt with it, but only through DynamoDB (kms:ViaService), and no grant
// on that key goes without the condition. (Keys the code calls KMS with
// directly are the IAM test's business: their calls are recorded.)
func checkKMS(d *Deployed, add addFunc) {
	pols, err := d.RolePolicies()
	if err != nil {
		return // reported by checkRolesAndPolicies
	}
	for _, t := range d.Of("aws_dynamodb_table") {
		sse := t.Block("server_side_encryption")
		key, _ := sse["kms_key_arn"].(string)
		if key == "" {
			continue
		}
		region := strings.Split(t.Str("arn"), ":")[3]
		via := "dynamodb." + region + ".amazonaws.com"
		for role, ps := range pols {
			for _, p := range ps {
				for _, st := range p.Statement {
					if slices.Contains(st.Resource, key) && !slices.Equal(st.Condition["StringEquals"]["kms:ViaService"], []string{via}) {
						add("%s policy statement %q: grant on the tables' key %s without kms:ViaService = %s", role, st.Sid, key, via)
					}
				}
			}
		}
		for _, role := range FunctionRoles {
			ok := false
			for _, p := range pols[role] {
				for _, st := range p.Statement {
					if st.Effect == "Allow" && slices.Contains(st.Action, "kms:Decrypt") && slices.Contains(st.Resource, key) &&
						slices.Equal(st.Condition["StringEquals"]["kms:ViaService"], []string{via}) {
						ok = true
					}
				}
			}
			if !ok {
				add("%s: table %s is encrypted with %s but the role has no kms:Decrypt on it through %s", role, t.Str("name"), key, via)
			}
		}
	}
}

// --------------------------------------------------------------- functions

func checkFunctionsDeployed(d *Deployed, add addFunc) {
	for role, f := range d.Functions {
		for name, want := range map[string]string{"runtime": "provided.al2023", "handler": "bootstrap"} {
			if got := f.Str(name); got != want {
				add("function %s: %s = %q, want %q", role, name, got, want)
			}
		}
		if a, _ := f.Values["architectures"].([]any); len(a) != 1 || a[0] != "arm64" {
			add("function %s: architectures = %v, want [arm64]", role, f.Values["architectures"])
		}
		if fn := f.Str("filename"); strings.HasPrefix(fn, "/") {
			add("function %s: filename %q is absolute: the checkout's path would land in state (two checkouts must plan the same)", role, fn)
		}
		if f.Str("source_code_hash") == "" {
			add("function %s: source_code_hash must track the zip", role)
		}
		lc := f.Block("logging_config")
		if lc == nil || lc["log_format"] != "JSON" {
			add("function %s: logging_config.log_format must be JSON", role)
			continue
		}
		// With JSON logs, Lambda drops application logs below
		// application_log_level (default INFO): it must follow CC_LOG_LEVEL.
		env := EnvOf(f)
		if want := strings.ToUpper(env["CC_LOG_LEVEL"]); lc["application_log_level"] != want {
			add("function %s: logging_config.application_log_level = %v, want %q (CC_LOG_LEVEL, or Lambda drops lower levels)", role, lc["application_log_level"], want)
		}
		if lg, ok := d.Find("aws_cloudwatch_log_group", "name", fmt.Sprint(lc["log_group"])); !ok || lg.Num("retention_in_days") <= 0 {
			add("function %s: logging_config.log_group must be a log group of this configuration with retention", role)
		}
	}
}

// EnvOf returns a function's environment variables.
func EnvOf(f Resource) map[string]string {
	out := map[string]string{}
	if e := f.Block("environment"); e != nil {
		if vars, ok := e["variables"].(map[string]any); ok {
			for k, v := range vars {
				out[k] = fmt.Sprint(v)
			}
		}
	}
	return out
}

var ssmParamARN = regexp.MustCompile(`^arn:aws[a-z-]*:ssm:[a-z0-9-]+:[0-9]{12}:parameter/.+$`)

// checkEnvironment ties each function's environment to the deployed
// resources it names.
func checkEnvironment(d *Deployed, add addFunc) {
	for role, f := range d.Functions {
		env := EnvOf(f)
		prefix, ok := env["CC_TABLE_PREFIX"]
		if !ok {
			add("function %s: no CC_TABLE_PREFIX", role)
		}
		for _, base := range []string{"CommitCollect", "CommitCollectSessions", "CommitCollectAudit", "CommitCollectIdempotency"} {
			if _, ok := d.Tables[prefix+base]; !ok {
				add("function %s: CC_TABLE_PREFIX %q names table %s, which is not deployed", role, prefix, prefix+base)
			}
		}
		for k, val := range env {
			if k == "STRAVA_CLIENT_SECRET" || k == "STRAVA_VERIFY_TOKEN" {
				add("function %s: plain secret environment variable %s: pass an SSM parameter ARN as %s_PARAM", role, k, k)
			}
			if strings.HasSuffix(k, "_PARAM") && !ssmParamARN.MatchString(val) {
				add("function %s: %s = %q is not an SSM parameter ARN", role, k, val)
			}
		}
	}
	if api, ok := d.Functions["api"]; ok {
		if w, ok := d.Functions["worker"]; !ok || EnvOf(api)["CC_WORKER_FUNCTION"] != w.Str("function_name") {
			add("function api: CC_WORKER_FUNCTION = %q, want the worker's name", EnvOf(api)["CC_WORKER_FUNCTION"])
		}
	}
}

// ------------------------------------------------------- stream and async

// StreamRetentionSeconds is how long DynamoDB Streams keep a record.
const StreamRetentionSeconds = 24 * 60 * 60

func sqsQueue(d *Deployed, arn string) bool {
	_, ok := d.Find("aws_sqs_queue", "arn", arn)
	return ok
}

func checkStreamMappingDeployed(d *Deployed, add addFunc) {
	esms := d.Of("aws_lambda_event_source_mapping")
	proj, ok := d.Functions["projector"]
	if len(esms) != 1 || !ok {
		add("want exactly one aws_lambda_event_source_mapping (the projector's), got %d", len(esms))
		return
	}
	m := esms[0]
	var main Resource
	for _, t := range d.Tables {
		if t.Values["stream_enabled"] == true {
			main = t
		}
	}
	if m.Str("event_source_arn") == "" || m.Str("event_source_arn") != main.Str("stream_arn") {
		add("projector mapping: event_source_arn %q, want the main table's stream %q", m.Str("event_source_arn"), main.Str("stream_arn"))
	}
	if m.Str("function_name") != proj.Str("arn") && m.Str("function_name") != proj.Str("function_name") {
		add("projector mapping: function_name %q, want the projector", m.Str("function_name"))
	}
	if frt, _ := m.Values["function_response_types"].([]any); len(frt) != 1 || frt[0] != "ReportBatchItemFailures" {
		add("projector mapping: function_response_types = %v, want [ReportBatchItemFailures]", m.Values["function_response_types"])
	}
	if m.Values["bisect_batch_on_function_error"] != true {
		add("projector mapping: bisect_batch_on_function_error must be true")
	}
	if n := m.Num("maximum_retry_attempts"); n < 0 || n > 10000 {
		add("projector mapping: maximum_retry_attempts = %v, want bounded (0..10000)", n)
	}
	// Older records than the stream keeps cannot be redriven from the DLQ's
	// shard/sequence range: give up (to the DLQ) while they still exist.
	if n := m.Num("maximum_record_age_in_seconds"); n < 60 || n >= StreamRetentionSeconds {
		add("projector mapping: maximum_record_age_in_seconds = %v, want 60..%d (below the stream's 24 h retention, so a parked range can still be redriven)", n, StreamRetentionSeconds-1)
	}
	if dst := m.Block("destination_config", "on_failure"); dst == nil || !sqsQueue(d, fmt.Sprint(dst["destination_arn"])) {
		add("projector mapping: destination_config.on_failure must send to an SQS queue of this configuration (DLQ)")
	}
	var got []string
	if fc := m.Block("filter_criteria"); fc != nil {
		fs, _ := fc["filter"].([]any)
		for _, f := range fs {
			if fm, ok := f.(map[string]any); ok {
				got = append(got, canonicalJSON(fmt.Sprint(fm["pattern"])))
			}
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
		add("projector filter_criteria:\n  got  %s\n  want %s", strings.Join(got, "\n       "), strings.Join(want, "\n       "))
	}
}

func checkWorkerAsyncDeployed(d *Deployed, add addFunc) {
	w, ok := d.Functions["worker"]
	cfgs := d.Of("aws_lambda_function_event_invoke_config")
	if !ok || len(cfgs) != 1 {
		add("want exactly one aws_lambda_function_event_invoke_config (the worker's), got %d", len(cfgs))
		return
	}
	c := cfgs[0]
	if c.Str("function_name") != w.Str("function_name") && c.Str("function_name") != w.Str("arn") {
		add("worker async config: function_name %q, want the worker", c.Str("function_name"))
	}
	if n := c.Num("maximum_retry_attempts"); n < 0 || n > 2 {
		add("worker async config: maximum_retry_attempts = %v, want 0..2", n)
	}
	if n := c.Num("maximum_event_age_in_seconds"); n < 60 || n > 21600 {
		add("worker async config: maximum_event_age_in_seconds = %v, want 60..21600", n)
	}
	if dst := c.Block("destination_config", "on_failure"); dst == nil || !sqsQueue(d, fmt.Sprint(dst["destination"])) {
		add("worker async config: destination_config.on_failure must send to an SQS queue of this configuration (DLQ)")
	}
}

// ----------------------------------------------------------------- sweeper

var scheduleExpr = regexp.MustCompile(`^(rate|cron)\(`)

// checkSweeperDeployed: a schedule invokes the sweeper (rule → target →
// permission scoped to that rule) and the sweeper dispatches to the worker
// with the lease the api's claim takes.
func checkSweeperDeployed(d *Deployed, add addFunc) {
	sw, ok := d.Functions["sweeper"]
	if !ok {
		return // reported with FunctionRoles
	}
	rules := map[string]Resource{} // rule name → rule
	for _, r := range d.Of("aws_cloudwatch_event_rule") {
		rules[r.Str("name")] = r
	}
	scheduled := map[string]bool{} // rule arn → targets the sweeper
	for _, tg := range d.Of("aws_cloudwatch_event_target") {
		r, ok := rules[tg.Str("rule")]
		if !ok {
			add("%s: rule %q is not an aws_cloudwatch_event_rule of this configuration", tg.Address, tg.Str("rule"))
			continue
		}
		if tg.Str("arn") != sw.Str("arn") {
			add("%s: the schedule %s targets %q, want the sweeper %q", tg.Address, r.Str("name"), tg.Str("arn"), sw.Str("arn"))
			continue
		}
		if !scheduleExpr.MatchString(r.Str("schedule_expression")) {
			add("%s: schedule_expression %q, want rate(...) or cron(...)", r.Address, r.Str("schedule_expression"))
			continue
		}
		scheduled[r.Str("arn")] = true
	}
	if len(scheduled) == 0 {
		add("no aws_cloudwatch_event_rule schedules the sweeper: accepted webhook events whose hand-off failed would wait forever")
	}
	permitted := false
	for _, p := range d.Of("aws_lambda_permission") {
		if p.Str("principal") != "events.amazonaws.com" {
			continue
		}
		if p.Str("function_name") != sw.Str("function_name") && p.Str("function_name") != sw.Str("arn") {
			add("%s: EventBridge may invoke %q, want only the sweeper", p.Address, p.Str("function_name"))
			continue
		}
		if !scheduled[p.Str("source_arn")] || p.Str("action") != "lambda:InvokeFunction" {
			add("%s: the sweeper's invoke permission must be lambda:InvokeFunction from its schedule rule only (source_arn %q)", p.Address, p.Str("source_arn"))
			continue
		}
		permitted = true
	}
	if !permitted {
		add("the sweeper's schedule has no aws_lambda_permission letting events.amazonaws.com invoke it from that rule")
	}
	env := EnvOf(sw)
	checkReconcileScheduled(d, sw, rules, add)
	if w, ok := d.Functions["worker"]; !ok || env["CC_WORKER_FUNCTION"] != w.Str("function_name") {
		add("function sweeper: CC_WORKER_FUNCTION = %q, want the worker's name", env["CC_WORKER_FUNCTION"])
	}
	for _, role := range []string{"api", "worker"} {
		if f, ok := d.Functions[role]; ok && (env["CC_OUTBOX_SHARDS"] == "" || EnvOf(f)["CC_OUTBOX_SHARDS"] != env["CC_OUTBOX_SHARDS"]) {
			add("function sweeper: CC_OUTBOX_SHARDS = %q, the %s's %q: the pending index's writers and its reader must use the same shards",
				env["CC_OUTBOX_SHARDS"], role, EnvOf(f)["CC_OUTBOX_SHARDS"])
		}
	}
	if api, ok := d.Functions["api"]; ok && (env["CC_OUTBOX_LEASE"] == "" || EnvOf(api)["CC_OUTBOX_LEASE"] != env["CC_OUTBOX_LEASE"]) {
		add("function sweeper: CC_OUTBOX_LEASE = %q, the api's %q: the claim and the re-dispatch must use the same lease", env["CC_OUTBOX_LEASE"], EnvOf(api)["CC_OUTBOX_LEASE"])
	}
}

// reconcileRate is the schedule expression of a step every N minutes.
var reconcileRate = regexp.MustCompile(`^rate\(([0-9]+) minutes?\)$`)

// maxReconcileStepMinutes bounds the reconcile schedule's period: each step
// comes to the users whose slot came since the last one, at most a batch
// (syncjobs.DefaultReconcileBatch), so rare steps would let the cycle lag.
const maxReconcileStepMinutes = 15

// checkReconcileScheduled: a rule of its own invokes the sweeper with
// {"task":"reconcile"} (handlers/app.TaskReconcile) every few minutes
// (each a step of the resumable enumeration); the idle interval is at
// least the slot interval; the worker reads the same intervals.
func checkReconcileScheduled(d *Deployed, sw Resource, rules map[string]Resource, add addFunc) {
	interval, idle := EnvOf(sw)["CC_RECONCILE_INTERVAL"], EnvOf(sw)["CC_RECONCILE_IDLE"]
	found := false
	for _, tg := range d.Of("aws_cloudwatch_event_target") {
		var in struct {
			Task string `json:"task"`
		}
		if tg.Str("arn") != sw.Str("arn") || json.Unmarshal([]byte(tg.Str("input")), &in) != nil || in.Task != "reconcile" {
			continue
		}
		found = true
		r := rules[tg.Str("rule")]
		m := reconcileRate.FindStringSubmatch(r.Str("schedule_expression"))
		if n, err := strconv.Atoi(safeIndex(m, 1)); m == nil || err != nil || n < 1 || n > maxReconcileStepMinutes {
			add("%s: reconcile schedule %q, want rate(N minutes) with N at most %d: each run is one bounded step of the enumeration", r.Address, r.Str("schedule_expression"), maxReconcileStepMinutes)
		}
	}
	if !found {
		add("no aws_cloudwatch_event_target invokes the sweeper with {\"task\":\"reconcile\"}: edits Strava never pushes would never be reconciled")
	}
	iv, err1 := time.ParseDuration(interval)
	id, err2 := time.ParseDuration(idle)
	if err1 != nil || err2 != nil || id < iv {
		add("function sweeper: CC_RECONCILE_IDLE = %q, CC_RECONCILE_INTERVAL = %q: want durations, the idle interval at least the slot interval", idle, interval)
	}
	if w, ok := d.Functions["worker"]; ok && (EnvOf(w)["CC_RECONCILE_INTERVAL"] != interval || EnvOf(w)["CC_RECONCILE_IDLE"] != idle) {
		add("function worker: CC_RECONCILE_INTERVAL = %q, CC_RECONCILE_IDLE = %q, the sweeper's %q, %q", EnvOf(w)["CC_RECONCILE_INTERVAL"], EnvOf(w)["CC_RECONCILE_IDLE"], interval, idle)
	}
}

func safeIndex(m []string, i int) string {
	if i < len(m) {
		return m[i]
	}
	return ""
}

// ------------------------------------------------------------------ routes

// Routes are the routes API Gateway must send to the api Lambda: what its mux
// serves (the BFF's table and the webhook), except CORS preflights, which API
// Gateway answers itself (cors_configuration), plus the landing page.
func Routes() []string {
	out := []string{"GET /", "GET " + intake.WebhookPath, "POST " + intake.WebhookPath}
	for _, r := range bff.Routes() {
		if !strings.HasPrefix(r, "OPTIONS ") {
			out = append(out, strings.ReplaceAll(r, "...}", "+}"))
		}
	}
	sort.Strings(out)
	return out
}

func checkRoutesDeployed(d *Deployed, add addFunc) {
	api, ok := d.Functions["api"]
	if !ok {
		return
	}
	integ := map[string]Resource{}
	for _, i := range d.Of("aws_apigatewayv2_integration") {
		integ["integrations/"+i.Str("id")] = i
		if i.Str("integration_uri") != api.Str("invoke_arn") {
			add("%s: integration_uri %q, want the api Lambda's invoke ARN", i.Address, i.Str("integration_uri"))
		}
		if i.Str("payload_format_version") != "2.0" {
			add("%s: payload_format_version %q, want 2.0 (httpadapter.NewV2)", i.Address, i.Str("payload_format_version"))
		}
	}
	var got []string
	for _, r := range d.Of("aws_apigatewayv2_route") {
		got = append(got, r.Str("route_key"))
		if _, ok := integ[r.Str("target")]; !ok {
			add("%s: target %q is not an integration of this configuration", r.Address, r.Str("target"))
		}
	}
	sort.Strings(got)
	want := append(Routes(), WebhookRoutesOf(d)...)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		add("routes: got %v, want %v (handlers/bff routes + the webhook, bare and on its own API under {secret})", got, want)
	}
	for _, p := range d.Of("aws_lambda_permission") {
		if p.Str("principal") == "apigateway.amazonaws.com" && p.Str("function_name") != api.Str("function_name") {
			add("%s: API Gateway may invoke %q, want the api Lambda", p.Address, p.Str("function_name"))
		}
	}
	// CORS: when the api allows origins, API Gateway must answer preflights
	// (no OPTIONS route reaches the Lambda) for the same origins.
	origins := EnvOf(api)["CC_CORS_ORIGINS"]
	hook := webhookAPI(d)
	for _, a := range d.Of("aws_apigatewayv2_api") {
		cors := a.Block("cors_configuration")
		switch {
		case a.Str("id") == hook && hook != "":
			if cors != nil {
				add("%s: cors_configuration on the webhook's API: no browser calls it", a.Address)
			}
		case origins == "" && cors != nil:
			add("%s: cors_configuration set while the api has no CC_CORS_ORIGINS", a.Address)
		case origins != "" && cors == nil:
			add("%s: no cors_configuration: preflights for %s would never reach an answer", a.Address, origins)
		case cors != nil:
			var got []string
			for _, o := range cors["allow_origins"].([]any) {
				got = append(got, fmt.Sprint(o))
			}
			want := strings.Split(origins, ",")
			sort.Strings(got)
			sort.Strings(want)
			if !slices.Equal(got, want) {
				add("%s: cors allow_origins %v, want CC_CORS_ORIGINS %v", a.Address, got, want)
			}
			if cors["allow_credentials"] != true {
				add("%s: cors allow_credentials must be true (the session cookie)", a.Address)
			}
			if exp, _ := cors["expose_headers"].([]any); !slices.ContainsFunc(exp, func(h any) bool { return strings.EqualFold(fmt.Sprint(h), "link") }) {
				add("%s: cors expose_headers %v must hold link (the export's next page)", a.Address, exp)
			}
		}
	}
}

// ------------------------------------------------------------------ alarms

// Alarm is one alarm the deployment must have: a metric and the dimension
// that names the watched resource.
type Alarm struct {
	What       string
	Namespace  string
	Metric     string
	Dimension  string                   // dimension key
	DimValueOf func(*Deployed) []string // the watched resources' dimension values
}

func functionNames(roles ...string) func(*Deployed) []string {
	return func(d *Deployed) []string {
		var out []string
		for _, r := range roles {
			out = append(out, d.Functions[r].Str("function_name"))
		}
		return out
	}
}

func allOf(typ, attr string) func(*Deployed) []string {
	return func(d *Deployed) []string {
		var out []string
		for _, r := range d.Of(typ) {
			out = append(out, r.Str(attr))
		}
		return out
	}
}

// RequiredAlarms are the alarms every deployment needs. Add an entry with a
// new resource that can fail silently.
var RequiredAlarms = []Alarm{
	{"function errors", "AWS/Lambda", "Errors", "FunctionName", functionNames(FunctionRoles...)},
	{"function throttles", "AWS/Lambda", "Throttles", "FunctionName", functionNames(FunctionRoles...)},
	{"projector stream iterator age", "AWS/Lambda", "IteratorAge", "FunctionName", functionNames("projector")},
	{"worker async destination delivery failures", "AWS/Lambda", "DestinationDeliveryFailures", "FunctionName", functionNames("worker")},
	{"worker async events dropped", "AWS/Lambda", "AsyncEventsDropped", "FunctionName", functionNames("worker")},
	{"DLQ depth", "AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", allOf("aws_sqs_queue", "name")},
	{"API 5xx", "AWS/ApiGateway", "5xx", "ApiId", allOf("aws_apigatewayv2_api", "id")},
	{"API latency", "AWS/ApiGateway", "Latency", "ApiId", allOf("aws_apigatewayv2_api", "id")},
	// Throttled answers are 429s: without these, a flood or limits set too
	// low throttle Strava's deliveries silently.
	{"API 4xx", "AWS/ApiGateway", "4xx", "ApiId", allOf("aws_apigatewayv2_api", "id")},
	// The api's EMF metric: events dropped for a subscription the webhook
	// does not accept (handlers/ingest/intake: a new subscription's events
	// before the configuration names it).
	{"webhook events dropped", intake.MetricsNamespace, intake.MetricEventsDropped, "Service", constant("api")},
	// The projector's EMF metric: a milestone's period held more workouts
	// than the guardrail reads (projections/consumer/metrics.go).
	{"milestones truncated by the guardrail", consumer.MetricsNamespace, consumer.MetricMilestonesTruncated, "Service", constant("projector")},
	// The sweeper's EMF metric: due outbox items per sweep (handlers/ingest/handoff/sweeper.go).
	{"outbox backlog", handoff.SweeperMetricsNamespace, "OutboxDue", "Service", constant("sweeper")},
	// The worker's EMF metric: jobs deferred because Strava refused the
	// application's credentials (handlers/ingest/runner/settle.go).
	{"strava app credentials rejected", budget.WorkerMetricsNamespace, runner.MetricAppCredentialsRejected, "Service", constant("worker")},
	// The worker's EMF metric: the largest share of a read window one
	// athlete took (handlers/ingest/fetch/spend.go).
	{"one athlete's share of a read window", budget.WorkerMetricsNamespace, budget.MetricAthleteReadShare, "Service", constant("worker")},
	// The store's EMF metric: audit entries Store.Audit dropped (model/store/audit.go).
	{"audit writes dropped", store.AuditMetricsNamespace, store.MetricAuditWritesDropped, "TableName", auditTables},
}

// auditTables are the deployed audit tables' names.
func auditTables(d *Deployed) []string {
	var out []string
	for _, n := range allOf("aws_dynamodb_table", "name")(d) {
		if strings.HasSuffix(n, dynamo.BaseAudit) {
			out = append(out, n)
		}
	}
	return out
}

func constant(v string) func(*Deployed) []string {
	return func(*Deployed) []string { return []string{v} }
}

func checkAlarmsDeployed(d *Deployed, topicARN string, add addFunc) {
	alarms := d.Of("aws_cloudwatch_metric_alarm")
	for _, want := range RequiredAlarms {
		for _, dim := range want.DimValueOf(d) {
			found := false
			for _, a := range alarms {
				dims, _ := a.Values["dimensions"].(map[string]any)
				// An ApiId alarm watches the whole API: one narrowed to a
				// route (Route, Stage) does not stand in for it.
				whole := want.Dimension != "ApiId" || len(dims) == 1
				if a.Str("namespace") == want.Namespace && a.Str("metric_name") == want.Metric && dims[want.Dimension] == dim && whole {
					found = true
				}
			}
			if !found {
				add("missing alarm: %s (%s %s, %s=%s)", want.What, want.Namespace, want.Metric, want.Dimension, dim)
			}
		}
	}
	for _, a := range alarms {
		acts, _ := a.Values["alarm_actions"].([]any)
		if !slices.Contains(acts, any(topicARN)) {
			add("%s: alarm_actions %v must notify %s", a.Address, acts, topicARN)
		}
	}
}

// --------------------------------------------------------------- dashboard

// DashboardMetric is a metric the capacity dashboard must show.
type DashboardMetric struct {
	Namespace, Metric, Dimension string
	DimValueOf                   func(*Deployed) []string
}

// DashboardMetrics are what the capacity dashboard must show: the
// projector's consumed capacity per batch beside its lag, the stream's
// iterator age and every function's errors.
var DashboardMetrics = []DashboardMetric{
	{consumer.MetricsNamespace, consumer.MetricDynamoDBRequests, "Service", constant("projector")},
	{consumer.MetricsNamespace, consumer.MetricConsumedReadUnits, "Service", constant("projector")},
	{consumer.MetricsNamespace, consumer.MetricConsumedWriteUnits, "Service", constant("projector")},
	{consumer.MetricsNamespace, "ProjectionLag", "Service", constant("projector")},
	{"AWS/Lambda", "IteratorAge", "FunctionName", functionNames("projector")},
	{"AWS/Lambda", "Errors", "FunctionName", functionNames(FunctionRoles...)},
	// the Strava read budget by class.
	{budget.WorkerMetricsNamespace, "StravaReads", "Class", func(*Deployed) []string {
		return []string{ingest.ReadClassWebhook, ingest.ReadClassBackfill, ingest.ReadClassReconcile, ingest.ReadClassConfirm}
	}},
}

// DashboardLogLines are the log lines whose capacity fields (requests, rcu,
// wcu) the dashboard's Logs Insights widget sums, with the functions whose
// log groups it must read: ingestion's capacity is logged, not an EMF metric.
var DashboardLogLines = map[string]string{"request served": "api", "job finished": "worker"}

func checkDashboardDeployed(d *Deployed, add addFunc) {
	boards := d.Of("aws_cloudwatch_dashboard")
	if len(boards) == 0 {
		add("no aws_cloudwatch_dashboard: the capacity dashboard is missing")
		return
	}
	type metricKey struct{ ns, metric, dim, value string }
	shown := map[metricKey]bool{}
	var queries []string
	for _, b := range boards {
		var body struct {
			Widgets []struct {
				Type       string
				Properties struct {
					Metrics [][]any
					Query   string
				}
			}
		}
		if err := json.Unmarshal([]byte(b.Str("dashboard_body")), &body); err != nil {
			add("%s: dashboard_body is not JSON: %v", b.Address, err)
			continue
		}
		for _, w := range body.Widgets {
			for _, m := range w.Properties.Metrics {
				if len(m) >= 4 {
					str := func(i int) string { s, _ := m[i].(string); return s }
					shown[metricKey{str(0), str(1), str(2), str(3)}] = true
				}
			}
			if w.Type == "log" {
				queries = append(queries, w.Properties.Query)
			}
		}
	}
	for _, want := range DashboardMetrics {
		for _, v := range want.DimValueOf(d) {
			if !shown[metricKey{want.Namespace, want.Metric, want.Dimension, v}] {
				add("capacity dashboard does not show %s %s (%s=%s)", want.Namespace, want.Metric, want.Dimension, v)
			}
		}
	}
	for msg, role := range DashboardLogLines {
		group := "SOURCE '/aws/lambda/" + d.Functions[role].Str("function_name") + "'"
		found := false
		for _, q := range queries {
			if strings.Contains(q, group) && strings.Contains(q, `"`+msg+`"`) && strings.Contains(q, "sum(rcu)") && strings.Contains(q, "sum(wcu)") && strings.Contains(q, "sum(requests)") {
				found = true
			}
		}
		if !found {
			add("capacity dashboard has no Logs Insights widget summing requests, rcu and wcu of %q lines from %s", msg, group)
		}
	}
}
