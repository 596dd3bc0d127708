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
			name: "pending index drifts from tableadmin.Specs", file: tables,
			old:       `range_key          = "PendingSK"`,
			new:       `range_key          = "DueAt"`,
			wantInErr: "table chk-CommitCollectIdempotency: got",
		},
		{
			name: "stream view drifts from tableadmin.Specs", file: tables,
			old:       `stream_view   = "NEW_AND_OLD_IMAGES"`,
			new:       `stream_view   = "KEYS_ONLY"`,
			wantInErr: "table chk-CommitCollect: got",
		},
		{
			name: "index key drifts from tableadmin.Specs", file: tables,
			old:       `range_key          = "GSI1SK"`,
			new:       `range_key          = "GSI1SORT"`,
			wantInErr: "table chk-CommitCollect: got",
		},
		{
			name: "athlete index projects more than the lookup reads", file: tables,
			old:       `non_key_attributes = ["entityType", "schemaVersion", "userId", "athleteId"]`,
			new:       `non_key_attributes = ["entityType", "schemaVersion", "userId", "athleteId", "accessToken"]`,
			wantInErr: "table chk-CommitCollect: got",
		},
		{
			name: "pending index projection drifts from tableadmin.Specs", file: tables,
			old:       `non_key_attributes = ["entityType", "schemaVersion", "correlationId", "createdAtUtc"]`,
			new:       `non_key_attributes = ["entityType", "schemaVersion", "correlationId"]`,
			wantInErr: "table chk-CommitCollectIdempotency: got",
		},
		{
			name: "ttl attribute drifts from tableadmin.Specs", file: tables,
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
			old:       "projection_type    = \"INCLUDE\"\n      non_key_attributes = local_secondary_index",
			new:       "projection_type    = \"ALL\"\n      non_key_attributes = local_secondary_index",
			wantInErr: "want INCLUDE",
		},
		{
			name: "secret in a plain environment variable", file: cc,
			old:       `STRAVA_CLIENT_SECRET_PARAM = var.strava.client_secret_param_arn`,
			new:       `STRAVA_CLIENT_SECRET = var.strava.client_secret_param_arn`,
			wantInErr: "plain secret environment variable",
		},
		{
			name: "required_version older than S3 native locking", file: "envs/example/versions.tf",
			old:       `required_version = ">= 1.11.0"`,
			new:       `required_version = ">= 1.5.0"`,
			wantInErr: "S3 backend native locking (use_lockfile) needs 1.11.0",
		},
		{
			name: "policy as inline JSON", file: fn,
			old:       `policy = data.aws_iam_policy_document.logs.json`,
			new:       `policy = jsonencode({ Version = "2012-10-17", Statement = [] })`,
			wantInErr: "policy must reference an aws_iam_policy_document",
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
