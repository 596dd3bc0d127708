// Package timeline answers how a milestone's period went, day by day: GET
// /v1/milestones/{milestoneId}/timeline gives the cumulative value on each
// local day where it changed (a series: its current period, or ?period=
// a period's first day), from one read of that period's log; a streak's
// answer is its active and bridged days, walked from the days its
// projection keeps (no read). The landing page draws the same timeline
// against its pace line (svg.go). handlers/bff mounts the route behind the
// session check.
package timeline

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/commitcollect/backend/handlers/bff/milestones"
	"github.com/commitcollect/backend/handlers/bff/respond"
	"github.com/commitcollect/backend/handlers/bff/workouts"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/counting"
	"github.com/commitcollect/backend/projections"
)

// Log reads the workouts started in a window, newest first, up to limit.
type Log = workouts.Log

// Day is one local day of the timeline: the cumulative value at its end,
// in the metric's unit. A streak's day is active or bridged (Kind), and
// its value the run's length then.
type Day struct {
	Date  string  `json:"date"`
	Value float64 `json:"value"`
	Kind  string  `json:"kind,omitempty"`
}

// Kinds of a streak's day.
const (
	KindActive  = "active"
	KindBridged = "bridged"
)

// Body is the answer: the period's days (endDate null when it has none),
// the target, and the days where the value changed, in order.
type Body struct {
	Metric    string  `json:"metric"`
	StartDate string  `json:"startDate"`
	EndDate   *string `json:"endDate"`
	Target    float64 `json:"target"`
	Days      []Day   `json:"days"`
}

// Handler serves the route.
type Handler struct {
	ms    workouts.Milestones
	log   Log
	zones milestones.Zones
	now   func() time.Time
}

// New returns a Handler.
func New(ms workouts.Milestones, log Log, zones milestones.Zones, now func() time.Time) *Handler {
	return &Handler{ms: ms, log: log, zones: zones, now: now}
}

// Serve serves GET /v1/milestones/{milestoneId}/timeline?period=. Another
// user's milestone, a deleted one or an unknown id is 404.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, s model.Session, log *slog.Logger, _ string) {
	ctx, id := r.Context(), r.PathValue("milestoneId")
	m, def, at, ok := workouts.ShownPeriod(w, r, s, log, h.ms, h.zones, h.now())
	if !ok {
		return
	}
	out, err := Of(ctx, h.log, m, def, at)
	if err != nil {
		respond.Fail(ctx, w, log.With("milestoneId", id), "read timeline", err)
		return
	}
	respond.JSON(w, http.StatusOK, out)
}

// Of is m's timeline over def's period (m's own, or one of its series'
// periods: workouts.PeriodOf) at at.
func Of(ctx context.Context, log Log, m model.Milestone, def model.MilestoneDefinition, at milestones.At) (Body, error) {
	out := Body{Metric: string(def.Metric), StartDate: def.PeriodStartDate, Target: def.Target, Days: []Day{}}
	if def.PeriodEndDate != "" {
		end := def.PeriodEndDate
		out.EndDate = &end
	}
	if !def.Period().Local() {
		out.StartDate = def.PeriodStartAtUtc.UTC().Format(time.DateOnly)
		if def.PeriodEndAtUtc != nil {
			end := def.PeriodEndAtUtc.Add(-time.Nanosecond).UTC().Format(time.DateOnly)
			out.EndDate = &end
		}
	}
	if def.Metric == model.MetricStreak {
		if cal, ok := projections.StreakCalendar(def); ok {
			var bits []byte
			if m.Days != nil {
				bits = m.Days.Bits
			}
			for _, mk := range cal.Summarize(bits, at.Today()).Marks {
				kind := KindActive
				if mk.Bridged {
					kind = KindBridged
				}
				out.Days = append(out.Days, Day{Date: mk.Date, Value: float64(mk.Run), Kind: kind})
			}
		}
		return out, nil
	}
	ws, _, err := log.PeriodWorkouts(ctx, m.UserID, def.Window(), "", model.MaxWorkoutsToInspect)
	if err != nil {
		return Body{}, fmt.Errorf("timeline of milestone %s: %w", m.MilestoneID, err)
	}
	out.Days = Cumulative(def, ws)
	return out, nil
}

// Cumulative is the cumulative value of def's counted workouts of ws (any
// order) at the end of each local day where it changed, in order.
func Cumulative(def model.MilestoneDefinition, ws []model.Workout) []Day {
	c := counting.For(def)
	perDay := map[string]int64{}
	for _, w := range ws {
		if v := c.Judge(w); v.Counted && v.Units > 0 {
			perDay[w.LocalDate()] += v.Units
		}
	}
	out := []Day{}
	var total int64
	for _, d := range slices.Sorted(maps.Keys(perDay)) {
		total += perDay[d]
		out = append(out, Day{Date: d, Value: def.Metric.ProgressInUnit(total)})
	}
	return out
}
