package tfdeploy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-exec/tfexec"
	tfjson "github.com/hashicorp/terraform-json"
)

// fakeTerraform is a Terraform whose plan is given; it remembers whether
// Apply ran and with which plan file, which is the behaviour under test.
type fakeTerraform struct {
	plan      *tfjson.Plan
	outputs   map[string]tfexec.OutputMeta
	planErr   error
	planFile  string
	applied   bool
	applyFile string
}

func (f *fakeTerraform) Init(context.Context, ...tfexec.InitOption) error { return nil }
func (f *fakeTerraform) Plan(context.Context, ...tfexec.PlanOption) (bool, error) {
	return !Summarize(f.plan).Empty(), f.planErr
}
func (f *fakeTerraform) ShowPlanFile(_ context.Context, p string, _ ...tfexec.ShowOption) (*tfjson.Plan, error) {
	f.planFile = p
	return f.plan, nil
}
func (f *fakeTerraform) Apply(_ context.Context, opts ...tfexec.ApplyOption) error {
	f.applied = true
	f.applyFile = f.planFile
	return nil
}
func (f *fakeTerraform) Output(context.Context, ...tfexec.OutputOption) (map[string]tfexec.OutputMeta, error) {
	return f.outputs, nil
}

func str(s string) tfexec.OutputMeta {
	b, _ := json.Marshal(s)
	return tfexec.OutputMeta{Value: b}
}

var outputs = map[string]tfexec.OutputMeta{
	"api_url":                        str("https://abc.execute-api.ap-southeast-2.amazonaws.com"),
	"webhook_callback_url":           str("https://abc.execute-api.ap-southeast-2.amazonaws.com/webhooks/strava"),
	"strava_base_url":                str("https://www.strava.com"),
	"strava_client_id":               str("12345"),
	"strava_client_secret_param_arn": str("arn:aws:ssm:ap-southeast-2:123456789012:parameter/cc/secret"),
	"strava_verify_token_param_arn":  str("arn:aws:ssm:ap-southeast-2:123456789012:parameter/cc/verify"),
	"table_names":                    {Value: json.RawMessage(`{"main":"prod-CommitCollect"}`)},
}

func TestRun(t *testing.T) {
	t.Parallel()
	safe := plan(rc(table, "aws_dynamodb_table", tfjson.ActionCreate), rc(fn, "aws_lambda_function", tfjson.ActionUpdate))
	dropsTable := plan(rc(table, "aws_dynamodb_table", tfjson.ActionDelete, tfjson.ActionCreate))
	tests := []struct {
		name        string
		plan        *tfjson.Plan
		opts        Options
		confirm     bool
		wantErr     error
		wantApplied bool
		wantOut     string
	}{
		{name: "applies after confirmation", plan: safe, confirm: true, wantApplied: true, wantOut: "-F verify_token="},
		{name: "not confirmed", plan: safe, confirm: false, wantErr: ErrAborted},
		{name: "yes skips confirmation", plan: safe, opts: Options{Yes: true}, wantApplied: true, wantOut: "Plan: 1 to create, 1 to update"},
		{name: "plan only", plan: safe, opts: Options{Yes: true, PlanOnly: true}, wantOut: "Plan: 1 to create"},
		{name: "refuses to replace a table", plan: dropsTable, opts: Options{Yes: true}, wantErr: ErrRefused},
		{name: "allow-destroy replaces a table", plan: dropsTable, opts: Options{Yes: true, AllowDestroy: true}, wantApplied: true, wantOut: "WARNING: --allow-destroy"},
		{name: "no changes applies nothing", plan: plan(), opts: Options{Yes: true}, wantOut: "No changes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tf := &fakeTerraform{plan: tt.plan, outputs: outputs}
			var out bytes.Buffer
			d := &Deployer{TF: tf, Out: &out, Confirm: func(string) (bool, error) { return tt.confirm, nil }}
			tt.opts.PlanOut = "/tmp/x.tfplan"
			_, err := d.Run(context.Background(), tt.opts)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got error %v, want %v", err, tt.wantErr)
			}
			if tf.applied != tt.wantApplied {
				t.Fatalf("got applied=%v, want %v", tf.applied, tt.wantApplied)
			}
			if tf.applied && tf.applyFile != tt.opts.PlanOut {
				t.Fatalf("got apply of plan %q, want the saved plan %q", tf.applyFile, tt.opts.PlanOut)
			}
			if !strings.Contains(out.String(), tt.wantOut) {
				t.Fatalf("got output\n%s\nwant it to contain %q", out.String(), tt.wantOut)
			}
		})
	}
}

