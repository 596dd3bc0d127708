package tfdeploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/terraform-exec/tfexec"
	tfjson "github.com/hashicorp/terraform-json"
)

// Terraform is what the deploy needs from terraform-exec.
type Terraform interface {
	Init(ctx context.Context, opts ...tfexec.InitOption) error
	Plan(ctx context.Context, opts ...tfexec.PlanOption) (bool, error)
	ShowPlanFile(ctx context.Context, planPath string, opts ...tfexec.ShowOption) (*tfjson.Plan, error)
	Apply(ctx context.Context, opts ...tfexec.ApplyOption) error
	Output(ctx context.Context, opts ...tfexec.OutputOption) (map[string]tfexec.OutputMeta, error)
}

var _ Terraform = (*tfexec.Terraform)(nil)

// ErrRefused is returned when the plan would destroy or replace a stateful
// resource and AllowDestroy is not set.
var ErrRefused = errors.New("refused")

// ErrAborted is returned when the operator does not confirm the apply.
var ErrAborted = errors.New("aborted")

// Options are the deploy's settings (the command-line flags).
type Options struct {
	BackendConfig []string // -backend-config values (files or key=value), passed through to init
	VarFiles      []string // -var-file values
	Vars          []string // -var key=value assignments
	PlanOut       string   // where the saved plan is written (then applied)
	AllowDestroy  bool     // let the plan destroy or replace tables and queues
	Yes           bool     // apply without asking (CI)
	PlanOnly      bool     // stop after the summary
}

// Deployer runs one deploy against a Terraform working directory.
type Deployer struct {
	TF  Terraform
	Out io.Writer
	// Confirm asks the operator whether to apply; nil means never confirmed
	// (only Yes applies).
	Confirm func(prompt string) (bool, error)
	// Seed writes the data Terraform does not own into the deployed tables
	// (the model catalog, SeedCatalog), after every apply and after a plan
	// with no changes, so a fresh environment and a catalog edit without
	// infrastructure changes are both seeded. Its failure fails the deploy.
	// nil seeds nothing.
	Seed func(ctx context.Context, outputs map[string]tfexec.OutputMeta) error
}

// Result is what a deploy did.
type Result struct {
	Summary Summary
	Applied bool
	Seeded  bool
	Outputs map[string]tfexec.OutputMeta
}

// Run initialises, plans to opts.PlanOut, prints the summary, refuses
// (ErrRefused) when a stateful resource would be destroyed or replaced
// without AllowDestroy, asks for confirmation (ErrAborted when refused) unless
// Yes, applies exactly the saved plan, prints the outputs, seeds (Seed) and
// prints the Strava push-subscription command. Terraform errors are returned wrapped with the
// step that failed.
func (d *Deployer) Run(ctx context.Context, opts Options) (Result, error) {
	var res Result
	if opts.PlanOut == "" {
		return res, fmt.Errorf("deploy: no plan file given")
	}
	initOpts := []tfexec.InitOption{}
	for _, b := range opts.BackendConfig {
		initOpts = append(initOpts, tfexec.BackendConfig(b))
	}
	fmt.Fprintln(d.Out, "==> terraform init")
	if err := d.TF.Init(ctx, initOpts...); err != nil {
		return res, fmt.Errorf("terraform init: %w", err)
	}
	planOpts := []tfexec.PlanOption{tfexec.Out(opts.PlanOut)}
	for _, f := range opts.VarFiles {
		planOpts = append(planOpts, tfexec.VarFile(f))
	}
	for _, v := range opts.Vars {
		planOpts = append(planOpts, tfexec.Var(v))
	}
	fmt.Fprintf(d.Out, "==> terraform plan -out %s\n", opts.PlanOut)
	if _, err := d.TF.Plan(ctx, planOpts...); err != nil {
		return res, fmt.Errorf("terraform plan: %w", err)
	}
	plan, err := d.TF.ShowPlanFile(ctx, opts.PlanOut)
	if err != nil {
		return res, fmt.Errorf("terraform show %s: %w", opts.PlanOut, err)
	}
	res.Summary = Summarize(plan)
	res.Summary.Write(d.Out)

	if bad := res.Summary.Dangerous(); len(bad) > 0 {
		if !opts.AllowDestroy {
			return res, fmt.Errorf("plan would destroy or replace stateful resources (%s); re-run with --allow-destroy if that is intended: %w", addresses(bad), ErrRefused)
		}
		fmt.Fprintf(d.Out, "WARNING: --allow-destroy: %s will be destroyed or replaced; their data is lost.\n", addresses(bad))
	}
	if opts.PlanOnly {
		return res, nil
	}
	if !res.Summary.Empty() {
		if !opts.Yes {
			ok := false
			if d.Confirm != nil {
				if ok, err = d.Confirm("Apply this plan? Only 'yes' applies: "); err != nil {
					return res, fmt.Errorf("confirm: %w", err)
				}
			}
			if !ok {
				return res, fmt.Errorf("apply not confirmed; the saved plan %s is left for inspection: %w", opts.PlanOut, ErrAborted)
			}
		}
		fmt.Fprintf(d.Out, "==> terraform apply %s\n", opts.PlanOut)
		if err := d.TF.Apply(ctx, tfexec.DirOrPlan(opts.PlanOut)); err != nil {
			return res, fmt.Errorf("terraform apply: %w", err)
		}
		res.Applied = true
	} else {
		fmt.Fprintln(d.Out, "No changes: nothing to apply.")
	}

	res.Outputs, err = d.TF.Output(ctx)
	if err != nil {
		return res, fmt.Errorf("terraform output: %w", err)
	}
	WriteOutputs(d.Out, res.Outputs)
	if d.Seed != nil {
		fmt.Fprintln(d.Out, "==> seeding the model catalog")
		if err := d.Seed(ctx, res.Outputs); err != nil {
			return res, fmt.Errorf("seed: %w", err)
		}
		res.Seeded = true
	}
	if cmd, err := SubscriptionCommand(res.Outputs); err == nil {
		fmt.Fprintf(d.Out, "\nCreate the Strava push subscription (once per environment), then set\nstrava.subscription_id to the returned id and deploy again:\n\n%s\n", cmd)
	} else {
		fmt.Fprintf(d.Out, "\nNo Strava push-subscription command: %v\n", err)
	}
	return res, nil
}

