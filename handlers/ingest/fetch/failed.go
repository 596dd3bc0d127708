package fetch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/fetch/warm"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/strava"
)

// readFailed settles a GET the athlete's token made that Strava did not
// answer 200: a cached token refused is retried without the cache, a 429
// defers to the window reset, a 404 marks the workout hidden, a 401 to the
// athlete's own token flags the connection, anything else is returned.
func (w *Fetcher) readFailed(ctx context.Context, log *slog.Logger, job ingest.Job, userID string, cached *warm.Entry,
	fetchStarted time.Time, rl strava.RateLimit, err error) (effects, error) {
	var apiErr *strava.APIError
	switch {
	case cached != nil && errors.Is(err, model.ErrUnauthorized):
		return effects{stale: true}, errStaleCache
	case errors.As(err, &apiErr) && apiErr.Status == http.StatusTooManyRequests:
		now := w.Now()
		until, why := w.Reads.ResetAfter429(rl, now)
		log.WarnContext(ctx, "strava refused with 429; deferring to the window reset", "writeStatus", "deferred", "error", err)
		return effects{}, fmt.Errorf("process %s: %w", job.CorrelationID, &ingest.DeferError{Until: until, Reason: "strava 429: " + why})
	case errors.Is(err, model.ErrNotFound):
		return w.hide(ctx, log, job, userID, fetchStarted)
	case errors.Is(err, model.ErrUnauthorized):
		if merr := w.store.Connections.MarkNeedsReauth(ctx, userID, w.Now()); merr != nil && !errors.Is(merr, model.ErrNotFound) {
			return effects{}, fmt.Errorf("process %s: %w", job.CorrelationID, merr)
		}
		return reauthNeeded(ctx, log, userID, err), nil
	}
	return effects{}, fmt.Errorf("process %s: %w", job.CorrelationID, err)
}

// tokenFailed settles an event whose token could not be had: a cached
// mapping or token is retried without the cache, a refused token flags
// nothing more (the provider did) and drops the event, an athlete without
// a connection is dropped, a refusal of the application's credentials
// waits for the operator, anything else is returned.
func tokenFailed(ctx context.Context, log *slog.Logger, job ingest.Job, userID string, cached *warm.Entry, err error, now time.Time) (effects, error) {
	switch {
	case cached != nil && (errors.Is(err, model.ErrUnauthorized) || errors.Is(err, model.ErrNotFound) || errors.Is(err, errStaleCache)):
		return effects{stale: true}, errStaleCache
	case errors.Is(err, model.ErrUnauthorized):
		return reauthNeeded(ctx, log, userID, err), nil
	case errors.Is(err, model.ErrNotFound):
		log.InfoContext(ctx, "athlete has no strava connection; event dropped", "writeStatus", "skipped")
		return effects{audit: &auditNote{subjectPK: keys.UserPK(userID), userID: userID, eventType: ingest.AuditAthleteNotLinked,
			details: map[string]string{"reason": "no connection"}}}, nil
	case errors.Is(err, strava.ErrAppCredentials):
		return effects{}, fmt.Errorf("process %s: %w", job.CorrelationID, ingest.DeferForAppCredentials(err, now))
	}
	return effects{}, fmt.Errorf("process %s: %w", job.CorrelationID, err)
}

// hide records Strava's 404 to the fetch started at fetchStarted: the
// activity is deleted or was made private (Strava does not say which), so
// the workout becomes a tombstone (model.WorkoutHiddenOrDeleted) that a
// later fetch or list showing the activity revives. The write is ordered by
// the fetch: a stored answer fetched later wins, and the job is done.
func (w *Fetcher) hide(ctx context.Context, log *slog.Logger, job ingest.Job, userID string, fetchStarted time.Time) (effects, error) {
	ev := job.Event
	err := w.store.Workouts.MarkWorkoutHidden(ctx, userID, ev.OwnerID, ev.ObjectID, job.CorrelationID, model.WorkoutHiddenOrDeleted,
		fetchStarted.UnixNano(), w.Now())
	if errors.Is(err, model.ErrConflict) {
		// Not an error, as for UpsertWorkout: an answer fetched later is
		// stored (or the user's guard removed the write).
		log.InfoContext(ctx, "older 404 dropped: workout fetched later", "writeStatus", "stale",
			"fetchStartedAtUtc", fetchStarted.Format(time.RFC3339Nano), "error", err)
		return effects{}, nil
	}
	if err != nil {
		return effects{}, fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
	log.InfoContext(ctx, "workout marked hidden-or-deleted (strava answered 404)", "writeStatus", "deleted")
	return effects{fetched: fetchStarted, audit: &auditNote{subjectPK: keys.UserPK(userID), userID: userID, eventType: ingest.AuditActivityDelete,
		details: map[string]string{"activityId": strconv.FormatInt(ev.ObjectID, 10), "reason": model.WorkoutHiddenOrDeleted}}}, nil
}

// reauthNeeded drops the event: only the athlete can repair the
// connection, and retrying would only repeat the refusal.
func reauthNeeded(ctx context.Context, log *slog.Logger, userID string, cause error) effects {
	log.WarnContext(ctx, "strava refused the athlete's token; connection needs re-authorization",
		"writeStatus", "skipped", "error", cause)
	return effects{audit: &auditNote{subjectPK: keys.UserPK(userID), userID: userID, eventType: ingest.AuditNeedsReauth,
		details: map[string]string{"reason": cause.Error()}}}
}

// markHidden is hide for a burst's event, its effects applied.
func (w *Fetcher) markHidden(ctx context.Context, log *slog.Logger, job ingest.Job, userID string, fetchStarted time.Time) error {
	e, err := w.hide(ctx, log, job, userID, fetchStarted)
	w.apply(ctx, log, job, e)
	return err
}

// needsReauth is reauthNeeded for a burst, its effects applied: nil, the
// event is done.
func (w *Fetcher) needsReauth(ctx context.Context, log *slog.Logger, job ingest.Job, userID string, cause error) error {
	w.apply(ctx, log, job, reauthNeeded(ctx, log, userID, cause))
	return nil
}
