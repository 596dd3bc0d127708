package fetch

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

// deauthorize handles a deauthorization event of userID's athlete (see the
// notes atop fetcher.go, step 2): an event older than the connection's
// grant is stale; otherwise Strava must confirm that the grant is revoked
// (confirmRevoked) before anything is removed; a confirmed revocation
// deletes the connection and records the revocation in the user guard (one
// transaction), then deletes what came from Strava (purge). Until the purge
// has finished the job fails (retryable) and its outbox item stays pending;
// a retry finds the connection gone and the guard holding this event's
// revocation, and resumes the purge.
func (w *Fetcher) deauthorize(ctx context.Context, log *slog.Logger, job ingest.Job, userID string) error {
	return deauthorizer{w}.deauthorize(ctx, log, job, userID)
}

// deauthorizer runs a deauthorization event's job (deauthorize) with the
// fetcher's budget, caps and tokens: the confirmation at Strava, the
// revocation and the purge are its own room.
type deauthorizer struct{ *Fetcher }

func (w deauthorizer) deauthorize(ctx context.Context, log *slog.Logger, job ingest.Job, userID string) error {
	revokedAt := time.Unix(job.Event.EventTime, 0).UTC()
	conn, err := w.revoked.StravaConnectionGrant(ctx, userID)
	switch {
	case errors.Is(err, model.ErrNotFound):
		return w.resumeDeauthorization(ctx, log, job, userID, revokedAt)
	case err != nil:
		return fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
	// event_time has second resolution: an event of the grant's own second
	// may be newer and goes on to Strava's confirmation.
	if granted := conn.GrantTime().UTC(); revokedAt.Before(granted.Truncate(time.Second)) {
		log.InfoContext(ctx, "deauthorization older than the connection's grant; dropped", "writeStatus", "stale",
			"eventTimeUtc", revokedAt.Format(time.RFC3339), "grantedAtUtc", granted.Format(time.RFC3339Nano))
		w.audit(ctx, log, keys.UserPK(userID), userID, ingest.AuditDeauthStale, job, map[string]string{
			"eventTimeUtc": revokedAt.Format(time.RFC3339), "grantedAtUtc": granted.Format(time.RFC3339Nano)})
		return nil
	}
	how, err := w.confirmRevoked(ctx, log, job, userID)
	if err != nil {
		return err
	}
	if how == "" {
		log.WarnContext(ctx, "deauthorization not confirmed: strava still honours the grant; nothing removed", "writeStatus", "unconfirmed")
		w.audit(ctx, log, keys.UserPK(userID), userID, ingest.AuditDeauthUnconfirmed, job, map[string]string{
			"eventTimeUtc": revokedAt.Format(time.RFC3339), "reason": "strava answered the grant's authenticated call"})
		return nil
	}
	now := w.Now()
	if err := w.revoked.RevokeStravaConnection(ctx, conn, revokedAt, now, now); err != nil {
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
func (w deauthorizer) resumeDeauthorization(ctx context.Context, log *slog.Logger, job ingest.Job, userID string, revokedAt time.Time) error {
	g, err := w.revoked.UserGuard(ctx, userID)
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

// confirmRevoked asks Strava whether the user's grant is revoked, through
// the shared budget and the athlete's read cap like a fetch. Only evidence
// about this athlete obtained after the event counts: a refresh refused now
// (the RefreshToken fault; Verify ignores an earlier flag) or a 401 to the
// token that refresh just issued. An Application fault is the operator's
// and defers the job. It returns how ("token refresh refused", "strava 401") when it is, "" when Strava still
// honours the grant, a ingest.DeferError for a spent budget, cap or 429, and a
// retryable error when Strava cannot say (5xx, transport, any other
// status): an unconfirmable deauthorization waits, it never destroys.
func (w deauthorizer) confirmRevoked(ctx context.Context, log *slog.Logger, job ingest.Job, userID string) (string, error) {
	if err := w.checkBudget(ctx); err != nil {
		log.WarnContext(ctx, "strava read budget nearly spent; deferring", "writeStatus", "deferred", "error", err)
		return "", fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
	if err := w.takeAthleteRead(ctx, job); err != nil {
		return "", err
	}
	// Evidence is obtained now, after the event: a refresh of the athlete's
	// grant, whatever the stored token and any flag set earlier (a flag may
	// come from a refusal that no longer holds).
	fresh, err := w.tokens.Verify(ctx, userID)
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
	_, rl, err := w.strava.GetAthlete(ctx, token)
	w.observeRate(ctx, log, rl, err)
	var apiErr *strava.APIError
	switch {
	case err == nil:
		return "", nil
	case errors.As(err, &apiErr) && apiErr.Status == http.StatusUnauthorized:
		return "strava 401", nil
	case errors.As(err, &apiErr) && apiErr.Status == http.StatusTooManyRequests:
		now := w.Now()
		until, why := budget.NextResetIn(budget.StateIn(rl, now, w.rateWindow()), now, 0, w.rateWindow())
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
func (w deauthorizer) purge(ctx context.Context, log *slog.Logger, job ingest.Job, userID string, revokedAt time.Time) error {
	g, err := w.revoked.UserGuard(ctx, userID)
	switch {
	case errors.Is(err, model.ErrNotFound) || (err == nil && (!g.Revoked() || !g.StravaRevokedAtUtc.Equal(revokedAt))):
		log.InfoContext(ctx, "athlete reconnected before the purge; nothing deleted", "writeStatus", "reconnected")
		return nil
	case err != nil:
		return fmt.Errorf("process %s: re-read guard: %w", job.CorrelationID, err)
	}
	n, err := w.revoked.PurgeStravaData(ctx, userID, job.Event.OwnerID, revokedAt)
	if err != nil {
		return fmt.Errorf("process %s: delete strava data (%d items so far, resumed on retry): %w", job.CorrelationID, n, err)
	}
	log.InfoContext(ctx, "strava data deleted", "writeStatus", "deauthorized", "itemsDeleted", n)
	return nil
}
