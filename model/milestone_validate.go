package model

import (
	"math"

	"strings"
	"unicode/utf8"

	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/sport"
	"github.com/commitcollect/backend/model/streak"
)

// Limits on a milestone definition.
const (
	// MaxTitleLength is the longest title, in characters.
	MaxTitleLength = 120
	// MaxSportTypes bounds the sport-type filter.
	MaxSportTypes = 50
	// MaxTarget bounds a target in the metric's unit, so that the projector's
	// integer arithmetic (millimetres × part count) cannot overflow.
	MaxTarget = 1e9
)

// Validate checks a definition as it will be stored and reports every bad
// field at once, as a *ValidationError (errors.Is ErrInvalid) whose field
// names are the JSON names. It returns nil when the definition is valid.
// PartCount must already be copied from the model (1..MaxPartCount).
func (d MilestoneDefinition) Validate() error { return d.check(true) }

// ValidateProjectable checks only what projecting a stored definition needs
// (metric, target, part count, period), with Validate's messages: the
// projector reads definitions written under older rules too.
func (d MilestoneDefinition) ValidateProjectable() error { return d.check(false) }

// check runs the checks of Validate (stored) or of ValidateProjectable.
func (d MilestoneDefinition) check(stored bool) error {
	v := &ValidationError{}
	if stored {
		d.checkNames(v)
	}
	metricOK := d.Metric.Valid()
	if !metricOK {
		v.Add("metric", "%q is not one of %s", d.Metric, metricNames())
	}
	switch {
	case math.IsNaN(d.Target) || math.IsInf(d.Target, 0) || d.Target <= 0:
		v.Add("target", "must be greater than 0")
	case stored && d.Target > MaxTarget:
		v.Add("target", "must be at most %g", float64(MaxTarget))
	case stored && metricOK && MetricSpecs[d.Metric].Whole && d.Target != math.Trunc(d.Target):
		v.Add("target", "must be a whole number for %s", d.Metric)
	case metricOK && d.TargetUnits() < 1:
		// The projector works in integer units (mm); a target that rounds to
		// zero could never be projected.
		v.Add("target", "must be at least %g for %s", 1/MetricSpecs[d.Metric].Scale, d.Metric)
	}
	if stored {
		d.checkSportTypes(v)
		for _, p := range d.Rules.Check() {
			v.Add(p.Field, "%s", p.Message)
		}
		for _, p := range streak.Check(streak.Definition{Streak: d.Metric == MetricStreak, Rule: d.Streak,
			Recurrence: d.Recurrence, LocalDays: d.Period().Local(), StartDate: d.PeriodStartDate}) {
			v.Add(p.Field, "%s", p.Message)
		}
	}
	d.checkPeriod(v)
	if d.PartCount < 1 || d.PartCount > MaxPartCount {
		v.Add("partCount", "must be between 1 and %d", MaxPartCount)
	}
	return v.Err()
}

// checkPeriod checks the period (calendar.Period.Check).
func (d MilestoneDefinition) checkPeriod(v *ValidationError) {
	for _, f := range d.Period().Check() {
		v.Add(f.Field, "%s", f.Message)
	}
}

// checkNames checks a stored definition's model id and title.
func (d MilestoneDefinition) checkNames(v *ValidationError) {
	switch {
	case strings.TrimSpace(d.ModelID) == "":
		v.Add("modelId", "is required")
	case strings.Contains(d.ModelID, keys.Separator) || d.ModelID != strings.TrimSpace(d.ModelID):
		v.Add("modelId", "%q is not a model id", d.ModelID)
	}
	switch title := strings.TrimSpace(d.Title); {
	case title == "":
		v.Add("title", "is required")
	case utf8.RuneCountInString(title) > MaxTitleLength:
		v.Add("title", "is longer than %d characters", MaxTitleLength)
	}
}

// checkSportTypes checks a stored definition's sport-type filter.
func (d MilestoneDefinition) checkSportTypes(v *ValidationError) {
	if len(d.SportTypes) > MaxSportTypes {
		v.Add("sportTypes", "has more than %d entries", MaxSportTypes)
	}
	seen := map[string]bool{}
	for _, s := range d.SportTypes {
		switch {
		case !sport.Known(s): // "run" would never match: names are exact
			v.Add("sportTypes", "%s", sport.Unknown(s))
		case seen[s]:
			v.Add("sportTypes", "%q is listed twice", s)
		}
		seen[s] = true
	}
}

// metricNames lists Metrics for messages: "distance, elevation, …".
func metricNames() string {
	names := make([]string, len(Metrics))
	for i, m := range Metrics {
		names[i] = string(m)
	}
	return strings.Join(names, ", ")
}
