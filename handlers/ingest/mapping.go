package ingest

import (
	"fmt"
	"math"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/strava"
)

// MapActivity projects a Strava activity onto the normalized workout: only
// the fields milestones need plus a minimal name, never the raw payload.
// sportType falls back to the legacy `type` when sport_type is empty.
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
	if a.Distance < 0 || math.IsNaN(a.Distance) || math.IsInf(a.Distance, 0) {
		v.Add("distance", "must be a finite non-negative number")
	} else if a.Distance > model.MaxWorkoutDistanceMeters {
		v.Add("distance", "%g m is beyond the physical bound of %g m", a.Distance, model.MaxWorkoutDistanceMeters)
	}
	if a.TotalElevationGain < 0 || math.IsNaN(a.TotalElevationGain) || math.IsInf(a.TotalElevationGain, 0) {
		v.Add("total_elevation_gain", "must be a finite non-negative number")
	} else if a.TotalElevationGain > model.MaxWorkoutElevationMeters {
		v.Add("total_elevation_gain", "%g m is beyond the physical bound of %g m", a.TotalElevationGain, model.MaxWorkoutElevationMeters)
	}
	maxSeconds := int64(model.MaxWorkoutDuration / time.Second)
	if a.MovingTime < 0 {
		v.Add("moving_time", "must not be negative")
	} else if a.MovingTime > maxSeconds {
		v.Add("moving_time", "%d s is beyond the physical bound of %d s", a.MovingTime, maxSeconds)
	}
	if a.ElapsedTime < 0 || a.ElapsedTime > maxSeconds {
		v.Add("elapsed_time", "%d s is outside 0..%d s", a.ElapsedTime, maxSeconds)
	}
	if userID == "" {
		v.Add("userId", "is required")
	}
	if err := v.Err(); err != nil {
		return nil, fmt.Errorf("map activity %d: %w", a.ID, err)
	}
	now = now.UTC()
	return &model.Workout{
		UserID: userID, AthleteID: athleteID, ActivityID: a.ID, Name: a.Name, SportType: sport,
		DistanceMeters: a.Distance, TotalElevationGain: a.TotalElevationGain, MovingTimeSeconds: a.MovingTime,
		StartDateUtc: a.StartDate.UTC(), CreatedAtUtc: now, UpdatedAtUtc: now, CorrelationID: correlationID,
	}, nil
}
