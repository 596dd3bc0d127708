package ingest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/app"
	"github.com/commitcollect/backend/handlers/ingest/handoff"
	"github.com/commitcollect/backend/handlers/ingest/intake"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/outbox"
	"github.com/commitcollect/backend/scripts/stravasim"
	"github.com/commitcollect/backend/test/dynamolocal"
	"github.com/commitcollect/backend/test/ingesttest"
)

// TestAForgersFloodLeavesTheVictimsImportToday, on DynamoDB Local and the
// Strava simulator, through the webhook, the sweeper and the worker as
// wired in AWS: a forger posts rounds of creates of ids that never existed
// naming a real athlete with 1,000 activities, until their bursts have
// spent the athlete's unverified allowance for the day (20 reads here, as
// large as the caps). The athlete then uploads 60 old-dated activities (an
// import, 600 hours and more back: below the first page), and a forged
// create joins them. Every import is written the same day, from the
// athlete's caps; the figures are printed. Protection: the walk's probe
// (without it the import waits for the next UTC day).
func TestAForgersFloodLeavesTheVictimsImportToday(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := dynamolocal.NewStore(t)
	sim := stravasim.New(stravasim.Options{SubscriptionID: ingesttest.SubscriptionID})
	t.Cleanup(sim.Close)
	const athlete, user = 611, "victim"
	linkSimAthlete(t, st, sim, athlete, user)
	now := time.Now().UTC()
	for i := range 1000 {
		sim.PutActivity(stravasim.Activity{ID: int64(40000 + i), AthleteID: athlete, Name: "Run", SportType: "Run", Distance: 5000,
			MovingTime: 1500, ElapsedTime: 1600, StartDate: now.Add(-time.Duration(i+1) * time.Hour).Truncate(time.Second)})
	}
	worker := app.NewStravaWorker(st, app.StravaSettings{BaseURL: sim.URL, ClientID: sim.ClientID(), ClientSecret: sim.ClientSecret(),
		AthleteReadsPerWindow: 20, AthleteReadsPerDay: 20}, ingesttest.Log())
	q := handoff.NewQueue(worker.Run, handoff.QueueOptions{Workers: 2, Backoff: 10 * time.Millisecond}, ingesttest.Log())
	t.Cleanup(func() { _ = q.Close(context.Background()) })
	mux := http.NewServeMux()
	intake.NewWebhook(intake.WebhookConfig{VerifyToken: ingesttest.VerifyToken, SubscriptionID: ingesttest.SubscriptionID, Gather: true},
		st.Outbox, outbox.NewDrops(st.DB), q, ingesttest.Log()).Mount(mux)
	post := func(ids ...int64) {
		t.Helper()
		for _, id := range ids {
			body, _ := json.Marshal(sim.ActivityEvent("create", id, athlete, nil))
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, intake.WebhookPath, strings.NewReader(string(body))))
			if rec.Code != http.StatusOK {
				t.Fatalf("webhook: %d %s", rec.Code, rec.Body)
			}
		}
	}
	sw := handoff.NewSweeper(app.SweeperStores(st), q, ingesttest.Log())
	round := 0
	sweep := func() {
		t.Helper()
		round++
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := q.Wait(wctx); err != nil {
			t.Fatal(err)
		}
		sw.Now = func() time.Time { return time.Now().UTC().Add(time.Duration(round) * time.Minute) } // past the gather ticks
		if _, err := sw.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		if err := q.Wait(wctx); err != nil {
			t.Fatal(err)
		}
	}
	for r := range 4 { // 4 rounds of 10 forged creates: about 5 unverified reads a burst, and a fetch alone each after
		post(span(int64(990000+100*r), 10)...)
		sweep()
	}
	forgerReads := sim.ReadsOf(athlete)

	imported := span(60000, 60)
	for j, id := range imported {
		sim.PutActivity(stravasim.Activity{ID: id, AthleteID: athlete, Name: "Old file", SportType: "Ride", Distance: 20000,
			MovingTime: 3600, ElapsedTime: 3700, StartDate: now.Add(-time.Duration(600+j) * time.Hour).Add(30 * time.Minute).Truncate(time.Second)})
	}
	post(append(imported, 999999)...)
	sweep()
	sweep()
	written, _, err := dynamo.QueryEntities[model.Workout](ctx, st.DB, st.DB.Tables().Main, keys.UserPK(user), keys.PrefixWorkoutStrava, dynamo.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]bool{}
	for _, w := range written {
		got[w.ActivityID] = true
	}
	missing := 0
	for _, id := range imported {
		if !got[id] {
			missing++
		}
	}
	t.Logf("forger's rounds: %d Strava reads; the import of %d: %d written the same day, %d Strava reads; %d workouts in all",
		forgerReads, len(imported), len(imported)-missing, sim.ReadsOf(athlete)-forgerReads, len(written))
	if missing > 0 {
		t.Fatalf("%d of the %d imported activities not written after the forger spent the unverified allowance; want every one today", missing, len(imported))
	}
}

func span(from int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = from + int64(i)
	}
	return out
}
