package consumer

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

import (
	"context"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/calendar"
)

// MaxSeriesPeriods bounds the periods one recompute of a whole series
// projects: twenty years of weeks.
const MaxSeriesPeriods = 1040

// touched is what a user's triggers say about the days they concern.
type touched struct {
	// days are the local days (midnights UTC, calendar.ParseDate) of the
	// workouts written or removed.
	days []time.Time
	// all: some trigger cannot name its days; every period is projected.
	all bool
}

// addDays records the local days of a trigger (known: they are all it
// concerns; else every period is projected).
func (t *touched) addDays(days []string, known bool) {
	if !known {
		t.all = true
		return
	}
	for _, d := range days {
		if day, err := calendar.ParseDate(d); err == nil {
			t.days = append(t.days, day)
		} else {
			t.all = true
		}
	}
}

// seriesPeriods returns, for each series among ms, the periods the
// triggers touch as milestones of their own (stored state, or a period not
// written yet at version 0), their awards by period, and the windows of
// the log they need.
func (c *Consumer) seriesPeriods(ctx context.Context, userID string, ms []model.Milestone, t touched, now time.Time) (
	periods []model.Milestone, awards map[string]map[int]model.Award, windows []model.Window, err error) {
	awards = map[string]map[int]model.Award{}
	for i := range ms {
		s := &ms[i]
		if s.Recurrence == "" || s.ValidateProjectable() != nil {
			continue
		}
		occ := s.Period().Occurrences(t.days)
		var starts []string
		if t.all {
			occ = s.Period().OccurrencesSoFar(now, MaxSeriesPeriods)
		} else {
			for _, o := range occ {
				starts = append(starts, o.StartDate)
			}
		}
		if len(occ) == 0 {
			continue
		}
		stored, err := c.st.SeriesPeriods(ctx, userID, s.MilestoneID, starts)
		if err != nil {
			return nil, nil, nil, err
		}
		for _, o := range occ {
			p := period(s, o, stored[o.StartDate].Period, now)
			periods = append(periods, p)
			awards[periodKey(p)] = stored[o.StartDate].Awards
			windows = append(windows, p.Window())
		}
	}
	return periods, awards, windows, nil
}

// period is one period o of series s as a milestone of its own: the
// series' definition on o's days, with the period's stored state (or none
// yet: version 0, created now).
func period(s *model.Milestone, o calendar.Period, stored *model.Milestone, now time.Time) model.Milestone {
	p := model.Milestone{UserID: s.UserID, MilestoneID: s.MilestoneID, PeriodOf: o.StartDate, CreatedAtUtc: now.UTC(),
		Projection: model.Projection{Status: model.StatusActive}, WrittenBy: model.WriterProjector}
	if stored != nil {
		p = *stored
	}
	p.MilestoneDefinition = s.MilestoneDefinition
	p.PeriodStartDate, p.PeriodEndDate, p.Recurrence = o.StartDate, o.EndDate, ""
	return p
}

// periodKey names a milestone or a series' period in maps of awards.
func periodKey(m model.Milestone) string { return m.MilestoneID + "/" + m.PeriodOf }
