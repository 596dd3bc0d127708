// Package deauth runs an athlete's deauthorization event: a webhook is
// unsigned and an athlete id is public, so the event is a reason to ask
// Strava, never proof. Strava must refuse the grant now before anything is
// removed; a confirmed revocation deletes the connection, records it in the
// user guard and purges what came from Strava, resumably. What a
// confirmation costs is the application's budget, never the athlete's
// allowance, and one confirmation a minute at most per athlete (rule.go).
package deauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/budget"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/strava"
)

// Stores are the adapters a Deauthorizer is handed, each behind the port
// of what a confirmed deauthorization reads and changes.
type Stores struct {
	// Connections hold the grant a deauthorization may revoke.
	Connections Grants
	// Guards read the user guard.
	Guards interface {
		// UserGuard reads the user's guard; ErrNotFound when there is none.
		UserGuard(ctx context.Context, userID string) (*model.UserGuard, error)
	}
	// Purger deletes what came from Strava for a revoked user.
	Purger interface {
		// PurgeStravaData deletes what came from Strava for the user,
		// keeping milestones and awards and a keyed-hash mapping for a
		// reconnect (idempotent, resumable). It returns how many items it
		// deleted or changed.
		PurgeStravaData(ctx context.Context, userID string, athleteID int64, revokedAt time.Time) (int, error)
	}
	// Checks keep the confirmations of a grant to one at a time.
	Checks GrantChecks
	// Audits write the deauthorization's audit entries.
	Audits ingest.Auditor
}

// Grants are a user's Strava connection as a deauthorization sees it.
type Grants interface {
	// StravaConnectionGrant reads the user's connection with its tokens
	// left sealed; ErrNotFound when there is none.
	StravaConnectionGrant(ctx context.Context, userID string) (*model.StravaConnection, error)
	// RevokeStravaConnection deletes the connection if it is still grant c
	// and records the revocation in the user guard, in one transaction;
	// ErrConflict when the connection moved or is gone.
	RevokeStravaConnection(ctx context.Context, c *model.StravaConnection, revokedAt, dataExpiresAt, now time.Time) error
}

// GrantChecks keeps the confirmations of one athlete's grant to one at a
// time, however many deauthorizations name the athlete (rule.go;
// model/store/grantcheck).
type GrantChecks interface {
	// ClaimDeauthCheck lets one confirmation of the user's grant begin at
	// now; ErrConflict when another began less than gap before,
	// ErrNotFound when the connection is gone.
	ClaimDeauthCheck(ctx context.Context, userID string, now time.Time, gap time.Duration) error
	// ReleaseDeauthCheck ends the confirmation begun at now without an
	// answer from Strava, so the next one need not wait.
	ReleaseDeauthCheck(ctx context.Context, userID string, now time.Time) error
	// MarkGrantHonoured records that Strava honoured the grant at at.
	MarkGrantHonoured(ctx context.Context, userID string, at time.Time) error
}

// Strava is what a confirmation asks: a token refreshed now
// (strava.Refresher) and the token's athlete (strava.Client).
type Strava struct {
	Tokens interface {
		// Verify refreshes the token now, whatever the stored one and any
		// earlier flag: ErrUnauthorized from it is Strava's refusal of
		// this athlete's grant, obtained now.
		Verify(ctx context.Context, userID string) (strava.Token, error)
	}
	Athletes interface {
		// GetAthlete fetches the token's athlete; a *strava.APIError with
		// status 401 when the grant is revoked.
		GetAthlete(ctx context.Context, accessToken string) (strava.Athlete, strava.RateLimit, error)
	}
}

// Budget is the application's Strava budget, shared with the fetches
// (fetch.Fetcher).
type Budget interface {
	// CheckBudget returns an ingest.DeferError when the budget is nearly
	// spent.
	CheckBudget(ctx context.Context) error
	// ObserveRate records the rate-limit reading of an answer (err is the
	// call's error).
	ObserveRate(ctx context.Context, log *slog.Logger, rl strava.RateLimit, err error)
	// ResetAfter429 is when a call Strava refused with 429 may be made
	// again, and why.
	ResetAfter429(rl strava.RateLimit, now time.Time) (time.Time, string)
}

