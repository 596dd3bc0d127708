package ingest_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model/counting"
	"github.com/commitcollect/backend/model/strava"
	"github.com/commitcollect/backend/scripts/stravasim"
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
		{"Sydney summer morning", stravasim.Activity{Name: "Bondi", SportType: "Run", Distance: 5000, MovingTime: 1500,
			ElapsedTime: 1600, StartDate: start.Add(5 * time.Hour), Zone: "Australia/Sydney"}},
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
			stored := *fromDetail
			stored.Stamp() // as the store holds it: its date key carries the local day
			if counting.Differs(&stored, fromSummary) {
				t.Fatalf("WorkoutDiffers(%+v, %+v) = true, want false", fromDetail, fromSummary)
			}
		})
	}
}

// TestLocalStartFollowsTheZoneOfEachActivity: Strava's start_date_local is
// the wall clock where the activity was recorded. Sydney changes its offset
// in April (daylight saving ends on 5 April 2026), and an athlete who flies
// to London runs on London's clock: each workout keeps its own local day.
func TestLocalStartFollowsTheZoneOfEachActivity(t *testing.T) {
	t.Parallel()
	sim := stravasim.New(stravasim.Options{})
	t.Cleanup(sim.Close)
	tests := []struct {
		name                 string
		at                   time.Time
		zone                 string
		wantLocal, wantZone  string
		wantDay, wantUTCDate string
	}{
		{"6:30 on 1 April in Sydney, summer time", time.Date(2026, 3, 31, 19, 30, 0, 0, time.UTC), "Australia/Sydney",
			"2026-04-01T06:30:00", "(GMT+11:00) Australia/Sydney", "2026-04-01", "2026-03-31"},
		{"6:30 on 1 May in Sydney, standard time", time.Date(2026, 4, 30, 20, 30, 0, 0, time.UTC), "Australia/Sydney",
			"2026-05-01T06:30:00", "(GMT+10:00) Australia/Sydney", "2026-05-01", "2026-04-30"},
		{"the same athlete on holiday in London", time.Date(2026, 5, 31, 23, 30, 0, 0, time.UTC), "Europe/London",
			"2026-06-01T00:30:00", "(GMT+01:00) Europe/London", "2026-06-01", "2026-05-31"},
		{"Honolulu evening", time.Date(2026, 7, 1, 5, 0, 0, 0, time.UTC), "Pacific/Honolulu",
			"2026-06-30T19:00:00", "(GMT-10:00) Pacific/Honolulu", "2026-06-30", "2026-07-01"},
	}
	for i, tt := range tests {
		id := int64(100 + i)
		sim.PutActivity(stravasim.Activity{ID: id, AthleteID: 9, SportType: "Run", Distance: 5000, MovingTime: 1500,
			ElapsedTime: 1600, StartDate: tt.at, Zone: tt.zone})
		tok := sim.IssueTokens(9, time.Hour)
		a, _, err := strava.NewClient(sim.URL, nil).GetActivity(context.Background(), tok.AccessToken, id)
		if err != nil {
			t.Fatal(err)
		}
		w, err := ingest.MapActivity(a, "u1", 9, "c1", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		w.Stamp()
		if w.StartDateLocal != tt.wantLocal || w.Timezone != tt.wantZone || w.LocalDate() != tt.wantDay ||
			w.StartDateUtc.Format(time.DateOnly) != tt.wantUTCDate {
			t.Errorf("%s: local %q zone %q day %s (UTC %s), want %q %q %s (UTC %s)", tt.name, w.StartDateLocal, w.Timezone,
				w.LocalDate(), w.StartDateUtc.Format(time.DateOnly), tt.wantLocal, tt.wantZone, tt.wantDay, tt.wantUTCDate)
		}
	}
}
