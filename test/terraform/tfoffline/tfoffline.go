// Package tfoffline runs Terraform on a copy of terraform/ with the
// schema-only hashicorp/aws provider (test/terraform/schemaprovider), so
// tests can validate, plan and apply envs/example without a registry or AWS.
//
// How: the provider is built once per test process into
// .cache/tfprovider/ and placed both in a filesystem mirror
// (registry.terraform.io/hashicorp/aws/6.47.0/<os>_<arch>/) and under a
// dev_overrides entry of a CLI configuration passed as TF_CLI_CONFIG_FILE.
// dev_overrides alone is not enough: `terraform init` still asks the
// registry for the overridden provider and fails offline, so the mirror lets
// init finish (it then writes a .terraform.lock.hcl, but only in the
// temporary copy; the repository never gets one), and dev_overrides makes
// every later command run the freshly built binary without checksum checks.
// The copy gets dist/{api,worker,projector}.zip placeholders where the
// example environment looks for them and an override file with a local
// backend (the repository's partial s3 backend needs an engineer's bucket).
//
// Shell equivalent:
//
//	go build -o .cache/tfprovider/mirror/registry.terraform.io/hashicorp/aws/6.47.0/linux_amd64/terraform-provider-aws_v6.47.0 ./test/terraform/schemaprovider/cmd/terraform-provider-aws
//	TF_CLI_CONFIG_FILE=cli.tfrc terraform init -backend=false && terraform validate && terraform init && terraform plan -var-file=example.tfvars
package tfoffline

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-exec/tfexec"

	"github.com/commitcollect/backend/scripts/lambdabuild"
	tfjson "github.com/hashicorp/terraform-json"

	"github.com/commitcollect/backend/test/terraform/schemaprovider"
)

// ProviderVersion is the version the mirror advertises (the schema's).
const ProviderVersion = "6.47.0"

// Example is the environment root planned by the tests, relative to terraform/.
const Example = "envs/example"

// Functions are the Lambda artifacts the example environment deploys.
var Functions = []string{"api", "worker", "projector", "sweeper"}

// BackendOverride replaces the environment's partial s3 backend with a local
// one in the temporary copy (Terraform merges *_override.tf files).
const BackendOverride = `terraform {
  backend "local" {}
}
`

// RepoRoot returns the folder holding go.mod, searching upwards from the
// working directory.
func RepoRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}

var (
	buildOnce sync.Once
	cliConfig string
	buildErr  error
)

// CLIConfig builds the provider once per process and returns the path of a
// Terraform CLI configuration that uses it (dev_overrides plus a filesystem
// mirror, see the package doc).
func CLIConfig(tb testing.TB) string {
	tb.Helper()
	root := RepoRoot(tb)
	buildOnce.Do(func() { cliConfig, buildErr = build(root) })
	if buildErr != nil {
		tb.Fatalf("build the schema-only provider: %v", buildErr)
	}
	return cliConfig
}

