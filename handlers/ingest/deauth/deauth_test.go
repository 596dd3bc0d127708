package deauth_test

import (
	"bytes"
	"context"
	"errors"
	"github.com/commitcollect/backend/handlers/ingest/budget"
	"io"
	"maps"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/commitcollect/backend/handlers/app"
	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/retry"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/purge"
	"github.com/commitcollect/backend/scripts/stravasim"
	"github.com/commitcollect/backend/test/dynamolocal"
	"github.com/commitcollect/backend/test/ingesttest"
)

// The tests of this file run deauthorization events:
// a deauthorization is confirmed by the grant failing at Strava and only
// when it is newer than the grant; its cleanup is resumable; writes landing
// afterwards keep the expiry.

// TestForgedDeauthorizationIsNotConfirmed: a deauthorization posted while
// the athlete's grant is valid removes nothing: Strava answers the grant's
// authenticated call once, the event is audited unconfirmed and settled.
// Protection: confirmRevoked (the grant must fail).
func TestForgedDeauthorizationIsNotConfirmed(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	tok := h.Link("u1", 10, time.Hour)
	h.WriteActivities(10, 800, 2)
	before := h.Sim.Stats()

	ev := h.Sim.DeauthorizationEvent(10) // forged: Strava revoked nothing
	h.Deliver(ev)

	// Confirming asked Strava now: one refresh (the grant rotated, not
	// removed) and one read with the fresh token.
	c, err := h.Connection("u1")
	if err != nil || c.RefreshToken == tok.RefreshToken || !h.Sim.RefreshTokenValid(c.RefreshToken) || c.NeedsReauth {
		t.Fatalf("connection %+v, %v; want it kept, with the refreshed tokens", c, err)
	}
	for _, w := range h.Workouts("u1") {
		if w.ExpiresAt != 0 {
			t.Fatalf("workout %d scheduled for deletion (expiresAt %d)", w.ActivityID, w.ExpiresAt)
		}
	}
	if _, err := h.St.Guard.UserGuard(context.Background(), "u1"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("guard: got %v, want none", err)
	}
	a := h.Audits(keys.UserPK("u1"))
	if len(a[ingest.AuditDeauthUnconfirmed]) != 1 || len(a[ingest.AuditAthleteDeauthorize]) != 0 {
		t.Fatalf("audits %v: want one %s and no %s", slices.Sorted(maps.Keys(a)), ingest.AuditDeauthUnconfirmed, ingest.AuditAthleteDeauthorize)
	}
	after := h.Sim.Stats()
	if n := after.AthleteRequests - before.AthleteRequests; n != 1 || after.TokenRefreshes != before.TokenRefreshes+1 {
		t.Fatalf("%d athlete requests and %d refreshes, want 1 and 1", n, after.TokenRefreshes-before.TokenRefreshes)
	}
	if rec := h.Outbox(ingesttest.Job(ev)); rec.Status != ops.OutboxDone {
		t.Fatalf("outbox %+v, want done", rec)
	}
}

// TestLateDeauthorizationIsStale: a deauthorization whose event is older
// than the connection's grant (the athlete revoked, then connected again;
// the event is processed late) removes nothing, even when the current grant
// fails too, and costs no Strava call.
// Protection: the event time vs. grant time check.
func TestLateDeauthorizationIsStale(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	ctx := context.Background()
	h.Link("u1", 10, time.Hour) // the reconnect: grant now
	h.WriteActivities(10, 810, 1)
	// The new grant is refused too (flagged): only the event time tells the
	// old revocation from a new one.
	if err := h.St.Connections.MarkNeedsReauth(ctx, "u1", time.Now()); err != nil {
		t.Fatal(err)
	}
	before := h.Sim.Stats()
	ev := h.Sim.DeauthorizationEvent(10)
	ev.EventTime = time.Now().Add(-time.Hour).Unix() // the revocation before the reconnect
	h.Deliver(ev)

	if _, err := h.Connection("u1"); err != nil {
		t.Fatalf("connection: %v; want it kept", err)
	}
	if _, err := h.St.Guard.UserGuard(ctx, "u1"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("guard: got %v, want none", err)
	}
	if w := h.Workout("u1", 810); w.ExpiresAt != 0 {
		t.Fatalf("workout scheduled for deletion (expiresAt %d)", w.ExpiresAt)
	}
	if n := len(h.Audits(keys.UserPK("u1"))[ingest.AuditDeauthStale]); n != 1 {
		t.Fatalf("got %d %s audits, want 1", n, ingest.AuditDeauthStale)
	}
	if after := h.Sim.Stats(); after.AthleteRequests != before.AthleteRequests || after.TokenRefreshes != before.TokenRefreshes {
		t.Fatal("a stale deauthorization called Strava")
	}
}

