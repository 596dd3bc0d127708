// Package rules is the vocabulary of what may count towards a milestone:
// the rules fixed when a milestone is created (minimums per activity,
// excluded kinds of activity), the activity flags Strava reports that the
// exclusions read, and the reasons a workout did not count. It holds values
// and their validation only; model/counting decides with them.
package rules

import (
	"fmt"
	"math"
	"slices"
)

// Exclusions a milestone's rules may name: activities Strava marks as
// entered by hand, recorded on an indoor trainer, or flagged as a commute.
const (
	ExcludeManual  = "manual"
	ExcludeTrainer = "trainer"
	ExcludeCommute = "commute"
)

// Exclusions lists every known exclusion, in the API's order.
var Exclusions = []string{ExcludeManual, ExcludeTrainer, ExcludeCommute}

// Reason says why a workout of a milestone's period did not count. The
// exclusions are reasons too (ExcludeManual, …).
type Reason string

// Reasons a workout in the period did not count, in the order they are
// checked: the first that applies is the one given.
const (
	ReasonSport        Reason = "sport"
	ReasonManual       Reason = ExcludeManual
	ReasonTrainer      Reason = ExcludeTrainer
	ReasonCommute      Reason = ExcludeCommute
	ReasonBelowMinimum Reason = "below_minimum"
)

// Reasons lists every reason, in the order they are checked.
var Reasons = []Reason{ReasonSport, ReasonManual, ReasonTrainer, ReasonCommute, ReasonBelowMinimum}

// Bounds on a minimum: a day of moving time, a thousand kilometres. A
// larger minimum would leave almost every real activity out.
const (
	MaxMinMovingTimeSeconds = 24 * 60 * 60
	MaxMinDistanceMeters    = 1_000_000
)

// Rules are a milestone's conditions on each activity, fixed at creation
// like its sport types. The zero value (or nil) admits every activity.
type Rules struct {
	// MinMovingTimeSeconds is the least moving time an activity needs
	// (0: none); an activity exactly at it counts.
	MinMovingTimeSeconds int64 `dynamodbav:"minMovingTimeSeconds,omitempty" json:"minMovingTimeSeconds,omitempty"`
	// MinDistanceMeters is the least distance an activity needs (0: none).
	MinDistanceMeters float64 `dynamodbav:"minDistanceMeters,omitempty" json:"minDistanceMeters,omitempty"`
	// Exclude names kinds of activity that never count (Exclusions), each
	// once.
	Exclude []string `dynamodbav:"exclude,omitempty" json:"exclude,omitempty"`
}

// Empty reports whether r admits every activity (nil included).
func (r *Rules) Empty() bool {
	return r == nil || (r.MinMovingTimeSeconds == 0 && r.MinDistanceMeters == 0 && len(r.Exclude) == 0)
}

// Excludes reports whether r names the exclusion x.
func (r *Rules) Excludes(x string) bool { return r != nil && slices.Contains(r.Exclude, x) }

// Problem is one bad field of a milestone's rules; Field is the API's path
// ("rules.minDistanceMeters", "rules.exclude[1]").
type Problem struct {
	Field   string
	Message string
}

// Check lists every problem of r (none for nil): a negative or too large
// minimum, an unknown exclusion, an exclusion named twice.
func (r *Rules) Check() []Problem {
	if r == nil {
		return nil
	}
	var out []Problem
	add := func(field, format string, args ...any) {
		out = append(out, Problem{Field: "rules." + field, Message: fmt.Sprintf(format, args...)})
	}
	if r.MinMovingTimeSeconds < 0 || r.MinMovingTimeSeconds > MaxMinMovingTimeSeconds {
		add("minMovingTimeSeconds", "must be a whole number of seconds from 0 to %d", MaxMinMovingTimeSeconds)
	}
	if d := r.MinDistanceMeters; math.IsNaN(d) || d < 0 || d > MaxMinDistanceMeters {
		add("minDistanceMeters", "must be a number of metres from 0 to %d", MaxMinDistanceMeters)
	}
	for i, x := range r.Exclude {
		switch {
		case !slices.Contains(Exclusions, x):
			add(fmt.Sprintf("exclude[%d]", i), "%q is not one of manual, trainer, commute", x)
		case slices.Index(r.Exclude, x) < i:
			add(fmt.Sprintf("exclude[%d]", i), "%q is listed twice", x)
		}
	}
	return out
}

// Same reports whether a and b admit the same activities (exclusions as a
// set; nil and empty alike).
func Same(a, b *Rules) bool {
	if a.Empty() || b.Empty() {
		return a.Empty() == b.Empty()
	}
	return a.MinMovingTimeSeconds == b.MinMovingTimeSeconds && a.MinDistanceMeters == b.MinDistanceMeters &&
		slices.Equal(sorted(a.Exclude), sorted(b.Exclude))
}

// Key is a canonical text of r for fingerprints: equal for rules that are
// Same.
func (r *Rules) Key() string {
	if r.Empty() {
		return ""
	}
	return fmt.Sprintf("t%d|d%g|x%v", r.MinMovingTimeSeconds, r.MinDistanceMeters, sorted(r.Exclude))
}

func sorted(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// Flags are what Strava says an activity is: entered by hand, recorded on
// an indoor trainer, a commute. A workout stored before flags were kept has
// none (nil): see model/counting for how rules read it.
type Flags struct {
	Manual  bool `dynamodbav:"manual" json:"manual"`
	Trainer bool `dynamodbav:"trainer" json:"trainer"`
	Commute bool `dynamodbav:"commute" json:"commute"`
}

// Has reports whether the activity is of the excluded kind x.
func (f Flags) Has(x string) bool {
	switch x {
	case ExcludeManual:
		return f.Manual
	case ExcludeTrainer:
		return f.Trainer
	case ExcludeCommute:
		return f.Commute
	}
	return false
}
