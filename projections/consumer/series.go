package consumer

// Series are projected period by period: see projections.Occurrence.

import (
	"context"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/calendar"
	"github.com/commitcollect/backend/projections"
)

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
			occ = s.Period().OccurrencesSoFar(now, projections.MaxSeriesPeriods)
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
			p := projections.Occurrence(s, o, stored[o.StartDate].Period, now)
			periods = append(periods, p)
			awards[periodKey(p)] = stored[o.StartDate].Awards
			windows = append(windows, p.Window())
		}
	}
	return periods, awards, windows, nil
}

// periodKey names a milestone or a series' period in maps of awards.
func periodKey(m model.Milestone) string { return m.MilestoneID + "/" + m.PeriodOf }
