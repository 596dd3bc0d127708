// Command deploy builds the Lambda zips and deploys an environment root with
// Terraform: init (your backend config), plan to a file, a summary of that
// plan, a refusal when a table, a queue or the token key would be destroyed or replaced,
// confirmation, apply of exactly that plan, then the outputs, the model
// catalog seeded into the deployed main table (idempotent) and the Strava
// push-subscription command.
//
//	go run ./scripts/deploy --env terraform/envs/example \
//	    --backend-config backend.hcl --var-file prod.tfvars
//
// --skip-build reuses dist/{api,worker,projector,sweeper}.zip; --plan-only
// stops after the plan and its summary (CI); --yes applies without asking
// (CI). The summary lists creates, updates, replacements and destroys read
// from the saved plan as JSON; the command refuses (exit 2) when a DynamoDB
// table, an SQS queue or the token KMS key would be destroyed or replaced
// unless --allow-destroy.
// After the apply it prints the outputs (API URL, webhook callback URL, table
// names, stream ARN, DLQ URLs) and the exact curl that creates the Strava
// push subscription (secrets read from SSM by the command, never printed).
// Put the returned subscription id in strava.subscription_id and deploy
// again: until then the api has no STRAVA_SUBSCRIPTION_ID and refuses every
// event. versions.tf pins hashicorp/aws >= 6.37.0, < 7.0.0 (6.37 is the first
// release whose global_secondary_index.key_schema works).
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/hashicorp/terraform-exec/tfexec"

	"github.com/commitcollect/backend/scripts/deploy/tfdeploy"
	"github.com/commitcollect/backend/scripts/lambdabuild"
)

// multi is a repeatable string flag.
type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// flags are the command's flags.
type flags struct {
	env, planOut, dist, handlers, tfBin    string
	backendCfg, varFiles, vars             multi
	allowDestroy, yes, planOnly, skipBuild bool
}

// parseFlags reads the flags; it returns the exit status when the command
// ends here (help: 0, a bad flag: 1), else -1.
func parseFlags(args []string, stderr io.Writer) (*flags, int) {
	fs := flag.NewFlagSet("deploy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := &flags{}
	fs.StringVar(&f.env, "env", "terraform/envs/example", "environment root `dir` to deploy (a Terraform root module)")
	fs.StringVar(&f.planOut, "plan-out", "", "`file` for the saved plan (default <env>/commitcollect.tfplan); the apply uses exactly this plan")
	fs.BoolVar(&f.allowDestroy, "allow-destroy", false, "allow the plan to destroy or replace stateful resources (DynamoDB tables, SQS queues, the token KMS key); refused otherwise")
	fs.BoolVar(&f.yes, "yes", false, "apply without asking for confirmation (CI)")
	fs.BoolVar(&f.planOnly, "plan-only", false, "stop after the plan summary (and the stateful-resource check); apply nothing")
	fs.BoolVar(&f.skipBuild, "skip-build", false, "do not build the Lambda zips; use the ones already in --dist")
	fs.StringVar(&f.dist, "dist", "dist", "`dir` for the Lambda zips (api.zip, worker.zip, projector.zip, sweeper.zip), passed as var artifacts_dir")
	fs.StringVar(&f.handlers, "handlers", "handlers", "`dir` holding one package per Lambda")
	fs.StringVar(&f.tfBin, "terraform", "", "terraform binary `path` (default: terraform on PATH)")
	fs.Var(&f.backendCfg, "backend-config", "backend configuration `file or key=value` passed to terraform init (repeatable)")
	fs.Var(&f.varFiles, "var-file", "Terraform variables `file` (repeatable)")
	fs.Var(&f.vars, "var", "Terraform variable `key=value` (repeatable)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: go run ./scripts/deploy [flags]

Builds the Lambda zips, runs terraform init (with your --backend-config),
terraform plan -out, prints what the plan creates, updates, replaces and
destroys, refuses when a DynamoDB table, an SQS queue or the token KMS key
would be destroyed or replaced (unless --allow-destroy), asks for confirmation (unless --yes),
applies exactly the saved plan, prints the outputs, seeds the model catalog
into the deployed main table (idempotent) and prints the Strava
push-subscription command.

Exit status: 0 deployed (or planned with --plan-only), 1 failed,
2 refused (stateful resources) or not confirmed.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, 0
		}
		return nil, 1
	}
	return f, -1

}