// Deauthorizer runs deauthorization events (object_type athlete,
// updates.authorized "false"): the confirmation at Strava, the revocation
// and the purge.
//
// The webhook is unsigned, so the event is a reason to ask, never proof. An
// event whose event_time (second resolution) is before the connection's
// grant (grantedAtUtc, set by every login and left by refreshes;
// updatedAtUtc for items written before it), or before Strava last found
// the grant honoured, is stale: audit STRAVA_DEAUTH_STALE, dropped, no
// Strava call; while another confirmation of the grant began less than a
// minute ago, it waits for that one (rule.go). Otherwise the grant must
// fail at Strava now, through the shared budget (never the athlete's read
// caps): a refresh made for the check (Verify, whatever the stored token
// and any earlier flag) refused with Strava's RefreshToken fault, or GET
// /api/v3/athlete answering 401 to the token it issued, confirms; 200 →
// audit STRAVA_DEAUTH_UNCONFIRMED, the honoured time recorded, nothing
// removed; an Application fault (our client secret) → deferred, nobody
// flagged; 429 or spent budget → deferred; 5xx, transport, any other status
// → retried, then parked: an unconfirmable deauthorization waits, it never
// destroys.
//
// Confirmed → one transaction deletes the connection (only if its
// tokenVersion and grant have not moved: a reconnect racing in wins; a
// refused condition is retried and judged again) and sets the user guard's
// revocation (stravaRevokedAtUtc = event time). Audit
// STRAVA_ATHLETE_DEAUTHORIZED. Then the purge (model/store/purge) deletes
// what came from Strava: workouts (the REMOVE records re-project the
// milestones), sync state, the Strava name and id, Strava ids on awards and
// audit entries, parked records, and last the owner mapping, leaving a
// keyed-hash mapping for a reconnect (handlers/bff). The job fails, and its
// outbox item stays pending, until the purge has finished: a retry finds
// the connection gone and the guard holding the same event time, and
// resumes. A workout written after the revocation (a fetch or sync page in
// flight) removes itself (its guard check).
type Deauthorizer struct {
	st     Stores
	strava Strava
	budget Budget
	// Now is the clock; tests may replace it.
	Now func() time.Time
}

// New builds the deauthorizer.
func New(st Stores, s Strava, b Budget) *Deauthorizer {
	return &Deauthorizer{st: st, strava: s, budget: b,
		Now: func() time.Time { return time.Now().UTC() }}
}

