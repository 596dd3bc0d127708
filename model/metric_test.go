package model

import (
	"math"
	"testing"
)

// TestMetricsAreDescribedOnce: every metric has its spec, with the Strava
// field it is mapped from and its bound (model/counting checks that the log
// holds each metric's field). Protection: the spec table.
func TestMetricsAreDescribedOnce(t *testing.T) {
	t.Parallel()
	if len(MetricSpecs) != len(Metrics) {
		t.Fatalf("%d specs for %d metrics", len(MetricSpecs), len(Metrics))
	}
	for _, m := range Metrics {
		s, ok := MetricSpecs[m]
		if !ok || !m.Valid() || s.Scale < 1 || s.Unit == "" {
			t.Errorf("%s: spec %+v", m, s)
		}
		if (s.Field == "") != (s.Strava == "") || (s.Strava != "" && s.Max <= 0) {
			t.Errorf("%s reads %q: it needs the Strava field it is mapped from and its bound, got %q and %v", m, s.Field, s.Strava, s.Max)
		}
	}
	if Metric("calories").Valid() {
		t.Error("an unknown metric is valid")
	}
}

// TestMetricUnits: targets and workouts convert to integer units one way
// (half away from zero, saturating), and back. Protection: Units.
func TestMetricUnits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		m    Metric
		x    float64
		want int64
	}{
		{MetricDistance, 5000.0004, 5000000},
		{MetricDistance, 0.0005, 1},
		{MetricElevation, -3, 0},
		{MetricMovingTime, 1500.5, 1501},
		{MetricCount, 2, 2},
		{MetricDistance, math.NaN(), 0},
		{MetricDistance, 1e300, math.MaxInt64},
		{Metric("calories"), 5, 0},
	}
	for _, tt := range tests {
		if got := tt.m.Units(tt.x); got != tt.want {
			t.Errorf("%s.Units(%v) = %d, want %d", tt.m, tt.x, got, tt.want)
		}
	}
	w := Workout{DistanceMeters: 10.5, TotalElevationGain: 2, MovingTimeSeconds: 60}
	for m, want := range map[Metric]int64{MetricDistance: 10500, MetricElevation: 2000, MetricMovingTime: 60, MetricCount: 1} {
		if got := m.Units(MetricSpecs[m].Of(w)); got != want {
			t.Errorf("%s: a workout is %d units, want %d", m, got, want)
		}
		d := MilestoneDefinition{Metric: m, Target: 12}
		if got := m.ProgressInUnit(d.TargetUnits()); got != 12 {
			t.Errorf("%s: target 12 comes back as %v", m, got)
		}
	}
}

// TestCheckWorkoutValue: one workout's value must be a finite non-negative
// number within the metric's physical bound. Protection: CheckWorkoutValue.
func TestCheckWorkoutValue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		m    Metric
		x    float64
		want string // "" = accepted
	}{
		{MetricDistance, 0, ""},
		{MetricDistance, MaxWorkoutDistanceMeters, ""},
		{MetricDistance, MaxWorkoutDistanceMeters + 1, "10000001 m is beyond the physical bound of 10000000 m"},
		{MetricElevation, -1, "must be a finite non-negative number"},
		{MetricElevation, math.Inf(1), "must be a finite non-negative number"},
		{MetricMovingTime, math.NaN(), "must be a finite non-negative number"},
		{MetricMovingTime, 2678401, "2678401 s is beyond the physical bound of 2678400 s"},
		{MetricCount, 1e9, ""}, // count has no bound of its own
	}
	for _, tt := range tests {
		if got := tt.m.CheckWorkoutValue(tt.x); got != tt.want {
			t.Errorf("%s.CheckWorkoutValue(%v) = %q, want %q", tt.m, tt.x, got, tt.want)
		}
	}
}
