package rebuildkit

import (
	"context"
	"sync"
	"time"

	"github.com/commitcollect/backend/model"
)

// Limiter spaces calls evenly at a fixed rate (a token bucket of one): the
// nth caller is let through at start + n/rate. A nil *Limiter, or one built
// with a rate ≤ 0, lets everything through. It is safe for concurrent use.
type Limiter struct {
	mu       sync.Mutex
	interval time.Duration
	next     time.Time
	now      func() time.Time
	sleep    func(ctx context.Context, d time.Duration) error
}

// NewLimiter returns a limiter of perSecond calls per second (≤ 0: unlimited).
func NewLimiter(perSecond float64) *Limiter {
	if perSecond <= 0 {
		return nil
	}
	return &Limiter{
		interval: time.Duration(float64(time.Second) / perSecond),
		now:      time.Now,
		sleep:    model.Sleep,
	}
}

// Wait blocks until the caller's slot comes. It returns ctx's error, without
// waiting longer, when ctx ends first.
func (l *Limiter) Wait(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if l == nil || l.interval <= 0 {
		return nil
	}
	l.mu.Lock()
	now := l.now()
	slot := l.next
	if slot.Before(now) {
		slot = now
	}
	l.next = slot.Add(l.interval)
	l.mu.Unlock()
	if d := slot.Sub(now); d > 0 {
		return l.sleep(ctx, d)
	}
	return nil
}
