// Package budget is the one room of Strava's rate budget on the handlers'
// side: the application-wide budget of every worker instance (the shared
// rate cache, RateCache; the reserve a job leaves free; when a spent
// budget resets), the events' spending of it with each athlete's read caps
// (Reads: caps.go, check.go), the sync jobs' pacing (pacing.go), and the
// count of Strava reads by class. Its counters are stored by
// model/store/limits, under keys model/keys builds (limits.go).
//
// Strava's budget is per application: 200 / 15 min and 2000 / day overall,
// 100 / 15 min and 1000 / day for reads. Every Strava answer (including 429s)
// updates the shared item RATELIMIT#STRAVA / STATE from X-RateLimit-* and
// X-ReadRateLimit-* (only a newer window or a higher usage in the same window
// overwrites it). Before a fetch the worker defers the job (outbox not-before
// = the next :00/:15/:30/:45 UTC, or midnight UTC for a daily budget) when
// usage has reached the limit minus 5 % (budget.DefaultReserve), instead of
// collecting 429s. CC_STRAVA_WINDOW shortens the assumed window (only
// against a simulator that runs shorter windows, as the chaos suite does).
//
// The Strava budget by class: every Strava API read a worker job makes
// (GET /activities/{id}, GET /athlete/activities, GET /athlete, whatever the answer, as
// Strava counts them) is counted on the job's context, and when the job
// ends the worker writes one CloudWatch Embedded Metric Format line
// (runner.Runner.Metrics; the worker Lambda writes to stdout) with StravaReads
// under the dimension Class: what the capacity dashboard shows next to the
// read limit. Token refreshes (POST /oauth/token) go through the refresher,
// not these calls, and are not counted (see scripts/plankit).
package budget

import (
	"fmt"
	"math"
	"time"

	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/strava"
)

// DefaultReserve is the share of each Strava budget the worker leaves
// unused: it defers instead of spending the last 5 %.
const DefaultReserve = 0.05

// StateIn turns a header reading at now into the shared counter item (the
// rate window, keys.AthleteReadsWindow in production, and the UTC day it
// belongs to).
func StateIn(rl strava.RateLimit, now time.Time, window time.Duration) *ops.RateLimitState {
	now = now.UTC()
	return &ops.RateLimitState{
		ShortLimit: rl.ShortLimit, ShortUsage: rl.ShortUsage, DailyLimit: rl.DailyLimit, DailyUsage: rl.DailyUsage,
		ReadShortLimit: rl.ReadShortLimit, ReadShortUsage: rl.ReadShortUsage,
		ReadDailyLimit: rl.ReadDailyLimit, ReadDailyUsage: rl.ReadDailyUsage,
		WindowStartedUtc: now.Truncate(window), DayUtc: now.Format(time.DateOnly), UpdatedAtUtc: now,
	}
}

// NextResetIn is when the budget Strava's reading st (taken at now) says
// is spent (keeping reserve) becomes available again, and which one it is:
// the next UTC midnight when a daily budget is used up, else the next
// window boundary (15 minutes: :00, :15, :30, :45 UTC), which is also the
// answer for a 429 whose headers show nothing spent (Strava refused; our
// reading lags).
func NextResetIn(st *ops.RateLimitState, now time.Time, reserve float64, window time.Duration) (time.Time, string) {
	now = now.UTC()
	daily := *st
	daily.ShortUsage, daily.ReadShortUsage = 0, 0
	if why := ExhaustedIn(&daily, now, reserve, window); why != "" {
		y, m, d := now.Date()
		return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC), why
	}
	why := ExhaustedIn(st, now, reserve, window)
	if why == "" {
		why = "no budget reported spent"
	}
	return now.Truncate(window).Add(window), why
}

// AfterRefusal is when a call Strava refused with 429, answering the
// headers rl at now, may be made again, and why: NextResetIn of that
// reading with no reserve kept.
func AfterRefusal(rl strava.RateLimit, now time.Time, window time.Duration) (time.Time, string) {
	return NextResetIn(StateIn(rl, now, window), now, 0, window)
}

// ReserveOf is how many reads of a budget of limit a reserve (a share of
// it) keeps free: at least one. The "spent" check, the sync share's cap
// and the rate cache's "near the limit" all count it this one way.
func ReserveOf(limit int, reserve float64) int {
	return max(1, int(math.Ceil(float64(limit)*reserve)))
}

// ExhaustedIn says why no Strava read should be made now ("" when one
// may): a budget counts only within the window (15 minutes in production)
// or UTC day the state was recorded in, and is nearly spent when its usage
// reaches its limit minus reserve (a share, at least one request).
func ExhaustedIn(st *ops.RateLimitState, now time.Time, reserve float64, window time.Duration) string {
	now = now.UTC()
	sameWindow := st.WindowStartedUtc.Equal(now.Truncate(window))
	sameDay := st.DayUtc == now.Format(time.DateOnly)
	spent := func(usage, limit int) bool {
		if limit <= 0 {
			return false
		}
		return usage >= limit-ReserveOf(limit, reserve)
	}
	switch {
	case sameWindow && spent(st.ReadShortUsage, st.ReadShortLimit):
		return fmt.Sprintf("read 15-minute usage %d of %d", st.ReadShortUsage, st.ReadShortLimit)
	case sameWindow && spent(st.ShortUsage, st.ShortLimit):
		return fmt.Sprintf("15-minute usage %d of %d", st.ShortUsage, st.ShortLimit)
	case sameDay && spent(st.ReadDailyUsage, st.ReadDailyLimit):
		return fmt.Sprintf("read daily usage %d of %d", st.ReadDailyUsage, st.ReadDailyLimit)
	case sameDay && spent(st.DailyUsage, st.DailyLimit):
		return fmt.Sprintf("daily usage %d of %d", st.DailyUsage, st.DailyLimit)
	}
	return ""
}
