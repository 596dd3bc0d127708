// Package retry paces retry loops: full-jitter exponential backoff and a
// sleep that ends with its context. The store, the stream reader, the
// Strava client and the operator tools share it.
package retry

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is full-jitter exponential backoff: a random delay in
// (0, min(max, base·2^attempt)]. Every retry loop of the store, the stream
// reader, the projector and the operator tools uses it.
func Backoff(attempt int, base, max time.Duration) time.Duration {
	d := base << min(attempt, 20)
	if d <= 0 || d > max {
		d = max
	}
	return time.Duration(rand.Int64N(int64(d)) + 1)
}

// Sleep waits d, or until ctx is done, in which case it returns ctx.Err().
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
