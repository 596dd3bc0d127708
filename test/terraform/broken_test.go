package terraform

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/commitcollect/backend/test/terraform/tfoffline"
)

// brokenCase breaks one invariant of the deployed stack: the first old in
// file (under terraform/) becomes new, and CheckDeployed must name it
// (wantInErr).
type brokenCase struct {
	// plan numbers the copy of terraform/ the case is broken in, with the
	// other cases of that number (runBroken).
	plan                 int
	name, file, old, new string
	wantInErr            string
}

// aloneEnv set to 1 makes runBroken plan every case in a copy of its own
// and check that the cases sharing a plan number are apart (checkApart).
const aloneEnv = "CC_TF_BROKEN_ALONE"

// runBroken breaks the cases in copies of terraform/, plans and applies each
// copy offline, and requires CheckDeployed to name every case. The cases
// of one plan number share a copy: a plan and an apply take seconds of CPU,
// and 45 of them were most of this package's time. Cases share a plan only
// when they break unrelated things: no case broken alone may give a
// violation that holds another's wantInErr, or removing the other's check
// would go unnoticed. `CC_TF_BROKEN_ALONE=1 go test -run BrokenCase...`
// checks that rule; run it when a case is added or moved.
func runBroken(t *testing.T, cases []brokenCase) {
	alone := os.Getenv(aloneEnv) == "1"
	var order []string
	plans := map[string][]brokenCase{}
	for _, c := range cases {
		name := fmt.Sprintf("plan %d", c.plan)
		if alone {
			name = c.name
		}
		if _, ok := plans[name]; !ok {
			order = append(order, name)
		}
		plans[name] = append(plans[name], c)
	}
	var mu sync.Mutex
	solo := map[string][]string{}
	if alone {
		t.Cleanup(func() { checkApart(t, cases, solo) })
	}
	for _, name := range order {
		group := plans[name]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ws := tfoffline.Copy(t, func(dir string) {
				for _, c := range group {
					breakIn(t, dir, c)
				}
			})
			violations := CheckDeployed(NewDeployed(ws.Apply(t, ws.PlanFile(t, exampleVars...))), topicARN)
			got := strings.Join(violations, "\n")
			for _, c := range group {
				t.Run(c.name, func(t *testing.T) {
					if !strings.Contains(got, c.wantInErr) {
						t.Fatalf("got violations:\n%s\nwant one mentioning %q", got, c.wantInErr)
					}
				})
			}
			mu.Lock()
			solo[group[0].name] = violations
			mu.Unlock()
			t.Logf("checks failed as they should:\n%s", got)
		})
	}
}

// checkApart reports two cases of one plan number where the first's
// wantInErr is in a violation of the second broken alone (solo, by name).
func checkApart(t *testing.T, cases []brokenCase, solo map[string][]string) {
	for _, x := range cases {
		for _, y := range cases {
			if x.name == y.name || x.plan != y.plan {
				continue
			}
			for _, v := range solo[y.name] {
				if strings.Contains(v, x.wantInErr) {
					t.Errorf("%q and %q share plan %d, but %q alone gives %q: removing the check of %q would go unnoticed",
						x.name, y.name, x.plan, y.name, v, x.name)
				}
			}
		}
	}
}

// breakIn replaces the first c.old in c.file under dir by c.new.
func breakIn(t *testing.T, dir string, c brokenCase) {
	t.Helper()
	p := filepath.Join(dir, c.file)
	b, err := os.ReadFile(p)
	if err != nil || !strings.Contains(string(b), c.old) {
		t.Fatalf("%s: mutation target %q not in %s (%v)", c.name, c.old, c.file, err)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), c.old, c.new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}
