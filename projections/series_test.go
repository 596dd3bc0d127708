package projections_test

import (
	"slices"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/calendar"
	"github.com/commitcollect/backend/projections"
)

// TestPlanSeriesReadsOnlyWhatTheItemDoesNotKeep: an event in the period the
// series' item keeps reads no period; a newer period moves the item on and
// is not read (never written); an older one is read from its own item; a
// series whose item keeps nothing yet (written before items kept periods)
// reads what it touches, and takes its newest only when no newer period has
// begun anywhere. Protections: the kept period left out of Read (an event
// in it reads a period), the fresh newer period left out of Read, and the
// begun-anywhere rule (a legacy series taking an old week over would leave
// its newer copy outranked by nothing and its awards minted twice).
func TestPlanSeriesReadsOnlyWhatTheItemDoesNotKeep(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC) // a Friday
	const this, last, before = "2026-11-23", "2026-11-16", "2026-11-09"
	day := func(d string) time.Time { x, _ := calendar.ParseDate(d); return x }
	for _, c := range []struct {
		name      string
		kept      string
		days      []string
		all       bool
		read      []string
		readAll   bool
		moveTo    string
		projected int
	}{
		{"an event in the kept week", this, []string{"2026-11-25"}, false, nil, false, "", 1},
		{"an event in an older week", this, []string{"2026-11-17"}, false, []string{last}, false, "", 1},
		{"a newer week moves the item on, unread", last, []string{"2026-11-24"}, false, nil, false, this, 1},
		{"a run moved from the kept week to a newer one", last, []string{"2026-11-17", "2026-11-24"}, false, nil, false, this, 2},
		{"a run moved from an older week to the kept one", this, []string{"2026-11-10", "2026-11-24"}, false, []string{before}, false, "", 2},
		{"a whole round keeps and reads all", this, nil, true, nil, true, "", 0},
		{"a whole round moves the item onto the week begun", last, nil, true, nil, true, this, 0},
		{"nothing kept: this week is read and taken", "", []string{"2026-11-24"}, false, []string{this}, false, this, 1},
		{"nothing kept: an old week is read, not taken", "", []string{"2026-11-17"}, false, []string{last}, false, "", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &model.Milestone{UserID: "u", MilestoneID: "s", Version: 7, MilestoneDefinition: model.MilestoneDefinition{
				ModelID: "rocket", PartCount: 10, Title: "weekly", Metric: model.MetricCount, Target: 2,
				PeriodStartDate: "2021-11-29", Recurrence: calendar.Weekly}}
			if c.kept != "" {
				s.Current = &model.CurrentPeriod{PeriodOf: c.kept}
			}
			var tc projections.Touched
			if c.all {
				tc.All = true
			}
			for _, d := range c.days {
				tc.Days = append(tc.Days, day(d))
			}
			r := projections.PlanSeries(s, tc, now)
			if !slices.Equal(r.Read, c.read) || r.ReadAll != c.readAll || r.MoveTo != c.moveTo || r.Kept != c.kept {
				t.Fatalf("plan %+v, want read %v (all %v), move to %q, kept %q", r, c.read, c.readAll, c.moveTo, c.kept)
			}
			if c.projected > 0 && len(r.Occurrences) != c.projected {
				t.Fatalf("projects %d periods, want %d", len(r.Occurrences), c.projected)
			}
			if c.all && r.Occurrences[len(r.Occurrences)-1].StartDate != this {
				t.Fatalf("a whole round projects %d periods ending %s", len(r.Occurrences), r.Occurrences[len(r.Occurrences)-1].StartDate)
			}
		})
	}
}

// TestArchivedIsTheKeptPeriodOnItsOwnDays: what a moving write leaves is
// the item's state of the kept period, on that period's days, without the
// item's record; a series keeping nothing leaves nothing.
func TestArchivedIsTheKeptPeriodOnItsOwnDays(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	created := now.Add(-72 * time.Hour)
	s := &model.Milestone{UserID: "u", MilestoneID: "s", Version: 9, Projection: model.Projection{ProgressValue: 3, WorkoutsCounted: 3,
		AwardedParts: 10, Status: model.StatusCompleted}, MilestoneDefinition: model.MilestoneDefinition{ModelID: "rocket", PartCount: 10,
		Title: "weekly", Metric: model.MetricCount, Target: 2, PeriodStartDate: "2021-11-29", Recurrence: calendar.Weekly},
		Current: &model.CurrentPeriod{PeriodOf: "2026-11-16", CreatedAtUtc: created, Minted: map[int]int64{0: created.Unix()}}}
	a := projections.Archived(s, now)
	if a == nil || a.PeriodOf != "2026-11-16" || a.PeriodStartDate != "2026-11-16" || a.PeriodEndDate != "2026-11-22" || a.Recurrence != "" ||
		a.Version != 9 || a.WorkoutsCounted != 3 || a.Status != model.StatusCompleted || !a.CreatedAtUtc.Equal(created) || a.Current != nil {
		t.Fatalf("archived %+v", a)
	}
	if aw := projections.MirroredAwards(s); len(aw) != 1 || !aw[0].AwardedAtUtc.Equal(created) || aw[0].PeriodOf != "2026-11-16" || !aw[0].Collected {
		t.Fatalf("mirrored awards %+v", aw)
	}
	s.Current = nil
	if a := projections.Archived(s, now); a != nil {
		t.Fatalf("a series keeping nothing archived %+v", a)
	}
}
