package handoff_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/commitcollect/backend/model/emf/emftest"

	"github.com/commitcollect/backend/handlers/app"
	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/handoff"
	"github.com/commitcollect/backend/handlers/ingest/intake"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/store/outbox"
	"github.com/commitcollect/backend/model/strava"
	"github.com/commitcollect/backend/scripts/stravasim"
	"github.com/commitcollect/backend/test/ingesttest"
)

// droppedQueue accepts every job and never runs it: the in-memory queue of
// a process killed (kill -9) right after answering 200.
type droppedQueue struct{ n atomic.Int64 }

func (d *droppedQueue) Dispatch(context.Context, ingest.Job) error { d.n.Add(1); return nil }

// TestCrashAfterAcceptLosesNothing: events answered 200 whose process dies
// before running them are all written once a new process's sweeper runs.
// Protection: the outbox claim (job + lease) and the sweeper.
func TestCrashAfterAcceptLosesNothing(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	h.Link("u1", 10, time.Hour)
	dead := &droppedQueue{}
	mux := http.NewServeMux()
	intake.NewWebhook(intake.WebhookConfig{VerifyToken: ingesttest.VerifyToken, SubscriptionID: ingesttest.SubscriptionID}, h.St.Outbox, outbox.NewDrops(h.St.DB), dead, ingesttest.Log()).Mount(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	const n = 12
	evs := make([]stravasim.Event, n)
	for i := range n {
		h.Activity(int64(1000+i), 10, "Run")
		evs[i] = h.Sim.ActivityEvent("create", int64(1000+i), 10, nil)
		if d, err := h.Sim.Deliver(context.Background(), srv.URL+intake.WebhookPath, evs[i]); err != nil || d.Statuses[0] != 200 {
			t.Fatalf("deliver %d: %+v %v", i, d, err)
		}
	}
	if dead.n.Load() != n || len(h.Workouts("u1")) != 0 {
		t.Fatalf("got %d hand-offs and %d workouts, want %d and 0", dead.n.Load(), len(h.Workouts("u1")), n)
	}
	// Strava's redelivery of an accepted event within the lease is a duplicate…
	if resp, body := h.Post(ingesttest.MustJSON(t, evs[0])); body["status"] != "duplicate" {
		t.Fatalf("got %d %v, want duplicate", resp.StatusCode, body)
	}
	// …and the restarted process's sweeper, once the leases lapse, delivers all.
	res := h.Sweep(time.Now().Add(ingest.DefaultLease + time.Second))
	if res.Due != n || res.Dispatched != n {
		t.Fatalf("got sweep %+v, want %d dispatched", res, n)
	}
	h.Wait()
	if got := len(h.Workouts("u1")); got != n {
		t.Fatalf("got %d workouts, want %d (accepted = written)", got, n)
	}
	for _, ev := range evs {
		if rec := h.Outbox(ingesttest.Job(ev)); rec.Status != ops.OutboxDone || rec.PendingPK != "" {
			t.Fatalf("got %+v, want done and out of the pending index", rec)
		}
	}
	if res := h.Sweep(time.Now().Add(time.Hour)); res.Due != 0 {
		t.Fatalf("got %+v after everything settled, want nothing due", res)
	}
}

// TestRedeliveryAfterLapsedLeaseIsAccepted: a redelivered event whose
// earlier hand-off was lost (lease lapsed) is claimed again and dispatched,
// with its original job; a done one stays a duplicate.
func TestRedeliveryAfterLapsedLeaseIsAccepted(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	h.Link("u1", 10, time.Hour)
	h.Activity(1100, 10, "Run")
	ev := h.Sim.ActivityEvent("create", 1100, 10, nil)
	j := ingesttest.Job(ev)
	j.ReceivedAtUtc = time.Now().Add(-time.Hour).UTC()
	h.Claim(j) // accepted an hour ago, lease long lapsed, never run
	resp, body := h.Post(ingesttest.MustJSON(t, ev))
	if resp.StatusCode != 200 || body["status"] != "accepted" || body["correlationId"] != j.CorrelationID {
		t.Fatalf("got %d %v, want accepted under the original correlation id %s", resp.StatusCode, body, j.CorrelationID)
	}
	h.Wait()
	if w := h.Workout("u1", 1100); w.CorrelationID != j.CorrelationID {
		t.Fatalf("got %+v, want the original job written", w)
	}
	if resp, body := h.Post(ingesttest.MustJSON(t, ev)); resp.StatusCode != 200 || body["status"] != "duplicate" {
		t.Fatalf("got %d %v, want duplicate once done", resp.StatusCode, body)
	}
}

// TestQueueCloseLeavesWorkToTheOutbox: Ctrl-C with a backlog. Close does not
// start queued jobs, lets the running one finish, and a job cancelled by the
// shutdown limit is not sent to OnFailure (with a dead context) but left;
// the next start's sweeper writes everything. Protections: Close leaves
// queued jobs, handle does not report interrupted jobs as failures.
func TestQueueCloseLeavesWorkToTheOutbox(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	h.Link("u1", 10, time.Hour)
	ctx := context.Background()
	const n = 8
	started := make(chan struct{}, n)
	var failures atomic.Int64
	slow := handoff.NewQueue(func(ctx context.Context, j ingest.Job) error {
		started <- struct{}{}
		<-ctx.Done() // Strava hangs until the shutdown limit cancels us
		return h.Worker.Run(ctx, j)
	}, handoff.QueueOptions{Workers: 1, OnFailure: func(context.Context, ingest.Job, error) { failures.Add(1) }}, ingesttest.Log())
	jobs := make([]ingest.Job, n)
	for i := range n {
		h.Activity(int64(1200+i), 10, "Run")
		jobs[i] = ingesttest.Job(h.Sim.ActivityEvent("create", int64(1200+i), 10, nil))
		h.Claim(jobs[i])
		if err := slow.Dispatch(ctx, jobs[i]); err != nil {
			t.Fatal(err)
		}
	}
	<-started
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := slow.Close(cctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the shutdown limit hit", err)
	}
	if got := slow.Left(); got != n-1 {
		t.Fatalf("got %d jobs left unstarted, want %d", got, n-1)
	}
	if failures.Load() != 0 {
		t.Fatalf("got %d OnFailure calls, want 0 (an interrupted job is not a failure)", failures.Load())
	}
	if err := slow.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if rec := h.Outbox(j); rec.Status != ops.OutboxReceived {
			t.Fatalf("got %+v, want every unfinished job received", rec)
		}
	}
	res := h.Sweep(time.Now().Add(ingest.DefaultLease + time.Second))
	h.Wait()
	if res.Dispatched != n || len(h.Workouts("u1")) != n {
		t.Fatalf("got sweep %+v and %d workouts, want %d of each", res, len(h.Workouts("u1")), n)
	}
}

