package milestones

import (
	"strings"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/rules"
	"github.com/commitcollect/backend/model/sport"
	"github.com/commitcollect/backend/model/streak"
)

// CreateRequest is the body of POST /v1/milestones. The period is given
// in exactly one of two forms: local days where the athlete runs
// (periodStartDate and an optional periodEndDate, YYYY-MM-DD, both
// included), or UTC instants (periodStartAtUtc and an optional
// periodEndAtUtc, RFC 3339, end excluded). target is in the metric's unit.
type CreateRequest struct {
	ModelID          string   `json:"modelId"`
	Title            string   `json:"title"`
	Metric           string   `json:"metric"`
	Target           *float64 `json:"target"`
	SportTypes       []string `json:"sportTypes"`
	PeriodStartAtUtc string   `json:"periodStartAtUtc"`
	PeriodEndAtUtc   *string  `json:"periodEndAtUtc"`
	PeriodStartDate  string   `json:"periodStartDate"`
	PeriodEndDate    *string  `json:"periodEndDate"`
	// Recurrence (weekly, monthly, yearly; local days only, starting on a
	// period's first day) makes a series: one period per week, month or
	// year, each with its own progress, status and awards.
	Recurrence string `json:"recurrence"`
	// Rules are the conditions each activity must meet to count (every
	// field optional; unknown keys refused, each named rules.<key>).
	Rules *rules.Rules `json:"rules"`
	// StreakUnit (day or week) and FreezesPerMonth (0..4) shape a streak
	// (metric streak, local days, no recurrence).
	StreakUnit      string `json:"streakUnit"`
	FreezesPerMonth *int   `json:"freezesPerMonth"`
}

type fieldErrors struct{ model.ValidationError }

func (f *fieldErrors) has(field string) bool {
	for _, e := range f.Fields {
		if e.Field == field {
			return true
		}
	}
	return false
}

// definition turns the request into a definition, collecting the errors only
// parsing can see (time formats, a missing target, both period forms).
func (req CreateRequest) definition() (model.MilestoneDefinition, *fieldErrors) {
	ve := &fieldErrors{}
	d := model.MilestoneDefinition{
		ModelID: strings.TrimSpace(req.ModelID), Title: strings.TrimSpace(req.Title), Metric: model.Metric(req.Metric),
		Recurrence: req.Recurrence,
	}
	if !req.Rules.Empty() { // {} is no rules: stored absent
		d.Rules = req.Rules
	}
	if req.StreakUnit != "" || req.FreezesPerMonth != nil {
		d.Streak = &streak.Rule{Unit: streak.Unit(req.StreakUnit)}
		if req.FreezesPerMonth != nil {
			d.Streak.FreezesPerMonth = *req.FreezesPerMonth
		}
	}
	// Groups ("group:rides") become their explicit types here, so the
	// stored definition is a plain filter; unknown names are refused by
	// Validate, which names each.
	types, unknown := sport.Expand(req.SportTypes)
	d.SportTypes = append(append([]string{}, types...), unknown...)
	if req.Target == nil {
		ve.Add("target", "is required")
	} else {
		d.Target = *req.Target
	}
	local := req.PeriodStartDate != "" || req.PeriodEndDate != nil
	if local && (req.PeriodStartAtUtc != "" || req.PeriodEndAtUtc != nil) {
		// Named once; the local form is checked on its own.
		ve.Add("periodStartDate", "give either periodStartDate/periodEndDate or periodStartAtUtc/periodEndAtUtc, not both")
	}
	if local {
		d.PeriodStartDate = req.PeriodStartDate
		if req.PeriodEndDate != nil {
			d.PeriodEndDate = *req.PeriodEndDate
			if d.PeriodEndDate == "" {
				ve.Add("periodEndDate", "must be a date (YYYY-MM-DD) when given")
			}
		}
		return d, ve
	}
	if req.PeriodStartAtUtc != "" {
		t, err := time.Parse(time.RFC3339, req.PeriodStartAtUtc)
		if err != nil {
			ve.Add("periodStartAtUtc", "%q is not an RFC 3339 time", req.PeriodStartAtUtc)
		} else {
			d.PeriodStartAtUtc = t.UTC()
		}
	}
	if req.PeriodEndAtUtc != nil {
		t, err := time.Parse(time.RFC3339, *req.PeriodEndAtUtc)
		if err != nil {
			ve.Add("periodEndAtUtc", "%q is not an RFC 3339 time", *req.PeriodEndAtUtc)
		} else {
			t = t.UTC()
			d.PeriodEndAtUtc = &t
		}
	}
	return d, ve
}
