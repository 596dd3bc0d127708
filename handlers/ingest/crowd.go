package ingest

import (
	"sync"
	"time"
)

// Gathering: one athlete's many creates in little time (a bulk upload, a
// new device syncing, a forged flood) are not handled one by one. Each
// instance that sees them (the webhook, the worker) lets the first
// CreatesBeforeGather of an athlete in a rate window through, and gathers
// the rest: their outbox items wait until the next tick of the gather grid
// (GatherGrid, NextGather), where the sweeper dispatches them together as
// one burst served from list pages (handlers/ingest/fetch burst.go).
const (
	// CreatesBeforeGather is how many create events of one athlete an
	// instance hands on one by one in a rate window.
	CreatesBeforeGather = 3
	// MaxBurstGather bounds the gather grid: in AWS the sweeper's minute
	// sets the pace anyway; locally a gathered create waits seconds.
	MaxBurstGather = 10 * time.Second
	// crowdMaxAthletes bounds the athletes a Crowd remembers (full: it
	// starts over, so a flood of many athletes costs bounded memory).
	crowdMaxAthletes = 10000
)

// GatherGrid is the gather grid of a rate window: a quarter of it, at most
// MaxBurstGather.
func GatherGrid(rateWindow time.Duration) time.Duration {
	return min(rateWindow/4, MaxBurstGather)
}

// NextGather is the first tick of the grid after now: when a create
// gathered at now is due.
func NextGather(now time.Time, grid time.Duration) time.Time {
	return now.UTC().Truncate(grid).Add(grid)
}

// Crowd counts, per athlete, the create events one instance saw in the
// current rate window. The zero value is ready; it is safe for concurrent
// use.
type Crowd struct {
	mu sync.Mutex
	m  map[int64]crowdCount
}

type crowdCount struct {
	window time.Time
	n      int
}

// Crowded counts a create event of the athlete in the window starting at
// window and says whether it is beyond CreatesBeforeGather.
func (c *Crowd) Crowded(athleteID int64, window time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= crowdMaxAthletes {
		c.m = make(map[int64]crowdCount)
	}
	cc := c.m[athleteID]
	if !cc.window.Equal(window) {
		cc = crowdCount{window: window}
	}
	cc.n++
	c.m[athleteID] = cc
	return cc.n > CreatesBeforeGather
}

// Forget takes back a create Crowded counted in the window starting at
// window (the webhook's claim found it a duplicate, or failed): a
// redelivery of one event does not crowd the athlete.
func (c *Crowd) Forget(athleteID int64, window time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cc, ok := c.m[athleteID]; ok && cc.window.Equal(window) && cc.n > 0 {
		cc.n--
		c.m[athleteID] = cc
	}
}
