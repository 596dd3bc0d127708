// Package workouts answers "why didn't it count?": GET
// /v1/milestones/{milestoneId}/workouts lists the athlete's stored workouts
// of a milestone's period (a series: its current period, or ?period= a
// period's first day), newest first and paged, each with model/counting's
// verdict: counted, what it added, and why not. handlers/bff mounts it
// behind the session check.
package workouts

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/commitcollect/backend/handlers/bff/milestones"
	"github.com/commitcollect/backend/handlers/bff/respond"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/calendar"
	"github.com/commitcollect/backend/model/counting"
	"github.com/commitcollect/backend/model/ports"
)

// Milestones reads the user's milestone named (none when it is not theirs).
type Milestones interface {
	MilestonesWithAwards(ctx context.Context, userID, milestoneID string) ([]ports.MilestoneWithAwards, bool, error)
}

// Log reads a page of the user's workouts started in a window, newest
// first (model.ErrInvalid for a cursor it did not give).
type Log interface {
	PeriodWorkouts(ctx context.Context, userID string, w model.Window, after string, limit int) ([]model.Workout, string, error)
}

// Page sizes of the route (?limit=).
const (
	DefaultLimit = 50
	MaxLimit     = 200
)

// Handler serves the route. Its method has the shape of the BFF's
// session-checked routes.
type Handler struct {
	ms        Milestones
	log       Log
	zones     milestones.Zones
	now       func() time.Time
	publicURL string
}

// New returns a Handler reading the athlete's zone (the series' current
// period is the one begun on their today) from zones; publicURL prefixes
// the next page's link.
func New(ms Milestones, log Log, zones milestones.Zones, now func() time.Time, publicURL string) *Handler {
	return &Handler{ms: ms, log: log, zones: zones, now: now, publicURL: strings.TrimRight(publicURL, "/")}
}

// Entry is one workout of the period and its verdict. Value is what it
// added in the metric's unit (0 when not counted); Reason (sport, manual,
// trainer, commute, below_minimum) says why not. FlagsUnknown says the
// workout was stored before Strava's flags were kept and the milestone
// excludes a kind of activity: it counts once a re-read shows what it is.
type Entry struct {
	ActivityID     int64   `json:"activityId"`
	StartDateLocal string  `json:"startDateLocal"`
	SportType      string  `json:"sportType"`
	Counted        bool    `json:"counted"`
	Value          float64 `json:"value"`
	Reason         string  `json:"reason,omitempty"`
	FlagsUnknown   bool    `json:"flagsUnknown,omitempty"`
}

// Body is the answer; Next is the next page's URL (also in the Link
// header), absent on the last page.
type Body struct {
	Workouts []Entry `json:"workouts"`
	Next     string  `json:"next,omitempty"`
}

// Serve serves GET /v1/milestones/{milestoneId}/workouts?period=&limit=&cursor=.
// Another user's milestone, a deleted one or an unknown id is 404.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, s model.Session, log *slog.Logger, _ string) {
	ctx, id, q := r.Context(), r.PathValue("milestoneId"), r.URL.Query()
	limit, after, ve := respond.ParsePage(q.Get("limit"), q.Get("cursor"), DefaultLimit, MaxLimit)
	if ve != nil {
		respond.Validation(w, ve)
		return
	}
	_, def, _, ok := ShownPeriod(w, r, s, log, h.ms, h.zones, h.now())
	if !ok {
		return
	}
	ws, next, err := h.log.PeriodWorkouts(ctx, s.UserID, def.Window(), after, limit)
	if errors.Is(err, model.ErrInvalid) && after != "" {
		respond.Validation(w, respond.FieldError("cursor", respond.NotACursor))
		return
	}
	if err != nil {
		respond.Fail(ctx, w, log.With("milestoneId", id), "read period workouts", err)
		return
	}
	out := Body{Workouts: Entries(def, ws)}
	if next != "" {
		v := q
		v.Set("limit", strconv.Itoa(limit))
		v.Set("cursor", base64.RawURLEncoding.EncodeToString([]byte(next)))
		out.Next = h.publicURL + "/v1/milestones/" + id + "/workouts?" + v.Encode()
		w.Header().Set("Link", "<"+out.Next+`>; rel="next"`)
	}
	respond.JSON(w, http.StatusOK, out)
}

