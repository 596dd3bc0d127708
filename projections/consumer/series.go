package consumer

// Series are projected period by period: see projections.Occurrence and
// projections.PlanSeries.

import (
	"context"
	"fmt"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/projections"
)

// target is one milestone, or one period of a series, a round projects:
// its stored state and awards, and leaves when its write moves the
// series' item onto it (moving).
type target struct {
	m        *model.Milestone
	existing map[int]model.Award
	moving   bool
	// leaves is the period the series' item kept before (nil: none),
	// archived to its own item by the moving write.
	leaves *model.Milestone
}

// seriesPeriods returns, for each series among ms, the periods the
// triggers touch as targets of their own (stored state, or a period not
// written yet at version 0), a period the round moves the series' item
// onto first, and the windows of the log they need.
func seriesPeriods(ctx context.Context, st SeriesStore, userID string, ms []model.Milestone, t projections.Touched, now time.Time) (
	periods []target, windows []model.Window, err error) {
	for i := range ms {
		s := &ms[i]
		r := projections.PlanSeries(s, t, now)
		if len(r.Occurrences) == 0 {
			continue
		}
		stored := map[string]model.Milestone{}
		awards := map[string]map[int]model.Award{}
		if r.ReadAll || len(r.Read) > 0 {
			ps, err := st.SeriesPeriods(ctx, userID, s.MilestoneID, r.Read)
			if err != nil {
				return nil, nil, err
			}
			for start, p := range ps {
				if p.Period != nil {
					stored[start] = *p.Period
				}
				awards[start] = p.Awards
			}
		}
		if kept := projections.Kept(s); kept != nil {
			stored[r.Kept] = *kept // the item's period outranks an older copy
			if !r.ReadAll {
				awards[r.Kept] = projections.MirroredAwards(s)
			}
		}
		var first []target
		for _, o := range r.Occurrences {
			var base *model.Milestone
			if p, ok := stored[o.StartDate]; ok {
				base = &p
			}
			tg := target{existing: awards[o.StartDate]}
			p := projections.Occurrence(s, o, base, now)
			switch o.StartDate {
			case r.MoveTo:
				p.Version, p.Current = s.Version, &model.CurrentPeriod{PeriodOf: o.StartDate, CreatedAtUtc: p.CreatedAtUtc}
				tg.moving, tg.leaves = true, projections.Archived(s, now)
				if r.Kept != "" && tg.leaves == nil {
					return nil, nil, fmt.Errorf("series %s keeps period %q, not a first day: %w", s.MilestoneID, r.Kept, model.ErrInvalid)
				}
			case r.Kept:
				if r.MoveTo != "" {
					p.Current = nil // on its own item once the move archived it
				}
			}
			tg.m = &p
			windows = append(windows, t.Windows(&p)...)
			if tg.moving {
				first = append(first, tg) // the move archives the kept period before it is written
				continue
			}
			periods = append(periods, tg)
		}
		periods = append(first, periods...)
	}
	return periods, windows, nil
}
