package model

import "math"

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
)

// MetricSpec describes a metric. Field is the workout attribute it reads
// ("" for count) and Of its value in Unit; Scale is how many integer units
// (the projection's exact arithmetic) one Unit holds.
type MetricSpec struct {
	Unit  string
	Scale float64
	Whole bool
	Field string
	Of    func(Workout) float64
}

// Metrics are the metrics a milestone can measure, in the API's order.
var Metrics = []Metric{MetricDistance, MetricElevation, MetricMovingTime, MetricCount}

// MetricSpecs describe each metric (read only).
var MetricSpecs = map[Metric]MetricSpec{
	MetricDistance:   {"m", 1000, false, "distanceMeters", func(w Workout) float64 { return w.DistanceMeters }},
	MetricElevation:  {"m", 1000, false, "totalElevationGain", func(w Workout) float64 { return w.TotalElevationGain }},
	MetricMovingTime: {"s", 1, true, "movingTimeSeconds", func(w Workout) float64 { return float64(w.MovingTimeSeconds) }},
	MetricCount:      {"workouts", 1, true, "", func(Workout) float64 { return 1 }},
}

// MilestoneWorkoutFields are the workout attributes milestones read beyond
// its identity: the sport type, the start, the tombstone mark and each
// metric's Field. The store's log projection and LSI1 are built from it.
var MilestoneWorkoutFields = []string{"sportType", "distanceMeters", "totalElevationGain", "movingTimeSeconds", "startDateUtc", "isDeleted"}

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

// WorkoutUnits is what w contributes to m, in integer units.
func (m Metric) WorkoutUnits(w Workout) int64 {
	if s, ok := MetricSpecs[m]; ok {
		return m.Units(s.Of(w))
	}
	return 0
}

// ProgressInUnit converts a projected value (integer units) to m's unit.
func (m Metric) ProgressInUnit(value int64) float64 {
	return float64(value) / max(MetricSpecs[m].Scale, 1)
}

// TargetUnits is the target in the projection's integer units.
func (d MilestoneDefinition) TargetUnits() int64 { return d.Metric.Units(d.Target) }
