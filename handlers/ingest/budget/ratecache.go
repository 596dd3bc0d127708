package budget

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/ops"
)

// rateStateTTL is how long a reading of the shared item answers for it.
const rateStateTTL = 10 * time.Second

// RateCache holds the newest Strava rate-limit reading this instance knows
// (its own responses' headers, or the shared item read at most rateStateTTL
// ago) and the last one it wrote to the shared item. Every Strava answer
// carries the application-wide usage, so an instance that fetches sees the
// others' usage at once; one that has not fetched for rateStateTTL reads the
// shared item again. A reading is written to the shared item only when it
// matters to the others (Observed); the 5 % budget reserve absorbs what an
// instance may spend before it sees another's reading. The fetcher's budget
// checks and the sync pages share one RateCache per instance (handlers/app
// hands the same one to both). The zero value is ready to use.
type RateCache struct {
	mu       sync.Mutex
	st       *ops.RateLimitState
	readAt   time.Time // when the shared item was last read (or found absent)
	recorded *ops.RateLimitState
}

// newer says whether a is a later reading than b (nil b: yes): a later
// window, or the same window with at least as much read usage.
func newer(a, b *ops.RateLimitState) bool {
	switch {
	case b == nil:
		return true
	case !a.WindowStartedUtc.Equal(b.WindowStartedUtc):
		return a.WindowStartedUtc.After(b.WindowStartedUtc)
	}
	return a.ReadShortUsage >= b.ReadShortUsage
}

// get returns the known reading when the shared item was read within
// rateStateTTL (nil, true: it was absent); ok is false when it must be read.
func (c *RateCache) Get(now time.Time) (st *ops.RateLimitState, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.readAt.IsZero() || now.Sub(c.readAt) > rateStateTTL || now.Before(c.readAt) {
		return nil, false
	}
	return c.st, true
}

// loaded records a read of the shared item (nil: absent) at now.
func (c *RateCache) Loaded(st *ops.RateLimitState, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.readAt = now
	if st != nil && newer(st, c.st) {
		c.st = st
	}
}

// current returns the reading to decide on: the known one when the shared
// item was read within rateStateTTL, else the shared item read now with
// read (nil: no reading yet). Every budget check of this instance, the
// worker's and the sync pages', goes through it: at most one read of
// RATELIMIT#STRAVA/STATE per rateStateTTL, whatever the traffic.
func (c *RateCache) Current(ctx context.Context, read func(context.Context) (*ops.RateLimitState, error), now time.Time) (*ops.RateLimitState, error) {
	if st, ok := c.Get(now); ok {
		return st, nil
	}
	stored, err := read(ctx)
	switch {
	case errors.Is(err, model.ErrNotFound):
		stored = nil
	case err != nil:
		return nil, err
	}
	c.Loaded(stored, now)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st, nil
}

// observed keeps a reading from a Strava answer and says whether it should
// be written to the shared item: the first reading of a window or day this
// instance writes, a 429, usage that moved a tenth of a limit since the last
// write, or usage within two reserves of a limit (where the others must
// know at once).
func (c *RateCache) Observed(st *ops.RateLimitState, refused bool, reserve float64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if newer(st, c.st) {
		c.st = st
	}
	last := c.recorded
	write := refused || last == nil || !st.WindowStartedUtc.Equal(last.WindowStartedUtc) || st.DayUtc != last.DayUtc
	for _, u := range [][2]int{{st.ReadShortUsage, st.ReadShortLimit}, {st.ShortUsage, st.ShortLimit},
		{st.ReadDailyUsage, st.ReadDailyLimit}, {st.DailyUsage, st.DailyLimit}} {
		usage, limit := u[0], u[1]
		if limit > 0 && usage >= limit-ReserveOf(limit, 2*reserve) {
			write = true
		}
	}
	if !write && last != nil {
		step := func(usage, before, limit int) bool {
			return limit > 0 && usage*10/limit != before*10/limit
		}
		write = step(st.ReadShortUsage, last.ReadShortUsage, st.ReadShortLimit) ||
			step(st.ShortUsage, last.ShortUsage, st.ShortLimit) ||
			step(st.ReadDailyUsage, last.ReadDailyUsage, st.ReadDailyLimit) ||
			step(st.DailyUsage, last.DailyUsage, st.DailyLimit)
	}
	if write {
		c.recorded = st
	}
	return write
}

// Peek returns the newest reading the instance knows, however old (nil:
// none), without reading the shared item.
func (c *RateCache) Peek() *ops.RateLimitState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st
}

// DefaultReadShortLimit is Strava's default read budget per window (100
// reads per 15 minutes), assumed until a reading says otherwise.
const DefaultReadShortLimit = 100

// RateStore is the shared rate-limit reading's persistence
// (model/store/limits), which every reader of Strava keeps up to date.
type RateStore interface {
	// RateLimitState reads the shared counter; ErrNotFound before the
	// first reading.
	RateLimitState(ctx context.Context) (*ops.RateLimitState, error)
	// RecordRateLimit stores a reading unless a newer one is stored.
	RecordRateLimit(ctx context.Context, r *ops.RateLimitState) error
}
