package ingest_test

import (
	"context"
	"encoding/json"
	"github.com/commitcollect/backend/handlers/app"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/handoff"
	"github.com/commitcollect/backend/handlers/ingest/intake"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/store/outbox"
	"github.com/commitcollect/backend/scripts/stravasim"
	"github.com/commitcollect/backend/test/ingesttest"
)

// TestARedeliveryOfACreateInABurstIsADuplicate: Strava delivers a create
// again while the burst that holds it is in flight (the sweeper leases the
// athlete, not the items, and the burst writes before it settles). The
// redelivery is answered "duplicate" and handed to nobody, and the burst
// settles the create once. Protection: the webhook holds a gathered create
// for the sweeper (HoldOutboxItem) and a redelivery never takes a held
// item. Without it, the claim's lease ends at the gather tick, the
// redelivery takes the item again ("accepted"), and the create is fetched
// a second time beside its burst.
func TestARedeliveryOfACreateInABurstIsADuplicate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := crowdedAthlete(t)
	now := time.Now().UTC()
	hook := intake.NewWebhook(intake.WebhookConfig{VerifyToken: ingesttest.VerifyToken, SubscriptionID: ingesttest.SubscriptionID,
		Gather: true}, h.St.Outbox, outbox.NewDrops(h.St.DB), h.Dispatch, ingesttest.Log())
	hook.Now = func() time.Time { return now }
	events, post := createsOf(t, h, hook, redeliveryCreates)
	for i, ev := range events {
		if got := post(ev); got != "accepted" {
			t.Fatalf("create %d: %q, want accepted", i, got)
		}
	}
	h.Wait() // the creates handed off before the athlete's crowded the window

	// The gather tick has passed: the sweeper dispatches the held creates
	// as one burst, which has not run yet when Strava redelivers.
	tick := now.Add(ingest.MaxBurstGather) // at or past the next tick of any gather grid
	bursts := &ingesttest.RecordingDispatcher{}
	sw := handoff.NewSweeper(app.SweeperStores(h.St), bursts, ingesttest.Log())
	sw.Now = func() time.Time { return tick.Add(time.Second) }
	if res, err := sw.Sweep(ctx); err != nil || res.Bursts != 1 || res.Dispatched != redeliveryCreates-ingest.CreatesBeforeGather {
		t.Fatalf("sweep: %+v, %v; want one burst of the held creates", res, err)
	}
	jobs := bursts.Take()
	last := events[redeliveryCreates-1] // held: crowded
	now = tick.Add(2 * time.Second)
	if got := post(last); got != "duplicate" {
		t.Errorf("redelivery during the burst: %q, want duplicate", got)
	}
	h.Wait()
	if n := h.Dispatch.Calls.Load(); n != ingest.CreatesBeforeGather {
		t.Errorf("%d hand-offs by the webhook, want %d (the creates before the crowd)", n, ingest.CreatesBeforeGather)
	}
	if err := h.Worker.Run(ctx, jobs[0]); err != nil {
		t.Fatalf("burst: %v", err)
	}
	if n := len(h.Workouts("u1")); n != redeliveryCreates {
		t.Fatalf("%d workouts, want %d", n, redeliveryCreates)
	}
	rec := h.Outbox(ingesttest.Job(last))
	if rec.Status != ops.OutboxDone || rec.Dispatches != 1 {
		t.Errorf("redelivered create's outbox item: %s after %d dispatches, want done after 1", rec.Status, rec.Dispatches)
	}
}

// redeliveryCreates is how many creates of one athlete the redelivery
// tests send: three more than gather at once (ingest.CreatesBeforeGather).
const redeliveryCreates = ingest.CreatesBeforeGather + 3

// crowdedAthlete is a harness with athlete 10 linked to user u1 and
// redeliveryCreates of its activities (ids 100 on) at Strava.
func crowdedAthlete(t *testing.T) *ingesttest.Harness {
	t.Helper()
	h := ingesttest.New(t)
	h.Link("u1", 10, time.Hour)
	for i := range redeliveryCreates {
		h.Activity(int64(100+i), 10, "Run")
	}
	return h
}