func build(root string) (string, error) {
	base := filepath.Join(root, ".cache", "tfprovider")
	mirror := filepath.Join(base, "mirror")
	pkgDir := filepath.Join(mirror, "registry.terraform.io", "hashicorp", "aws", ProviderVersion, runtime.GOOS+"_"+runtime.GOARCH)
	if err := os.MkdirAll(pkgDir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(pkgDir, "terraform-provider-aws_v"+ProviderVersion)
	// Test binaries of several packages may build at once: each builds to its
	// own file and renames it into place (atomic; running providers keep
	// their inode). Go's build cache makes a rebuild a link step.
	tmp := fmt.Sprintf("%s.%d.tmp", bin, os.Getpid())
	cmd := exec.Command("go", "build", "-o", tmp, "./test/terraform/schemaprovider/cmd/terraform-provider-aws")
	cmd.Dir = root
	cmd.Env = lambdabuild.WithoutRace(os.Environ()) // a tool: nothing of ours to race in it
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	cfg := fmt.Sprintf(`provider_installation {
  dev_overrides {
    "hashicorp/aws" = %q
  }
  filesystem_mirror {
    path    = %q
    include = ["registry.terraform.io/hashicorp/aws"]
  }
}
`, pkgDir, mirror)
	path := filepath.Join(base, "cli.tfrc")
	tmpCfg := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	if err := os.WriteFile(tmpCfg, []byte(cfg), 0o644); err != nil {
		return "", err
	}
	return path, os.Rename(tmpCfg, path)
}

// Workspace is a temporary copy of terraform/ (plus placeholder artifacts in
// dist/ next to it) with Terraform pointed at one environment root.
type Workspace struct {
	Root string // the copy's top folder: Root/terraform, Root/dist
	Dir  string // the environment root inside the copy
	TF   *tfexec.Terraform
	Log  *bytes.Buffer // Terraform's stderr
}

// Copy copies the repository's terraform/ into a temporary folder, lets
// mutate change it (nil for none), adds dist/ placeholders and the local
// backend override, and returns a workspace on envs/example.
func Copy(tb testing.TB, mutate func(terraformDir string)) *Workspace {
	tb.Helper()
	repo := RepoRoot(tb)
	root := tb.TempDir()
	CopyDir(tb, filepath.Join(repo, "terraform"), filepath.Join(root, "terraform"))
	if mutate != nil {
		mutate(filepath.Join(root, "terraform"))
	}
	dist := filepath.Join(root, "dist")
	if err := os.MkdirAll(dist, 0o755); err != nil {
		tb.Fatal(err)
	}
	for _, n := range Functions {
		// Only their hash ends up in the plan; the content does not matter.
		if err := os.WriteFile(filepath.Join(dist, n+".zip"), []byte("placeholder "+n), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	dir := filepath.Join(root, "terraform", filepath.FromSlash(Example))
	if err := os.WriteFile(filepath.Join(dir, "offline_override.tf"), []byte(BackendOverride), 0o644); err != nil {
		tb.Fatal(err)
	}
	return &Workspace{Root: root, Dir: dir, TF: NewTerraform(tb, dir, UsedTypes(tb, filepath.Join(root, "terraform"))), Log: &bytes.Buffer{}}
}

var typeDecl = regexp.MustCompile(`(?m)^\s*(resource|data)\s+"(aws_[a-z0-9_]+)"`)

// UsedTypes lists the aws resource and data source types declared under dir
// ("resource.aws_x", "data.aws_y"), for schemaprovider.TypesEnv.
func UsedTypes(tb testing.TB, dir string) []string {
	tb.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".tf") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range typeDecl.FindAllStringSubmatch(string(b), -1) {
			seen[m[1]+"."+m[2]] = true
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	out := make([]string, 0, len(seen))
	for t := range seen {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// NewTerraform returns terraform-exec on dir with the offline CLI
// configuration in its environment, the provider limited to types (all when
// empty).
func NewTerraform(tb testing.TB, dir string, types []string) *tfexec.Terraform {
	tb.Helper()
	bin, err := exec.LookPath("terraform")
	if err != nil {
		tb.Fatalf("terraform CLI not on PATH (required, see README): %v", err)
	}
	tf, err := tfexec.NewTerraform(dir, bin)
	if err != nil {
		tb.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "TF_") {
			continue // the test decides Terraform's settings
		}
		env[k] = v
	}
	env["TF_CLI_CONFIG_FILE"] = CLIConfig(tb)
	if len(types) > 0 {
		env[schemaprovider.TypesEnv] = strings.Join(types, ",")
	}
	if err := tf.SetEnv(env); err != nil {
		tb.Fatal(err)
	}
	return tf
}

// Context is the time budget of one Terraform command sequence.
func Context(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	tb.Cleanup(cancel)
	return ctx
}

// InitNoBackend runs `terraform init -backend=false` (modules and the
// mirrored provider).
func (w *Workspace) InitNoBackend(tb testing.TB) {
	tb.Helper()
	w.TF.SetStderr(w.Log)
	if err := w.TF.Init(Context(tb), tfexec.Backend(false)); err != nil {
		tb.Fatalf("terraform init -backend=false: %v\n%s", err, w.Log)
	}
}

// Validate runs `terraform validate` and returns its JSON result.
func (w *Workspace) Validate(tb testing.TB) *tfjson.ValidateOutput {
	tb.Helper()
	out, err := w.TF.Validate(Context(tb))
	if err != nil {
		tb.Fatalf("terraform validate: %v", err)
	}
	return out
}

// Plan initialises with the local backend, plans with example.tfvars (plus
// vars, "name=value") into Root/example.tfplan and returns the plan's JSON.
func (w *Workspace) Plan(tb testing.TB, vars ...string) (*tfjson.Plan, string) {
	tb.Helper()
	planFile := w.PlanFile(tb, vars...)
	plan, err := w.TF.ShowPlanFile(Context(tb), planFile)
	if err != nil {
		tb.Fatalf("terraform show -json %s: %v", planFile, err)
	}
	return plan, planFile
}

// PlanFile is Plan without reading the plan back: the saved plan's path,
// for a test that only applies it (one Terraform command fewer).
func (w *Workspace) PlanFile(tb testing.TB, vars ...string) string {
	tb.Helper()
	ctx := Context(tb)
	w.TF.SetStderr(w.Log)
	if err := w.TF.Init(ctx); err != nil {
		tb.Fatalf("terraform init: %v\n%s", err, w.Log)
	}
	planFile := filepath.Join(w.Root, "example.tfplan")
	opts := []tfexec.PlanOption{tfexec.Out(planFile), tfexec.VarFile(filepath.Join(w.Dir, "example.tfvars"))}
	for _, v := range vars {
		opts = append(opts, tfexec.Var(v))
	}
	if _, err := w.TF.Plan(ctx, opts...); err != nil {
		tb.Fatalf("terraform plan: %v\n%s", err, w.Log)
	}
	return planFile
}

// Apply applies a saved plan with the schema-only provider (which stores
// nothing anywhere: it fills what AWS would compute, see schemaprovider) and
// returns the state's JSON, where values unknown at plan time (ARNs, the
// policy documents that name them) are resolved.
func (w *Workspace) Apply(tb testing.TB, planFile string) *tfjson.State {
	tb.Helper()
	ctx := Context(tb)
	if err := w.TF.Apply(ctx, tfexec.DirOrPlan(planFile)); err != nil {
		tb.Fatalf("terraform apply %s: %v\n%s", planFile, err, w.Log)
	}
	st, err := w.TF.Show(ctx)
	if err != nil {
		tb.Fatalf("terraform show -json: %v", err)
	}
	return st
}

// CopyDir copies a folder tree, leaving out .terraform working folders and
// lock files.
func CopyDir(tb testing.TB, src, dst string) {
	tb.Helper()
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
		if d.Name() == ".terraform.lock.hcl" || strings.HasSuffix(d.Name(), ".tfstate") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		tb.Fatal(err)
	}
}
