package terraform

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/commitcollect/backend/test/terraform/tfoffline"
)

// exampleVars are planned on top of example.tfvars so the optional paths are
// planned too: debug logs (application_log_level), CORS origins
// (cors_configuration) and a customer managed key on the tables (its KMS
// grants).
var exampleVars = []string{
	`log_level=debug`,
	`cors_origins=["https://app.example.com"]`,
	`table_kms_key_arn=arn:aws:kms:ap-southeast-2:123456789012:key/11111111-2222-3333-4444-555555555555`,
}

// topicARN is example.tfvars' alarm_topic_arn.
const topicARN = "arn:aws:sns:ap-southeast-2:123456789012:platform-alarms"

var example struct {
	once  sync.Once
	plan  *tfjson.Plan
	state *tfjson.State
}

// applied plans envs/example once per test binary (init, plan, show -json,
// then apply with the schema-only provider and show -json of the state).
func applied(t *testing.T) (*tfjson.Plan, *tfjson.State) {
	t.Helper()
	example.once.Do(func() {
		ws := tfoffline.Copy(t, nil)
		plan, planFile := ws.Plan(t, exampleVars...)
		example.plan, example.state = plan, ws.Apply(t, planFile)
	})
	if example.state == nil {
		t.Fatal("the offline plan of envs/example failed (see the first test that ran it)")
	}
	return example.plan, example.state
}

// TestOfflineValidate is `terraform init -backend=false` and `terraform
// validate` of envs/example against the provider's real schema.
func TestOfflineValidate(t *testing.T) {
	t.Parallel()
	// The repository's environment root is never touched: whatever lock file
	// or working folder an engineer's own init left there stays as it was.
	repoEnv := filepath.Join(tfoffline.RepoRoot(t), "terraform", filepath.FromSlash(tfoffline.Example))
	snapshot := func() string {
		lock, _ := os.ReadFile(filepath.Join(repoEnv, ".terraform.lock.hcl"))
		_, err := os.Stat(filepath.Join(repoEnv, ".terraform"))
		return fmt.Sprintf("lock=%q workdir=%v", lock, err == nil)
	}
	before := snapshot()
	ws := tfoffline.Copy(t, nil)
	ws.InitNoBackend(t)
	out := ws.Validate(t)
	for _, d := range out.Diagnostics {
		if d.Severity == tfjson.DiagnosticSeverityError {
			t.Errorf("validate: %s: %s", d.Summary, d.Detail)
		}
	}
	if !out.Valid {
		t.Fatalf("terraform validate: %d errors", out.ErrorCount)
	}
	if after := snapshot(); after != before {
		t.Errorf("the repository's %s changed: %s, was %s (offline runs must stay in their temporary copy)", tfoffline.Example, after, before)
	}
}

// TestValidateRefusesMistakes shows Terraform itself, through the schema,
// refusing what no hand-written check looks for.
func TestValidateRefusesMistakes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, file, old, new string
		wantSummary, wantIn  string
	}{
		{
			name: "misspelled argument", file: "modules/function/main.tf",
			old: "memory_size  ", new: "memory_sise  ",
			wantSummary: "Unsupported argument", wantIn: `"memory_sise" is not expected here`,
		},
		{
			name: "misspelled nested block", file: "modules/commitcollect/main.tf",
			old: "filter_criteria {", new: "filter_criterion {",
			wantSummary: "Unsupported block type", wantIn: `"filter_criterion" are not expected here`,
		},
		{
			name: "wrongly typed value", file: "modules/commitcollect/main.tf",
			old: "bisect_batch_on_function_error = true", new: `bisect_batch_on_function_error = "sometimes"`,
			wantSummary: "Incorrect attribute value type", wantIn: "a bool is required",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ws := tfoffline.Copy(t, func(dir string) { mutate(t, dir, tt.file, tt.old, tt.new) })
			ws.InitNoBackend(t)
			out := ws.Validate(t)
			if out.Valid {
				t.Fatalf("validate accepted %s", tt.name)
			}
			var got []string
			for _, d := range out.Diagnostics {
				got = append(got, d.Summary+": "+d.Detail)
				if d.Severity == tfjson.DiagnosticSeverityError && d.Summary == tt.wantSummary && strings.Contains(d.Detail, tt.wantIn) {
					t.Logf("refused as it should: %s: %s", d.Summary, d.Detail)
					return
				}
			}
			t.Fatalf("got diagnostics %q, want %q mentioning %q", got, tt.wantSummary, tt.wantIn)
		})
	}
}

