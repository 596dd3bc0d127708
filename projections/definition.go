package projections

import (
	"slices"

	"github.com/commitcollect/backend/model"
)

// SameDefinition reports whether two milestone definitions project the
// same way and read the same (sport types compare as a set, times as
// instants).
func SameDefinition(a, b model.MilestoneDefinition) bool {
	sa, sb := slices.Clone(a.SportTypes), slices.Clone(b.SportTypes)
	slices.Sort(sa)
	slices.Sort(sb)
	endEqual := (a.PeriodEndAtUtc == nil) == (b.PeriodEndAtUtc == nil) &&
		(a.PeriodEndAtUtc == nil || a.PeriodEndAtUtc.Equal(*b.PeriodEndAtUtc))
	return a.ModelID == b.ModelID && a.Title == b.Title && a.Metric == b.Metric && a.Target == b.Target &&
		slices.Equal(sa, sb) && a.PeriodStartAtUtc.Equal(b.PeriodStartAtUtc) && endEqual && a.PartCount == b.PartCount &&
		a.PeriodStartDate == b.PeriodStartDate && a.PeriodEndDate == b.PeriodEndDate
}
