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

// fetchAndWrite fetches the activity and writes its workout for userID
// (create, update and delete events alike: a webhook is unsigned, so a
// delete is only a reason to ask Strava). cached is the athlete cache's
// entry userID came from (nil: from the table); with one, any sign that it
// is stale returns errStaleCache before anything is written.
func (w *Fetcher) fetchAndWrite(ctx context.Context, log *slog.Logger, job ingest.Job, userID string, cached *athleteEntry) error {
	ev := job.Event
	// Coalesce: a fetch that started after this event was received has
	// already seen the change it reports (a tombstone's fetch too: it is
	// the 404 that fetch got), so it needs no other Strava read. A stored
	// tombstone alone does not stop a fetch: the activity may have been
	// made public again. A create event skips the stored workout's read
	// (its activity is new, and the writes are ordered anyway); when the
	// athlete's creates crowd this window (ingest.CreatesBeforeGather) the
	// instance's memory of its own fetches coalesces it instead.
	if ev.Kind() == ingest.KindActivityCreate && !job.Redrive {
		crowded := !job.Gathered && w.athletes.creates.Crowded(ev.OwnerID, w.Now().UTC().Truncate(w.rateWindow()))
		if crowded && !job.ReceivedAtUtc.IsZero() && w.athletes.fetchedAfter(ev.ObjectID, job.ReceivedAtUtc, w.Now()) {
			log.InfoContext(ctx, "activity fetched here after this event; no fetch", "writeStatus", "coalesced")
			return nil
		}
		if crowded && w.Lister != nil && job.IdempotencyKey != "" {
			return w.gather(ctx, log, job)
		}
		return w.fetchNew(ctx, log, job, userID, cached)
	}
	switch stored, err := w.store.Workout(ctx, userID, ev.ObjectID); {
	case err == nil && !job.ReceivedAtUtc.IsZero() && stored.FetchStarted().After(job.ReceivedAtUtc):
		log.InfoContext(ctx, "workout already fetched after this event; no fetch", "writeStatus", "coalesced",
			"fetchStartedAtUtc", stored.FetchStarted().Format(time.RFC3339Nano))
		return nil
	case errors.Is(err, model.ErrNotFound):
		return w.neverStored(ctx, log, job, userID, cached)
	case err != nil:
		return fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
	return w.fetchNew(ctx, log, job, userID, cached)
}

// neverStored handles an update or delete of an activity we never stored
// (athlete and activity ids are public, so such events are cheap to forge):
// it is not fetched alone but gathered with the athlete's other activity
// events and served from list pages (burst.go): a create we missed is
// listed and written, a forged id settles with the burst for a share of a
// page, a delete's absence writes its tombstone ordered by the walk (so a
// create's fetch in flight still loses to it). Gathered already, or from
// a redrive, it is fetched.
func (w *Fetcher) neverStored(ctx context.Context, log *slog.Logger, job ingest.Job, userID string, cached *athleteEntry) error {
	if !job.Gathered && !job.Redrive && w.Lister != nil && job.IdempotencyKey != "" {
		return w.gather(ctx, log, job)
	}
	return w.fetchNew(ctx, log, job, userID, cached)
}

// fetchNew is fetchAndWrite after the coalescing check.
func (w *Fetcher) fetchNew(ctx context.Context, log *slog.Logger, job ingest.Job, userID string, cached *athleteEntry) error {
	ev := job.Event
	if err := w.CheckBudget(ctx); err != nil {
		log.WarnContext(ctx, "strava read budget nearly spent; deferring", "writeStatus", "deferred", "error", err)
		return fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
	take := func() error { return w.takeAthleteRead(ctx, job, ev.Kind() == ingest.KindActivityCreate) }
	if job.Unlisted {
		take = func() error { return w.takeUnverifiedRead(ctx, job) }
	}
	if err := take(); err != nil {
		return err
	}
	token, tokenUntil, err := w.accessToken(ctx, ev.OwnerID, userID, cached)
	switch {
	case cached != nil && (errors.Is(err, model.ErrUnauthorized) || errors.Is(err, model.ErrNotFound) || errors.Is(err, errStaleCache)):
		return errStaleCache
	case errors.Is(err, model.ErrUnauthorized):
		return w.needsReauth(ctx, log, job, userID, err)
	case errors.Is(err, model.ErrNotFound):
		log.InfoContext(ctx, "athlete has no strava connection; event dropped", "writeStatus", "skipped")
		w.audit(ctx, log, keys.UserPK(userID), userID, ingest.AuditAthleteNotLinked, job, map[string]string{"reason": "no connection"})
		return nil
	case errors.Is(err, strava.ErrAppCredentials):
		return fmt.Errorf("process %s: %w", job.CorrelationID, ingest.DeferForAppCredentials(err, w.Now()))
	case err != nil:
		return fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
	fetchStarted := w.Now()
	act, rl, err := w.strava.GetActivity(ctx, token, ev.ObjectID)
	w.ObserveRate(ctx, log, rl, err)
	if err != nil {
		return w.fetchFailed(ctx, log, job, userID, cached, fetchStarted, rl, err)
	}
	if act.Athlete.ID != 0 && act.Athlete.ID != ev.OwnerID {
		return fmt.Errorf("process %s: activity %d belongs to athlete %d, not %d: %w",
			job.CorrelationID, act.ID, act.Athlete.ID, ev.OwnerID, model.ErrInvalid)
	}
	wo, err := ingest.MapActivity(act, userID, ev.OwnerID, job.CorrelationID, w.Now())
	if err != nil {
		return fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
	wo.FetchStartedAtNs = fetchStarted.UnixNano()
	err = w.store.UpsertWorkout(ctx, wo)
	if errors.Is(err, model.ErrConflict) {
		// Not an error: the stored item holds an answer (or a 404) whose
		// fetch started later than ours (newest answer wins).
		log.InfoContext(ctx, "older answer dropped: workout fetched later", "writeStatus", "stale",
			"fetchStartedAtUtc", fetchStarted.Format(time.RFC3339Nano), "error", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
	w.athletes.sawFetch(ev.ObjectID, fetchStarted)
	w.remember(ev.OwnerID, userID, token, tokenUntil, cached)
	kind := ingest.AuditActivityUpdate
	details := map[string]string{"activityId": strconv.FormatInt(ev.ObjectID, 10), "sportType": wo.SportType}
	switch ev.Kind() {
	case ingest.KindActivityCreate:
		kind = ingest.AuditActivityCreate
	case ingest.KindActivityDelete:
		// Strava still serves the activity: the event was forged, or
		// overtaken by an undelete; what Strava says is stored.
		details["reason"] = reasonDeleteNotConfirmed
		log.WarnContext(ctx, "delete event not confirmed: strava serves the activity", "writeStatus", "written")
	}
	log.InfoContext(ctx, "workout written", "writeStatus", "written", "sportType", wo.SportType)
	w.audit(ctx, log, keys.UserPK(userID), userID, kind, job, details)
	return nil
}

func (w *Fetcher) audit(ctx context.Context, log *slog.Logger, subjectPK, userID, eventType string, job ingest.Job, details map[string]string) {
	w.store.Audit(ctx, log, ingest.AuditEntry(subjectPK, userID, eventType, job, details, w.Now()))
}

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
