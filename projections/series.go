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
//
// # The period the series' item keeps
//
// The newest projected period lives on the series' item itself (its
// projection and version, and model.CurrentPeriod naming it and mirroring
// its awards), so an event in it reads nothing beyond the user's
// milestones. When a round projects a newer period, its first write moves
// the item onto that period and puts the period left behind on its own
// SERIES# item, in one transaction (PlanSeries): once per period, never per
// event. The item's period is the truth for that period; an own item of
// the same period is an older copy (one written before the item kept
// periods), replaced when the item moves on. The mirror of its awards
// costs the item about 10 bytes a part (1 KB at 99 parts).
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

// Kept is the period a series' item keeps (s.Current), as stored: the
// item's projection and version, on the period's own days. nil when the
// item keeps none.
func Kept(s *model.Milestone) *model.Milestone {
	if s.Current == nil {
		return nil
	}
	cur := *s.Current
	return &model.Milestone{UserID: s.UserID, MilestoneID: s.MilestoneID, Projection: s.Projection, Version: s.Version,
		CreatedAtUtc: cur.CreatedAtUtc, PeriodOf: cur.PeriodOf, Current: &cur, WrittenBy: model.WriterProjector}
}

// Archived is the period s's item keeps as its own item stores it (on its
// own days, version and all): what a write moving the item on leaves. nil
// when the item keeps none.
func Archived(s *model.Milestone, now time.Time) *model.Milestone {
	kept := Kept(s)
	if kept == nil {
		return nil
	}
	day, err := calendar.ParseDate(kept.PeriodOf)
	if err != nil {
		return nil
	}
	p := Occurrence(s, s.Period().Occurrence(day), kept, now)
	p.Current = nil
	return &p
}

// MirroredAwards are the kept period's awards as its mirror names them
// (part and time to the second; filed in the collection when minted).
func MirroredAwards(s *model.Milestone) map[int]model.Award {
	if s.Current == nil {
		return nil
	}
	out := make(map[int]model.Award, len(s.Current.Minted))
	for i, at := range s.Current.Minted {
		out[i] = model.Award{UserID: s.UserID, MilestoneID: s.MilestoneID, ModelID: s.ModelID, PartIndex: i, AwardedAtUtc: time.Unix(at, 0).UTC(),
			PeriodOf: s.Current.PeriodOf, Collected: true}
	}
	return out
}

// SeriesRound is how one recompute projects a series: the periods, which
// of them to read from their own items, and whether the item moves on.
type SeriesRound struct {
	// Occurrences are the periods to project, oldest first.
	Occurrences []calendar.Period
	// ReadAll: read every period's own item (Read is then nil).
	ReadAll bool
	// Read are the first days of the periods to read from their own items.
	Read []string
	// Kept is the first day of the period the series' item keeps ("": none).
	Kept string
	// MoveTo is the first day of the period the round moves the item onto
	// ("": it stays). Its write is due even when nothing changed, and it
	// archives Kept's state to Kept's own item.
	MoveTo string
}

// PlanSeries decides a series' round from the triggers t at now. The item
// moves onto the newest period projected when that one is newer than the
// period it keeps: a newer period has never been written, so it is not
// read. An item keeping no period yet (a series written before items kept
// periods) reads its touched periods, and takes the newest only when no
// newer one has begun anywhere, so no own item newer than it can exist.
func PlanSeries(s *model.Milestone, t Touched, now time.Time) SeriesRound {
	var r SeriesRound
	if s.Recurrence == "" || s.ValidateProjectable() != nil {
		return r
	}
	r.ReadAll, r.Occurrences = t.All, s.Period().Occurrences(t.Days)
	if t.All {
		r.Occurrences = s.Period().OccurrencesSoFar(now, MaxSeriesPeriods)
	}
	if len(r.Occurrences) == 0 {
		return SeriesRound{}
	}
	if s.Current != nil {
		r.Kept = s.Current.PeriodOf
	}
	if newest := r.Occurrences[len(r.Occurrences)-1].StartDate; newest > r.Kept && (r.Kept != "" || newestBegun(s, now) <= newest) {
		r.MoveTo = newest
	}
	for _, o := range r.Occurrences {
		if fresh := o.StartDate == r.MoveTo && r.Kept != ""; !r.ReadAll && o.StartDate != r.Kept && !fresh {
			r.Read = append(r.Read, o.StartDate)
		}
	}
	return r
}

// newestBegun is the first day of s's newest period begun anywhere by now
// ("" when none has).
func newestBegun(s *model.Milestone, now time.Time) string {
	if begun := s.Period().OccurrencesSoFar(now, 1); len(begun) > 0 {
		return begun[0].StartDate
	}
	return ""
}
