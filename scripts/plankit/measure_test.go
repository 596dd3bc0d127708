package plankit

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/test/dynamolocal"
)

func TestMain(m *testing.M) { dynamolocal.Main(m) }

// TestMeasureAndPlan runs the measurement on the test's DynamoDB Local (one
// warm event per class, a 20-activity backfill) and the tool's plan from
// it: every unit of work cost something in every stage that touches
// DynamoDB for it, the webhook and sync units made the Strava reads they
// should, and the output ends with the summary line.
func TestMeasureAndPlan(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	a, mo, err := ParseFlags([]string{"-athletes", "80", "-endpoint", dynamolocal.Endpoint(t), "-measure-events", "1", "-history-days", "50"}, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	if mo.BackfillActivities != 20 {
		t.Fatalf("backfill activities %d, want 50 days × 0.4 = 20", mo.BackfillActivities)
	}
	m, err := Measure(ctx, mo)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		s      Stages
		stages string // which stages must have recorded writes
	}{
		{"create", m.Create, "api worker projector"}, {"create without milestone", m.CreateNoMilestone, "api worker"},
		{"update", m.Update, "api worker projector"}, {"delete", m.Delete, "api worker projector"},
		{"deauthorization", m.Deauth, "api worker"}, {"backfill page", m.BackfillPage, "api worker"},
		{"reconcile page", m.ReconcilePage, "api worker"},
	} {
		for _, st := range strings.Fields(c.stages) {
			cost := map[string]Cost{"api": c.s.API, "worker": c.s.Worker, "projector": c.s.Projector}[st]
			if cost.Requests <= 0 || (cost.WCU <= 0 && cost.RCU <= 0) {
				t.Errorf("%s: %s stage measured %v; want requests and units", c.name, st, cost)
			}
		}
	}
	for unit, want := range map[string]float64{"create": 1, "update": 1, "backfill": 1, "reconcile": 1} {
		if m.Reads[unit] != want {
			t.Errorf("%s made %v Strava reads per unit, want %v", unit, m.Reads[unit], want)
		}
	}
	if m.BackfillActivities != 20 || m.DeauthWorkouts != 20 {
		t.Errorf("backfill page of %d activities, deauthorization of %d workouts; want 20 and 20", m.BackfillActivities, m.DeauthWorkouts)
	}
	var b strings.Builder
	Compute(a, m).Print(&b)
	out := strings.TrimSuffix(b.String(), "\n")
	t.Log(out)
	lines := strings.Split(out, "\n")
	last := lines[len(lines)-1]
	if !lastLine.MatchString(last) || !strings.HasPrefix(last, "capacity: athletes=80 ") || !strings.Contains(last, "fits=yes") {
		t.Errorf("last line %q: want the format for 80 athletes that fit the default limits", last)
	}
}

// TestParseFlags: -help is not an error, bad values are.
func TestParseFlags(t *testing.T) {
	if _, _, err := ParseFlags([]string{"-help"}, &strings.Builder{}); err == nil || !strings.Contains(err.Error(), "help") {
		t.Errorf("-help: %v", err)
	}
	for _, args := range [][]string{{"-athletes", "0"}, {"-milestone-share", "2"}, {"extra"}} {
		if _, _, err := ParseFlags(args, &strings.Builder{}); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}
