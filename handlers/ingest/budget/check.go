package budget

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/strava"
)

// Window is the rate limit's short window the reads count in
// (RateWindow, else Strava's). The application's shared reading
// (RateCache) is checked before a read (CheckBudget) and updated
// after each answer (ObserveRate).
func (r *Reads) Window() time.Duration {
	if r.RateWindow <= 0 {
		return keys.AthleteReadsWindow
	}
	return r.RateWindow
}

// ObserveRate records the rate-limit reading of a Strava answer (err is the
// call's error: a 429 always records).
func (r *Reads) ObserveRate(ctx context.Context, log *slog.Logger, rl strava.RateLimit, err error) {
	if !rl.Valid() {
		return
	}
	var apiErr *strava.APIError
	st := StateIn(rl, r.Now(), r.Window())
	refused := errors.As(err, &apiErr) && apiErr.Status == http.StatusTooManyRequests
	if r.Cache.Observed(st, refused, r.Reserve) {
		if rerr := r.Rate.RecordRateLimit(ctx, st); rerr != nil {
			log.WarnContext(ctx, "rate limit not recorded", "error", rerr)
		}
	}
}

// CheckBudget returns an error matching model.ErrRetryable (an
// ingest.DeferError) when the shared rate-limit state says the budget is
// nearly spent. It reads the shared item at most every rateStateTTL
// (RateCache).
func (r *Reads) CheckBudget(ctx context.Context) error {
	now := r.Now()
	st, err := r.Cache.Current(ctx, r.Rate.RateLimitState, now)
	if err != nil {
		return fmt.Errorf("check strava budget: %w", err)
	}
	if st == nil {
		return nil
	}
	if why := ExhaustedIn(st, now, r.Reserve, r.Window()); why != "" {
		until, _ := NextResetIn(st, now, r.Reserve, r.Window())
		return fmt.Errorf("strava budget: %w", &ingest.DeferError{Until: until, Reason: why})
	}
	return nil
}

// ResetAfter429 is when a call Strava refused with 429 (its reading rl)
// may be made again, and why.
func (r *Reads) ResetAfter429(rl strava.RateLimit, now time.Time) (time.Time, string) {
	return AfterRefusal(rl, now, r.Window())
}