// TestUnconfirmableDeauthorizationWaits: when Strava cannot answer (5xx)
// the deauthorization is retried later, nothing is removed meanwhile; the
// retry confirms it. Protection: confirmRevoked returning a retryable error
// for anything but 200 and 401.
func TestUnconfirmableDeauthorizationWaits(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	ctx := context.Background()
	h.Link("u1", 10, time.Hour)
	h.Sim.RevokeAthlete(10)
	// The confirmation's refresh meets a 5xx: Strava cannot say.
	h.Sim.FailNext(stravasim.EndpointToken, http.StatusServiceUnavailable, 1)
	j := ingesttest.Job(h.Sim.DeauthorizationEvent(10))
	h.Claim(j)
	w := h.NewWorker()
	if err := w.Run(ctx, j); err != nil {
		t.Fatal(err)
	}
	if rec := h.Outbox(j); rec.Status != ops.OutboxReceived || rec.Failures != 1 {
		t.Fatalf("outbox %+v, want received with one failure", rec)
	}
	if _, err := h.Connection("u1"); err != nil {
		t.Fatalf("connection: %v; want it kept while unconfirmed", err)
	}
	if err := w.Run(ctx, j); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Connection("u1"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("connection: got %v, want it removed once confirmed", err)
	}
	if rec := h.Outbox(j); rec.Status != ops.OutboxDone {
		t.Fatalf("outbox %+v, want done", rec)
	}
}

// failingPurge is an HTTP transport in front of DynamoDB Local that lets
// `allow` batch deletes of workouts through and fails every later one (a
// Lambda timing out, DynamoDB throttling midway through the purge).
type failingPurge struct {
	next  http.RoundTripper
	allow atomic.Int64
}

func (f *failingPurge) RoundTrip(r *http.Request) (*http.Response, error) {
	// The purge deletes workouts in transactions with the guard's check.
	if r.Header.Get("X-Amz-Target") == "DynamoDB_20120810.TransactWriteItems" && r.Body != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`{"S":"`+keys.PrefixWorkoutStrava)) && f.allow.Add(-1) < 0 {
			return nil, errors.New("injected failure midway through the purge")
		}
	}
	return f.next.RoundTrip(r)
}

// TestConfirmedDeauthorizationIsResumable: a confirmed deauthorization
// removes the connection, records the revocation in the guard and deletes
// what came from Strava; a failure midway through that purge leaves the
// outbox item received, and the retry (finding the connection gone)
// finishes it: no workout, no owner mapping, a keyed-hash mapping to u1.
// Protections: the job failing until the purge is done; the resume path
// (guard revoked at the event's time → purge again).
func TestConfirmedDeauthorizationIsResumable(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	ctx := context.Background()
	h.Link("u1", 10, time.Hour)
	h.WriteActivities(10, 820, 5)
	h.Sim.RevokeAthlete(10) // the athlete revoked access on strava.com

	ft := &failingPurge{next: http.DefaultTransport}
	ft.allow.Store(0)
	db := dynamodb.NewFromConfig(dynamolocal.Config(dynamolocal.Endpoint(t)), func(o *dynamodb.Options) {
		o.HTTPClient = &http.Client{Transport: ft}
	})
	faulty := store.New(db, h.St.DB.Tables())
	faulty.DB.Secrets = h.St.DB.Secrets
	w := app.NewStravaWorker(faulty, app.StravaSettings{BaseURL: h.Sim.URL, ClientID: h.Sim.ClientID(),
		ClientSecret: h.Sim.ClientSecret(), AthleteReadsPerWindow: budget.DefaultAthleteReadsPerWindow}, ingesttest.Log())

	ev := h.Sim.DeauthorizationEvent(10)
	j := ingesttest.Job(ev)
	h.Claim(j)
	if err := w.Run(ctx, j); err != nil {
		t.Fatal(err)
	}
	if rec := h.Outbox(j); rec.Status != ops.OutboxReceived || rec.Failures != 1 {
		t.Fatalf("outbox %+v, want received with one failure after the purge failed", rec)
	}
	if _, err := h.Connection("u1"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("connection: got %v, want it removed", err)
	}
	g, err := h.St.Guard.UserGuard(ctx, "u1")
	if err != nil || !g.Revoked() || g.StravaRevokedAtUtc.Unix() != ev.EventTime {
		t.Fatalf("guard %+v, %v; want revoked at the event time %d", g, err, ev.EventTime)
	}
	if n := len(h.Workouts("u1")); n != 5 {
		t.Fatalf("%d workouts after the failed purge, want 5 (the delete failed)", n)
	}

	// The retry (another instance) finds the connection gone and resumes.
	if err := h.NewWorker().Run(ctx, j); err != nil {
		t.Fatal(err)
	}
	if rec := h.Outbox(j); rec.Status != ops.OutboxDone {
		t.Fatalf("outbox %+v, want done", rec)
	}
	if n := len(h.Workouts("u1")); n != 0 {
		t.Fatalf("%d workouts, want 0", n)
	}
	if _, err := h.St.Users.ResolveAthlete(ctx, 10); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("owner: %v; want the mapping deleted", err)
	}
	if u, err := purge.New(h.St).RevokedAthleteOwner(ctx, 10); err != nil || u != "u1" {
		t.Fatalf("revoked owner: %q, %v; want u1", u, err)
	}
	if n := len(h.Audits(keys.UserPK("u1"))[ingest.AuditAthleteDeauthorize]); n != 1 {
		t.Fatalf("got %d %s audits, want 1", n, ingest.AuditAthleteDeauthorize)
	}
}