// run is the command with its arguments and streams; it returns the exit
// status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	f, code := parseFlags(args, stderr)
	if f == nil {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err := f.deploy(ctx, stdin, stdout, stderr)
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "deploy:", err)
	if errors.Is(err, tfdeploy.ErrRefused) || errors.Is(err, tfdeploy.ErrAborted) {
		return 2
	}
	return 1
}

// deploy builds the zips (unless skipped) and runs the deployer.
func (f *flags) deploy(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) error {
	distAbs, err := filepath.Abs(f.dist)
	if err != nil {
		return err
	}
	if !f.skipBuild {
		fmt.Fprintln(stdout, "==> building Lambda zips into", distAbs)
		if _, err := lambdabuild.BuildAll(f.handlers, distAbs); err != nil {
			return err
		}
	}
	if err := tfdeploy.RequireZips(distAbs, []string{"api", "worker", "projector", "sweeper"}); err != nil {
		return err
	}
	bin := f.tfBin
	if bin == "" {
		if bin, err = exec.LookPath("terraform"); err != nil {
			return fmt.Errorf("terraform not found on PATH: %w", err)
		}
	}
	tf, err := tfexec.NewTerraform(f.env, bin)
	if err != nil {
		return err
	}
	tf.SetStdout(stdout)
	tf.SetStderr(stderr)
	out := f.planOut
	if out == "" {
		out = filepath.Join(f.env, "commitcollect.tfplan")
	}
	if out, err = filepath.Abs(out); err != nil {
		return err
	}
	_, err = deployer(tf, stdin, stdout).Run(ctx, tfdeploy.Options{
		BackendConfig: absFiles(f.backendCfg),
		VarFiles:      absFiles(f.varFiles),
		Vars:          append([]string{"artifacts_dir=" + tfdeploy.ArtifactsDir(f.env, distAbs)}, f.vars...),
		PlanOut:       out,
		AllowDestroy:  f.allowDestroy,
		Yes:           f.yes,
		PlanOnly:      f.planOnly,
	})
	return err
}

// deployer asks for confirmation on stdin and seeds the catalog into the
// deployed main table.
func deployer(tf *tfexec.Terraform, stdin io.Reader, stdout io.Writer) *tfdeploy.Deployer {
	in := bufio.NewReader(stdin)
	return &tfdeploy.Deployer{
		TF:  tf,
		Out: stdout,
		Confirm: func(prompt string) (bool, error) {
			fmt.Fprint(stdout, prompt)
			line, err := in.ReadString('\n')
			if err != nil && line == "" {
				return false, err
			}
			return strings.TrimSpace(line) == "yes", nil
		},
		Seed: func(ctx context.Context, outs map[string]tfexec.OutputMeta) error {
			t, err := tfdeploy.TargetFromOutputs(outs)
			if err != nil {
				return err
			}
			cfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(t.Region))
			if err != nil {
				return fmt.Errorf("load aws config: %w", err)
			}
			n, err := tfdeploy.SeedCatalog(ctx, dynamodb.NewFromConfig(cfg), t.Tables)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "model catalog: %d items changed in %s (%s)\n", n, t.Tables.Main, t.Region)
			return nil
		},
	}
}

// absFiles makes file arguments absolute (terraform runs in the environment
// folder); key=value arguments pass unchanged.
func absFiles(args []string) []string {
	out := make([]string, 0, len(args))
	for _, p := range args {
		if strings.Contains(p, "=") {
			out = append(out, p)
			continue
		}
		if a, err := filepath.Abs(p); err == nil {
			p = a
		}
		out = append(out, p)
	}
	return out
}
