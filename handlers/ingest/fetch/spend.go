package fetch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
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

// takeAthleteRead counts one Strava read against the athlete's cap
// (AthleteReadsPerWindow); a ingest.DeferError to the next window when the cap is
// reached.
func (w *Fetcher) takeAthleteRead(ctx context.Context, job ingest.Job) error {
	if w.AthleteReadsPerWindow <= 0 {
		return nil
	}
	ev := job.Event
	now := w.Now()
	win := w.rateWindow()
	err := w.store.TakeAthleteRead(ctx, ev.OwnerID, now, win, w.AthleteReadsPerWindow)
	if errors.Is(err, model.ErrConflict) {
		return fmt.Errorf("process %s: %w", job.CorrelationID, &ingest.DeferError{
			Until:  now.UTC().Truncate(win).Add(win),
			Reason: fmt.Sprintf("athlete %d reached %d strava reads in this window", ev.OwnerID, w.AthleteReadsPerWindow),
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