// WriteOutputs prints the non-sensitive outputs, sorted by name.
func WriteOutputs(w io.Writer, outs map[string]tfexec.OutputMeta) {
	names := make([]string, 0, len(outs))
	for n := range outs {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "\nOutputs:")
	for _, n := range names {
		o := outs[n]
		val := string(o.Value)
		var s string
		if json.Unmarshal(o.Value, &s) == nil {
			val = s
		}
		if o.Sensitive {
			val = "(sensitive)"
		}
		fmt.Fprintf(w, "  %s = %s\n", n, val)
	}
}

// SubscriptionCommand returns the curl command that creates the Strava push
// subscription for the deployed callback URL. Secrets are not printed: the
// command reads them from their SSM parameters with the AWS CLI. It returns
// an error naming the missing outputs when the environment does not export
// them.
func SubscriptionCommand(outs map[string]tfexec.OutputMeta) (string, error) {
	get := func(name string) (string, bool) {
		o, ok := outs[name]
		if !ok {
			return "", false
		}
		var s string
		if err := json.Unmarshal(o.Value, &s); err != nil || s == "" {
			return "", false
		}
		return s, true
	}
	names := []string{"strava_base_url", "strava_client_id", "strava_client_secret_param_arn", "webhook_callback_url", "strava_verify_token_param_arn"}
	vals := map[string]string{}
	var missing []string
	for _, n := range names {
		v, ok := get(n)
		if !ok {
			missing = append(missing, n)
		}
		vals[n] = v
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("outputs %s missing", strings.Join(missing, ", "))
	}
	ssm := func(arn string) string {
		return `"$(aws ssm get-parameter --with-decryption --name ` + shellQuote(arn) + ` --query Parameter.Value --output text)"`
	}
	return strings.Join([]string{
		"curl -sS -X POST " + shellQuote(strings.TrimRight(vals["strava_base_url"], "/")+"/api/v3/push_subscriptions") + ` \`,
		"  -F client_id=" + shellQuote(vals["strava_client_id"]) + ` \`,
		"  -F client_secret=" + ssm(vals["strava_client_secret_param_arn"]) + ` \`,
		"  -F callback_url=" + shellQuote(vals["webhook_callback_url"]) + ` \`,
		"  -F verify_token=" + ssm(vals["strava_verify_token_param_arn"]),
	}, "\n"), nil
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// RequireZips checks that dir holds <name>.zip for every name, reporting
// every missing one together.
func RequireZips(dir string, names []string) error {
	var missing []string
	for _, n := range names {
		if st, err := os.Stat(filepath.Join(dir, n+".zip")); err != nil || st.IsDir() {
			missing = append(missing, filepath.Join(dir, n+".zip"))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing Lambda zips %s (build them with make build, or drop --skip-build)", strings.Join(missing, ", "))
	}
	return nil
}

// ArtifactsDir returns the artifacts folder as Terraform should see it:
// relative to the environment root envDir (where Terraform runs), so the
// checkout's location never lands in the plan or state and two checkouts plan
// the same. It falls back to distAbs when no relative path exists.
func ArtifactsDir(envDir, distAbs string) string {
	envAbs, err := filepath.Abs(envDir)
	if err != nil {
		return distAbs
	}
	rel, err := filepath.Rel(envAbs, distAbs)
	if err != nil {
		return distAbs
	}
	return filepath.ToSlash(rel)
}