func TestRunRefusalNamesTheResource(t *testing.T) {
	t.Parallel()
	tf := &fakeTerraform{plan: plan(rc(queue, "aws_sqs_queue", tfjson.ActionDelete))}
	_, err := (&Deployer{TF: tf, Out: &bytes.Buffer{}}).Run(context.Background(), Options{PlanOut: "p", Yes: true})
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), queue) || !strings.Contains(err.Error(), "--allow-destroy") {
		t.Fatalf("got %v, want ErrRefused naming %s and --allow-destroy", err, queue)
	}
}

func TestSubscriptionCommand(t *testing.T) {
	t.Parallel()
	got, err := SubscriptionCommand(outputs)
	if err != nil {
		t.Fatal(err)
	}
	want := `curl -sS -X POST 'https://www.strava.com/api/v3/push_subscriptions' \
  -F client_id='12345' \
  -F client_secret="$(aws ssm get-parameter --with-decryption --name 'arn:aws:ssm:ap-southeast-2:123456789012:parameter/cc/secret' --query Parameter.Value --output text)" \
  -F callback_url='https://abc.execute-api.ap-southeast-2.amazonaws.com/webhooks/strava' \
  -F verify_token="$(aws ssm get-parameter --with-decryption --name 'arn:aws:ssm:ap-southeast-2:123456789012:parameter/cc/verify' --query Parameter.Value --output text)"`
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	_, err = SubscriptionCommand(map[string]tfexec.OutputMeta{"strava_client_id": str("1")})
	if err == nil || !strings.Contains(err.Error(), "webhook_callback_url") {
		t.Fatalf("got %v, want an error naming the missing outputs", err)
	}
}

func TestShellQuote(t *testing.T) {
	t.Parallel()
	tests := []struct{ given, want string }{
		{"plain", "'plain'"},
		{"it's", `'it'\''s'`},
		{"$(rm -rf /)", "'$(rm -rf /)'"},
	}
	for _, tt := range tests {
		if got := shellQuote(tt.given); got != tt.want {
			t.Errorf("shellQuote(%q): got %s, want %s", tt.given, got, tt.want)
		}
	}
}

func TestRequireZips(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "api.zip"), []byte("zip"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := RequireZips(dir, []string{"api", "worker", "projector"})
	if err == nil || !strings.Contains(err.Error(), "worker.zip") || !strings.Contains(err.Error(), "projector.zip") || strings.Contains(err.Error(), "api.zip") {
		t.Fatalf("got %v, want worker.zip and projector.zip reported missing", err)
	}
	if err := RequireZips(dir, []string{"api"}); err != nil {
		t.Fatalf("got %v, want nil", err)
	}
}

func TestArtifactsDirIsRelativeToTheEnvironment(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, env, dist, want string }{
		{"repository layout", "/src/cc/terraform/envs/prod", "/src/cc/dist", "../../../dist"},
		{"another checkout plans the same", "/home/b/cc/terraform/envs/prod", "/home/b/cc/dist", "../../../dist"},
		{"dist inside the environment", "/src/cc/terraform/envs/prod", "/src/cc/terraform/envs/prod/dist", "dist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := ArtifactsDir(tt.env, tt.dist); got != tt.want {
				t.Fatalf("ArtifactsDir(%q, %q) = %q, want %q", tt.env, tt.dist, got, tt.want)
			}
		})
	}
}
