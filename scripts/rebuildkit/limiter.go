package rebuildkit

import (
	"context"

	"golang.org/x/time/rate"
)

// NewLimiter returns a limiter that spaces calls evenly at perSecond per
// second (golang.org/x/time/rate with a bucket of one: an idle caller banks
// no burst), or nil, unlimited, when perSecond ≤ 0.
func NewLimiter(perSecond float64) *rate.Limiter {
	if perSecond <= 0 {
		return nil
	}
	return rate.NewLimiter(rate.Limit(perSecond), 1)
}

// wait blocks until l lets the caller through (at once when l is nil). It
// returns an error, without waiting, when ctx ends first or would end
// before the caller's turn.
func wait(ctx context.Context, l *rate.Limiter) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if l == nil {
		return nil
	}
	return l.Wait(ctx)
}
