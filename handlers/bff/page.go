package bff

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/commitcollect/backend/handlers/bff/milestones"
	"github.com/commitcollect/backend/handlers/bff/respond"
	"github.com/commitcollect/backend/handlers/bff/timeline"
	"github.com/commitcollect/backend/handlers/bff/workouts"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/rules"
	"github.com/commitcollect/backend/model/strava"
)

// PageRoute is the read-only landing page the OAuth callback redirects to.
const PageRoute = "GET /{$}"

//go:embed templates/landing.html
var pageHTML string

var pageTmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	"amount": Amount,
	"left":   leftOut,
	"inc":    func(i int) int { return i + 1 },
	"pct":    func(p float64) int { return int(math.Round(math.Min(p, 100))) },
	"f1":     func(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) },
	"when": func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.UTC().Format("2 Jan 2006 15:04 UTC")
	},
	"day": func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.UTC().Format("2 Jan 2006")
	},
}).Parse(pageHTML))

// Amount is a progress value or target of metric in its unit, as the page
// shows it: km to one decimal (distance), metres of climb (elevation),
// hours and minutes (moving_time), workouts (count), days or weeks in a
// row (streak).
func Amount(metric string, v float64) string {
	switch model.Metric(metric) {
	case model.MetricDistance:
		return strconv.FormatFloat(math.Round(v/100)/10, 'f', -1, 64) + " km"
	case model.MetricElevation:
		return strconv.FormatFloat(math.Round(v), 'f', -1, 64) + " m of climb"
	case model.MetricMovingTime:
		m := int64(math.Round(v / 60))
		if m < 60 {
			return fmt.Sprintf("%d min", m)
		}
		return fmt.Sprintf("%d h %02d min", m/60, m%60)
	case model.MetricStreak:
		return strconv.FormatFloat(v, 'f', -1, 64) + " in a row"
	}
	return strconv.FormatFloat(v, 'f', -1, 64) + " workouts"
}

// leftOut says what the rules left out, in the reasons' order ("2
// manual, 1 below_minimum"); "" when nothing.
func leftOut(excluded map[string]int) string {
	var parts []string
	for _, r := range rules.Reasons {
		if n := excluded[string(r)]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, strings.ReplaceAll(string(r), "_", " ")))
		}
	}
	return strings.Join(parts, ", ")
}

// pageData is what the page shows: nothing but a sign-in link without a
// session, else the athlete's milestones with their progress and awards.
type pageData struct {
	SignedIn    bool
	DisplayName string
	AthleteID   int64
	// Scope is the activity scope the athlete granted (strava.ActivityScope).
	Scope      string
	Milestones []milestones.MilestoneJSON
	// Sync is the Strava sync, shown with a progress bar while history is
	// imported.
	Sync SyncJSON
	// Refresh is the seconds between reloads (the page has no script).
	Refresh int
	// Charts are the milestones' timelines, drawn, by milestone id.
	Charts map[string]timeline.Chart
}

// RegisterPage adds the landing page (PageRoute) to mux: server-rendered
// HTML, no script, reloading itself every few seconds so progress and
// awards appear as the projector writes them. It reads the same projection
// as GET /v1/milestones.
func (h *Handler) RegisterPage(mux *http.ServeMux) { mux.HandleFunc(PageRoute, h.page) }

func (h *Handler) page(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	log, _ := h.reqLog(r)
	data := pageData{Refresh: 3}
	if c, err := r.Cookie(SessionCookie); err == nil && respond.OpaqueID.MatchString(c.Value) {
		sess, err := h.sessions.Session(ctx, keys.SessionHash(c.Value))
		switch {
		case err == nil && !sess.Expired(h.now()):
			if what, err := h.reads().fill(ctx, sess.UserID, &data); err != nil {
				respond.Fail(ctx, w, log, "page: "+what, err)
				return
			}
		case err != nil && !errors.Is(err, model.ErrNotFound):
			respond.Fail(ctx, w, log, "page: read session", err)
			return
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", PageCSP)
	if err := pageTmpl.Execute(w, data); err != nil {
		log.ErrorContext(ctx, "page: render", "error", err)
	}
}

// pageReads are what the page reads of a signed-in user, each a port of
// its own, and the clock.
type pageReads struct {
	profiles    ProfileStore
	connections ConnectionStore
	milestones  milestones.Store
	periods     milestones.PeriodReader
	zones       milestones.Zones
	periodLog   workouts.Log
	syncState   func(ctx context.Context, userID string) (SyncJSON, error)
	now         func() time.Time
}

// reads are the page's reads over h's ports.
func (h *Handler) reads() pageReads {
	return pageReads{profiles: h.profiles, connections: h.connections, milestones: h.readMilestones, periods: h.periods, zones: h.zones, periodLog: h.periodLog,
		syncState: h.syncState, now: h.now}
}

// fill reads what the page shows a signed-in user: profile, sync, each
// milestone with its timeline drawn (one read of its current period's log;
// a streak's from its projection). It names what failed.
func (r pageReads) fill(ctx context.Context, userID string, data *pageData) (string, error) {
	p, err := r.profiles.Profile(ctx, userID)
	if err != nil && !errors.Is(err, model.ErrNotFound) {
		return "read profile", err
	}
	ms, _, err := r.milestones.MilestonesWithAwards(ctx, userID, "")
	if err != nil {
		return "list milestones", err
	}
	sync, err := r.syncState(ctx, userID)
	if err != nil {
		return "read sync state", err
	}
	data.SignedIn, data.DisplayName, data.AthleteID, data.Sync = true, p.DisplayName, p.AthleteID, sync
	if c, err := r.connections.StravaConnection(ctx, userID); err == nil {
		data.Scope = strava.ActivityScope(c.Scopes)
	}
	at, err := milestones.AtFor(ctx, r.zones, userID, r.now())
	if err != nil {
		return "read zone", err
	}
	data.Charts = map[string]timeline.Chart{}
	for _, m := range ms {
		j, err := milestones.Show(ctx, r.periods, userID, m, at)
		if err != nil {
			return "read series", err
		}
		data.Milestones = append(data.Milestones, j)
		def, _ := workouts.PeriodOf(m.Milestone.MilestoneDefinition, "", at.Today())
		tl, err := timeline.Of(ctx, r.periodLog, m.Milestone, def, at)
		if err != nil {
			return "read timeline", err
		}
		data.Charts[m.Milestone.MilestoneID] = timeline.ChartOf(tl, at.Today())
	}
	return "", nil
}