// Handle handles a deauthorization event of userID's athlete (job): an
// event older than the connection's grant, or than Strava's last word on
// it, is stale (rule.go); otherwise Strava must confirm that the grant is
// revoked (confirmRevoked) before anything is removed; a confirmed
// revocation deletes the connection and records the revocation in the user
// guard (one transaction), then deletes what came from Strava (purge).
// Until the purge has finished the job fails (retryable) and its outbox
// item stays pending; a retry finds the connection gone and the guard
// holding this event's revocation, and resumes the purge. The errors are
// the fetcher's (fetch.Fetcher.Process).
func (w *Deauthorizer) Handle(ctx context.Context, log *slog.Logger, job ingest.Job, userID string) error {
	revokedAt := time.Unix(job.Event.EventTime, 0).UTC()
	conn, err := w.st.Connections.StravaConnectionGrant(ctx, userID)
	switch {
	case errors.Is(err, model.ErrNotFound):
		return w.resumeDeauthorization(ctx, log, job, userID, revokedAt)
	case err != nil:
		return fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
	checkAt := w.Now()
	switch step, until := ruleOnDeauth(revokedAt, conn, checkAt); step {
	case deauthStale:
		log.InfoContext(ctx, "deauthorization older than the connection's grant or strava's last word on it; dropped", "writeStatus", "stale",
			"eventTimeUtc", revokedAt.Format(time.RFC3339), "grantedAtUtc", conn.GrantTime().UTC().Format(time.RFC3339Nano),
			"honouredAtUtc", fmtOptional(conn.HonouredAtUtc))
		w.audit(ctx, log, keys.UserPK(userID), userID, ingest.AuditDeauthStale, job, map[string]string{
			"eventTimeUtc": revokedAt.Format(time.RFC3339), "grantedAtUtc": conn.GrantTime().UTC().Format(time.RFC3339Nano),
			"honouredAtUtc": fmtOptional(conn.HonouredAtUtc)})
		return nil
	case deauthWait:
		return w.waitForCheck(ctx, log, job, until)
	}
	switch err := w.st.Checks.ClaimDeauthCheck(ctx, userID, checkAt, deauthCheckGap); {
	case errors.Is(err, model.ErrConflict):
		return w.waitForCheck(ctx, log, job, checkAt.Add(deauthCheckGap)) // another confirmation began meanwhile
	case errors.Is(err, model.ErrNotFound):
		return fmt.Errorf("process %s: connection removed during the deauthorization: %w: %w", job.CorrelationID, model.ErrRetryable, err)
	case err != nil:
		return fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
	how, err := w.confirmRevoked(ctx, log, job, userID)
	if err != nil {
		// Strava did not say: the next deauthorization (or this one's
		// retry) may ask at once.
		if rerr := w.st.Checks.ReleaseDeauthCheck(ctx, userID, checkAt); rerr != nil {
			log.WarnContext(ctx, "deauthorization check not released; the next waits for its gap", "error", rerr)
		}
		return err
	}
	if how == "" {
		log.WarnContext(ctx, "deauthorization not confirmed: strava still honours the grant; nothing removed", "writeStatus", "unconfirmed")
		if err := w.st.Checks.MarkGrantHonoured(ctx, userID, checkAt); err != nil {
			log.WarnContext(ctx, "honoured grant not recorded; a later deauthorization asks strava again", "error", err)
		}
		w.audit(ctx, log, keys.UserPK(userID), userID, ingest.AuditDeauthUnconfirmed, job, map[string]string{
			"eventTimeUtc": revokedAt.Format(time.RFC3339), "reason": "strava answered the grant's authenticated call"})
		return nil
	}
	now := w.Now()
	if err := w.st.Connections.RevokeStravaConnection(ctx, conn, revokedAt, now, now); err != nil {
		if errors.Is(err, model.ErrConflict) {
			// A login (new grant) or another run moved the connection since
			// it was read: the retry judges the event again.
			return fmt.Errorf("process %s: connection changed during the deauthorization: %w: %w", job.CorrelationID, model.ErrRetryable, err)
		}
		return fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
	log.InfoContext(ctx, "athlete deauthorization confirmed; tokens removed", "writeStatus", "deauthorized", "confirmedBy", how)
	w.audit(ctx, log, keys.UserPK(userID), userID, ingest.AuditAthleteDeauthorize, job, map[string]string{
		"confirmedBy": how, "eventTimeUtc": revokedAt.Format(time.RFC3339)})
	return w.purge(ctx, log, job, userID, revokedAt)
}

// resumeDeauthorization handles a deauthorization whose user has no
// connection: when the guard holds this event's revocation, a previous run
// confirmed it and its expiry loop may be unfinished, so the loop runs
// again; otherwise there is nothing to deauthorize.
func (w *Deauthorizer) resumeDeauthorization(ctx context.Context, log *slog.Logger, job ingest.Job, userID string, revokedAt time.Time) error {
	g, err := w.st.Guards.UserGuard(ctx, userID)
	switch {
	case err == nil && g.Revoked() && g.StravaRevokedAtUtc.Equal(revokedAt):
		log.InfoContext(ctx, "deauthorization confirmed earlier; resuming its purge")
		return w.purge(ctx, log, job, userID, revokedAt)
	case err != nil && !errors.Is(err, model.ErrNotFound):
		return fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
	log.InfoContext(ctx, "athlete has no strava connection; deauthorization dropped", "writeStatus", "skipped")
	w.audit(ctx, log, keys.UserPK(userID), userID, ingest.AuditAthleteNotLinked, job, map[string]string{"reason": "no connection"})
	return nil
}

// waitForCheck defers a deauthorization until another confirmation of the
// same grant has had its say (until): not a cap, and not the athlete's.
func (w *Deauthorizer) waitForCheck(ctx context.Context, log *slog.Logger, job ingest.Job, until time.Time) error {
	log.InfoContext(ctx, "deauthorization waits for the confirmation of the same grant begun moments ago", "writeStatus", "deferred",
		"untilUtc", until.UTC().Format(time.RFC3339))
	return fmt.Errorf("process %s: %w", job.CorrelationID, &ingest.DeferError{Until: until,
		Reason: "a confirmation of this athlete's grant began less than " + deauthCheckGap.String() + " ago"})
}

func fmtOptional(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// confirmRevoked asks Strava whether the user's grant is revoked, through
// the shared budget like a fetch, but not the athlete's read caps: a
// deauthorization names its athlete, so a forged one must not spend that
// athlete's allowance, and a real one must not wait for it (the rule
// ruleOnDeauth keeps the confirmations to one per athlete at a time). Only evidence
// about this athlete obtained after the event counts: a refresh refused now
// (the RefreshToken fault; Verify ignores an earlier flag) or a 401 to the
// token that refresh just issued. An Application fault is the operator's
// and defers the job. It returns how ("token refresh refused", "strava 401") when it is, "" when Strava still
// honours the grant, a ingest.DeferError for a spent budget, cap or 429, and a
// retryable error when Strava cannot say (5xx, transport, any other
// status): an unconfirmable deauthorization waits, it never destroys.
func (w *Deauthorizer) confirmRevoked(ctx context.Context, log *slog.Logger, job ingest.Job, userID string) (string, error) {
	if err := w.budget.CheckBudget(ctx); err != nil {
		log.WarnContext(ctx, "strava read budget nearly spent; deferring", "writeStatus", "deferred", "error", err)
		return "", fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
	// Evidence is obtained now, after the event: a refresh of the athlete's
	// grant, whatever the stored token and any flag set earlier (a flag may
	// come from a refusal that no longer holds).
	fresh, err := w.strava.Tokens.Verify(ctx, userID)
	switch {
	case errors.Is(err, model.ErrUnauthorized):
		// Strava refused this athlete's refresh token, now.
		return "token refresh refused", nil
	case errors.Is(err, model.ErrNotFound):
		return "", fmt.Errorf("process %s: connection removed during the deauthorization: %w: %w", job.CorrelationID, model.ErrRetryable, err)
	case errors.Is(err, strava.ErrAppCredentials):
		return "", fmt.Errorf("process %s: confirm deauthorization: %w", job.CorrelationID, ingest.DeferForAppCredentials(err, w.Now()))
	case err != nil:
		return "", fmt.Errorf("process %s: confirm deauthorization: %w", job.CorrelationID, err)
	}
	token := fresh.AccessToken
	budget.CountRead(ctx)
	_, rl, err := w.strava.Athletes.GetAthlete(ctx, token)
	w.budget.ObserveRate(ctx, log, rl, err)
	var apiErr *strava.APIError
	switch {
	case err == nil:
		return "", nil
	case errors.As(err, &apiErr) && apiErr.Status == http.StatusUnauthorized:
		return "strava 401", nil
	case errors.As(err, &apiErr) && apiErr.Status == http.StatusTooManyRequests:
		now := w.Now()
		until, why := w.budget.ResetAfter429(rl, now)
		log.WarnContext(ctx, "strava refused with 429; deferring to the window reset", "writeStatus", "deferred", "error", err)
		return "", fmt.Errorf("process %s: %w", job.CorrelationID, &ingest.DeferError{Until: until, Reason: "strava 429: " + why})
	}
	// Anything else cannot confirm: retried, then parked.
	return "", fmt.Errorf("process %s: confirm deauthorization: %w: %w", job.CorrelationID, model.ErrRetryable, err)
}

// purge deletes what came from Strava for the user (store.PurgeStravaData:
// workouts, sync state, the Strava name and ids, parked records, the owner
// mapping, leaving a keyed-hash mapping for a reconnect); an error keeps
// the job pending so a retry finishes it. A reconnect that cleared this
// revocation stops it, before it runs or between its steps: the athlete is
// back, and the reconnect's own backfill imports the history.
func (w *Deauthorizer) purge(ctx context.Context, log *slog.Logger, job ingest.Job, userID string, revokedAt time.Time) error {
	g, err := w.st.Guards.UserGuard(ctx, userID)
	switch {
	case errors.Is(err, model.ErrNotFound) || (err == nil && (!g.Revoked() || !g.StravaRevokedAtUtc.Equal(revokedAt))):
		log.InfoContext(ctx, "athlete reconnected before the purge; nothing deleted", "writeStatus", "reconnected")
		return nil
	case err != nil:
		return fmt.Errorf("process %s: re-read guard: %w", job.CorrelationID, err)
	}
	n, err := w.st.Purger.PurgeStravaData(ctx, userID, job.Event.OwnerID, revokedAt)
	if err != nil {
		return fmt.Errorf("process %s: delete strava data (%d items so far, resumed on retry): %w", job.CorrelationID, n, err)
	}
	log.InfoContext(ctx, "strava data deleted", "writeStatus", "deauthorized", "itemsDeleted", n)
	return nil
}

func (w *Deauthorizer) audit(ctx context.Context, log *slog.Logger, subjectPK, userID, eventType string, job ingest.Job, details map[string]string) {
	w.st.Audits.Audit(ctx, log, ingest.AuditEntry(subjectPK, userID, eventType, job, details, w.Now()))
}
