package milestones

import (
	"context"
	"encoding/base64"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/commitcollect/backend/handlers/bff/respond"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/calendar"
	"github.com/commitcollect/backend/model/ports"
)

// A series' periods, a page at a time: a weekly series kept for twenty
// years has 1,040 periods, and an answer that listed them all (2.6 MB,
// 953 read units with a 12-part model) would grow with the athlete's past.
// So a series' answer lists its newest ShownPeriods periods, and says how
// many have begun (periodCount) and where the rest go on (periodsNext);
// GET /v1/milestones/{id}/periods pages through them all, newest first.
// Each page reads only the periods it shows (SeriesPeriodsBetween).

// Period pages' sizes.
const (
	// ShownPeriods is how many periods a series' answer lists: a year of
	// weeks, and the default page of the periods route.
	ShownPeriods = 52
	// MaxPeriodPage is the largest page of the periods route.
	MaxPeriodPage = 200
)

// PeriodReader reads a series' periods whose first days are from through
// through, with their awards (periods never projected are absent).
type PeriodReader interface {
	SeriesPeriodsBetween(ctx context.Context, userID, milestoneID, from, through string) (map[string]ports.SeriesPeriod, error)
}

// Window is which periods of a series an answer lists: at most Limit,
// newest first, from the one whose first day is From ("": the newest
// begun).
type Window struct {
	From  string
	Limit int
}

// periodPage is a window of a series' periods begun by today.
type periodPage struct {
	periods []calendar.Period // newest first
	next    string            // the first day of the next (older) period; "" at the end
	count   int               // periods begun in all
}

// pageOf finds w among the periods of series s begun by at's today (the
// newest maxShownPeriods); not ok when w.From is the first day of none of
// them.
func pageOf(s model.Milestone, w Window, at At) (periodPage, bool) {
	occ := s.Period().OccurrencesThrough(at.Today(), maxShownPeriods) // oldest first
	p := periodPage{count: len(occ)}
	i := len(occ) - 1
	if w.From != "" {
		for i >= 0 && occ[i].StartDate != w.From {
			i--
		}
		if i < 0 {
			return p, false
		}
	}
	for ; i >= 0 && len(p.periods) < max(w.Limit, 1); i-- {
		p.periods = append(p.periods, occ[i])
	}
	if i >= 0 {
		p.next = occ[i].StartDate
	}
	return p, true
}

// readPage reads the stored periods of page.
func readPage(ctx context.Context, pr PeriodReader, userID, milestoneID string, page periodPage) (map[string]ports.SeriesPeriod, error) {
	if len(page.periods) == 0 {
		return map[string]ports.SeriesPeriod{}, nil
	}
	return pr.SeriesPeriodsBetween(ctx, userID, milestoneID, page.periods[len(page.periods)-1].StartDate, page.periods[0].StartDate)
}

// PeriodsPage is the answer of GET /v1/milestones/{id}/periods.
type PeriodsPage struct {
	Periods     []PeriodStateJSON `json:"periods"`
	PeriodCount int               `json:"periodCount"`
	// Next is the next page's URL (also a Link rel="next" header); absent
	// on the last page.
	Next string `json:"next,omitempty"`
}

// periodCursor is the cursor of the page that begins with the period
// whose first day is start.
func periodCursor(start string) string {
	return base64.RawURLEncoding.EncodeToString([]byte("p1:" + start))
}

// Periods serves GET /v1/milestones/{milestoneId}/periods: the series'
// periods begun so far, newest first, ?limit= (1..MaxPeriodPage, default
// ShownPeriods) at a time from ?cursor=. A milestone that is not a series
// has none; an unknown id (or another user's) is 404.
func (h *Handler) Periods(w http.ResponseWriter, r *http.Request, s model.Session, log *slog.Logger, _ string) {
	id := r.PathValue("milestoneId")
	if !respond.OpaqueID.MatchString(id) {
		notFound(w, id)
		return
	}
	q := r.URL.Query()
	limit, cursor, ve := respond.ParsePage(q.Get("limit"), q.Get("cursor"), ShownPeriods, MaxPeriodPage)
	from, ok := strings.CutPrefix(cursor, "p1:")
	if ve == nil && cursor != "" && (!ok || from == "") {
		ve = respond.FieldError("cursor", respond.NotACursor)
	}
	if ve != nil {
		respond.Validation(w, ve)
		return
	}
	log = log.With("milestoneId", id)
	ms, _, err := h.st.MilestonesWithAwards(r.Context(), s.UserID, id)
	if err != nil || len(ms) != 1 {
		if err != nil {
			respond.Fail(r.Context(), w, log, "read milestone", err)
		} else {
			notFound(w, id)
		}
		return
	}
	at, err := AtFor(r.Context(), h.zones, s.UserID, h.now())
	if err != nil {
		respond.Fail(r.Context(), w, log, "read milestone", err)
		return
	}
	out := PeriodsPage{Periods: []PeriodStateJSON{}}
	if ms[0].Milestone.Recurrence != "" {
		j, ok, err := showPage(r.Context(), h.periods, s.UserID, ms[0], at, Window{From: from, Limit: limit})
		if err != nil {
			respond.Fail(r.Context(), w, log, "read periods", err)
			return
		}
		if !ok {
			respond.Validation(w, respond.FieldError("cursor", respond.NotACursor))
			return
		}
		out.Periods, out.PeriodCount = j.Periods, j.PeriodCount
		if j.PeriodsNext != "" {
			out.Next = h.publicURL + "/v1/milestones/" + id + "/periods?limit=" + strconv.Itoa(limit) + "&cursor=" + j.PeriodsNext
			w.Header().Set("Link", "<"+out.Next+`>; rel="next"`)
		}
	}
	respond.JSON(w, http.StatusOK, out)
}