// TestFetchInFlightDuringDeauthorizationLeavesNothing: a fetch answered
// before the athlete revoked lands after the deauthorization was processed;
// the workout it writes removes itself.
// Protection: the guard check after UpsertWorkout (revoked → delete).
func TestFetchInFlightDuringDeauthorizationLeavesNothing(t *testing.T) {
	t.Parallel()
	h := ingesttest.NewStreamed(t)
	ctx := context.Background()
	h.Link("u1", 10, time.Hour)
	h.Activity(830, 10, "Run")
	gate := make(chan struct{})
	h.Sim.AddFault(stravasim.Fault{ActivityID: 830, Gate: gate})
	create := ingesttest.Job(h.Sim.ActivityEvent("create", 830, 10, nil))
	h.Claim(create)
	before := h.Sim.Stats().ActivityRequests
	done := make(chan error, 1)
	go func() { done <- h.NewWorker().Run(ctx, create) }()
	for h.Sim.Stats().ActivityRequests == before {
		if err := retry.Sleep(ctx, 5*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	// The answer (200) is decided; now the athlete revokes and the
	// deauthorization is processed before the fetch lands.
	h.Sim.RevokeAthlete(10)
	deauth := ingesttest.Job(h.Sim.DeauthorizationEvent(10))
	h.Claim(deauth)
	if err := h.NewWorker().Run(ctx, deauth); err != nil {
		t.Fatal(err)
	}
	if rec := h.Outbox(deauth); rec.Status != ops.OutboxDone {
		t.Fatalf("deauthorization outbox %+v, want done", rec)
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	g, err := h.St.Guard.UserGuard(ctx, "u1")
	if err != nil || !g.Revoked() {
		t.Fatalf("guard %+v, %v; want revoked", g, err)
	}
	h.Project() // the landed write's record: the guard, read with the milestones, removes it
	if _, err := h.St.Workouts.Workout(ctx, "u1", 830); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("workout written after the revocation: %v, want it removed", err)
	}
}

// TestDeauthorizationConfirmationDefersOn429: Strava's 429 on the
// confirmation call defers the job to the window reset (not a failure) and
// removes nothing. Protection: confirmRevoked's 429 → DeferError.
func TestDeauthorizationConfirmationDefersOn429(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	ctx := context.Background()
	h.Link("u1", 10, time.Hour)
	// The refresh Verify makes succeeds; the confirming read is refused.
	h.Sim.FailNext(stravasim.EndpointAthlete, http.StatusTooManyRequests, 1)
	j := ingesttest.Job(h.Sim.DeauthorizationEvent(10))
	h.Claim(j)
	if err := h.NewWorker().Run(ctx, j); err != nil {
		t.Fatal(err)
	}
	if rec := h.Outbox(j); rec.Status != ops.OutboxReceived || rec.Deferrals != 1 || rec.Failures != 0 || rec.NotBefore == 0 {
		t.Fatalf("outbox %+v, want received and deferred (no failure)", rec)
	}
	if _, err := h.Connection("u1"); err != nil {
		t.Fatalf("connection: %v; want it kept while unconfirmed", err)
	}
}

// TestDeauthorizationIsNotHeldBackByTheAthletesCaps: an athlete whose read
// caps are spent (forged events in their name, or their own uploads)
// revokes the grant; the confirmation does not wait for the caps, and the
// connection and data go at once. Protection: confirmRevoked leaving the
// athlete's caps alone (with takeAthleteRead there, the job is deferred to
// the next window and nothing is removed).
func TestDeauthorizationIsNotHeldBackByTheAthletesCaps(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	ctx := context.Background()
	h.Link("u1", 10, time.Hour)
	h.WriteActivities(10, 820, 2)
	// Caps of one read per window and day, both spent: every read of
	// this athlete would now be refused.
	h.Worker.Fetch.Reads.PerWindow, h.Worker.Fetch.Reads.PerDay = 1, 1
	now := time.Now()
	if _, err := h.Budget.TakeAthleteReads(ctx, 10, now, h.Worker.Fetch.Reads.RateWindow, 1, 1); err != nil {
		t.Fatal(err)
	}
	if err := h.Budget.TakeAthleteDayReads(ctx, 10, now, 1, 1); err != nil {
		t.Fatal(err)
	}
	h.Sim.RevokeAthlete(10)
	ev := h.Sim.DeauthorizationEvent(10)
	h.Deliver(ev)
	if rec := h.Outbox(ingesttest.Job(ev)); rec.Status != ops.OutboxDone || rec.Deferrals != 0 {
		t.Fatalf("outbox %+v, want done without a deferral", rec)
	}
	if _, err := h.Connection("u1"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("connection: got %v, want it removed", err)
	}
	if n := len(h.Workouts("u1")); n != 0 {
		t.Fatalf("%d workouts left, want the purge done", n)
	}
}

// TestForgedDeauthorizationsInAnAthletesNameCostOneConfirmation: eleven
// forged deauthorizations naming a real athlete cost two confirmations at
// Strava, not eleven: the first asks; those arriving within the minute
// after wait for it (no call); when they run again Strava's answer has made
// them stale, but for one that began its own check. Nothing is removed.
// Protections: the wait for a check begun moments ago (without it, each of
// the ten asks Strava at once), the stale rule of an honoured grant
// (without it, the ten ask again one by one, a minute apart).
func TestForgedDeauthorizationsInAnAthletesNameCostOneConfirmation(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	h.Link("u1", 10, time.Hour)
	h.WriteActivities(10, 830, 2)
	before := h.Sim.Stats()
	first := h.Sim.DeauthorizationEvent(10) // forged: Strava revoked nothing
	h.Deliver(first)
	if got := h.Sim.Stats().AthleteRequests - before.AthleteRequests; got != 1 {
		t.Fatalf("the first forged deauthorization made %d confirming reads, want 1", got)
	}
	var later []ingest.Job
	for i := range 10 {
		ev := h.Sim.DeauthorizationEvent(10)
		ev.EventTime = first.EventTime + int64(i) + 1
		h.Deliver(ev)
		later = append(later, ingesttest.Job(ev))
	}
	if got := h.Sim.Stats().AthleteRequests - before.AthleteRequests; got != 1 {
		t.Fatalf("ten more forged deauthorizations within the minute made %d confirming reads in all, want still 1", got)
	}
	for _, j := range later {
		if rec := h.Outbox(j); rec.Status != ops.OutboxReceived || rec.Deferrals != 1 || rec.Failures != 0 {
			t.Fatalf("outbox %+v: want waiting for the first confirmation (deferred, no failure)", rec)
		}
	}
	// A minute on, the ten run again: one asks Strava anew, the others
	// find its answer (or wait one more minute and then find it).
	for _, at := range []time.Time{time.Now().Add(time.Minute + time.Second), time.Now().Add(2*time.Minute + 2*time.Second)} {
		ingesttest.SetClock(h.Worker, func() time.Time { return at })
		h.Sweep(at)
		h.Wait()
	}
	if got := h.Sim.Stats().AthleteRequests - before.AthleteRequests; got != 2 {
		t.Fatalf("eleven forged deauthorizations made %d confirming reads, want 2", got)
	}
	for _, j := range later {
		if rec := h.Outbox(j); rec.Status != ops.OutboxDone {
			t.Fatalf("outbox %+v: want done", rec)
		}
	}
	if c, err := h.Connection("u1"); err != nil || c.HonouredAtUtc == nil {
		t.Fatalf("connection %+v, %v: want it kept, honoured", c, err)
	}
	if n := len(h.Workouts("u1")); n != 2 {
		t.Fatalf("%d workouts left, want 2", n)
	}
	a := h.Audits(keys.UserPK("u1"))
	if len(a[ingest.AuditDeauthUnconfirmed]) != 2 || len(a[ingest.AuditDeauthStale]) != 9 {
		t.Fatalf("audits: %d unconfirmed and %d stale, want 2 and 9", len(a[ingest.AuditDeauthUnconfirmed]), len(a[ingest.AuditDeauthStale]))
	}
}
