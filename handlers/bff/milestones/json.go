package milestones

import (
	"math"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/ports"
	"github.com/commitcollect/backend/model/rules"
)

// MilestoneJSON is the API shape of a milestone and its projected progress.
type MilestoneJSON struct {
	MilestoneID string  `json:"milestoneId"`
	ModelID     string  `json:"modelId"`
	Title       string  `json:"title"`
	Metric      string  `json:"metric"`
	Target      float64 `json:"target"`
	// SportTypes are the Strava sport types the milestone counts (empty:
	// every sport); groups were expanded when it was created.
	SportTypes []string `json:"sportTypes"`
	// Rules are the conditions each activity must meet, as created.
	Rules  RulesJSON  `json:"rules"`
	Period PeriodJSON `json:"period"`
	// Status is active, completed, or ended: the period is over in every
	// time zone without the target reached (a late activity inside it may
	// still complete it).
	Status         string      `json:"status"`
	Version        int64       `json:"version"`
	ProjectedAtUtc *time.Time  `json:"projectedAtUtc"`
	Progress       Progress    `json:"progress"`
	Awards         []AwardJSON `json:"awards"`
	// Recurrence is weekly, monthly or yearly for a series, whose
	// progress, status and awards above are the current period's, and
	// Periods the newest ShownPeriods periods begun so far, newest first;
	// PeriodCount says how many have begun, and PeriodsNext, when more
	// did, is the cursor of GET /v1/milestones/{id}/periods that lists
	// the rest.
	Recurrence  string            `json:"recurrence,omitempty"`
	Periods     []PeriodStateJSON `json:"periods,omitempty"`
	PeriodCount int               `json:"periodCount,omitempty"`
	PeriodsNext string            `json:"periodsNext,omitempty"`
	// Pace is where the progress should be today (null when the period
	// has no end; a series: its current period's).
	Pace *PaceJSON `json:"pace"`
	// StreakUnit and FreezesPerMonth are a streak's, as created; Streak
	// is where it stands today (absent on other metrics).
	StreakUnit      string      `json:"streakUnit,omitempty"`
	FreezesPerMonth *int        `json:"freezesPerMonth,omitempty"`
	Streak          *StreakJSON `json:"streak,omitempty"`
}

// PeriodStateJSON is one period of a series: its days, status, progress
// and awards.
type PeriodStateJSON struct {
	StartDate string      `json:"startDate"`
	EndDate   string      `json:"endDate"`
	Status    string      `json:"status"`
	Progress  Progress    `json:"progress"`
	Pace      *PaceJSON   `json:"pace"`
	Awards    []AwardJSON `json:"awards"`
}

// PeriodJSON is the period a milestone covers: local days where the
// athlete ran ({calendar: "local", startDate, endDate}, both days
// included) or UTC instants ({calendar: "utc", startAtUtc, endAtUtc}, end
// excluded). An end is absent when the period has none.
type PeriodJSON struct {
	Calendar   string     `json:"calendar"`
	StartDate  string     `json:"startDate,omitempty"`
	EndDate    string     `json:"endDate,omitempty"`
	StartAtUtc *time.Time `json:"startAtUtc,omitempty"`
	EndAtUtc   *time.Time `json:"endAtUtc,omitempty"`
}

// Calendars of a period.
const (
	CalendarLocal = "local"
	CalendarUTC   = "utc"
)

// Progress is a milestone's projected progress in the metric's unit (metres
// for distance and elevation, seconds for moving_time, workouts for count).
type Progress struct {
	Value           float64 `json:"value"`
	Target          float64 `json:"target"`
	Percent         float64 `json:"percent"`
	WorkoutsCounted int     `json:"workoutsCounted"`
	// Truncated says the period holds more workouts than the guardrail
	// lets the projector read: the value counts only workouts started at
	// or after ExactFromUtc (set only then).
	Truncated    bool       `json:"truncated"`
	ExactFromUtc *time.Time `json:"exactFromUtc,omitempty"`
	// Excluded counts the period's activities that did not count, by
	// reason (sport, manual, trainer, commute, below_minimum).
	Excluded map[string]int `json:"excluded"`
}

// RulesJSON is a milestone's rules as the API shows them: 0 and [] mean
// none.
type RulesJSON struct {
	MinMovingTimeSeconds int64    `json:"minMovingTimeSeconds"`
	MinDistanceMeters    float64  `json:"minDistanceMeters"`
	Exclude              []string `json:"exclude"`
}

// Rules is r as the API shows it.
func Rules(r *rules.Rules) RulesJSON {
	out := RulesJSON{Exclude: []string{}}
	if r != nil {
		out.MinMovingTimeSeconds, out.MinDistanceMeters = r.MinMovingTimeSeconds, r.MinDistanceMeters
		out.Exclude = append(out.Exclude, r.Exclude...)
	}
	return out
}

// AwardJSON is one minted part, with the part's name and metadata as they
// were when it was minted.
type AwardJSON struct {
	MilestoneID  string            `json:"milestoneId"`
	ModelID      string            `json:"modelId"`
	PartIndex    int               `json:"partIndex"`
	Name         string            `json:"name"`
	Metadata     map[string]string `json:"metadata"`
	AwardedAtUtc time.Time         `json:"awardedAtUtc"`
	ActivityID   int64             `json:"activityId"`
	// StartDate is the first day of the series' period the award belongs
	// to; absent for a milestone that does not repeat.
	StartDate string `json:"startDate,omitempty"`
}

