package scale

import (
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model/store/metering"
	"github.com/commitcollect/backend/test/bench"
)

// MinWritesForHotKey is how many writes a table or an index needs before
// its hottest key's share counts toward hottest_key_share: below it a share
// says nothing (two writes to one key are 100 %).
const MinWritesForHotKey = 100

// Targets (printed met/missed, never asserted).
const (
	TargetLate        = 0
	TargetExceeded    = 0
	TargetEditsCaught = 0.95
	TargetHottestKey  = 0.05
)

// Window is one rate-limit window's Strava reads: Requests by endpoint as
// the simulator served them (Activity: GET /activities/{id}, List: GET
// /athlete/activities, Athlete: GET /athlete), Refused the 429s among
// them, ByClass the worker's StravaReads EMF lines by class (booked at the
// end of their job), and WebhooksDeferred / DeferredWithSyncs the webhook
// jobs deferred in it, and those deferred after sync reads were spent in
// the same window.
type Window struct {
	Start                   time.Time
	Activity, List, Athlete int
	Refused                 int
	ByClass                 map[string]int
	WebhooksDeferred        int
	DeferredWithSyncs       int
}

// Report is what one simulation measured.
type Report struct {
	Mode                  string
	Athletes, Milestones  int
	Connects, HistoryDays int
	Day, Window, Interval time.Duration
	// Bound is the README's bound for an unpushed edit of an athlete with
	// an active milestone: the idle round-robin (CC_RECONCILE_IDLE) + one
	// window, which holds for every such edit. FastBound (reconcile
	// interval + one window) holds only when the athlete uploads again
	// before their next slot; it is printed, not a target.
	Bound, FastBound      time.Duration
	ReadLimit, SyncShare  int     // reads per window, and the syncs' share of them
	PeakFactor            float64 // busiest window's webhooks ÷ the mean window's
	Webhooks              int     // webhook events Strava sent (create + update)
	Lags                  []time.Duration
	NotDelivered          int // events Strava's sender gave up on (no 200 in 3 attempts)
	Lost                  int // activities told by webhook or backfilled never written
	Backfilled            int // activities of new connects written
	BackfillTimes         []time.Duration
	Edits, EditsMilestone int // unpushed edits, and those of athletes with an active milestone
	CaughtMilestone       int // of EditsMilestone, caught within Bound
	CaughtFast            int // of EditsMilestone, caught within FastBound
	CaughtAny             int // of Edits, caught at all by the end
	Windows               []Window
	HotKeys               []metering.HotKey
	TablePrefix           string
	Elapsed               time.Duration
	ProductKnobs          []string
	// SlowLines explain the slowest webhooks (every late one, and at least
	// a few): a count by kind and where their lag went, then the slowest
	// spelled out with what the worker logged.
	SlowLines []string
	// MissedEdits says, for each edit of EditsMilestone not caught within
	// Bound, whose it was, when in the day, and when it was caught.
	MissedEdits []string
}

// Late is how many webhooks' lag exceeded one window.
func (r Report) Late() int {
	n := 0
	for _, l := range r.Lags {
		if l > r.Window {
			n++
		}
	}
	return n
}

// Exceeded is how many windows' sync reads (list pages) exceeded the
// syncs' share.
func (r Report) Exceeded() int {
	n := 0
	for _, w := range r.Windows {
		if w.List > r.SyncShare {
			n++
		}
	}
	return n
}

// EditsCaught is the share of unpushed edits of athletes with an active
// milestone caught within the bound (1 when there were none).
func (r Report) EditsCaught() float64 {
	if r.EditsMilestone == 0 {
		return 1
	}
	return float64(r.CaughtMilestone) / float64(r.EditsMilestone)
}

// Hottest returns the table or index (with at least MinWritesForHotKey
// writes) whose hottest key takes the largest share of its writes.
func (r Report) Hottest() (metering.HotKey, bool) {
	var best metering.HotKey
	found := false
	for _, h := range r.HotKeys {
		if h.Writes >= MinWritesForHotKey && (!found || h.Share() > best.Share()) {
			best, found = h, true
		}
	}
	return best, found
}

// LastLine is the report's last line:
// scale: athletes=N webhooks_late=L share_exceeded=S edits_caught=P% hottest_key_share=H%
func (r Report) LastLine() string {
	h, _ := r.Hottest()
	return fmt.Sprintf("scale: athletes=%d webhooks_late=%d share_exceeded=%d edits_caught=%.1f%% hottest_key_share=%.1f%%",
		r.Athletes, r.Late(), r.Exceeded(), 100*r.EditsCaught(), 100*h.Share())
}

// LastLinePattern matches LastLine's format.
var LastLinePattern = regexp.MustCompile(`^scale: athletes=\d+ webhooks_late=\d+ share_exceeded=\d+ edits_caught=\d+(\.\d)?% hottest_key_share=\d+(\.\d)?%$`)

