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
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/strava"
)

// rateWindow is the rate limit's short window the fetches count in
// (RateWindow, else Strava's). The application's shared reading
// (budget.RateCache) is checked before a read (CheckBudget) and updated
// after each answer (ObserveRate).
func (w *Fetcher) rateWindow() time.Duration {
	if w.RateWindow <= 0 {
		return keys.AthleteReadsWindow
	}
	return w.RateWindow
}

// ObserveRate records the rate-limit reading of a Strava answer (err is the
// call's error: a 429 always records).
func (w *Fetcher) ObserveRate(ctx context.Context, log *slog.Logger, rl strava.RateLimit, err error) {
	if !rl.Valid() {
		return
	}
	var apiErr *strava.APIError
	st := budget.StateIn(rl, w.Now(), w.rateWindow())
	refused := errors.As(err, &apiErr) && apiErr.Status == http.StatusTooManyRequests
	if w.Rate.Observed(st, refused, w.BudgetReserve) {
		if rerr := w.store.Rate.RecordRateLimit(ctx, st); rerr != nil {
			log.WarnContext(ctx, "rate limit not recorded", "error", rerr)
		}
	}
}

// CheckBudget returns an error matching model.ErrRetryable (an
// ingest.DeferError) when the shared rate-limit state says the budget is
// nearly spent. It reads the shared item at most every rateStateTTL
// (budget.RateCache).
func (w *Fetcher) CheckBudget(ctx context.Context) error {
	now := w.Now()
	st, err := w.Rate.Current(ctx, w.store.Rate.RateLimitState, now)
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

// ResetAfter429 is when a call Strava refused with 429 (its reading rl)
// may be made again, and why.
func (w *Fetcher) ResetAfter429(rl strava.RateLimit, now time.Time) (time.Time, string) {
	return budget.AfterRefusal(rl, now, w.rateWindow())
}

// countedFetcher counts every GetActivity on the caller's context.
type countedFetcher struct{ ActivityFetcher }

func (c countedFetcher) GetActivity(ctx context.Context, token string, id int64) (strava.Activity, strava.RateLimit, error) {
	budget.CountRead(ctx)
	return c.ActivityFetcher.GetActivity(ctx, token, id)
}
