package ingest_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/app"
	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/purge"
	"github.com/commitcollect/backend/model/strava"
	"github.com/commitcollect/backend/scripts/stravasim"
	"github.com/commitcollect/backend/test/dynamolocal"
	"github.com/commitcollect/backend/test/ingesttest"
)

func storeQueryAuditByCorrelation(h *ingesttest.Harness, corr string) ([]model.AuditEntry, bool, error) {
	return dynamo.QueryEntities[model.AuditEntry](context.Background(), h.St.DB, h.St.DB.Tables().Audit,
		keys.CorrelationPK(corr), "", dynamo.QueryOptions{Index: dynamo.IndexGSI1})
}

func newBrokenStore(t *testing.T) *store.Adapters {
	db, _ := dynamolocal.Clients(t)
	return store.New(db, dynamo.TableNames("missing-"+dynamolocal.UniquePrefix()))
}

func TestPipelineCreateUpdateDelete(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	h.Link("u1", 10, time.Hour)
	h.Activity(100, 10, "Run")
	ev := h.Sim.ActivityEvent("create", 100, 10, nil)
	h.Deliver(ev)
	created := h.Workout("u1", 100)
	if created.SportType != "Run" || created.DistanceMeters != 5000 || created.MovingTimeSeconds != 1500 ||
		created.TotalElevationGain != 30 || created.IsDeleted || created.AthleteID != 10 ||
		!created.StartDateUtc.Equal(time.Date(2026, 3, 2, 6, 0, 0, 0, time.UTC)) {
		t.Fatalf("got %+v after create", created)
	}

	time.Sleep(10 * time.Millisecond) // updatedAtUtc must move
	h.Sim.UpdateActivity(100, func(a *stravasim.Activity) { a.SportType, a.Distance = "TrailRun", 6200 })
	up := h.Sim.ActivityEvent("update", 100, 10, map[string]string{"type": "TrailRun"})
	up.EventTime = ev.EventTime + 1
	h.Deliver(up)
	updated := h.Workout("u1", 100)
	if updated.SportType != "TrailRun" || updated.DistanceMeters != 6200 || !updated.CreatedAtUtc.Equal(created.CreatedAtUtc) ||
		!updated.UpdatedAtUtc.After(created.UpdatedAtUtc) || updated.CorrelationID == created.CorrelationID {
		t.Fatalf("got %+v after update, want TrailRun 6200 with createdAt %v kept", updated, created.CreatedAtUtc)
	}

	h.Sim.DeleteActivity(100)
	del := h.Sim.ActivityEvent("delete", 100, 10, nil)
	del.EventTime = ev.EventTime + 2
	h.Deliver(del)
	ws := h.Workouts("u1")
	if len(ws) != 1 {
		t.Fatalf("got %d workout items, want 1", len(ws))
	}
	got := ws[0]
	if !got.IsDeleted || got.DeletedAtUtc == nil || got.SportType != "" || got.DistanceMeters != 0 || !got.StartDateUtc.IsZero() ||
		!got.CreatedAtUtc.Equal(created.CreatedAtUtc) || got.DeletedReason != model.WorkoutHiddenOrDeleted {
		t.Fatalf("got %+v after delete, want a tombstone (hidden-or-deleted) that keeps none of the activity's content", got)
	}
	a := h.Audits(keys.UserPK("u1"))
	for _, kind := range []string{ingest.AuditActivityCreate, ingest.AuditActivityUpdate, ingest.AuditActivityDelete} {
		if len(a[kind]) != 1 {
			t.Fatalf("got %d %s audits, want 1 (all: %v)", len(a[kind]), kind, a)
		}
	}
	if e := a[ingest.AuditActivityCreate][0]; e.ExpiresAt < time.Now().Add(89*24*time.Hour).Unix() || e.UserID != "u1" {
		t.Fatalf("got audit %+v, want a 90-day TTL and the user", e)
	}
	// A delete event is confirmed by one Strava read (its 404).
	if n := h.Sim.Stats().ActivityRequests; n != 3 {
		t.Fatalf("got %d Strava requests, want 3", n)
	}
}