// TestPlanChecks runs the invariants of plancheck.go on the applied plan.
func TestPlanChecks(t *testing.T) {
	t.Parallel()
	plan, state := applied(t)
	for _, rc := range plan.ResourceChanges {
		if rc.Mode == tfjson.ManagedResourceMode && !rc.Change.Actions.Create() {
			t.Errorf("%s: planned %v on an empty state, want create", rc.Address, rc.Change.Actions)
		}
	}
	if got := CheckDeployed(NewDeployed(state), topicARN); len(got) > 0 {
		t.Fatalf("the plan of envs/example breaks %d invariant(s):\n%s", len(got), strings.Join(got, "\n"))
	}
}

// TestPlanChecksFailWhenBroken breaks one invariant per case in a copy of
// terraform/, plans and applies it offline, and requires CheckDeployed to
// name it (runBroken: the cases numbered alike share a copy).
func TestPlanChecksFailWhenBroken(t *testing.T) {
	t.Parallel()
	const cc, fn, wh = "modules/commitcollect/main.tf", "modules/function/main.tf", "modules/commitcollect/webhook.tf"
	runBroken(t, []brokenCase{
		{1, "scan granted", cc, `actions   = ["dynamodb:ListStreams"]`, `actions   = ["dynamodb:ListStreams", "dynamodb:Scan"]`, "dynamodb:Scan is forbidden"},
		{1, "table key grant through any service", cc, `via_dynamodb = "dynamodb.${data.aws_region.current.region}.amazonaws.com"`, `via_dynamodb = "*"`, "has no kms:Decrypt on it through dynamodb.ap-southeast-2.amazonaws.com"},
		{1, "wildcard resource", cc, "resources = [module.worker.function_arn]\n  }\n  statement {\n    sid       = \"ReadSecrets\"",
			"resources = [\"*\"]\n  }\n  statement {\n    sid       = \"ReadSecrets\"", `resource "*"`},
		{1, "no bisect on error", cc, `bisect_batch_on_function_error = true`, `bisect_batch_on_function_error = false`, "bisect_batch_on_function_error"},
		{1, "record age at the stream's retention", cc,
			`maximum_record_age_in_seconds  = var.projector.maximum_record_age_s`, `maximum_record_age_in_seconds  = 86400`, "below the stream's 24 h retention"},
		{1, "filter lets the projector's own writes through", cc,
			`writtenBy  = { S = [{ "anything-but" = ["projector"] }] }`, `writtenBy  = { S = [{ "anything-but" = ["api"] }] }`, "projector filter_criteria"},
		{1, "stream failures go nowhere useful", cc,
			`destination_arn = aws_sqs_queue.projector_dlq.arn`, `destination_arn = module.worker.function_arn`, "projector mapping: destination_config.on_failure"},
		{1, "route missing", cc, `"DELETE /v1/me",`, ``, "routes: got"},
		{1, "no CORS preflight answer", cc, `for_each = length(var.cors_origins) > 0 ? [1] : []`, `for_each = []`, "no cors_configuration"},
		{2, "export's Link hidden from scripts", cc, `expose_headers    = ["link"]`, `expose_headers    = []`, "cors expose_headers"},
		{2, "iterator age alarm missing", cc, `metric_name         = "IteratorAge"`, `metric_name         = "Duration"`, "missing alarm: projector stream iterator age"},
		{2, "async drops unwatched", cc, `"AsyncEventsDropped"`, `"AsyncEventAge"`, "missing alarm: worker async events dropped"},
		{2, "debug logs dropped", fn, `application_log_level = upper(var.log_level)`, `application_log_level = "INFO"`, "application_log_level"},
		{2, "api invokes something else", cc,
			`CC_WORKER_FUNCTION        = module.worker.function_name`, `CC_WORKER_FUNCTION        = module.projector.function_name`, "CC_WORKER_FUNCTION"},
		{2, "functions read another table prefix", cc, `CC_TABLE_PREFIX = local.table_prefix`, `CC_TABLE_PREFIX = var.environment`, "CC_TABLE_PREFIX"},
		{3, "truncation alarm missing", cc, `metric_name         = "MilestonesTruncated"`, `metric_name         = "UsersProjected"`, "missing alarm: milestones truncated by the guardrail"},
		{3, "athlete share alarm missing", cc, `metric_name         = "AthleteReadShare"`, `metric_name         = "AthleteReadsHeldBack"`, "missing alarm: one athlete's share of a read window"},
		{3, "outbox backlog alarm missing", cc, `metric_name         = "OutboxDue"`, `metric_name         = "OutboxDispatched"`, "missing alarm: outbox backlog"},
		{3, "schedule invokes another function", cc, `arn  = module.sweeper.function_arn`, `arn  = module.worker.function_arn`, "want the sweeper"},
		{4, "schedule permission not scoped to the rule", cc,
			`source_arn    = aws_cloudwatch_event_rule.sweeper.arn`, `source_arn    = null`, "the sweeper's invoke permission must be lambda:InvokeFunction from its schedule rule only"},
		{4, "reconcile schedule missing", cc, `input = jsonencode({ task = "reconcile" })`, `input = jsonencode({ task = "sweep" })`, "reconcile"},
		{1, "reconcile stepped too rarely", cc, `schedule_expression = "rate(1 minute)"`, `schedule_expression = "rate(6 hours)"`, "reconcile schedule"},
		{2, "reconcile idle below the slot interval", cc, `CC_RECONCILE_IDLE     = "${var.reconcile.idle_hours}h"`, `CC_RECONCILE_IDLE     = "1h"`, "CC_RECONCILE_IDLE"},
		{3, "write units off the capacity dashboard", "modules/commitcollect/dashboard.tf", `[local.projector_emf, "ConsumedWriteUnits", "Service", "projector"],`, ``,
			"capacity dashboard does not show CommitCollect/Projector ConsumedWriteUnits"},
		{4, "strava budget off the dashboard", "modules/commitcollect/dashboard.tf", `read_classes     = ["webhook", "backfill", "reconcile", "confirm"]`,
			`read_classes     = ["webhook", "backfill", "reconcile"]`, "capacity dashboard does not show CommitCollect/Worker StravaReads (Class=confirm)"},
		{1, "webhook throttled below its peak", "modules/commitcollect/variables.tf", `webhook_rate_limit     = optional(number, 500)`,
			`webhook_rate_limit     = optional(number, 50)`, "want at least 130/s"},
		{5, "webhook routes on the public API", cc, `for_each = toset(local.routes)`, `for_each = toset(concat(local.routes, local.webhook_routes))`,
			"on the public API: a flood of it reaches"},
		{2, "webhook without a path secret", cc, `CC_WEBHOOK_PATH_SECRET    = join(",", local.webhook_secrets)`, ``, "no CC_WEBHOOK_PATH_SECRET"},
		{6, "webhook secret in the route key", wh, `webhook_path    = "/webhooks/strava/{secret}"`,
			`webhook_path    = "/webhooks/strava/${var.strava.callback_path_segment}"`, "holds the webhook's path secret"},
		{5, "webhook access log shows the path", wh, `      routeKey       = "$context.routeKey"`, `      routeKey       = "$context.path"`,
			"the access log logs $context.path"},
		{6, "dropped events unwatched", wh, `metric_name         = "WebhookEventsDropped"`, `metric_name         = "WebhookEventsAccepted"`,
			"missing alarm: webhook events dropped"},
		{4, "bare webhook path at the stage's budget", cc, `|| endswith(r, " /webhooks/strava")`, ``, "POST /webhooks/strava throttling"},
		{1, "auth routes at the default budget", cc, `rate = var.api.auth_rate_limit, burst = var.api.auth_burst_limit`,
			`rate = var.api.throttling_rate_limit, burst = var.api.throttling_burst_limit`, "want its own budget, below the stage default"},
		{2, "API 4xx unwatched", cc, `"4xx"   = { statistic = "Sum", threshold = var.alarms.api_4xx,`, `"Count" = { statistic = "Sum", threshold = var.alarms.api_4xx,`, "missing alarm: API 4xx"},
		{3, "webhook API unwatched", wh, `dimensions          = { ApiId = aws_apigatewayv2_api.webhook.id }`,
			`dimensions          = { ApiId = aws_apigatewayv2_api.http.id }`, "missing alarm: API 4xx"},
		{4, "worker without reserved concurrency", "modules/commitcollect/variables.tf", `reserved_concurrency = optional(number, 25)`,
			`reserved_concurrency = optional(number)`, "function worker: reserved_concurrent_executions"},
		{2, "key policy without the IAM policies' conditions", cc, "# no AWS service acting for the roles).\n    dynamic \"condition\" {\n      for_each = local.token_key_conditions",
			"# no AWS service acting for the roles).\n    dynamic \"condition\" {\n      for_each = slice(local.token_key_conditions, 0, 1)",
			"key policy statement \"SealAndOpenStravaTokens\" on the token key: condition Null kms:EncryptionContext:userId"},
		{3, "token key with the default policy", cc, `policy                  = data.aws_iam_policy_document.token_key.json`, `policy                  = null`, "no key policy"},
		{4, "projector may open tokens", cc, `identifiers = [module.api.role_arn, module.worker.role_arn]`,
			`identifiers = [module.api.role_arn, module.worker.role_arn, module.projector.role_arn]`, "projector use the token key"},
		{1, "administrators may decrypt", cc, `"kms:CancelKeyDeletion", "kms:CreateAlias",`, `"kms:Decrypt", "kms:CancelKeyDeletion", "kms:CreateAlias",`, ":root use the token key"},
		{2, "worker capacity off the dashboard", "modules/commitcollect/dashboard.tf", `| SOURCE '${module.worker.log_group_name}' `, ``,
			`summing requests, rcu and wcu of "job finished" lines`},
		{3, "sweeper dispatches elsewhere", cc, `CC_WORKER_FUNCTION = module.worker.function_name`, `CC_WORKER_FUNCTION = module.projector.function_name`, "function sweeper: CC_WORKER_FUNCTION"},
	})
}

