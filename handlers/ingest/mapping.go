package ingest

import (
	"fmt"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/calendar"
	"github.com/commitcollect/backend/model/rules"
	"github.com/commitcollect/backend/model/strava"
)

// maxTimezoneLength bounds the zone name kept (Strava's are about 40
// characters).
const maxTimezoneLength = 100

// MapActivity projects a Strava activity onto the normalized workout: only
// the fields milestones need (Strava's manual, trainer and commute marks
// and the elapsed time included, which rules read) plus a minimal name,
// never the raw payload.
// Each metric's value is checked as its model.MetricSpec says (named by
// its Strava field); TestMapActivityFillsEveryMetric holds the mapping to
// the specs. sportType falls back to the legacy `type` when sport_type is empty.
// createdAtUtc is set to now; the store keeps an existing item's value. It
// returns a *model.ValidationError (model.ErrInvalid) for unusable data,
// including numbers beyond the physical bounds of a workout
// (model.MaxWorkoutDistanceMeters, …).
func MapActivity(a strava.Activity, userID string, athleteID int64, correlationID string, now time.Time) (*model.Workout, error) {
	var v model.ValidationError
	sport := a.SportType
	if sport == "" {
		sport = a.Type
	}
	if a.ID <= 0 {
		v.Add("id", "must be positive")
	}
	if sport == "" {
		v.Add("sport_type", "is empty")
	}
	if a.StartDate.IsZero() {
		v.Add("start_date", "is missing")
	}
	now = now.UTC()
	w := &model.Workout{
		UserID: userID, AthleteID: athleteID, ActivityID: a.ID, Name: a.Name, SportType: sport,
		DistanceMeters: a.Distance, TotalElevationGain: a.TotalElevationGain, MovingTimeSeconds: a.MovingTime,
		ElapsedTimeSeconds: a.ElapsedTime, StartDateUtc: a.StartDate.UTC(), CreatedAtUtc: now, UpdatedAtUtc: now,
		CorrelationID: correlationID, Flags: &rules.Flags{Manual: a.Manual, Trainer: a.Trainer, Commute: a.Commute},
	}
	// A local start Strava did not send, or sent in another shape, leaves
	// the workout counted by its UTC date (model.Workout.LocalDate): it is
	// not a reason to refuse the activity.
	w.StartDateLocal, _ = calendar.LocalStart(a.StartDateLocal)
	if w.StartDateLocal != "" && len(a.Timezone) <= maxTimezoneLength {
		w.Timezone = a.Timezone
	}
	for _, m := range model.Metrics {
		if spec := model.MetricSpecs[m]; spec.Strava != "" {
			if why := m.CheckWorkoutValue(spec.Of(*w)); why != "" {
				v.Add(spec.Strava, "%s", why)
			}
		}
	}
	maxSeconds := int64(model.MaxWorkoutDuration / time.Second)
	if a.ElapsedTime < 0 || a.ElapsedTime > maxSeconds {
		v.Add("elapsed_time", "%d s is outside 0..%d s", a.ElapsedTime, maxSeconds)
	}
	if userID == "" {
		v.Add("userId", "is required")
	}
	if err := v.Err(); err != nil {
		return nil, fmt.Errorf("map activity %d: %w", a.ID, err)
	}
	return w, nil
}