// Print writes the report; its last line is LastLine.
func (r Report) Print(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("scale (%s): %d athletes (%d with an active milestone), a day compressed to %s with an evening peak (peak factor %.1f), "+
		"Strava window %s, %d reads per window app-wide (syncs' share %d), reconciliation every %s; %d new connects with %d days of history; took %s",
		r.Mode, r.Athletes, r.Milestones, r.Day, r.PeakFactor, r.Window, r.ReadLimit, r.SyncShare, r.Interval, r.Connects, r.HistoryDays,
		r.Elapsed.Round(time.Second))
	p("  product knobs: %s", strings.Join(r.ProductKnobs, " "))
	p("")
	p("webhooks: %d sent, %d never acknowledged, lag POST → workout written p50 %s p99 %s max %s; late (> one window, %s): %d",
		r.Webhooks, r.NotDelivered, ms(bench.Percentile(r.Lags, 0.5)), ms(bench.Percentile(r.Lags, 0.99)), ms(bench.Percentile(r.Lags, 1)), r.Window, r.Late())
	for _, l := range r.SlowLines {
		p("  %s", l)
	}
	deferred, withSyncs := 0, 0
	for _, w := range r.Windows {
		deferred += w.WebhooksDeferred
		withSyncs += w.DeferredWithSyncs
	}
	p("  webhook jobs deferred: %d, of which %d in a window where syncs had already spent reads", deferred, withSyncs)
	p("backfill: %d activities of %d new connects written (lost %d), connect → last activity written p50 %s max %s",
		r.Backfilled, r.Connects, r.Lost, ms(bench.Percentile(r.BackfillTimes, 0.5)), ms(bench.Percentile(r.BackfillTimes, 1)))
	p("unpushed edits: %d (%d of athletes with an active milestone); caught within the bound (idle round-robin + one window = %s): %d of %d; within reconcile interval + one window (%s, when they upload again first): %d of %d; caught at all by the end: %d of %d",
		r.Edits, r.EditsMilestone, r.Bound, r.CaughtMilestone, r.EditsMilestone, r.FastBound, r.CaughtFast, r.EditsMilestone, r.CaughtAny, r.Edits)
	for _, m := range r.MissedEdits {
		p("  missed: %s", m)
	}
	p("")
	p("Strava reads per window (simulator: by endpoint; worker EMF: by class, booked when the job ends); sync share %d of %d:", r.SyncShare, r.ReadLimit)
	p("  %-3s %8s %6s %7s %4s | %7s %8s %9s %7s | %8s %s", "#", "activity", "list", "athlete", "429", "webhook", "backfill", "reconcile", "confirm", "deferred", "")
	for i, w := range r.Windows {
		mark := ""
		if w.List > r.SyncShare {
			mark = "syncs over their share"
		}
		p("  %-3d %8d %6d %7d %4d | %7d %8d %9d %7d | %8d %s", i, w.Activity, w.List, w.Athlete, w.Refused,
			w.ByClass[ingest.ReadClassWebhook], w.ByClass[ingest.ReadClassBackfill], w.ByClass[ingest.ReadClassReconcile], w.ByClass[ingest.ReadClassConfirm], w.WebhooksDeferred, mark)
	}
	p("")
	p("writes per table and index (the day's traffic, seeding left out; capacity meter, Space-Saving top-%d; index writes whose key the request does not show are 'unknown'):", metering.DefaultTopK)
	hk := append([]metering.HotKey(nil), r.HotKeys...)
	sort.Slice(hk, func(i, j int) bool { return hk[i].Share() > hk[j].Share() })
	for _, h := range hk {
		note := ""
		if h.Writes < MinWritesForHotKey {
			note = fmt.Sprintf(" (fewer than %d writes: not counted)", MinWritesForHotKey)
		}
		if h.Error > 0 {
			note += fmt.Sprintf(" (count may overstate by %d)", h.Error)
		}
		p("  %-34s writes %7d unknown %6d keys %5d hottest %-40q %6.2f%%%s", strings.TrimPrefix(h.Scope, r.TablePrefix), h.Writes, h.Unknown,
			h.Keys, h.Key, 100*h.Share(), note)
	}
	p("")
	hot, _ := r.Hottest()
	p("targets (printed, not asserted):")
	p("  webhooks late past one window   %6d   want %d       %s", r.Late(), TargetLate, metOr(r.Late() <= TargetLate))
	p("  windows syncs exceed the share  %6d   want %d       %s", r.Exceeded(), TargetExceeded, metOr(r.Exceeded() <= TargetExceeded))
	p("  unpushed edits caught in bound  %5.1f%%   want ≥ %.0f%%  %s", 100*r.EditsCaught(), 100*TargetEditsCaught, metOr(r.EditsCaught() >= TargetEditsCaught))
	p("  hottest key's share of writes   %5.1f%%   want ≤ %.0f%%   %s (%s, %q; tables and indexes with ≥ %d writes)", 100*hot.Share(), 100*TargetHottestKey,
		metOr(hot.Share() <= TargetHottestKey), strings.TrimPrefix(hot.Scope, r.TablePrefix), hot.Key, MinWritesForHotKey)
	p("%s", r.LastLine())
}

func metOr(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

func ms(d time.Duration) string { return d.Round(time.Millisecond).String() }