func TestPipelineDeleteBeforeCreateConvergesToDeleted(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	h.Link("u1", 10, time.Hour)
	ctx := context.Background()

	// Strava already deleted the activity; its delete event arrives first.
	create := h.Sim.ActivityEvent("create", 200, 10, nil)
	del := h.Sim.ActivityEvent("delete", 200, 10, nil)
	del.EventTime = create.EventTime + 1
	h.Deliver(del)
	h.Deliver(create) // its fetch answers 404
	if w := h.Workout("u1", 200); !w.IsDeleted {
		t.Fatalf("got %+v, want deleted", w)
	}

	// The create's fetch started while Strava still served the activity;
	// its answer lands after the delete's 404 was written (the tombstone
	// of a workout never written): the older fetch loses to the 404.
	h.Activity(201, 10, "Run")
	client := strava.NewClient(h.Sim.URL, nil)
	slow := &ingesttest.SlowFirstFetch{Next: client, Fetched: make(chan struct{}), Release: make(chan struct{})}
	refresher := strava.NewRefresher(strava.OAuthConfig(h.Sim.URL, h.Sim.ClientID(), h.Sim.ClientSecret(), ""), h.St.Connections, client.HTTPClient())
	older := app.NewWorker(h.St, refresher, slow, ingesttest.Log())
	done := make(chan error, 1)
	go func() { done <- older.Process(ctx, ingesttest.Job(h.Sim.ActivityEvent("create", 201, 10, nil))) }()
	<-slow.Fetched
	h.Sim.DeleteActivity(201)
	if err := h.Worker.Process(ctx, ingesttest.Job(h.Sim.ActivityEvent("delete", 201, 10, nil))); err != nil {
		t.Fatal(err)
	}
	close(slow.Release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if w := h.Workout("u1", 201); !w.IsDeleted {
		t.Fatalf("got %+v, want deleted", w)
	}
	if n := len(h.Workouts("u1")); n != 2 {
		t.Fatalf("got %d workout items, want 2", n)
	}
}

// TestPipeline429DefersToTheWindowReset: a 429 is never a failure: the job
// stays received, not before the next 15-minute boundary, and runs after it.
func TestPipeline429DefersToTheWindowReset(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	h.Link("u1", 10, time.Hour)
	h.Activity(300, 10, "Ride")
	ctx := context.Background()

	h.Sim.FailNext(stravasim.EndpointActivity, http.StatusTooManyRequests, 1)
	j := ingesttest.Job(h.Sim.ActivityEvent("create", 300, 10, nil))
	err := h.Worker.Process(ctx, j)
	var de *ingest.DeferError
	if !errors.As(err, &de) || !errors.Is(err, model.ErrRetryable) {
		t.Fatalf("got %v, want a DeferError (retryable without an outbox)", err)
	}
	st, err := h.Budget.RateLimitState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.ReadShortUsage != 1 || st.ReadDailyUsage != 1 || st.ShortUsage != 1 || st.ReadShortLimit != 100 ||
		st.ReadDailyLimit != 1000 || st.ShortLimit != 200 || st.DailyLimit != 2000 {
		t.Fatalf("got rate-limit state %+v, want the 429's headers", st)
	}

	// Through the webhook and the queue: deferred, not retried, not parked.
	h.Sim.FailNext(stravasim.EndpointActivity, http.StatusTooManyRequests, 1)
	ev := h.Sim.ActivityEvent("create", 300, 10, nil)
	h.Deliver(ev)
	rec := h.Outbox(ingesttest.Job(ev))
	reset := time.Now().UTC().Truncate(15 * time.Minute).Add(15 * time.Minute)
	if rec.Status != ops.OutboxReceived || rec.Failures != 0 || rec.Deferrals != 1 ||
		(rec.NotBefore != reset.UnixMilli() && rec.NotBefore != reset.Add(15*time.Minute).UnixMilli()) {
		t.Fatalf("got %+v, want received, one deferral, not before %v", rec, reset)
	}
	if _, err := h.St.Workouts.Workout(ctx, "u1", 300); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("got %v, want no workout yet", err)
	}
	if res := h.Sweep(rec.DueAt().Add(-time.Millisecond)); res.Due != 0 {
		t.Fatalf("got %+v before the reset, want nothing due", res)
	}
	if res := h.Sweep(rec.DueAt()); res.Dispatched != 1 {
		t.Fatalf("got %+v at the reset, want it dispatched", res)
	}
	h.Wait()
	if w := h.Workout("u1", 300); w.SportType != "Ride" {
		t.Fatalf("got %+v, want the workout after the reset", w)
	}
	if rec := h.Outbox(ingesttest.Job(ev)); rec.Status != ops.OutboxDone {
		t.Fatalf("got %+v, want done", rec)
	}
}

