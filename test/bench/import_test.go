package bench

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/bff"
	"github.com/commitcollect/backend/handlers/bff/milestones"
	"github.com/commitcollect/backend/scripts/runkit"
	"github.com/commitcollect/backend/scripts/stravasim"
)

// The import's floor measured from outside: what a new athlete's import
// costs DynamoDB per imported activity, counting everything the local stack
// does from the sign-in on (the OAuth callback, the milestone's creation,
// the backfill's pages, the projector), not only the sync path.
const (
	importActivities             = 400
	importMaxRequestsPerActivity = 1.2
	importMaxRCUPerActivity      = 0.3
)

// BenchmarkImport signs an athlete with 400 activities of the last year in
// through the API (Strava's simulated OAuth), creates a milestone covering
// the year through POST /v1/milestones and waits until the milestone counts
// every activity; it reports DynamoDB requests and RCU per imported activity
// of the api, the worker and the projector together, against the floor.
func BenchmarkImport(b *testing.B) {
	var requests, rcu, acts float64
	for b.Loop() {
		b.StopTimer()
		r, u := runImport(b)
		requests += float64(r)
		rcu += u
		acts += importActivities
		b.StartTimer()
	}
	b.ReportMetric(requests/acts, "ddb-req/act")
	b.ReportMetric(rcu/acts, "RCU/act")
	b.Logf("import from outside (sign-in, milestone creation, backfill, projection): DynamoDB requests per imported activity %.3f ≤ %.1f: %s; "+
		"RCU per imported activity %.3f ≤ %.1f: %s", requests/acts, importMaxRequestsPerActivity, Verdict(requests/acts, importMaxRequestsPerActivity, true),
		rcu/acts, importMaxRCUPerActivity, Verdict(rcu/acts, importMaxRCUPerActivity, true))
}

// runImport runs one import on a fresh local stack and returns what it cost
// (requests, RCU) from the sign-in until the milestone counts every activity.
func runImport(b *testing.B) (int, float64) {
	ctx := context.Background()
	p := startPipeline(b)
	athlete := p.nextID.Add(1)
	p.sim.AddAthlete(stravasim.Athlete{ID: athlete, Firstname: "Import"})
	p.sim.SetAuthorization(stravasim.Authorization{AthleteID: athlete})
	now := time.Now().UTC()
	every := 364 * 24 * time.Hour / (importActivities + 1)
	for i := range importActivities {
		p.sim.PutActivity(stravasim.Activity{ID: athlete*1000 + int64(i), AthleteID: athlete, Name: "Run", SportType: "Run",
			Distance: float64(3000 + i), MovingTime: 1500, ElapsedTime: 1600, StartDate: now.Add(-time.Duration(i+1) * every).Truncate(time.Second)})
	}
	before := p.quiesce(b)
	client := runkit.Browser(30 * time.Second)
	if err := runkit.Login(ctx, client, p.st.APIURL); err != nil {
		b.Fatal(err)
	}
	var me bff.MeJSON
	if err := runkit.SendJSON(ctx, client, http.MethodGet, p.st.APIURL+"/v1/me", nil, &me, http.StatusOK); err != nil {
		b.Fatal(err)
	}
	target := 1e7
	start := now.AddDate(0, 0, -365).Format(time.RFC3339)
	var ms milestones.MilestoneJSON
	req := milestones.CreateRequest{ModelID: p.modelID, Title: "A year", Metric: "distance", Target: &target,
		SportTypes: []string{"Run"}, PeriodStartAtUtc: start}
	if err := runkit.SendJSON(ctx, client, http.MethodPost, p.st.APIURL+"/v1/milestones", req, &ms, http.StatusCreated); err != nil {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(3 * time.Minute); ; {
		m := p.milestone(ctx, b, me.UserID, ms.MilestoneID)
		if m.WorkoutsCounted == importActivities {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the milestone counts %d of %d activities after 3 minutes", m.WorkoutsCounted, importActivities)
		}
		time.Sleep(50 * time.Millisecond)
	}
	after := p.quiesce(b)
	total := after.ingest(before).Add(after.project(before))
	in, pr := after.ingest(before), after.project(before)
	b.Logf("import of %d activities: api+worker %d requests %.1f RCU %.1f WCU, projector %d requests %.1f RCU %.1f WCU",
		importActivities, in.Requests, in.RCU, in.WCU, pr.Requests, pr.RCU, pr.WCU)
	b.Logf("by operation: api+worker %v; projector %v", in.ByOp, pr.ByOp)
	return total.Requests, total.RCU
}
