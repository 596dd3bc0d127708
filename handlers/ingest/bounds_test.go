package ingest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/strava"
	"github.com/commitcollect/backend/scripts/stravasim"
	"github.com/commitcollect/backend/test/ingesttest"
)

func TestMapActivityPhysicalBounds(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	base := strava.Activity{ID: 7, Name: "x", SportType: "Ride", Distance: 5000, TotalElevationGain: 40, MovingTime: 1800,
		ElapsedTime: 2000, StartDate: now.Add(-time.Hour)}
	month := int64(model.MaxWorkoutDuration / time.Second)
	tests := []struct {
		name      string
		given     func(a *strava.Activity)
		wantField string // "" = accepted
	}{
		{"at every bound", func(a *strava.Activity) {
			a.Distance, a.TotalElevationGain, a.MovingTime, a.ElapsedTime = model.MaxWorkoutDistanceMeters, model.MaxWorkoutElevationMeters, month, month
		}, ""},
		{"distance 1e300", func(a *strava.Activity) { a.Distance = 1e300 }, "distance"},
		{"distance just beyond", func(a *strava.Activity) { a.Distance = model.MaxWorkoutDistanceMeters + 1 }, "distance"},
		{"elevation beyond", func(a *strava.Activity) { a.TotalElevationGain = 2e6 }, "total_elevation_gain"},
		{"moving time beyond a month", func(a *strava.Activity) { a.MovingTime = month + 1 }, "moving_time"},
		{"elapsed time beyond a month", func(a *strava.Activity) { a.ElapsedTime = month + 1 }, "elapsed_time"},
		{"negative elapsed time", func(a *strava.Activity) { a.ElapsedTime = -1 }, "elapsed_time"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := base
			tt.given(&a)
			got, err := ingest.MapActivity(a, "u1", 3, "c1", now)
			if tt.wantField == "" {
				if err != nil || got == nil {
					t.Fatalf("got %v, %v; want a workout", got, err)
				}
				return
			}
			var v *model.ValidationError
			if !errors.As(err, &v) || len(v.Fields) != 1 || v.Fields[0].Field != tt.wantField {
				t.Fatalf("got %v, want a ValidationError naming only %s", err, tt.wantField)
			}
		})
	}
}

// TestMapActivityFillsEveryMetric: for every metric read from a Strava
// field (model.MetricSpec.Strava), the value Strava sends in that field is
// the value the metric reads off the workout, and a value past the metric's
// bound is refused naming that field. A metric added to the specs without
// its mapping fails here. Protection: MapActivity's use of the specs.
func TestMapActivityFillsEveryMetric(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	mapped := 0
	for _, m := range model.Metrics {
		spec := model.MetricSpecs[m]
		if spec.Strava == "" {
			continue
		}
		mapped++
		for _, x := range []float64{1234, spec.Max + 1} {
			body := fmt.Sprintf(`{"id": 7, "sport_type": "Ride", "start_date": "2026-03-02T08:00:00Z", %q: %s}`,
				spec.Strava, strconv.FormatFloat(x, 'f', -1, 64))
			var a strava.Activity
			if err := json.Unmarshal([]byte(body), &a); err != nil {
				t.Fatalf("%s: %v", m, err)
			}
			w, err := ingest.MapActivity(a, "u1", 3, "c1", now)
			var v *model.ValidationError
			switch {
			case x <= spec.Max && (err != nil || spec.Of(*w) != x):
				t.Errorf("%s: Strava's %s %v mapped to %v (%v)", m, spec.Strava, x, w, err)
			case x > spec.Max && (!errors.As(err, &v) || len(v.Fields) != 1 || v.Fields[0].Field != spec.Strava):
				t.Errorf("%s: %s %v past the bound: got %v, want a ValidationError naming %s", m, spec.Strava, x, err, spec.Strava)
			}
		}
	}
	if mapped < 3 {
		t.Fatalf("%d metrics read a Strava field; want distance, elevation and moving time", mapped)
	}
}

// TestWorkerRejectsPhysicallyImpossibleActivity: an activity Strava serves
// with a distance of 1e300 m is rejected at normalization: the job ends (no
// error, so no retry and no DLQ/park), nothing is written, and the audit
// trail says why.
func TestWorkerRejectsPhysicallyImpossibleActivity(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	h.Link("u1", 10, time.Hour)
	ctx := context.Background()
	h.Sim.PutActivity(stravasim.Activity{ID: 900, AthleteID: 10, SportType: "Run", Distance: 1e300, MovingTime: 1500,
		ElapsedTime: 1600, StartDate: time.Now().UTC().Add(-time.Hour)})
	if err := h.Worker.Run(ctx, ingesttest.Job(h.Sim.ActivityEvent("create", 900, 10, nil))); err != nil {
		t.Fatalf("worker: %v; want the job finished as rejected (nil)", err)
	}
	if _, err := h.St.Workouts.Workout(ctx, "u1", 900); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("workout 900: %v; want nothing written", err)
	}
	rejected := h.Audits(keys.AthletePK(10))[ingest.AuditEventRejected]
	if len(rejected) != 1 || !strings.Contains(rejected[0].Details["reason"], "distance") ||
		!strings.Contains(rejected[0].Details["reason"], "physical bound") {
		t.Fatalf("rejected audits %+v; want one whose reason names the distance bound", rejected)
	}
}
