package terraform

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-exec/tfexec"
)

// root is the repository's terraform/ folder.
const root = "../../terraform"

func TestInvariantsHold(t *testing.T) {
	t.Parallel()
	got, err := Check(root, DefaultLayout)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) > 0 {
		t.Fatalf("terraform/ breaks %d invariant(s):\n%s", len(got), strings.Join(got, "\n"))
	}
}

// terraformBin finds the terraform CLI; the README lists it as required.
func terraformBin(t *testing.T) *tfexec.Terraform {
	t.Helper()
	bin, err := exec.LookPath("terraform")
	if err != nil {
		t.Fatalf("terraform CLI not on PATH (required, see README): %v", err)
	}
	tf, err := tfexec.NewTerraform(t.TempDir(), bin)
	if err != nil {
		t.Fatal(err)
	}
	return tf
}

func fmtCheck(t *testing.T, dir string) (bool, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	ok, files, err := terraformBin(t).FormatCheck(ctx, tfexec.Dir(abs), tfexec.Recursive(true))
	if err != nil {
		t.Fatalf("terraform fmt -check -recursive %s: %v", dir, err)
	}
	return ok, files
}

func TestFormatted(t *testing.T) {
	t.Parallel()
	if ok, files := fmtCheck(t, root); !ok {
		t.Fatalf("terraform fmt -check -recursive terraform: unformatted files %v (run make tf-fmt)", files)
	}
}

