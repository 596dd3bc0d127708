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
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/strava"
)

// fetchFailed settles a GET the athlete's token made that Strava did not
// answer 200: a cached token refused is retried without the cache, a 429
// defers to the window reset, a 404 marks the workout hidden, a 401 to the
// athlete's own token flags the connection, anything else is returned.
func (w *Fetcher) fetchFailed(ctx context.Context, log *slog.Logger, job ingest.Job, userID string, cached *athleteEntry,
	fetchStarted time.Time, rl strava.RateLimit, err error) error {
	var apiErr *strava.APIError
	switch {
	case cached != nil && errors.Is(err, model.ErrUnauthorized):
		return errStaleCache
	case errors.As(err, &apiErr) && apiErr.Status == http.StatusTooManyRequests:
		now := w.Now()
		until, why := w.ResetAfter429(rl, now)
		log.WarnContext(ctx, "strava refused with 429; deferring to the window reset", "writeStatus", "deferred", "error", err)
		return fmt.Errorf("process %s: %w", job.CorrelationID, &ingest.DeferError{Until: until, Reason: "strava 429: " + why})
	case errors.Is(err, model.ErrNotFound):
		return w.markHidden(ctx, log, job, userID, fetchStarted)
	case errors.Is(err, model.ErrUnauthorized):
		if merr := w.store.MarkNeedsReauth(ctx, userID, w.Now()); merr != nil && !errors.Is(merr, model.ErrNotFound) {
			return fmt.Errorf("process %s: %w", job.CorrelationID, merr)
		}
		return w.needsReauth(ctx, log, job, userID, err)
	}
	return fmt.Errorf("process %s: %w", job.CorrelationID, err)
}

// reasonDeleteNotConfirmed is the audit reason of a delete event whose
// confirming fetch found the activity alive.
const reasonDeleteNotConfirmed = "delete event not confirmed: strava serves the activity"

// accessToken returns the user's access token for athleteID and until when
// the athlete cache may keep it (zero: not at all): the cached one while it
// is fresh, else the provider's. With a cached mapping, a token of another
// athlete's connection returns errStaleCache.
func (w *Fetcher) accessToken(ctx context.Context, athleteID int64, userID string, cached *athleteEntry) (string, time.Time, error) {
	if cached != nil && cached.token != "" {
		return cached.token, cached.tokenUntil, nil
	}
	src, ok := w.tokens.(TokenSource)
	if !ok {
		token, err := w.tokens.AccessToken(ctx, userID)
		return token, time.Time{}, err
	}
	t, err := src.Token(ctx, userID)
	switch {
	case err != nil:
		return "", time.Time{}, err
	case t.AthleteID != 0 && t.AthleteID != athleteID && cached != nil:
		return "", time.Time{}, errStaleCache
	case t.AthleteID != 0 && t.AthleteID != athleteID:
		// The table's mapping and the connection disagree: not cached; the
		// fetched activity's owner check still guards the write.
		return t.AccessToken, time.Time{}, nil
	}
	return t.AccessToken, t.ExpiresAt.Add(-tokenSkew), nil
}

// remember caches what a successful write confirmed: the athlete's user
// and, while fresh, its token (tokenUntil zero: the mapping is not cached
// either, nothing confirmed it).
func (w *Fetcher) remember(athleteID int64, userID, token string, tokenUntil time.Time, cached *athleteEntry) {
	if tokenUntil.IsZero() {
		return
	}
	e := athleteEntry{userID: userID, resolvedAt: w.Now(), token: token, tokenUntil: tokenUntil}
	if cached != nil {
		e.resolvedAt = cached.resolvedAt
	}
	w.athletes.put(athleteID, e)
}

// markHidden records Strava's 404 to the fetch started at fetchStarted: the
// activity is deleted or was made private (Strava does not say which), so
// the workout becomes a tombstone (model.WorkoutHiddenOrDeleted) that a
// later fetch or list showing the activity revives. The write is ordered by
// the fetch: a stored answer fetched later wins, and the job is done.
func (w *Fetcher) markHidden(ctx context.Context, log *slog.Logger, job ingest.Job, userID string, fetchStarted time.Time) error {
	ev := job.Event
	err := w.store.MarkWorkoutHidden(ctx, userID, ev.OwnerID, ev.ObjectID, job.CorrelationID, model.WorkoutHiddenOrDeleted,
		fetchStarted.UnixNano(), w.Now())
	if errors.Is(err, model.ErrConflict) {
		// Not an error, as for UpsertWorkout: an answer fetched later is
		// stored (or the user's guard removed the write).
		log.InfoContext(ctx, "older 404 dropped: workout fetched later", "writeStatus", "stale",
			"fetchStartedAtUtc", fetchStarted.Format(time.RFC3339Nano), "error", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
	w.athletes.sawFetch(ev.ObjectID, fetchStarted)
	log.InfoContext(ctx, "workout marked hidden-or-deleted (strava answered 404)", "writeStatus", "deleted")
	w.audit(ctx, log, keys.UserPK(userID), userID, ingest.AuditActivityDelete, job, map[string]string{
		"activityId": strconv.FormatInt(ev.ObjectID, 10), "reason": model.WorkoutHiddenOrDeleted,
	})
	return nil
}

// needsReauth drops the event: only the athlete can repair the connection,
// and retrying would only repeat the refusal.
func (w *Fetcher) needsReauth(ctx context.Context, log *slog.Logger, job ingest.Job, userID string, cause error) error {
	log.WarnContext(ctx, "strava refused the athlete's token; connection needs re-authorization",
		"writeStatus", "skipped", "error", cause)
	w.audit(ctx, log, keys.UserPK(userID), userID, ingest.AuditNeedsReauth, job, map[string]string{"reason": cause.Error()})
	return nil
}
