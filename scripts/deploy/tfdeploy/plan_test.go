package tfdeploy

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	tfjson "github.com/hashicorp/terraform-json"
)

// rc builds a managed resource change.
func rc(addr, typ string, actions ...tfjson.Action) *tfjson.ResourceChange {
	return &tfjson.ResourceChange{Address: addr, Type: typ, Mode: tfjson.ManagedResourceMode, Change: &tfjson.Change{Actions: actions}}
}

func plan(rcs ...*tfjson.ResourceChange) *tfjson.Plan { return &tfjson.Plan{ResourceChanges: rcs} }

const (
	table = "module.commitcollect.module.tables.aws_dynamodb_table.this[\"main\"]"
	queue = "module.commitcollect.aws_sqs_queue.projector_dlq"
	// tokenKey seals every Strava token and the athlete-hash key.
	tokenKey = "module.commitcollect.aws_kms_key.tokens[0]"
	fn       = "module.commitcollect.module.api.aws_lambda_function.this"
)

func TestSummarize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		given *tfjson.Plan
		want  Summary
	}{
		{name: "nil plan", given: nil, want: Summary{}},
		{name: "no-op and data reads are not changes", given: plan(
			rc(fn, "aws_lambda_function", tfjson.ActionNoop),
			&tfjson.ResourceChange{Address: "data.aws_iam_policy_document.api", Type: "aws_iam_policy_document", Mode: tfjson.DataResourceMode, Change: &tfjson.Change{Actions: tfjson.Actions{tfjson.ActionRead}}},
		), want: Summary{}},
		{name: "create update destroy", given: plan(
			rc(table, "aws_dynamodb_table", tfjson.ActionCreate),
			rc(fn, "aws_lambda_function", tfjson.ActionUpdate),
			rc(queue, "aws_sqs_queue", tfjson.ActionDelete),
		), want: Summary{
			Creates:  []Change{{table, "aws_dynamodb_table"}},
			Updates:  []Change{{fn, "aws_lambda_function"}},
			Destroys: []Change{{queue, "aws_sqs_queue"}},
		}},
		{name: "replace in either order", given: plan(
			rc(table, "aws_dynamodb_table", tfjson.ActionDelete, tfjson.ActionCreate),
			rc(fn, "aws_lambda_function", tfjson.ActionCreate, tfjson.ActionDelete),
		), want: Summary{Replaces: []Change{{table, "aws_dynamodb_table"}, {fn, "aws_lambda_function"}}}},
		{name: "forget", given: plan(rc(queue, "aws_sqs_queue", tfjson.ActionForget)),
			want: Summary{Forgets: []Change{{queue, "aws_sqs_queue"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Summarize(tt.given)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDangerous(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		given *tfjson.Plan
		want  []Change
	}{
		{name: "table destroyed", given: plan(rc(table, "aws_dynamodb_table", tfjson.ActionDelete)),
			want: []Change{{table, "aws_dynamodb_table"}}},
		{name: "table replaced", given: plan(rc(table, "aws_dynamodb_table", tfjson.ActionDelete, tfjson.ActionCreate)),
			want: []Change{{table, "aws_dynamodb_table"}}},
		{name: "queue replaced create-before-destroy", given: plan(rc(queue, "aws_sqs_queue", tfjson.ActionCreate, tfjson.ActionDelete)),
			want: []Change{{queue, "aws_sqs_queue"}}},
		{name: "token key destroyed", given: plan(rc(tokenKey, "aws_kms_key", tfjson.ActionDelete)),
			want: []Change{{tokenKey, "aws_kms_key"}}},
		{name: "token key replaced", given: plan(rc(tokenKey, "aws_kms_key", tfjson.ActionDelete, tfjson.ActionCreate)),
			want: []Change{{tokenKey, "aws_kms_key"}}},
		{name: "token key policy updated in place is fine", given: plan(rc(tokenKey, "aws_kms_key", tfjson.ActionUpdate)), want: nil},
		{name: "table updated in place is fine", given: plan(rc(table, "aws_dynamodb_table", tfjson.ActionUpdate)), want: nil},
		{name: "function replaced is fine", given: plan(rc(fn, "aws_lambda_function", tfjson.ActionDelete, tfjson.ActionCreate)), want: nil},
		{name: "queue forgotten keeps the queue", given: plan(rc(queue, "aws_sqs_queue", tfjson.ActionForget)), want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Summarize(tt.given).Dangerous()
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestSummaryWrite(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	Summarize(plan(
		rc(table, "aws_dynamodb_table", tfjson.ActionCreate),
		rc(fn, "aws_lambda_function", tfjson.ActionDelete, tfjson.ActionCreate),
	)).Write(&b)
	got := b.String()
	want := "Plan: 1 to create, 0 to update, 1 to replace, 0 to destroy.\n" +
		"  +      " + table + "\n" +
		"  -/+    " + fn + "\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if strings.Contains(got, "forget") {
		t.Fatalf("got %q, want no forget count when nothing is forgotten", got)
	}
}

func TestCounts(t *testing.T) {
	t.Parallel()
	got := Summarize(plan(
		rc(table, "aws_dynamodb_table", tfjson.ActionCreate),
		rc(strings.Replace(table, "main", "audit", 1), "aws_dynamodb_table", tfjson.ActionCreate),
		rc(fn, "aws_lambda_function", tfjson.ActionUpdate),
	)).Counts()
	want := map[string]int{"aws_dynamodb_table": 2}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
