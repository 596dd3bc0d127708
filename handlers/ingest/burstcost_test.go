package ingest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/commitcollect/backend/handlers/ingest/budget"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/app"
	"github.com/commitcollect/backend/handlers/ingest"
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

// What one event of a burst may cost ingestion in DynamoDB (webhook,
// sweeper, worker; the projector's share is make bench's U×E run): the
// claim (2 WCU: the item and its Pending entry), the settle (2), the
// workout with LSI1 (2) and its audit entry (1), and a share of the
// athlete's burst lease and of the list page. The sweeper reads the items'
// jobs (1 RCU each) rather than leasing each (3 WCU: its Pending entry
// would move).
const (
	burstCreates             = 200
	maxBurstRequestsPerEvent = 8
	maxBurstWCUPerEvent      = 8.0
)

// TestABurstCost posts one athlete's 200 creates through the webhook (with
// its gathering on, as wired in AWS), sweeps once their gather tick has
// passed and lets the worker serve them as a burst from list pages, on one
// metered DynamoDB client; it prints the calls by stage and asserts the
// requests and WCU per event, and that the worker released the athlete's
// burst lease. Protections: gathering at the claim (without it the worker
// defers each crowded create, 3 WCU more per event), deleting a parked
// record only when a park marked the item (without it each burst event
// pays a DeleteItem), leasing the burst as one (with the sweeper's Bursts
// nil each item is leased, 3 WCU more), and the runner's release (without
// it the athlete's lease still holds).
func TestABurstCost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	plain, _ := dynamolocal.Clients(t)
	seed, st, m, prefix := meteredStores(t, plain)
	tables := st.DB.Tables()

	sim := stravasim.New(stravasim.Options{SubscriptionID: ingesttest.SubscriptionID})
	t.Cleanup(sim.Close)
	const athlete, user = 601, "bulk"
	linkSimAthlete(t, seed, sim, athlete, user)
	now := time.Now().UTC()
	for i := range burstCreates {
		sim.PutActivity(stravasim.Activity{ID: int64(20000 + i), AthleteID: athlete, Name: "Upload", SportType: "Run", Distance: 5000,
			MovingTime: 1500, ElapsedTime: 1600, StartDate: now.Add(-time.Duration(i+1) * time.Hour).Truncate(time.Second)})
	}
	worker := app.NewStravaWorker(st, app.StravaSettings{BaseURL: sim.URL, ClientID: sim.ClientID(), ClientSecret: sim.ClientSecret(),
		AthleteReadsPerWindow: budget.DefaultAthleteReadsPerWindow}, ingesttest.Log())
	q := handoff.NewQueue(worker.Run, handoff.QueueOptions{Workers: 2, Backoff: 10 * time.Millisecond}, ingesttest.Log())
	t.Cleanup(func() { _ = q.Close(context.Background()) })
	mux := http.NewServeMux()
	intake.NewWebhook(intake.WebhookConfig{VerifyToken: ingesttest.VerifyToken, SubscriptionID: ingesttest.SubscriptionID, Gather: true},
		st.Outbox, outbox.NewDrops(st.DB), q, ingesttest.Log()).Mount(mux)
	wait := func() {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := q.Wait(wctx); err != nil {
			t.Fatal(err)
		}
	}

	m.setStage("webhook")
	for i := range burstCreates {
		body, _ := json.Marshal(sim.ActivityEvent("create", int64(20000+i), athlete, nil))
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, intake.WebhookPath, strings.NewReader(string(body))))
		if rec.Code != http.StatusOK {
			t.Fatalf("webhook: %d %s", rec.Code, rec.Body)
		}
	}
	wait() // the first creates, fetched one by one
	m.setStage("burst")
	sw := handoff.NewSweeper(app.SweeperStores(st), q, ingesttest.Log())
	sw.Now = func() time.Time { return time.Now().UTC().Add(time.Minute) } // past every gather tick
	res, err := sw.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wait()
	if want := burstCreates - ingest.CreatesBeforeGather; res.Bursts != 1 || res.Dispatched != want {
		t.Fatalf("sweep %+v, want one burst of the %d gathered creates", res, want)
	}
	written, _, err := dynamo.QueryEntities[model.Workout](ctx, seed.DB, tables.Main, keys.UserPK(user), keys.PrefixWorkoutStrava, dynamo.QueryOptions{})
	if err != nil || len(written) != burstCreates {
		t.Fatalf("%d workouts written (%v), want %d", len(written), err, burstCreates)
	}

	calls := m.take()
	n, rcu, wcu, _ := costReport(calls, prefix)
	byCall := map[string][2]float64{}
	for _, c := range calls {
		k := c.stage + " " + c.op + " " + strings.TrimPrefix(c.table, prefix)
		v := byCall[k]
		byCall[k] = [2]float64{v[0] + 1, v[1] + c.wcu}
	}
	var lines []string
	for k, v := range byCall {
		lines = append(lines, fmt.Sprintf("  %-45s %.2f requests, %.2f WCU per event", k, v[0]/burstCreates, v[1]/burstCreates))
	}
	sort.Strings(lines)
	perReq, perWCU := float64(n)/burstCreates, wcu/burstCreates
	t.Logf("burst of %d creates: %.2f requests, %.2f RCU, %.2f WCU per event (8 WCU is the target)\n%s", burstCreates,
		perReq, rcu/burstCreates, perWCU, strings.Join(lines, "\n"))
	if perReq > maxBurstRequestsPerEvent || perWCU > maxBurstWCUPerEvent {
		t.Errorf("burst event: %.2f requests, %.2f WCU; want at most %d and %g", perReq, perWCU, maxBurstRequestsPerEvent, maxBurstWCUPerEvent)
	}
	if _, err := seed.Outbox.LeaseBurst(ctx, athlete, time.Now(), time.Minute, 1); err != nil {
		t.Errorf("the athlete's burst lease after the burst: %v; want it released", err)
	}
}
