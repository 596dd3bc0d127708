package fetch_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/test/capture"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/runner"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/test/ingesttest"
)

// TestRotatedAppSecretFlagsNobodyAndResumes: Strava refuses the
// application's secret (rotated at Strava, not yet here). An activity event
// and a forged revocation both wait: nobody is flagged, nothing is removed,
// no failure is counted, and the StravaAppCredentialsRejected metric is
// written. Once the secret is right the same jobs finish by themselves: the
// workout is written, the forged revocation is not confirmed.
// Protections: classifyTokenError's Application fault (without it the
// athlete is flagged), DeferForAppCredentials (without it the jobs count
// failures), the runner's metric, and Verify for the confirmation.
func TestRotatedAppSecretFlagsNobodyAndResumes(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	ctx := context.Background()
	h.Link("u1", 10, -time.Minute) // expired: every job needs a refresh
	h.Activity(901, 10, "Run")
	metrics := &capture.Buffer{}
	h.Worker.Runner.Metrics = metrics
	good := h.Sim.ClientSecret()
	h.Sim.RotateClientSecret("rotated-at-strava")

	create, revoke := h.Sim.ActivityEvent("create", 901, 10, nil), h.Sim.DeauthorizationEvent(10)
	h.Deliver(create)
	h.Deliver(revoke)
	for _, ev := range []ingest.Job{ingesttest.Job(create), ingesttest.Job(revoke)} {
		rec := h.Outbox(ev)
		if rec.Status != ops.OutboxReceived || rec.Failures != 0 || rec.Deferrals == 0 || !strings.Contains(rec.Reason, "credentials") {
			t.Fatalf("outbox %+v: want received, deferred for the credentials, no failure", rec)
		}
	}
	c, err := h.Connection("u1")
	if err != nil || c.NeedsReauth {
		t.Fatalf("connection %+v, %v: want it kept and not flagged", c, err)
	}
	if _, err := h.St.Guard.UserGuard(ctx, "u1"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("guard: %v; want no revocation", err)
	}
	if got := strings.Count(metrics.String(), `"`+runner.MetricAppCredentialsRejected+`":1`); got != 2 {
		t.Fatalf("got %d %s points, want 2:\n%s", got, runner.MetricAppCredentialsRejected, metrics.String())
	}

	h.Sim.RotateClientSecret(good)
	h.Sweep(time.Now().Add(ingest.AppCredentialsWait + time.Second))
	h.Wait()
	for _, ev := range []ingest.Job{ingesttest.Job(create), ingesttest.Job(revoke)} {
		if rec := h.Outbox(ev); rec.Status != ops.OutboxDone {
			t.Fatalf("outbox %+v after the secret is right: want done", rec)
		}
	}
	if w := h.Workout("u1", 901); w == nil || w.IsDeleted {
		t.Fatalf("workout %+v: want it written", w)
	}
	if c, err := h.Connection("u1"); err != nil || c.NeedsReauth {
		t.Fatalf("connection %+v, %v: the forged revocation removed or flagged it", c, err)
	}
	// Strava was asked (Verify) and honours the grant: unconfirmed, never
	// judged stale (the connection carries its grant's time, as a login
	// writes it, which the resumed create's refresh leaves).
	if a := h.Audits(keys.UserPK("u1")); len(a[ingest.AuditDeauthUnconfirmed]) != 1 || len(a[ingest.AuditDeauthStale]) != 0 || len(a[ingest.AuditAthleteDeauthorize]) != 0 {
		t.Fatalf("audits %v: want the revocation unconfirmed by Strava", slices.Sorted(maps.Keys(a)))
	}
}

// TestForgedRevocationOfAFlaggedAthleteIsNotConfirmed: a connection flagged
// earlier (for a reason that no longer holds) is not proof of a
// revocation: the confirmation asks Strava now, Strava honours the grant,
// nothing is removed and the flag is cleared.
// Protection: confirmRevoked's Verify (with AccessToken, the old flag
// confirms and the athlete's data is deleted).
func TestForgedRevocationOfAFlaggedAthleteIsNotConfirmed(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	h.Link("u1", 10, time.Hour)
	h.WriteActivities(10, 800, 2)
	if err := h.St.Connections.MarkNeedsReauth(context.Background(), "u1", time.Now()); err != nil {
		t.Fatal(err)
	}
	h.Deliver(h.Sim.DeauthorizationEvent(10))
	c, err := h.Connection("u1")
	if err != nil || c.NeedsReauth {
		t.Fatalf("connection %+v, %v: want it kept, the stale flag cleared by Strava's answer", c, err)
	}
	if n := len(h.Workouts("u1")); n != 2 {
		t.Fatalf("%d workouts left, want 2", n)
	}
	if a := h.Audits(keys.UserPK("u1")); len(a[ingest.AuditDeauthUnconfirmed]) != 1 {
		t.Fatalf("audits %v: want one %s", slices.Sorted(maps.Keys(a)), ingest.AuditDeauthUnconfirmed)
	}
}
