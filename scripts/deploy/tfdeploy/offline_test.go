package tfdeploy

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/commitcollect/backend/test/terraform/tfoffline"
)

// wantAtLeast are the resources the example environment must create (other
// resources may join without touching this test; test/terraform checks what
// they are): the four tables, four functions (api, worker, projector,
// sweeper) with a role each, the stream mapping, the worker's async config
// and the sweeper's and the reconciliation's schedules (rule, target each).
var wantAtLeast = map[string]int{
	"aws_dynamodb_table":                      4,
	"aws_lambda_function":                     4,
	"aws_iam_role":                            4,
	"aws_lambda_event_source_mapping":         1,
	"aws_lambda_function_event_invoke_config": 1,
	"aws_cloudwatch_event_rule":               2,
	"aws_cloudwatch_event_target":             2,
}

// TestOfflinePlan drives the deploy through terraform-exec as far as an
// offline plan of terraform/envs/example and its summary (init, plan -out,
// show -json, the stateful-resource check), with the schema-only provider
// of test/terraform/schemaprovider standing in for hashicorp/aws.
func TestOfflinePlan(t *testing.T) {
	t.Parallel()
	ws := tfoffline.Copy(t, nil)
	var out bytes.Buffer
	d := &Deployer{TF: ws.TF, Out: &out}
	res, err := d.Run(tfoffline.Context(t), Options{
		VarFiles: []string{filepath.Join(ws.Dir, "example.tfvars")},
		Vars:     []string{"artifacts_dir=" + ArtifactsDir(ws.Dir, filepath.Join(ws.Root, "dist"))},
		PlanOut:  filepath.Join(ws.Root, "example.tfplan"),
		PlanOnly: true,
	})
	t.Logf("deploy --plan-only:\n%s", out.String())
	if err != nil {
		t.Fatalf("deploy --plan-only: %v\n%s", err, ws.Log)
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
	for typ, n := range wantAtLeast {
		if got[typ] < n {
			t.Errorf("creates %d %s, want at least %d", got[typ], typ, n)
		}
	}
}