// copyTree copies terraform/ to a temporary folder so a test can break it.
func copyTree(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if d.Name() == ".terraform" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// mutate replaces exactly one occurrence of old in file (relative to dir).
func mutate(t *testing.T, dir, file, old, new string) {
	t.Helper()
	p := filepath.Join(dir, file)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), old); n != 1 {
		t.Fatalf("mutation target %q occurs %d times in %s, want 1", old, n, file)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCheckFailsWhenBroken breaks one invariant per case in a copy of
// terraform/ and requires Check to name it.
func TestCheckFailsWhenBroken(t *testing.T) {
	t.Parallel()
	const cc, tables, fn = "modules/commitcollect/main.tf", "modules/tables/main.tf", "modules/function/main.tf"
	tests := []struct {
		name      string
		file      string
		old, new  string
		wantInErr string
	}{
		{
			name: "scan granted to the projector", file: cc,
			old:       `"dynamodb:Query", "dynamodb:ConditionCheckItem",` + "\n    ]\n    resources = [module.tables.arns[\"main\"]]\n  }\n  # The workout log",
			new:       `"dynamodb:Query", "dynamodb:ConditionCheckItem", "dynamodb:Scan",` + "\n    ]\n    resources = [module.tables.arns[\"main\"]]\n  }\n  # The workout log",
			wantInErr: "dynamodb:Scan is forbidden",
		},
		{
			name: "projector cannot read the workout log index", file: cc,
			old:       `resources = ["${module.tables.arns["main"]}/index/LSI1"]`,
			new:       `resources = ["${module.tables.arns["main"]}/index/*"]`,
			wantInErr: "projector",
		},
		{
			name: "wildcard action", file: cc,
			old:       "sid       = \"InvokeWorker\"\n    actions   = [\"lambda:InvokeFunction\"]\n    resources = [module.worker.function_arn]\n  }\n  statement {\n    sid       = \"ReadSecrets\"",
			new:       "sid       = \"InvokeWorker\"\n    actions   = [\"lambda:*\"]\n    resources = [module.worker.function_arn]\n  }\n  statement {\n    sid       = \"ReadSecrets\"",
			wantInErr: `wildcard action "lambda:*"`,
		},
		{
			name: "wildcard resource", file: cc,
			old:       "resources = [module.worker.function_arn]\n  }\n  statement {\n    sid       = \"ReadSecrets\"",
			new:       "resources = [\"*\"]\n  }\n  statement {\n    sid       = \"ReadSecrets\"",
			wantInErr: `resource "*"`,
		},
		{
			name: "extra grant beyond least privilege", file: cc,
			old:       "sid       = \"OutboxClaim\"\n    actions   = [\"dynamodb:UpdateItem\"]",
			new:       "sid       = \"OutboxClaim\"\n    actions   = [\"dynamodb:UpdateItem\", \"dynamodb:DeleteItem\"]",
			wantInErr: `api policy on module.tables.arns["idempotency"]`,
		},
		{
			name: "sweeper queries the table instead of the pending index", file: cc,
			old:       `resources = ["${module.tables.arns["idempotency"]}/index/Pending"]`,
			new:       `resources = [module.tables.arns["idempotency"]]`,
			wantInErr: `sweeper policy on`,
		},
		{
			name: "pending index drifts from store.Specs", file: tables,
			old:       `{ name = "Pending", hash_key = "PendingPK", range_key = "PendingSK" }`,
			new:       `{ name = "Pending", hash_key = "PendingPK", range_key = "DueAt" }`,
			wantInErr: "table chk-CommitCollectIdempotency: got",
		},
		{
			name: "schedule invokes another function", file: cc,
			old:       "arn  = module.sweeper.function_arn",
			new:       "arn  = module.worker.function_arn",
			wantInErr: "the sweeper schedule must target module.sweeper.function_arn",
		},
		{
			name: "schedule permission not scoped to the rule", file: cc,
			old:       "source_arn    = aws_cloudwatch_event_rule.sweeper.arn",
			new:       "source_arn    = null",
			wantInErr: "want an aws_lambda_permission letting events.amazonaws.com invoke module.sweeper",
		},
		{
			name: "sweeper dispatches elsewhere", file: cc,
			old:       "CC_WORKER_FUNCTION = module.worker.function_name",
			new:       "CC_WORKER_FUNCTION = module.projector.function_name",
			wantInErr: "the sweeper's CC_WORKER_FUNCTION",
		},
		{
			name: "outbox backlog alarm missing", file: cc,
			old:       `metric_name         = "OutboxDue"`,
			new:       `metric_name         = "OutboxDueX"`,
			wantInErr: "missing alarm: outbox backlog",
		},
		{
			name: "stream view drifts from store.Specs", file: tables,
			old:       `stream_view   = "NEW_AND_OLD_IMAGES"`,
			new:       `stream_view   = "KEYS_ONLY"`,
			wantInErr: "table chk-CommitCollect: got",
		},
		{
			name: "index key drifts from store.Specs", file: tables,
			old:       `{ name = "GSI1", hash_key = "GSI1PK", range_key = "GSI1SK" }, # athlete -> user`,
			new:       `{ name = "GSI1", hash_key = "GSI1PK", range_key = "GSI1SORT" }, # athlete -> user`,
			wantInErr: "table chk-CommitCollect: got",
		},
		{
			name: "ttl attribute drifts from store.Specs", file: tables,
			old:       `ttl_attribute = "expiresAtUtc"`,
			new:       `ttl_attribute = "expiresAt"`,
			wantInErr: "table chk-CommitCollectSessions: got",
		},
		{
			name: "pitr off", file: tables,
			old:       `enabled = each.value.pitr`,
			new:       `enabled = false`,
			wantInErr: "PITR:false",
		},
		{
			name: "no bisect on error", file: cc,
			old:       `bisect_batch_on_function_error = true`,
			new:       `bisect_batch_on_function_error = false`,
			wantInErr: "bisect_batch_on_function_error",
		},
		{
			name: "no partial batch failures", file: cc,
			old:       `function_response_types        = ["ReportBatchItemFailures"]`,
			new:       `function_response_types        = []`,
			wantInErr: "function_response_types",
		},
		{
			name: "unbounded retries", file: "modules/commitcollect/variables.tf",
			old:       `maximum_retry_attempts = optional(number, 10)`,
			new:       `maximum_retry_attempts = optional(number, -1)`,
			wantInErr: "maximum_retry_attempts = -1",
		},
		{
			name: "hard-coded batch size", file: cc,
			old:       `batch_size                         = var.projector.batch_size`,
			new:       `batch_size                         = 100`,
			wantInErr: "batch_size must come from a variable",
		},
		{
			name: "filter lets the projector's own writes through", file: cc,
			old:       `writtenBy  = { S = [{ "anything-but" = ["projector"] }] }`,
			new:       `writtenBy  = { S = [{ "anything-but" = ["api"] }] }`,
			wantInErr: "projector filter_criteria",
		},
		{
			name: "no on-failure destination for the stream", file: cc,
			old:       `destination_arn = aws_sqs_queue.projector_dlq.arn`,
			new:       `destination_arn = module.worker.function_arn`,
			wantInErr: "on_failure must send to an SQS queue",
		},
		{
			name: "iterator age alarm missing", file: cc,
			old:       `metric_name         = "IteratorAge"`,
			new:       `metric_name         = "Duration"`,
			wantInErr: "missing alarm: projector stream iterator age",
		},
		{
			name: "truncation alarm missing", file: cc,
			old:       `metric_name         = "MilestonesTruncated"`,
			new:       `metric_name         = "UsersProjected"`,
			wantInErr: "missing alarm: milestones truncated by the guardrail",
		},
		{
			name: "date index missing", file: tables,
			old:       `name      = "LSI1"`,
			new:       `name      = "LSI9"`,
			wantInErr: "table chk-CommitCollect: got",
		},
		{
			name: "date index projects less than the log reads", file: tables,
			old:       `"totalElevationGain", "movingTimeSeconds",`,
			new:       `"movingTimeSeconds",`,
			wantInErr: "table chk-CommitCollect: got",
		},
		{
			name: "date index projects everything", file: tables,
			old:       `projection_type    = "INCLUDE"`,
			new:       `projection_type    = "ALL"`,
			wantInErr: "want INCLUDE",
		},
		{
			name: "throttles alarm missing", file: fn,
			old:       `metric_name         = "Throttles"`,
			new:       `metric_name         = "Invocations"`,
			wantInErr: "missing alarm: function throttles",
		},
		{
			name: "secret in a plain environment variable", file: cc,
			old:       `STRAVA_CLIENT_SECRET_PARAM = var.strava.client_secret_param_arn`,
			new:       `STRAVA_CLIENT_SECRET = var.strava.client_secret_param_arn`,
			wantInErr: "plain secret environment variable",
		},
		{
			name: "x86 build", file: fn,
			old:       `architectures = ["arm64"]`,
			new:       `architectures = ["x86_64"]`,
			wantInErr: "architectures must be",
		},
		{
			name: "functions read another table prefix", file: cc,
			old:       `CC_TABLE_PREFIX = local.table_prefix`,
			new:       `CC_TABLE_PREFIX = var.environment`,
			wantInErr: "CC_TABLE_PREFIX in local.common_env",
		},
		{
			name: "api invokes something else", file: cc,
			old:       `CC_WORKER_FUNCTION        = module.worker.function_name`,
			new:       `CC_WORKER_FUNCTION        = module.projector.function_name`,
			wantInErr: "CC_WORKER_FUNCTION",
		},
		{
			name: "route missing", file: cc,
			old:       `"DELETE /v1/me",`,
			new:       ``,
			wantInErr: "routes: got",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := copyTree(t)
			mutate(t, dir, tt.file, tt.old, tt.new)
			got, err := Check(dir, DefaultLayout)
			if err != nil {
				t.Fatal(err)
			}
			joined := strings.Join(got, "\n")
			if !strings.Contains(joined, tt.wantInErr) {
				t.Fatalf("got violations:\n%s\nwant one mentioning %q", joined, tt.wantInErr)
			}
			t.Logf("check failed as it should:\n%s", joined)
		})
	}
}

func TestFormatCheckFailsWhenUnformatted(t *testing.T) {
	t.Parallel()
	dir := copyTree(t)
	mutate(t, dir, "modules/tables/main.tf", `billing_mode = "PAY_PER_REQUEST"`, `billing_mode     =    "PAY_PER_REQUEST"`)
	ok, files := fmtCheck(t, dir)
	if ok || len(files) == 0 {
		t.Fatalf("got formatted=%v files=%v, want the mutated file reported", ok, files)
	}
	t.Logf("fmt check failed as it should: %v", files)
}
