package projections

import (
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/calendar"
)

// MaxSeriesPeriods bounds the periods one recompute of a whole series
// projects: twenty years of weeks.
const MaxSeriesPeriods = 1040

// Occurrence is period o of series s as a milestone of its own: the
// series' definition on o's days, with the period's stored state (nil:
// none yet, version 0, created now).
//
// # Series
//
// A series (recurrence weekly, monthly or yearly) is one milestone item
// and one item per period (USER#…/SERIES#{id}#{first day}, with the
// period's awards beside it), outside the MILESTONE# range every recompute
// reads. Each period is projected as a milestone of its own days with the
// series' definition (period): its own progress, version, awards and
// AWARD_MINTED entries (keys.AwardOwnerID). A workout trigger names the
// local days it concerns (its start before and after the write), and only
// the periods holding those days are read, projected and written, so an
// event's cost does not grow with the series' past. A trigger that cannot
// name its days (the series written, a sync page's request) and a rebuild
// project every period begun so far (at most MaxSeriesPeriods).
func Occurrence(s *model.Milestone, o calendar.Period, stored *model.Milestone, now time.Time) model.Milestone {
	p := model.Milestone{UserID: s.UserID, MilestoneID: s.MilestoneID, PeriodOf: o.StartDate, CreatedAtUtc: now.UTC(),
		Projection: model.Projection{Status: model.StatusActive}, WrittenBy: model.WriterProjector}
	if stored != nil {
		p = *stored
	}
	p.MilestoneDefinition = s.MilestoneDefinition
	p.PeriodStartDate, p.PeriodEndDate, p.Recurrence = o.StartDate, o.EndDate, ""
	return p
}
