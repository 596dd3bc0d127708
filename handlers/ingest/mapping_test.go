package ingest_test

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/rules"
	"github.com/commitcollect/backend/model/strava"
)

func TestMapActivity(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	start := time.Date(2026, 3, 2, 6, 0, 0, 0, time.FixedZone("x", 3600))
	base := strava.Activity{ID: 7, Athlete: strava.ActivityAthlete{ID: 3}, Name: "Easy", SportType: "Run", Type: "Run",
		Distance: 5000.5, TotalElevationGain: 42, MovingTime: 1800, ElapsedTime: 1900, StartDate: start, Trainer: true}
	tests := []struct {
		name      string
		given     func(a *strava.Activity)
		want      *model.Workout
		wantField string
	}{
		{"full activity", func(*strava.Activity) {}, &model.Workout{UserID: "u1", AthleteID: 3, ActivityID: 7, Name: "Easy",
			SportType: "Run", DistanceMeters: 5000.5, TotalElevationGain: 42, MovingTimeSeconds: 1800, ElapsedTimeSeconds: 1900,
			StartDateUtc: start.UTC(), CreatedAtUtc: now, UpdatedAtUtc: now, CorrelationID: "c1", Flags: &rules.Flags{Trainer: true}}, ""},
		{"each of Strava's marks", func(a *strava.Activity) { a.Manual, a.Trainer, a.Commute = true, false, true }, &model.Workout{UserID: "u1",
			AthleteID: 3, ActivityID: 7, Name: "Easy", SportType: "Run", DistanceMeters: 5000.5, TotalElevationGain: 42, MovingTimeSeconds: 1800,
			ElapsedTimeSeconds: 1900, StartDateUtc: start.UTC(), CreatedAtUtc: now, UpdatedAtUtc: now, CorrelationID: "c1",
			Flags: &rules.Flags{Manual: true, Commute: true}}, ""},
		{"legacy type when sport_type is empty", func(a *strava.Activity) { a.SportType, a.Type = "", "Ride" },
			&model.Workout{UserID: "u1", AthleteID: 3, ActivityID: 7, Name: "Easy", SportType: "Ride", DistanceMeters: 5000.5,
				TotalElevationGain: 42, MovingTimeSeconds: 1800, ElapsedTimeSeconds: 1900, StartDateUtc: start.UTC(), CreatedAtUtc: now,
				UpdatedAtUtc: now, CorrelationID: "c1", Flags: &rules.Flags{Trainer: true}}, ""},
		{"no sport at all", func(a *strava.Activity) { a.SportType, a.Type = "", "" }, nil, "sport_type"},
		{"no start date", func(a *strava.Activity) { a.StartDate = time.Time{} }, nil, "start_date"},
		{"negative distance", func(a *strava.Activity) { a.Distance = -1 }, nil, "distance"},
		{"NaN elevation", func(a *strava.Activity) { a.TotalElevationGain = math.NaN() }, nil, "total_elevation_gain"},
		{"negative moving time", func(a *strava.Activity) { a.MovingTime = -5 }, nil, "moving_time"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := base
			tt.given(&a)
			got, err := ingest.MapActivity(a, "u1", 3, "c1", now)
			if tt.wantField != "" {
				if !errors.Is(err, model.ErrInvalid) || !strings.Contains(err.Error(), tt.wantField) {
					t.Fatalf("got %v, want ErrInvalid naming %s", err, tt.wantField)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
