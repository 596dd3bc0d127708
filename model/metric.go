package model

import (
	"fmt"
	"math"
	"strconv"
)

// Metric is what a milestone measures. Its MetricSpec, in one place, says
// its unit, its scale to the projection's integer units, whether a target
// must be whole, and the workout attribute it reads.
type Metric string

// The metrics a milestone can measure.
const (
	MetricDistance   Metric = "distance"    // metres
	MetricElevation  Metric = "elevation"   // metres
	MetricMovingTime Metric = "moving_time" // seconds
	MetricCount      Metric = "count"       // workouts
	// MetricStreak measures the longest run of active days or weeks
	// (model/streak); a workout that counts adds 1 like count does, which
	// only /workouts shows.
	MetricStreak Metric = "streak"
)

// MetricSpec describes a metric. Field is the workout attribute it reads
// ("" for count) and Of its value in Unit; Scale is how many integer units
// (the projection's exact arithmetic) one Unit holds. Strava names the
// activity field the value is mapped from and Max is the physical bound of
// one workout's value (bounds.go), which normalization checks.
type MetricSpec struct {
	Unit   string
	Scale  float64
	Whole  bool
	Field  string
	Of     func(Workout) float64
	Strava string
	Max    float64
}

// Metrics are the metrics a milestone can measure, in the API's order.
var Metrics = []Metric{MetricDistance, MetricElevation, MetricMovingTime, MetricCount, MetricStreak}

// MetricSpecs describe each metric (read only).
var MetricSpecs = map[Metric]MetricSpec{
	MetricDistance: {Unit: "m", Scale: 1000, Field: "distanceMeters", Strava: "distance", Max: MaxWorkoutDistanceMeters,
		Of: func(w Workout) float64 { return w.DistanceMeters }},
	MetricElevation: {Unit: "m", Scale: 1000, Field: "totalElevationGain", Strava: "total_elevation_gain", Max: MaxWorkoutElevationMeters,
		Of: func(w Workout) float64 { return w.TotalElevationGain }},
	MetricMovingTime: {Unit: "s", Scale: 1, Whole: true, Field: "movingTimeSeconds", Strava: "moving_time", Max: MaxWorkoutDuration.Seconds(),
		Of: func(w Workout) float64 { return float64(w.MovingTimeSeconds) }},
	MetricCount:  {Unit: "workouts", Scale: 1, Whole: true, Of: func(Workout) float64 { return 1 }},
	MetricStreak: {Unit: "days or weeks", Scale: 1, Whole: true, Of: func(Workout) float64 { return 1 }},
}

// CheckWorkoutValue says why x cannot be one workout's value of m ("" when
// it can): it is not a finite non-negative number, or it is beyond m's
// physical bound.
func (m Metric) CheckWorkoutValue(x float64) string {
	s := MetricSpecs[m]
	switch {
	case math.IsNaN(x) || math.IsInf(x, 0) || x < 0:
		return "must be a finite non-negative number"
	case s.Max > 0 && x > s.Max:
		return fmt.Sprintf("%s %s is beyond the physical bound of %s %s", number(x), s.Unit, number(s.Max), s.Unit)
	}
	return ""
}

// number formats x without an exponent below 1e21 (2678400, not 2.6784e+06).
func number(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

// Valid reports whether m is a known metric.
func (m Metric) Valid() bool { _, ok := MetricSpecs[m]; return ok }

// Units converts x (in m's unit) to integer units, rounding half away from
// zero and saturating (NaN, negatives and unknown metrics are 0, overflow
// is MaxInt64).
func (m Metric) Units(x float64) int64 {
	s, ok := MetricSpecs[m]
	v := math.Round(x * s.Scale)
	switch {
	case !ok || math.IsNaN(v) || v <= 0:
		return 0
	case v >= math.MaxInt64:
		return math.MaxInt64
	}
	return int64(v)
}

// ProgressInUnit converts a projected value (integer units) to m's unit.
func (m Metric) ProgressInUnit(value int64) float64 {
	return float64(value) / max(MetricSpecs[m].Scale, 1)
}

// TargetUnits is the target in the projection's integer units.
func (d MilestoneDefinition) TargetUnits() int64 { return d.Metric.Units(d.Target) }