// TestTwoCheckoutsPlanTheSame plans envs/example from two copies at
// different paths: nothing of the checkout's location may reach the plan
// (and so the state).
func TestTwoCheckoutsPlanTheSame(t *testing.T) {
	t.Parallel()
	var got [2]map[string]string
	for i := range got {
		ws := tfoffline.Copy(t, nil)
		plan, _ := ws.Plan(t)
		got[i] = plannedByAddress(t, plan)
		for addr, v := range got[i] {
			if strings.Contains(v, ws.Root) {
				t.Errorf("copy %d: %s holds the checkout's path %s: %s", i, addr, ws.Root, v)
			}
		}
	}
	if len(got[0]) == 0 {
		t.Fatal("no planned resources")
	}
	for addr, v := range got[0] {
		if got[1][addr] != v {
			t.Errorf("%s differs between two checkouts:\n  %s\n  %s", addr, v, got[1][addr])
		}
	}
	if len(got[0]) != len(got[1]) {
		t.Errorf("got %d and %d planned resources", len(got[0]), len(got[1]))
	}
}

// plannedByAddress returns each planned resource's values (JSON) by address,
// and the outputs under "output.<name>": Terraform orders child modules as it
// likes, so whole plans are compared per address.
func plannedByAddress(t *testing.T, plan *tfjson.Plan) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(m *tfjson.StateModule)
	walk = func(m *tfjson.StateModule) {
		if m == nil {
			return
		}
		for _, r := range m.Resources {
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			out[r.Address] = string(b)
		}
		for _, c := range m.ChildModules {
			walk(c)
		}
	}
	walk(plan.PlannedValues.RootModule)
	for name, o := range plan.PlannedValues.Outputs {
		b, _ := json.Marshal(o)
		out["output."+name] = string(b)
	}
	return out
}