// Award is a as the API shows it.
func Award(a model.Award) AwardJSON {
	md := a.PartMetadata
	if md == nil {
		md = map[string]string{}
	}
	return AwardJSON{MilestoneID: a.MilestoneID, ModelID: a.ModelID, PartIndex: a.PartIndex, Name: a.PartName, Metadata: md,
		AwardedAtUtc: a.AwardedAtUtc.UTC(), ActivityID: a.ActivityID, StartDate: a.PeriodOf}
}

// Period is d's period as the API shows it.
func Period(d model.MilestoneDefinition) PeriodJSON {
	if d.Period().Local() {
		return PeriodJSON{Calendar: CalendarLocal, StartDate: d.PeriodStartDate, EndDate: d.PeriodEndDate}
	}
	start := d.PeriodStartAtUtc.UTC()
	p := PeriodJSON{Calendar: CalendarUTC, StartAtUtc: &start}
	if d.PeriodEndAtUtc != nil {
		end := d.PeriodEndAtUtc.UTC()
		p.EndAtUtc = &end
	}
	return p
}

// JSON is mw as the API shows it at at (which decides ended, the pace and
// the streak's today).
func JSON(mw ports.MilestoneWithAwards, at At) MilestoneJSON {
	m, now := mw.Milestone, at.Now
	out := MilestoneJSON{
		MilestoneID: m.MilestoneID, ModelID: m.ModelID, Title: m.Title, Metric: string(m.Metric), Target: m.Target,
		SportTypes: m.SportTypes, Rules: Rules(m.Rules), Period: Period(m.MilestoneDefinition), Status: string(m.StatusAt(now)), Version: m.Version,
		ProjectedAtUtc: m.ProjectedAtUtc,
		Progress: Progress{
			Value: m.Metric.ProgressInUnit(m.ProgressValue), Target: m.Target,
			Percent: Percent(m.MilestoneDefinition, m.ProgressValue), WorkoutsCounted: m.WorkoutsCounted, Truncated: m.Truncated,
			ExactFromUtc: m.ExactFromUtc, Excluded: map[string]int{},
		},
		Awards: make([]AwardJSON, 0, len(mw.Awards)),
		Pace:   Pace(m, at), Streak: Streak(m, at),
	}
	if m.Streak != nil {
		out.StreakUnit, out.FreezesPerMonth = string(m.Streak.Unit), &m.Streak.FreezesPerMonth
	}
	if out.SportTypes == nil {
		out.SportTypes = []string{}
	}
	for r, n := range m.Excluded {
		out.Progress.Excluded[r] = n
	}
	for _, a := range mw.Awards {
		out.Awards = append(out.Awards, Award(a))
	}
	return out
}

// seriesJSON is a series as the API shows it at at: JSON of the series,
// whose progress, status and awards are the current period's (the newest
// begun on the athlete's today, in the zone of their newest activity: west
// of UTC+14, next week is not shown before it begins there), with the
// periods of page, newest first, from the stored periods (a period never
// projected shows nothing counted), how many have begun, and the cursor of
// the rest.
func seriesJSON(mw ports.MilestoneWithAwards, stored map[string]ports.SeriesPeriod, at At, page periodPage) MilestoneJSON {
	out := JSON(mw, at)
	s := mw.Milestone
	out.Recurrence, out.Periods, out.PeriodCount = s.Recurrence, []PeriodStateJSON{}, page.count
	if page.next != "" {
		out.PeriodsNext = periodCursor(page.next)
	}
	for _, o := range page.periods {
		p := model.Milestone{MilestoneDefinition: s.MilestoneDefinition, Projection: model.Projection{Status: model.StatusActive}}
		st := stored[o.StartDate]
		if st.Period != nil {
			p.Projection = st.Period.Projection
		}
		p.PeriodStartDate, p.PeriodEndDate, p.Recurrence = o.StartDate, o.EndDate, ""
		awards := make([]model.Award, 0, len(st.Awards))
		for j := range p.PartCount {
			if a, ok := st.Awards[j]; ok {
				awards = append(awards, a)
			}
		}
		pj := JSON(ports.MilestoneWithAwards{Milestone: p, Awards: awards}, at)
		out.Periods = append(out.Periods, PeriodStateJSON{StartDate: o.StartDate, EndDate: o.EndDate, Status: pj.Status,
			Progress: pj.Progress, Pace: pj.Pace, Awards: pj.Awards})
	}
	if len(out.Periods) > 0 {
		cur := out.Periods[0]
		out.Status, out.Progress, out.Awards, out.Pace = cur.Status, cur.Progress, cur.Awards, cur.Pace
		out.ProjectedAtUtc = nil // when the current period was projected, if it was
		if st := stored[cur.StartDate].Period; st != nil {
			out.ProjectedAtUtc = st.ProjectedAtUtc
		}
	} else {
		out.Status = string(model.StatusActive) // not begun yet
	}
	return out
}

// Percent is how far value (integer units) is towards d's target, in
// percent rounded down to one decimal and kept within 0..100, so a milestone
// reads 100 only when it is really reached.
func Percent(d model.MilestoneDefinition, value int64) float64 {
	target := d.TargetUnits()
	if target <= 0 || value <= 0 {
		return 0
	}
	if value >= target {
		return 100
	}
	return math.Floor(float64(value)*1000/float64(target)) / 10
}

// maxShownPeriods bounds the periods one answer lists: twenty years of weeks.
const maxShownPeriods = 1040
