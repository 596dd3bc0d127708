package tfdeploy

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-exec/tfexec"
)

// offlineEnv makes a missing provider a failure instead of a skip; make
// tf-check sets it.
const offlineEnv = "CC_TF_OFFLINE_PLAN"

// offlineOverride turns the example environment into one that plans without
// AWS: local state instead of the engineer's backend, dummy credentials and
// no calls to STS or the metadata service. Terraform merges *_override.tf
// files over the root module.
const offlineOverride = `terraform {
  backend "local" {}
}

provider "aws" {
  region                      = "ap-southeast-2"
  access_key                  = "offline"
  secret_key                  = "offline"
  skip_credentials_validation = true
  skip_requesting_account_id  = true
  skip_metadata_api_check     = true
  skip_region_validation      = true
}
`

// wantCreates is what the example environment creates, read from the
// configuration: 4 tables; 4 functions each with a role, 2 inline policies
// (least privilege + logs), a log group and errors/throttles alarms; 2 DLQs
// with depth alarms; the projector iterator-age and truncation alarms, stream
// mapping and the worker's async config; the sweeper's schedule (rule,
// target, invoke permission) and outbox backlog alarm; the HTTP API with its
// integration, 12 routes, stage, access-log group and invoke permission.
var wantCreates = map[string]int{
	"aws_dynamodb_table":                      4,
	"aws_lambda_function":                     4,
	"aws_iam_role":                            4,
	"aws_iam_role_policy":                     8,
	"aws_cloudwatch_log_group":                5,
	"aws_cloudwatch_metric_alarm":             13,
	"aws_sqs_queue":                           2,
	"aws_lambda_event_source_mapping":         1,
	"aws_lambda_function_event_invoke_config": 1,
	"aws_cloudwatch_event_rule":               1,
	"aws_cloudwatch_event_target":             1,
	"aws_apigatewayv2_api":                    1,
	"aws_apigatewayv2_integration":            1,
	"aws_apigatewayv2_route":                  12,
	"aws_apigatewayv2_stage":                  1,
	"aws_lambda_permission":                   2,
}

// providerInstalled reports the hashicorp/aws binaries in Terraform's implied
// local mirror (~/.terraform.d/plugins), where make tf-provider puts them.
func providerInstalled() []string {
	home, err := os.UserHomeDir()
	if err != nil {
		return nil
	}
	found, _ := filepath.Glob(filepath.Join(home, ".terraform.d", "plugins", "registry.terraform.io", "hashicorp", "aws", "*",
		runtime.GOOS+"_"+runtime.GOARCH, "terraform-provider-aws_v*"))
	return found
}

// TestOfflinePlan drives the deploy through terraform-exec as far as an
// offline plan of terraform/envs/example and its summary: init (local
// mirror), validate, plan -out, show -json, the stateful-resource check.
func TestOfflinePlan(t *testing.T) {
	providers := providerInstalled()
	if len(providers) == 0 {
		if os.Getenv(offlineEnv) != "" {
			t.Fatalf("%s is set but the hashicorp/aws provider is not installed under ~/.terraform.d/plugins: run make tf-provider (about 50 minutes and 12 GB once)", offlineEnv)
		}
		t.Skipf("needs the hashicorp/aws provider binary, which is not installed (make tf-provider builds it; make tf-check runs this test with %s=1)", offlineEnv)
	}
	t.Logf("provider: %v", providers)
	bin, err := exec.LookPath("terraform")
	if err != nil {
		t.Fatalf("terraform not on PATH: %v", err)
	}

	root := t.TempDir()
	copyDir(t, "../../../terraform", filepath.Join(root, "terraform"))
	env := filepath.Join(root, "terraform", "envs", "example")
	if err := os.WriteFile(filepath.Join(env, "offline_override.tf"), []byte(offlineOverride), 0o644); err != nil {
		t.Fatal(err)
	}
	dist := filepath.Join(root, "dist")
	if err := os.MkdirAll(dist, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"api", "worker", "projector"} {
		// The plan only hashes the zips; their content does not matter here.
		if err := os.WriteFile(filepath.Join(dist, n+".zip"), []byte("placeholder "+n), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	tf, err := tfexec.NewTerraform(env, bin)
	if err != nil {
		t.Fatal(err)
	}
	var tfLog bytes.Buffer
	tf.SetStderr(&tfLog)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	if err := tf.Init(ctx); err != nil {
		t.Fatalf("terraform init: %v\n%s", err, tfLog.String())
	}
	val, err := tf.Validate(ctx)
	if err != nil {
		t.Fatalf("terraform validate: %v", err)
	}
	for _, d := range val.Diagnostics {
		t.Logf("validate %s: %s: %s", d.Severity, d.Summary, d.Detail)
	}
	if !val.Valid || val.ErrorCount > 0 {
		t.Fatalf("terraform validate: %d errors", val.ErrorCount)
	}

	var out bytes.Buffer
	d := &Deployer{TF: tf, Out: &out}
	res, err := d.Run(ctx, Options{
		VarFiles: []string{filepath.Join(env, "example.tfvars")},
		Vars:     []string{"artifacts_dir=" + dist},
		PlanOut:  filepath.Join(root, "example.tfplan"),
		PlanOnly: true,
	})
	t.Logf("deploy --plan-only:\n%s", out.String())
	if err != nil {
		t.Fatalf("deploy --plan-only: %v\n%s", err, tfLog.String())
	}
	s := res.Summary
	if len(s.Updates)+len(s.Replaces)+len(s.Destroys) > 0 {
		t.Fatalf("got updates/replaces/destroys on an empty state: %+v", s)
	}
	got := s.Counts()
	var lines []string
	total := 0
	for typ, n := range got {
		lines = append(lines, fmt.Sprintf("%-42s %d", typ, n))
		total += n
	}
	sort.Strings(lines)
	t.Logf("planned resources (%d):\n  %s", total, strings.Join(lines, "\n  "))
	if !reflect.DeepEqual(got, wantCreates) {
		t.Fatalf("got creates %v, want %v", got, wantCreates)
	}
}

// copyDir copies a folder tree, leaving out .terraform working folders.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
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
}