// ShownPeriod reads what a route about one period of the milestone named
// in the path shows: the milestone, the athlete's moment (their zone) and
// the period (PeriodOf, ?period=). It answers the request itself, 404 for
// another user's, a deleted or an unknown milestone, 400 for a bad period,
// 500 for a failed read, and then returns false. The workouts and the
// timeline routes share it.
func ShownPeriod(w http.ResponseWriter, r *http.Request, s model.Session, log *slog.Logger, ms Milestones, zones milestones.Zones,
	now time.Time) (model.Milestone, model.MilestoneDefinition, milestones.At, bool) {
	ctx, id := r.Context(), r.PathValue("milestoneId")
	var found []ports.MilestoneWithAwards
	if respond.OpaqueID.MatchString(id) {
		var err error
		if found, _, err = ms.MilestonesWithAwards(ctx, s.UserID, id); err != nil {
			respond.Fail(ctx, w, log.With("milestoneId", id), "read milestone", err)
			return model.Milestone{}, model.MilestoneDefinition{}, milestones.At{}, false
		}
	}
	if len(found) != 1 {
		respond.Error(w, http.StatusNotFound, respond.CodeNotFound, fmt.Sprintf("milestone %q not found", id))
		return model.Milestone{}, model.MilestoneDefinition{}, milestones.At{}, false
	}
	at, err := milestones.AtFor(ctx, zones, s.UserID, now)
	if err != nil {
		respond.Fail(ctx, w, log.With("milestoneId", id), "read zone", err)
		return model.Milestone{}, model.MilestoneDefinition{}, milestones.At{}, false
	}
	def, ve := PeriodOf(found[0].Milestone.MilestoneDefinition, r.URL.Query().Get("period"), at.Today())
	if ve != nil {
		respond.Validation(w, ve)
		return model.Milestone{}, model.MilestoneDefinition{}, milestones.At{}, false
	}
	return found[0].Milestone, def, at, true
}

// Entries are the workouts of ws that def judges (in its period, not
// deleted), in the order given, each with its verdict.
func Entries(def model.MilestoneDefinition, ws []model.Workout) []Entry {
	c := counting.For(def)
	out := make([]Entry, 0, len(ws))
	for _, wo := range ws {
		v := c.Judge(wo)
		if !v.InPeriod {
			continue // started in the window, on a local day outside the period
		}
		local := wo.StartDateLocal
		if local == "" {
			local = wo.LocalDate()
		}
		out = append(out, Entry{ActivityID: wo.ActivityID, StartDateLocal: local, SportType: wo.SportType, Counted: v.Counted,
			Value: def.Metric.ProgressInUnit(v.Units), Reason: string(v.Reason), FlagsUnknown: v.FlagsUnknown})
	}
	return out
}

// PeriodOf is the definition of the period the route shows: the
// milestone's own, or for a series the period whose first day is period
// (YYYY-MM-DD), else the newest begun by today (the athlete's local day,
// milestones.At), as the series' answer shows it (its first period when
// none has begun). A period given for
// a milestone that does not repeat, or that is no period's first day, is a
// validation error naming period.
func PeriodOf(def model.MilestoneDefinition, period string, today time.Time) (model.MilestoneDefinition, *model.ValidationError) {
	p := def.Period()
	if p.Recurrence == "" {
		if period != "" {
			return def, respond.FieldError("period", "is only for a series (a milestone with recurrence)")
		}
		return def, nil
	}
	first, last, _ := p.Days()
	day, err := calendar.ParseDate(period)
	switch {
	case period == "": // the series' headline period (SeriesJSON), or its first when none has begun
		day = first
		if begun := p.OccurrencesThrough(today, 1); len(begun) > 0 {
			day, _ = calendar.ParseDate(begun[0].StartDate)
		}
	case err != nil || day.Before(first) || (last != nil && day.After(*last)) || p.Occurrence(day).StartDate != period:
		return def, respond.FieldError("period", fmt.Sprintf("%q is not the first day of one of this series' periods", period))
	}
	o := p.Occurrence(day)
	def.PeriodStartDate, def.PeriodEndDate, def.Recurrence = o.StartDate, o.EndDate, ""
	return def, nil
}