// createsOf is n create events of athlete 10 (activities 100 on) and a
// post of one to hook, answering its status.
func createsOf(t *testing.T, h *ingesttest.Harness, hook *intake.Webhook, n int) ([]stravasim.Event, func(stravasim.Event) string) {
	mux := http.NewServeMux()
	hook.Mount(mux)
	events := make([]stravasim.Event, n)
	for i := range events {
		events[i] = h.Sim.ActivityEvent("create", int64(100+i), 10, nil)
	}
	return events, func(ev stravasim.Event) string {
		t.Helper()
		body, _ := json.Marshal(ev)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, intake.WebhookPath, strings.NewReader(string(body))))
		var out map[string]string
		if err := json.Unmarshal(rec.Body.Bytes(), &out); rec.Code != http.StatusOK || err != nil {
			t.Fatalf("webhook: %d %s", rec.Code, rec.Body)
		}
		return out["status"]
	}
}

// TestARedeliveryOfALostHandOffInABurstIsADuplicate: the creates handed
// off before the athlete's crowded the window are lost (nobody runs them),
// their leases lapse, and the sweeper finds them due with the held creates
// as one burst. Strava redelivers a lost one while the burst is in flight:
// it is a duplicate, and the burst settles it. Protection: the sweeper
// leases a lost hand-off of a burst on its own (handoff's
// leaseLostHandOff); without it the lapsed claim lets the redelivery take
// the item again ("accepted"), and the create is fetched beside its burst.
func TestARedeliveryOfALostHandOffInABurstIsADuplicate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := crowdedAthlete(t)
	now := time.Now().UTC()
	lost := &ingesttest.RecordingDispatcher{} // hand-offs nobody runs
	hook := intake.NewWebhook(intake.WebhookConfig{VerifyToken: ingesttest.VerifyToken, SubscriptionID: ingesttest.SubscriptionID,
		Gather: true, Lease: time.Second}, h.St.Outbox, outbox.NewDrops(h.St.DB), lost, ingesttest.Log())
	hook.Now = func() time.Time { return now }
	events, post := createsOf(t, h, hook, redeliveryCreates)
	for i, ev := range events {
		if got := post(ev); got != "accepted" {
			t.Fatalf("create %d: %q, want accepted", i, got)
		}
	}
	if n := len(lost.Take()); n != ingest.CreatesBeforeGather {
		t.Fatalf("%d hand-offs, want %d (the creates before the crowd)", n, ingest.CreatesBeforeGather)
	}
	tick := now.Add(ingest.MaxBurstGather) // the held are due, the lost hand-offs' leases lapsed
	bursts := &ingesttest.RecordingDispatcher{}
	sw := handoff.NewSweeper(app.SweeperStores(h.St), bursts, ingesttest.Log())
	sw.Now = func() time.Time { return tick.Add(time.Second) }
	if res, err := sw.Sweep(ctx); err != nil || res.Bursts != 1 || res.Dispatched != redeliveryCreates {
		t.Fatalf("sweep: %+v, %v; want one burst of every create", res, err)
	}
	jobs := bursts.Take()
	first := events[0] // handed off and lost
	now = tick.Add(2 * time.Second)
	if got := post(first); got != "duplicate" {
		t.Errorf("redelivery of a lost hand-off during its burst: %q, want duplicate", got)
	}
	if n := len(lost.Take()); n != 0 {
		t.Errorf("the redelivery was handed off %d times, want none", n)
	}
	if err := h.Worker.Run(ctx, jobs[0]); err != nil {
		t.Fatalf("burst: %v", err)
	}
	if n := len(h.Workouts("u1")); n != redeliveryCreates {
		t.Fatalf("%d workouts, want %d", n, redeliveryCreates)
	}
	if rec := h.Outbox(ingesttest.Job(first)); rec.Status != ops.OutboxDone || rec.Dispatches != 2 {
		t.Errorf("redelivered create's outbox item: %s after %d dispatches, want done after 2 (the lost hand-off, the burst)",
			rec.Status, rec.Dispatches)
	}
}
