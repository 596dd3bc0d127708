package consumer

// Series are projected period by period: see projections.Occurrence.

import (
	"context"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/projections"
)

// seriesPeriods returns, for each series among ms, the periods the
// triggers touch as milestones of their own (stored state, or a period not
// written yet at version 0), their awards by period, and the windows of
// the log they need.
func seriesPeriods(ctx context.Context, st SeriesStore, userID string, ms []model.Milestone, t projections.Touched, now time.Time) (
	periods []model.Milestone, awards map[string]map[int]model.Award, windows []model.Window, err error) {
	awards = map[string]map[int]model.Award{}
	for i := range ms {
		s := &ms[i]
		if s.Recurrence == "" || s.ValidateProjectable() != nil {
			continue
		}
		occ := s.Period().Occurrences(t.Days)
		var starts []string
		if t.All {
			occ = s.Period().OccurrencesSoFar(now, projections.MaxSeriesPeriods)
		} else {
			for _, o := range occ {
				starts = append(starts, o.StartDate)
			}
		}
		if len(occ) == 0 {
			continue
		}
		stored, err := st.SeriesPeriods(ctx, userID, s.MilestoneID, starts)
		if err != nil {
			return nil, nil, nil, err
		}
		for _, o := range occ {
			p := projections.Occurrence(s, o, stored[o.StartDate].Period, now)
			periods = append(periods, p)
			awards[periodKey(p)] = stored[o.StartDate].Awards
			windows = append(windows, t.Windows(&p)...)
		}
	}
	return periods, awards, windows, nil
}

// periodKey names a milestone or a series' period in maps of awards.
func periodKey(m model.Milestone) string { return m.MilestoneID + "/" + m.PeriodOf }