// TestWorkerParksAfterBoundedFailures: 5xx answers are retried through the
// outbox with backoff and parked (with a redrivable record) only after
// MaxFailures; the parked job redrives.
func TestWorkerParksAfterBoundedFailures(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	h.Link("u1", 10, time.Hour)
	h.Activity(1300, 10, "Run")
	ctx := context.Background()
	w := h.NewWorker()
	w.Runner.MaxFailures = 3
	j := ingesttest.Job(h.Sim.ActivityEvent("create", 1300, 10, nil))
	h.Claim(j)
	h.Sim.FailNext(stravasim.EndpointActivity, http.StatusBadGateway, 3)
	for i := 1; i <= 3; i++ {
		if err := w.Run(ctx, j); err != nil {
			t.Fatalf("run %d: got %v, want the outcome recorded", i, err)
		}
		rec := h.Outbox(j)
		want := ops.OutboxReceived
		if i == 3 {
			want = ops.OutboxParked
		}
		if rec.Status != want || (i < 3 && (rec.Failures != i || rec.NotBefore == 0)) {
			t.Fatalf("run %d: got %+v, want %s with %d failures", i, rec, want, i)
		}
	}
	parked, err := h.St.Parked.Parked(ctx, keys.ParkSourceWorker)
	if err != nil || len(parked) != 1 || parked[0].RecordID != j.IdempotencyKey {
		t.Fatalf("got %+v, %v; want one parked worker record", parked, err)
	}
	if rec := h.Outbox(j); rec.Reason == "" || rec.PendingPK != "" {
		t.Fatalf("got %+v, want a reason and no pending keys", rec)
	}
	if err := w.Handle(ctx, json.RawMessage(parked[0].Payload)); err != nil {
		t.Fatal(err)
	}
	if wo := h.Workout("u1", 1300); wo.SportType != "Run" {
		t.Fatalf("got %+v, want the redriven job written", wo)
	}
}

