package tfdeploy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-exec/tfexec"
	tfjson "github.com/hashicorp/terraform-json"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/catalog"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/test/dynamolocal"
)

func TestMain(m *testing.M) { dynamolocal.Main(m) }

func TestRunSeedsTheCatalog(t *testing.T) {
	t.Parallel()
	safe := plan(rc(fn, "aws_lambda_function", tfjson.ActionUpdate))
	boom := errors.New("boom")
	tests := []struct {
		name       string
		plan       *tfjson.Plan
		opts       Options
		seedErr    error
		wantSeeded bool
		wantErr    error
	}{
		{name: "after apply", plan: safe, opts: Options{Yes: true}, wantSeeded: true},
		{name: "with no changes (a catalog edit needs no infrastructure change)", plan: plan(), opts: Options{Yes: true}, wantSeeded: true},
		{name: "not on plan only", plan: safe, opts: Options{Yes: true, PlanOnly: true}},
		{name: "not when the apply is not confirmed", plan: safe, wantErr: ErrAborted},
		{name: "a failed seed fails the deploy", plan: safe, opts: Options{Yes: true}, seedErr: boom, wantSeeded: true, wantErr: boom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got map[string]tfexec.OutputMeta
			d := &Deployer{TF: &fakeTerraform{plan: tt.plan, outputs: outputs}, Out: &bytes.Buffer{},
				Seed: func(_ context.Context, outs map[string]tfexec.OutputMeta) error { got = outs; return tt.seedErr }}
			tt.opts.PlanOut = "p"
			_, err := d.Run(context.Background(), tt.opts)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got error %v, want %v", err, tt.wantErr)
			}
			if (got != nil) != tt.wantSeeded {
				t.Fatalf("got seeded=%v, want %v", got != nil, tt.wantSeeded)
			}
			if got != nil && string(got["table_names"].Value) != string(outputs["table_names"].Value) {
				t.Fatalf("seed got outputs %v, want the applied outputs", got)
			}
		})
	}
}

func TestTargetFromOutputs(t *testing.T) {
	t.Parallel()
	names := tfexec.OutputMeta{Value: json.RawMessage(`{"main":"prod-CommitCollect","sessions":"prod-CommitCollectSessions","audit":"prod-CommitCollectAudit","idempotency":"prod-CommitCollectIdempotency"}`)}
	arn := str("arn:aws:dynamodb:eu-west-1:123456789012:table/prod-CommitCollect/stream/2026-01-01T00:00:00.000")
	got, err := TargetFromOutputs(map[string]tfexec.OutputMeta{"table_names": names, "stream_arn": arn})
	if err != nil {
		t.Fatal(err)
	}
	want := Target{Tables: dynamo.TableNames("prod-"), Region: "eu-west-1"}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for _, tt := range []struct {
		name string
		outs map[string]tfexec.OutputMeta
		want string
	}{
		{"no table names", map[string]tfexec.OutputMeta{"stream_arn": arn}, "table_names is missing"},
		{"no main table", map[string]tfexec.OutputMeta{"table_names": {Value: json.RawMessage(`{}`)}, "stream_arn": arn}, "no main table"},
		{"no stream", map[string]tfexec.OutputMeta{"table_names": names}, "stream_arn is missing"},
		{"not an ARN", map[string]tfexec.OutputMeta{"table_names": names, "stream_arn": str("x")}, "not a stream ARN"},
	} {
		if _, err := TargetFromOutputs(tt.outs); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
}

// A fresh deployment has empty tables: the seed makes every catalog model
// usable by POST /v1/milestones, and a second deploy changes nothing.
func TestSeedCatalogIntoFreshTablesIsIdempotent(t *testing.T) {
	t.Parallel()
	db, _ := dynamolocal.Clients(t)
	tables := dynamolocal.MustCreateTables(t, db)
	ctx := context.Background()
	st := store.New(db, tables)
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Milestones.ModelMeta(ctx, cat.Models[0].ModelID); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("fresh tables: ModelMeta = %v, want ErrNotFound", err)
	}
	n, err := SeedCatalog(ctx, db, tables)
	if err != nil || n == 0 {
		t.Fatalf("first seed: %d items changed, %v; want > 0, nil", n, err)
	}
	for _, m := range cat.Models {
		meta, err := st.Milestones.ModelMeta(ctx, m.ModelID)
		if err != nil || meta.PartCount != m.PartCount {
			t.Fatalf("model %s after seed: %+v, %v; want partCount %d", m.ModelID, meta, err, m.PartCount)
		}
		parts, err := st.Milestones.ModelParts(ctx, m.ModelID)
		if err != nil || len(parts) != m.PartCount {
			t.Fatalf("model %s parts after seed: %d, %v; want %d", m.ModelID, len(parts), err, m.PartCount)
		}
	}
	if n, err := SeedCatalog(ctx, db, tables); err != nil || n != 0 {
		t.Fatalf("second seed: %d items changed, %v; want 0, nil", n, err)
	}
}