func TestPipelineDefersWhenReadBudgetNearlySpent(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	h.Link("u1", 10, time.Hour)
	h.Activity(400, 10, "Run")
	h.Activity(401, 10, "Run")
	ctx := context.Background()
	h.Sim.SetUsage(10, 10, 94, 94)
	if err := h.Worker.Process(ctx, ingesttest.Job(h.Sim.ActivityEvent("create", 400, 10, nil))); err != nil {
		t.Fatal(err) // usage 95 of 100 now recorded
	}
	before := h.Sim.Stats().ActivityRequests
	err := h.Worker.Process(ctx, ingesttest.Job(h.Sim.ActivityEvent("create", 401, 10, nil)))
	if !errors.Is(err, model.ErrRetryable) {
		t.Fatalf("got %v, want a retryable deferral", err)
	}
	if after := h.Sim.Stats().ActivityRequests; after != before {
		t.Fatalf("Strava was called while the budget was nearly spent (%d → %d)", before, after)
	}
}

func TestPipeline401MarksNeedsReauthWithoutRetrying(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	h.Link("u1", 10, time.Hour)
	h.Activity(500, 10, "Run")
	h.Activity(501, 10, "Run")
	ctx := context.Background()
	h.Sim.FailNext(stravasim.EndpointActivity, http.StatusUnauthorized, 1)
	if err := h.Worker.Process(ctx, ingesttest.Job(h.Sim.ActivityEvent("create", 500, 10, nil))); err != nil {
		t.Fatalf("got %v, want nil (no retry storm)", err)
	}
	c, err := h.Connection("u1")
	if err != nil || !c.NeedsReauth {
		t.Fatalf("got %+v, %v; want needsReauth", c, err)
	}
	before := h.Sim.Stats()
	if err := h.Worker.Process(ctx, ingesttest.Job(h.Sim.ActivityEvent("create", 501, 10, nil))); err != nil {
		t.Fatalf("got %v, want nil", err)
	}
	after := h.Sim.Stats()
	if after.ActivityRequests != before.ActivityRequests || after.TokenRefreshes != before.TokenRefreshes {
		t.Fatal("a connection needing re-authorization still called Strava")
	}
	if n := len(h.Audits(keys.UserPK("u1"))[ingest.AuditNeedsReauth]); n != 2 {
		t.Fatalf("got %d %s audits, want 2", n, ingest.AuditNeedsReauth)
	}
}

