package fetch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/strava"
)

// reasonDeleteNotConfirmed is the audit reason of a delete event whose
// confirming fetch found the activity alive.
const reasonDeleteNotConfirmed = "delete event not confirmed: strava serves the activity"

// written writes Strava's answer act, read by a fetch started at
// fetchStarted, as the event's workout: ordered by the fetch (a stored
// answer fetched later wins, and the job is done), audited
// STRAVA_ACTIVITY_CREATE or _UPDATE (a delete event Strava still serves is
// not confirmed). Its effects record the fetch for coalescing.
func (w *Fetcher) written(ctx context.Context, log *slog.Logger, job ingest.Job, userID string, act strava.Activity, fetchStarted time.Time) (effects, error) {
	ev := job.Event
	if act.Athlete.ID != 0 && act.Athlete.ID != ev.OwnerID {
		return effects{}, fmt.Errorf("process %s: activity %d belongs to athlete %d, not %d: %w",
			job.CorrelationID, act.ID, act.Athlete.ID, ev.OwnerID, model.ErrInvalid)
	}
	wo, err := ingest.MapActivity(act, userID, ev.OwnerID, job.CorrelationID, w.Now())
	if err != nil {
		return effects{}, fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
	wo.FetchStartedAtNs = fetchStarted.UnixNano()
	err = w.store.Workouts.UpsertWorkout(ctx, wo)
	if errors.Is(err, model.ErrConflict) {
		// Not an error: the stored item holds an answer (or a 404) whose
		// fetch started later than ours (newest answer wins).
		log.InfoContext(ctx, "older answer dropped: workout fetched later", "writeStatus", "stale",
			"fetchStartedAtUtc", fetchStarted.Format(time.RFC3339Nano), "error", err)
		return effects{}, nil
	}
	if err != nil {
		return effects{}, fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
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
	return effects{fetched: fetchStarted, audit: &auditNote{subjectPK: keys.UserPK(userID), userID: userID, eventType: kind, details: details}}, nil
}
