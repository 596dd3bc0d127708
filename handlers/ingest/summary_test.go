package ingest_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/syncjobs"
	"github.com/commitcollect/backend/model/strava"
	"github.com/commitcollect/backend/test/stravasim"
)

// TestSummaryAndDetailedActivityMapToTheSameWorkout proves that backfill and
// reconciliation (which read Strava's list, SummaryActivity) and webhooks
// (which read one DetailedActivity) normalize an activity to the same
// workout item, field for field, so a list never rewrites what a fetch
// wrote, nor the other way round.
func TestSummaryAndDetailedActivityMapToTheSameWorkout(t *testing.T) {
	t.Parallel()
	sim := stravasim.New(stravasim.Options{})
	t.Cleanup(sim.Close)
	ctx := context.Background()
	start := time.Date(2026, 3, 2, 6, 30, 17, 0, time.UTC)
	tests := []struct {
		name  string
		given stravasim.Activity
	}{
		{"run", stravasim.Activity{Name: "Morning Run", SportType: "Run", Distance: 10123.4, TotalElevationGain: 85.2,
			MovingTime: 3012, ElapsedTime: 3300, StartDate: start}},
		{"ride with fractional metres", stravasim.Activity{Name: "Ride", SportType: "Ride", Distance: 42195.123456789,
			TotalElevationGain: 0.1, MovingTime: 5400, ElapsedTime: 6000, StartDate: start.Add(time.Hour)}},
		{"manual entry without distance", stravasim.Activity{Name: "Yoga", SportType: "Yoga", MovingTime: 1800,
			ElapsedTime: 1800, StartDate: start.Add(2 * time.Hour)}},
		{"unicode name", stravasim.Activity{Name: "Lauf 🏃 am Fluss", SportType: "TrailRun", Distance: 8000,
			TotalElevationGain: 300, MovingTime: 3600, ElapsedTime: 4000, StartDate: start.Add(3 * time.Hour)}},
		{"private activity", stravasim.Activity{Name: "Secret", SportType: "Swim", Distance: 1500, MovingTime: 2000,
			ElapsedTime: 2100, StartDate: start.Add(4 * time.Hour), Private: true}},
		{"no name", stravasim.Activity{SportType: "Walk", Distance: 3000.5, MovingTime: 2400, ElapsedTime: 2500,
			StartDate: start.Add(5 * time.Hour)}},
	}
	for i := range tests {
		tests[i].given.ID, tests[i].given.AthleteID = int64(500+i), 9
		sim.PutActivity(tests[i].given)
	}
	tok := sim.IssueTokens(9, time.Hour, "read", "activity:read_all")
	c := strava.NewClient(sim.URL, nil)
	listed, _, err := c.ListActivities(ctx, tok.AccessToken, strava.ListOptions{PerPage: strava.MaxPerPage})
	if err != nil {
		t.Fatal(err)
	}
	summaries := map[int64]strava.Activity{}
	for _, a := range listed {
		summaries[a.ID] = a
	}
	now := time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			detailed, _, err := c.GetActivity(ctx, tok.AccessToken, tt.given.ID)
			if err != nil {
				t.Fatal(err)
			}
			summary, ok := summaries[tt.given.ID]
			if !ok {
				t.Fatalf("activity %d is not in the list %v", tt.given.ID, listed)
			}
			fromDetail, err := ingest.MapActivity(detailed, "u1", 9, "c1", now)
			if err != nil {
				t.Fatal(err)
			}
			fromSummary, err := ingest.MapActivity(summary, "u1", 9, "c1", now)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(fromSummary, fromDetail) {
				t.Fatalf("summary maps to %+v, detailed to %+v", fromSummary, fromDetail)
			}
			if syncjobs.WorkoutDiffers(fromDetail, fromSummary) {
				t.Fatalf("WorkoutDiffers(%+v, %+v) = true, want false", fromDetail, fromSummary)
			}
		})
	}
}
