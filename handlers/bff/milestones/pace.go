package milestones

import (
	"context"
	"fmt"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/calendar"
	"github.com/commitcollect/backend/model/streak"
	"github.com/commitcollect/backend/projections"
)

// Zones reads where the athlete is: the offset from UTC of their newest
// stored activity, false when none names its wall clock.
type Zones interface {
	LatestZone(ctx context.Context, userID string) (time.Duration, bool, error)
}

// At is when, and where, a milestone is shown: now, and the offset from
// UTC of the athlete's newest activity (UTC when none is known). A
// streak's today and a period's days over are read there.
type At struct {
	Now  time.Time
	Zone time.Duration
}

// Today is the athlete's local day at a.Now.
func (a At) Today() time.Time { return calendar.Today(a.Now, a.Zone) }

// AtFor is the moment now where the user's newest activity was recorded.
func AtFor(ctx context.Context, zones Zones, userID string, now time.Time) (At, error) {
	off, _, err := zones.LatestZone(ctx, userID)
	if err != nil {
		return At{}, fmt.Errorf("where user %s is: %w", userID, err)
	}
	return At{Now: now, Zone: off}, nil
}

// PaceJSON is where a milestone (or a series' period) with an end should
// be on the athlete's today, in the metric's unit: the target times the
// share of the period's days that are over, the value's distance from
// it, and the local day the target is reached at the rate so far (null
// when nothing is counted yet, or the milestone is complete).
type PaceJSON struct {
	ExpectedNow         float64 `json:"expectedNow"`
	Delta               float64 `json:"delta"`
	OnPace              bool    `json:"onPace"`
	ProjectedFinishDate *string `json:"projectedFinishDate"`
}

// Pace is m's pace at, nil when its period has no end.
func Pace(m model.Milestone, at At) *PaceJSON {
	p, ok := projections.PaceOf(m.MilestoneDefinition, m.ProgressValue, m.Status == model.StatusCompleted, at.Today(), at.Now)
	if !ok {
		return nil
	}
	out := &PaceJSON{ExpectedNow: m.Metric.ProgressInUnit(p.ExpectedNow), OnPace: p.OnPace,
		Delta: m.Metric.ProgressInUnit(m.ProgressValue) - m.Metric.ProgressInUnit(p.ExpectedNow)}
	if p.Finish != nil {
		d := calendar.FormatDate(*p.Finish)
		out.ProjectedFinishDate = &d
	}
	return out
}

// StreakJSON is where a streak stands on the athlete's today: the active
// days (or weeks) of the run into today and of the longest run so far,
// the run's first active day, the last active day, alive, at_risk (today
// has none yet, and yesterday was active or bridged) or broken, and the
// dates its freezes bridged (a week's as its first day).
type StreakJSON struct {
	Current        int      `json:"current"`
	Longest        int      `json:"longest"`
	Since          *string  `json:"since"`
	LastActiveDate *string  `json:"lastActiveDate"`
	State          string   `json:"state"`
	FreezesUsed    []string `json:"freezesUsed"`
}

// Streak is m's streak at, nil when m is no streak.
func Streak(m model.Milestone, at At) *StreakJSON {
	s, ok := summary(m, at)
	if !ok {
		return nil
	}
	return &StreakJSON{Current: s.Current, Longest: s.Longest, Since: orNull(s.Since), LastActiveDate: orNull(s.LastActive),
		State: string(s.State), FreezesUsed: s.FreezesUsed}
}

// summary walks m's stored days up to the athlete's today; false when m is
// no streak.
func summary(m model.Milestone, at At) (streak.Summary, bool) {
	cal, ok := projections.StreakCalendar(m.MilestoneDefinition)
	if m.Metric != model.MetricStreak || !ok {
		return streak.Summary{}, false
	}
	var bits []byte
	if m.Days != nil {
		bits = m.Days.Bits
	}
	return cal.Summarize(bits, at.Today()), true
}

func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