// TestNewestAnswerWins: two fetches of one activity race; the one that
// started first (and saw the older state) answers last and is dropped.
// Protection: UpsertWorkout's condition on fetchStartedAtNs.
func TestNewestAnswerWins(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	h.Link("u1", 10, time.Hour)
	h.Sim.PutActivity(stravasim.Activity{ID: 1400, AthleteID: 10, Name: "Morning", SportType: "Run", Distance: 5000,
		MovingTime: 1500, StartDate: time.Date(2026, 3, 2, 6, 0, 0, 0, time.UTC)})
	ctx := context.Background()
	fast := h.NewWorker()
	client := strava.NewClient(h.Sim.URL, nil)
	slow := &ingesttest.SlowFirstFetch{Next: client, Fetched: make(chan struct{}), Release: make(chan struct{})}
	refresher := strava.NewRefresher(strava.OAuthConfig(h.Sim.URL, h.Sim.ClientID(), h.Sim.ClientSecret(), ""), h.St.Connections, client.HTTPClient())
	older := app.NewWorker(h.St, refresher, slow, ingesttest.Log())

	create := ingesttest.Job(h.Sim.ActivityEvent("create", 1400, 10, nil))
	h.Claim(create)
	done := make(chan error, 1)
	go func() { done <- older.Run(ctx, create) }()
	<-slow.Fetched // the create's fetch saw "Run 5 km"
	h.Sim.UpdateActivity(1400, func(a *stravasim.Activity) { a.SportType, a.Distance = "Ride", 40000 })
	up := h.Sim.ActivityEvent("update", 1400, 10, nil)
	up.EventTime++
	update := ingesttest.Job(up)
	h.Claim(update)
	if err := fast.Run(ctx, update); err != nil {
		t.Fatal(err)
	}
	close(slow.Release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	w := h.Workout("u1", 1400)
	if w.SportType != "Ride" || w.DistanceMeters != 40000 || w.CorrelationID != update.CorrelationID {
		t.Fatalf("got %s %.0f m (correlation %s), want the newer answer Ride 40000 m (%s)", w.SportType, w.DistanceMeters,
			w.CorrelationID, update.CorrelationID)
	}
	if rec := h.Outbox(create); rec.Status != ops.OutboxDone {
		t.Fatalf("got %+v, want the dropped older answer's job done (not an error)", rec)
	}
}

// TestSpentBudgetDefersNeverParks: with Strava's read budget spent (its 429
// headers say so), the 429'd job and the next ones are deferred to the
// window reset with no further Strava call, none parked; after the reset the
// sweeper runs them all.
func TestSpentBudgetDefersNeverParks(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	h.Link("u1", 10, time.Hour)
	ctx := context.Background()
	h.Sim.SetUsage(100, 100, 100, 100) // the 15-minute read budget is gone
	const n = 6
	jobs := make([]ingest.Job, n)
	for i := range n {
		h.Activity(int64(1500+i), 10, "Run")
		jobs[i] = ingesttest.Job(h.Sim.ActivityEvent("create", int64(1500+i), 10, nil))
		h.Claim(jobs[i])
		if err := h.Worker.Run(ctx, jobs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if got := h.Sim.Stats().ActivityRequests; got != 1 {
		t.Fatalf("got %d Strava requests, want 1 (the 429; the rest deferred on the recorded budget)", got)
	}
	reset := time.Now().UTC().Truncate(15 * time.Minute).Add(15 * time.Minute)
	for _, j := range jobs {
		rec := h.Outbox(j)
		if rec.Status != ops.OutboxReceived || rec.Failures != 0 || !rec.DueAt().Equal(reset) {
			t.Fatalf("got %+v (due %v), want received, no failure, due at the reset %v", rec, rec.DueAt(), reset)
		}
	}
	if parked, _ := h.St.Parked.Parked(ctx, keys.ParkSourceWorker); len(parked) != 0 {
		t.Fatalf("got %d parked, want none", len(parked))
	}
	// The window resets (here: Strava's counters and our clock move on).
	h.Sim.SetUsage(0, 0, 0, 0)
	h.Worker.Runner.Now = func() time.Time { return reset }
	h.Worker.Fetch.Now = h.Worker.Runner.Now
	if res := h.Sweep(reset); res.Dispatched != n {
		t.Fatalf("got %+v, want %d dispatched at the reset", res, n)
	}
	h.Wait()
	if got := len(h.Workouts("u1")); got != n {
		t.Fatalf("got %d workouts, want %d", got, n)
	}
}

// TestAthleteReadCapDefersTheFlood: a flood of events for one athlete (here
// forged ids Strava answers 404 for) fetches at most the cap per window; the
// rest wait in the outbox for the next window, nothing dropped or parked.
// Protection: the per-athlete read counter.
func TestAthleteReadCapDefersTheFlood(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	h.Link("u1", 10, time.Hour)
	ctx := context.Background()
	w := h.NewWorker()
	w.Fetch.Reads.PerWindow = 5
	now := time.Now().UTC()
	ingesttest.SetClock(w, func() time.Time { return now })
	const n = 12
	jobs := make([]ingest.Job, n)
	for i := range n {
		jobs[i] = ingesttest.Job(h.Sim.ActivityEvent("create", int64(900000+i*7919), 10, nil))
		h.Claim(jobs[i])
		if err := w.Run(ctx, jobs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if got := h.Sim.Stats().ActivityRequests; got != 5 {
		t.Fatalf("got %d Strava reads, want the cap 5", got)
	}
	if got := len(h.Workouts("u1")); got != 5 {
		t.Fatalf("got %d tombstones, want 5 (bounded by the cap)", got)
	}
	next := now.Truncate(keys.AthleteReadsWindow).Add(keys.AthleteReadsWindow)
	deferred := 0
	for _, j := range jobs {
		rec := h.Outbox(j)
		switch {
		case rec.Status == ops.OutboxDone:
		case rec.Status == ops.OutboxReceived && rec.DueAt().Equal(next) && rec.Failures == 0:
			deferred++
		default:
			t.Fatalf("got %+v, want done or deferred to %v", rec, next)
		}
	}
	if deferred != n-5 {
		t.Fatalf("got %d deferred, want %d", deferred, n-5)
	}
	// In the next window the next 5 are read.
	ingesttest.SetClock(w, func() time.Time { return next })
	for _, j := range jobs {
		if err := w.Run(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	if got := h.Sim.Stats().ActivityRequests; got != 10 {
		t.Fatalf("got %d Strava reads after the next window, want 10", got)
	}
}

// TestRepeatedEventsCoalesce: events for one activity received before a
// fetch started are answered by that fetch: one Strava read for all.
// Protection: the fetch-start check before fetching.
func TestRepeatedEventsCoalesce(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	h.Link("u1", 10, time.Hour)
	h.Activity(1600, 10, "Run")
	ctx := context.Background()
	const n = 5
	jobs := make([]ingest.Job, n)
	for i := range n {
		ev := h.Sim.ActivityEvent("update", 1600, 10, map[string]string{"title": fmt.Sprint(i)})
		ev.EventTime += int64(i)
		jobs[i] = ingesttest.Job(ev) // all received now, before any fetch
		h.Claim(jobs[i])
	}
	var wg sync.WaitGroup
	if err := h.Worker.Run(ctx, jobs[0]); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := h.NewWorker().Run(ctx, j); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got := h.Sim.Stats().ActivityRequests; got != 1 {
		t.Fatalf("got %d Strava reads, want 1", got)
	}
	for _, j := range jobs {
		if rec := h.Outbox(j); rec.Status != ops.OutboxDone {
			t.Fatalf("got %+v, want done", rec)
		}
	}
	// An event received after the stored fetch started is fetched again.
	later := ingesttest.Job(h.Sim.ActivityEvent("update", 1600, 10, nil))
	later.ReceivedAtUtc = time.Now().Add(time.Second).UTC()
	if err := h.Worker.Process(ctx, later); err != nil {
		t.Fatal(err)
	}
	if got := h.Sim.Stats().ActivityRequests; got != 2 {
		t.Fatalf("got %d Strava reads, want 2", got)
	}
}

// TestSweeperParksAnUndecodableJob: an item whose stored job cannot be
// decoded is parked with the reason, not re-dispatched forever.
func TestSweeperParksAnUndecodableJob(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	ctx := context.Background()
	if _, err := h.St.Outbox.ClaimOutboxItem(ctx, "bad-key", "c", `{"event":{}}`, time.Now().Add(-time.Hour), time.Minute, ingest.IdempotencyTTL); err != nil {
		t.Fatal(err)
	}
	if res := h.Sweep(time.Now()); res.Parked != 1 || res.Dispatched != 0 {
		t.Fatalf("got %+v, want it parked", res)
	}
	rec, err := h.St.Outbox.OutboxItem(ctx, "bad-key")
	if err != nil || rec.Status != ops.OutboxParked || rec.Reason == "" {
		t.Fatalf("got %+v, %v; want parked with a reason", rec, err)
	}
}

// TestQueueRunsAKeyOnce: the sweeper re-dispatching an item whose job still
// waits in (or runs from) the local queue does not queue it twice.
func TestQueueRunsAKeyOnce(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var runs atomic.Int64
	q := handoff.NewQueue(func(context.Context, ingest.Job) error {
		runs.Add(1)
		<-release
		return nil
	}, handoff.QueueOptions{Workers: 2}, ingesttest.Log())
	ctx := context.Background()
	j := ingest.Job{CorrelationID: "c", IdempotencyKey: "k"}
	for range 3 {
		if err := q.Dispatch(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	if err := q.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got := runs.Load(); got != 1 {
		t.Fatalf("got %d runs, want 1", got)
	}
	// Once finished, the key may run again (a later re-dispatch).
	if err := q.Dispatch(ctx, j); err != nil {
		t.Fatal(err)
	}
	if err := q.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got := runs.Load(); got != 2 {
		t.Fatalf("got %d runs, want 2", got)
	}
	_ = q.Close(ctx)
}

func TestSweepResultEMF(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	res := handoff.SweepResult{Due: 7, Dispatched: 5, Skipped: 1, Failed: 1, SetAside: 3, OldestDueAge: 90 * time.Second}
	if err := res.WriteEMF(&b, time.UnixMilli(1700000000000)); err != nil {
		t.Fatal(err)
	}
	line, err := emftest.Parse([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	figure := func(name string) float64 { v, _ := line.Value(name); return v }
	if !line.At.Equal(time.UnixMilli(1700000000000)) || line.Namespace != handoff.SweeperMetricsNamespace || len(line.Metrics) != 7 ||
		figure("OutboxDue") != 7 || figure("OutboxSetAside") != 3 || figure("OutboxDispatched") != 5 || figure("OutboxDispatchFailed") != 1 ||
		figure("OutboxOldestDueAge") != 90 || !strings.HasSuffix(b.String(), "\n") {
		t.Fatalf("got %s, want one EMF line with the sweep's figures", b.String())
	}
}

// TestSweepStopsAtAFullQueue: once the local queue is full the sweep stops,
// so the items it did not reach keep no useless lease and stay due.
func TestSweepStopsAtAFullQueue(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	ctx := context.Background()
	release := make(chan struct{})
	q := handoff.NewQueue(func(context.Context, ingest.Job) error { <-release; return nil },
		handoff.QueueOptions{Workers: 1, Capacity: 1}, ingesttest.Log())
	defer func() { close(release); _ = q.Close(ctx) }()
	past := time.Now().Add(-time.Hour).UTC()
	for i := range 5 {
		j := ingesttest.Job(h.Sim.ActivityEvent("delete", int64(1700+i), int64(10+i), nil)) // five athletes: a turn each (one athlete's would be one burst)
		j.ReceivedAtUtc = past
		h.Claim(j)
	}
	sw := handoff.NewSweeper(app.SweeperStores(h.St), q, ingesttest.Log())
	res, err := sw.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// One job runs (blocked), one waits in the buffer; the third finds it full.
	if res.Due != 5 || res.Dispatched < 1 || res.Dispatched > 2 || res.Failed != 1 {
		t.Fatalf("got %+v, want the sweep to stop at the first full-queue refusal", res)
	}
	b, err := h.St.Pending.PendingOutbox(ctx, time.Now())
	if err != nil || b.Due != 5-res.Dispatched-res.Failed {
		t.Fatalf("got backlog %+v, %v; want %d still due", b, err, 5-res.Dispatched-res.Failed)
	}
}

// TestShortRateWindow: against a simulator running short rate-limit windows
// (CC_STRAVA_WINDOW), the read cap and a 429 defer to that window's end.
func TestShortRateWindow(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	h.Link("u1", 10, time.Hour)
	ctx := context.Background()
	w := h.NewWorker()
	w.Fetch.Reads.RateWindow, w.Fetch.Reads.PerWindow = 10*time.Second, 1
	now := time.Now().UTC()
	ingesttest.SetClock(w, func() time.Time { return now })
	next := now.Truncate(10 * time.Second).Add(10 * time.Second)
	jobs := make([]ingest.Job, 3)
	for i := range jobs {
		h.Activity(int64(1800+i), 10, "Run")
		jobs[i] = ingesttest.Job(h.Sim.ActivityEvent("create", int64(1800+i), 10, nil))
		h.Claim(jobs[i])
	}
	if err := w.Run(ctx, jobs[0]); err != nil {
		t.Fatal(err)
	}
	if err := w.Run(ctx, jobs[1]); err != nil { // the cap of 1 is used up
		t.Fatal(err)
	}
	if rec := h.Outbox(jobs[1]); !rec.DueAt().Equal(next) {
		t.Fatalf("capped: got due %v, want the 10-second window's end %v", rec.DueAt(), next)
	}
	w.Fetch.Reads.PerWindow = 0
	h.Sim.FailNext(stravasim.EndpointActivity, http.StatusTooManyRequests, 1)
	if err := w.Run(ctx, jobs[2]); err != nil {
		t.Fatal(err)
	}
	if rec := h.Outbox(jobs[2]); !rec.DueAt().Equal(next) || rec.Failures != 0 {
		t.Fatalf("429: got %+v (due %v), want deferred to %v", rec, rec.DueAt(), next)
	}
}

// TestParkedRecordGoesWhenTheJobIsDone: a job parked at shutdown (the local
// queue's on-failure destination: outcome not recorded, the item stays
// received) and completed later by the sweeper leaves no PARKED#WORKER
// record, and a stale record of a done job redriven anyway does not run it
// again. Protections: the worker removes the parked record of a done job
// whose outbox item the park marked (as the local queue's parkJob does);
// Run skips a redriven job whose item is done.
func TestParkedRecordGoesWhenTheJobIsDone(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	h.Link("u1", 10, time.Hour)
	h.Activity(1400, 10, "Run")
	ctx := context.Background()
	j := ingesttest.Job(h.Sim.ActivityEvent("create", 1400, 10, nil))
	h.Claim(j)
	rj := j
	rj.Redrive = true
	parked := &ops.ParkedRecord{Source: keys.ParkSourceWorker, RecordID: j.IdempotencyKey, Reason: "shutdown",
		Payload: string(ingesttest.MustJSON(t, rj)), CorrelationID: j.CorrelationID}
	if err := h.St.Outbox.MarkOutboxParked(ctx, j.IdempotencyKey); err != nil {
		t.Fatal(err)
	}
	if err := h.St.Parked.Park(ctx, parked); err != nil {
		t.Fatal(err)
	}
	if res := h.Sweep(time.Now().Add(ingest.DefaultLease + time.Second)); res.Dispatched != 1 {
		t.Fatalf("got sweep %+v, want the parked job dispatched", res)
	}
	h.Wait()
	if rec := h.Outbox(j); rec.Status != ops.OutboxDone {
		t.Fatalf("got %+v, want done", rec)
	}
	h.Workout("u1", 1400)
	if recs, err := h.St.Parked.Parked(ctx, keys.ParkSourceWorker); err != nil || len(recs) != 0 {
		t.Fatalf("got parked %+v, %v; want none once the job is done", recs, err)
	}
	// A stale record (its removal failed, or parked by older code) redriven
	// anyway: the done job is not run again. A delete event shows it (its
	// re-run would write the workout again).
	dj := ingesttest.Job(h.Sim.ActivityEvent("delete", 1400, 10, nil))
	h.Claim(dj)
	if err := h.Worker.Run(ctx, dj); err != nil {
		t.Fatal(err)
	}
	before := h.Workout("u1", 1400)
	fetches := h.Sim.Stats().ActivityRequests
	dj.Redrive = true
	if err := h.Worker.Handle(ctx, ingesttest.MustJSON(t, dj)); err != nil {
		t.Fatal(err)
	}
	after := h.Workout("u1", 1400)
	if got := h.Sim.Stats().ActivityRequests; got != fetches || !after.UpdatedAtUtc.Equal(before.UpdatedAtUtc) {
		t.Fatalf("got %d activity requests and workout updated at %s after redriving a done job, want %d and %s (not run again)",
			got, after.UpdatedAtUtc, fetches, before.UpdatedAtUtc)
	}
}