func TestPipelineDeauthorization(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	h.Link("u1", 10, time.Hour)
	h.Activity(600, 10, "Run")
	h.Activity(601, 10, "Swim")
	h.Deliver(h.Sim.ActivityEvent("create", 600, 10, nil))
	h.Deliver(h.Sim.ActivityEvent("create", 601, 10, nil))
	ctx := context.Background()

	h.Sim.RevokeAthlete(10) // the athlete revoked access on strava.com
	h.Deliver(h.Sim.DeauthorizationEvent(10))
	if _, err := h.Connection("u1"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("connection: got %v, want it removed", err)
	}
	// Everything that came from Strava is gone within the job: the
	// workouts, the athlete mapping (a keyed hash of the id finds u1).
	if _, err := h.St.Users.ResolveAthlete(ctx, 10); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("athlete mapping: got %v, want it deleted", err)
	}
	if u, err := purge.New(h.St).RevokedAthleteOwner(ctx, 10); err != nil || u != "u1" {
		t.Fatalf("revoked athlete mapping: got %q, %v; want u1", u, err)
	}
	if ws := h.Workouts("u1"); len(ws) != 0 {
		t.Fatalf("%d workouts left after the revocation, want 0", len(ws))
	}
	if n := len(h.Audits(keys.UserPK("u1"))[ingest.AuditAthleteDeauthorize]); n != 1 {
		t.Fatalf("got %d deauthorization audits, want 1", n)
	}

	// Later events for the athlete are audited as not connected, without Strava calls.
	before := h.Sim.Stats().ActivityRequests
	h.Activity(602, 10, "Run")
	h.Deliver(h.Sim.ActivityEvent("create", 602, 10, nil))
	if n := len(h.Audits(keys.AthletePK(10))[ingest.AuditAthleteNotLinked]); n != 1 {
		t.Fatalf("got %d not-linked audits, want 1", n)
	}
	if after := h.Sim.Stats().ActivityRequests; after != before {
		t.Fatal("an unlinked athlete's event called Strava")
	}
	if _, err := h.St.Workouts.Workout(ctx, "u1", 602); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("got %v, want no workout for an unlinked athlete", err)
	}
}

func TestPipelineExpiredTokenRefreshedOnceAcrossWorkers(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	old := h.Link("u1", 10, -time.Minute)
	ctx := context.Background()
	const n = 4
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		h.Activity(int64(700+i), 10, "Run")
		w := h.NewWorker() // a separate Lambda instance
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.Process(ctx, ingesttest.Job(h.Sim.ActivityEvent("create", int64(700+i), 10, nil)))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
	}
	if got := h.Sim.Stats().TokenRefreshes; got != 1 {
		t.Fatalf("got %d refreshes, want 1", got)
	}
	c, _ := h.Connection("u1")
	if c.RefreshToken == old.RefreshToken || !h.Sim.RefreshTokenValid(c.RefreshToken) {
		t.Fatal("the stored refresh token is not the rotated one")
	}
	if got := len(h.Workouts("u1")); got != n {
		t.Fatalf("got %d workouts, want %d", got, n)
	}
}

func TestWorkerHandlePoisonAndRetryable(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	h.Link("u1", 10, time.Hour)
	ctx := context.Background()
	if err := h.Worker.Handle(ctx, json.RawMessage(`not a job`)); err != nil {
		t.Fatalf("undecodable job: got %v, want nil (dropped)", err)
	}
	// An activity Strava serves without a sport type can never be mapped.
	h.Sim.PutActivity(stravasim.Activity{ID: 800, AthleteID: 10, StartDate: time.Now()})
	j := ingesttest.Job(h.Sim.ActivityEvent("create", 800, 10, nil))
	raw, _ := json.Marshal(j)
	if err := h.Worker.Handle(ctx, raw); err != nil {
		t.Fatalf("poison activity: got %v, want nil", err)
	}
	if n := len(h.Audits(keys.AthletePK(10))[ingest.AuditEventRejected]); n != 1 {
		t.Fatalf("got %d rejected audits, want 1", n)
	}
	// A 500 is returned so Lambda retries.
	h.Activity(801, 10, "Run")
	h.Sim.FailNext(stravasim.EndpointActivity, 500, 1)
	raw, _ = json.Marshal(ingesttest.Job(h.Sim.ActivityEvent("create", 801, 10, nil)))
	if err := h.Worker.Handle(ctx, raw); !errors.Is(err, model.ErrRetryable) {
		t.Fatalf("500: got %v, want ErrRetryable", err)
	}
}
