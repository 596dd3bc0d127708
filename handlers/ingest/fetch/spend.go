package fetch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/budget"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/strava"
)

func (w *Fetcher) rateWindow() time.Duration {
	if w.RateWindow <= 0 {
		return keys.AthleteReadsWindow
	}
	return w.RateWindow
}

// The athlete's read cap (AthleteReadsPerWindow) is a shared counter per
// athlete and window (STRAVA#ATHLETE#{id} / READS#{window}), but an athlete
// who uploads one activity in a window is nowhere near it: touching the
// counter for every read would cost every event a write. So each instance
// keeps its own tally per athlete and window (readTally) and reads without
// touching the counter while its tally is under localReadAllowance (at most
// half the cap). Past that it adds every read not yet counted, its own
// earlier ones included, with a condition that the counter stays within the
// cap: from then on this instance's reads are counted exactly and refused at
// the cap. Across instances, each may spend its allowance unseen by the
// others before its first write (the local stack is one instance, so there
// the cap is exact); the application-wide budget check still bounds them all.
const localReadAllowance = 3

// readTally is the instance's own count of Strava reads per athlete in the
// current window, and how many of them the shared counter has not seen.
type readTally struct {
	mu sync.Mutex
	m  map[int64]tally
}

type tally struct {
	window          time.Time
	reads, unshared int
}

// take counts one read of the athlete in the window starting at window. It
// returns 0 when the read stays within the instance's allowance, else how
// many reads the shared counter must take now (the unshared ones and this
// one); the caller reports the outcome with settle.
func (t *readTally) take(athleteID int64, window time.Time, allowance int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil || len(t.m) >= cacheMaxEntries {
		t.m = make(map[int64]tally)
	}
	c := t.m[athleteID]
	if !c.window.Equal(window) {
		c = tally{window: window}
	}
	c.reads++
	if c.reads <= allowance {
		c.unshared++
		t.m[athleteID] = c
		return 0
	}
	add := c.unshared + 1
	c.unshared = 0
	t.m[athleteID] = c
	return add
}

// settle undoes take's count of add reads when the shared counter refused
// them: the read is not made, and the unshared ones stay unshared.
func (t *readTally) settle(athleteID int64, window time.Time, add int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.m[athleteID]; ok && c.window.Equal(window) {
		c.reads--
		c.unshared += add - 1
		t.m[athleteID] = c
	}
}

// takeAthleteRead counts one Strava read against the athlete's cap
// (AthleteReadsPerWindow, see readTally); a ingest.DeferError to the next
// window when the cap is reached.
func (w *Fetcher) takeAthleteRead(ctx context.Context, job ingest.Job) error {
	limit := w.AthleteReadsPerWindow
	if limit <= 0 {
		return nil
	}
	ev := job.Event
	now := w.Now()
	win := w.rateWindow()
	window := now.UTC().Truncate(win)
	add := w.reads.take(ev.OwnerID, window, min(localReadAllowance, limit/2))
	if add == 0 {
		return nil
	}
	err := w.store.TakeAthleteReads(ctx, ev.OwnerID, now, win, limit, add)
	if err != nil {
		w.reads.settle(ev.OwnerID, window, add)
	}
	if errors.Is(err, model.ErrConflict) {
		return fmt.Errorf("process %s: %w", job.CorrelationID, &ingest.DeferError{
			Until:  window.Add(win),
			Reason: fmt.Sprintf("athlete %d reached %d strava reads in this window", ev.OwnerID, limit),
		})
	}
	if err != nil {
		return fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
	return nil
}

// observeRate records the rate-limit reading of a Strava answer (err is the
// call's error: a 429 always records).
func (w *Fetcher) observeRate(ctx context.Context, log *slog.Logger, rl strava.RateLimit, err error) {
	if !rl.Valid() {
		return
	}
	var apiErr *strava.APIError
	st := budget.StateIn(rl, w.Now(), w.rateWindow())
	refused := errors.As(err, &apiErr) && apiErr.Status == http.StatusTooManyRequests
	if w.Rate.Observed(st, refused, w.BudgetReserve) {
		if rerr := w.store.RecordRateLimit(ctx, st); rerr != nil {
			log.WarnContext(ctx, "rate limit not recorded", "error", rerr)
		}
	}
}

// checkBudget returns an error matching model.ErrRetryable when the shared
// rate-limit state says the budget is nearly spent. It reads the shared
// item at most every rateStateTTL (cache.go).
func (w *Fetcher) checkBudget(ctx context.Context) error {
	now := w.Now()
	st, err := w.Rate.Current(ctx, w.store.RateLimitState, now)
	if err != nil {
		return fmt.Errorf("check strava budget: %w", err)
	}
	if st == nil {
		return nil
	}
	if why := budget.ExhaustedIn(st, now, w.BudgetReserve, w.rateWindow()); why != "" {
		until, _ := budget.NextResetIn(st, now, w.BudgetReserve, w.rateWindow())
		return fmt.Errorf("strava budget: %w", &ingest.DeferError{Until: until, Reason: why})
	}
	return nil
}
