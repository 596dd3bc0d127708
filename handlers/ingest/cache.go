package ingest

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/strava"
)

// What a warm worker keeps between events (one Lambda instance, or the local
// stack's process). Each cache saves a DynamoDB request per event on the
// common path and is never the last word:
//
//   - athletes: athlete → user and that user's access token. Used only for
//     create and update events; deletes and deauthorizations resolve from
//     the table. A cached mapping is confirmed by what follows it: a token
//     read for the user must belong to the athlete, and Strava must accept
//     the token. Any refusal (no connection, needs re-authorization, another
//     athlete's connection, 401) drops the entry and the event is processed
//     again from the table, so an athlete who deauthorized and reconnected as
//     another user (processed by another instance) is never routed to the old
//     user: Strava revokes the old user's tokens at deauthorization. A token
//     is used only until tokenSkew before it expires. A deauthorization
//     processed here drops the entry at once. Bounded by cacheMaxEntries
//     (full: emptied) and athleteTTL.
//   - rate: the last Strava rate-limit reading this instance knows (its own
//     responses' headers, or the shared item read at most rateStateTTL ago).
//     Every Strava answer carries the application-wide usage, so an instance
//     that fetches sees the others' usage at once; one that has not fetched
//     for rateStateTTL reads the shared item again. A reading is written to
//     the shared item only when it matters to the others (see
//     rateCache.material); the 5 % budget reserve absorbs what an instance
//     may spend before it sees another's reading.
//     The worker's budget checks and the sync pages' share one rateCache
//     per instance (NewStravaWorker; a Syncer built alone has its own).
const (
	cacheMaxEntries = 10000
	athleteTTL      = 15 * time.Minute
	tokenSkew       = 5 * time.Minute
	rateStateTTL    = 10 * time.Second
	// createsBeforeCheck: a create event skips the coalescing GetItem (its
	// activity is new) unless this instance saw more than this many creates
	// of the athlete in the current rate window: a flood of forged or
	// replayed creates, where the check saves Strava reads (repeated ids,
	// and ids Strava already answered 404 for).
	createsBeforeCheck = 3
)

// errStaleCache says a cached athlete entry was refused: process again
// from the table.
var errStaleCache = errors.New("cached athlete mapping or token refused")

// TokenSource is a TokenProvider that also says when the token expires and
// whose it is (strava.Refresher); the worker caches its tokens.
type TokenSource interface {
	Token(ctx context.Context, userID string) (strava.Token, error)
}

var _ TokenSource = (*strava.Refresher)(nil)

type athleteEntry struct {
	userID     string
	resolvedAt time.Time
	token      string
	tokenUntil time.Time // use token only before this
}

type athleteCache struct {
	mu      sync.Mutex
	m       map[int64]athleteEntry
	creates map[int64]createCount
}

type createCount struct {
	window time.Time
	n      int
}

// crowded counts a create event of the athlete in the window starting at
// window and says whether it is beyond createsBeforeCheck.
func (c *athleteCache) crowded(athleteID int64, window time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.creates == nil || len(c.creates) >= cacheMaxEntries {
		c.creates = make(map[int64]createCount)
	}
	cc := c.creates[athleteID]
	if !cc.window.Equal(window) {
		cc = createCount{window: window}
	}
	cc.n++
	c.creates[athleteID] = cc
	return cc.n > createsBeforeCheck
}

func (c *athleteCache) get(athleteID int64, now time.Time) (athleteEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[athleteID]
	if !ok || now.Sub(e.resolvedAt) > athleteTTL || now.Before(e.resolvedAt.Add(-time.Minute)) {
		return athleteEntry{}, false
	}
	if !now.Before(e.tokenUntil) {
		e.token = ""
	}
	return e, true
}

func (c *athleteCache) put(athleteID int64, e athleteEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= cacheMaxEntries {
		c.m = make(map[int64]athleteEntry)
	}
	c.m[athleteID] = e
}

func (c *athleteCache) drop(athleteID int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, athleteID)
}

// rateCache holds the newest rate-limit reading this instance knows and
// the last one it wrote to the shared item.
type rateCache struct {
	mu       sync.Mutex
	st       *model.RateLimitState
	readAt   time.Time // when the shared item was last read (or found absent)
	recorded *model.RateLimitState
}

// newer says whether a is a later reading than b (nil b: yes): a later
// window, or the same window with at least as much read usage.
func newer(a, b *model.RateLimitState) bool {
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
func (c *rateCache) get(now time.Time) (st *model.RateLimitState, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.readAt.IsZero() || now.Sub(c.readAt) > rateStateTTL || now.Before(c.readAt) {
		return nil, false
	}
	return c.st, true
}

// loaded records a read of the shared item (nil: absent) at now.
func (c *rateCache) loaded(st *model.RateLimitState, now time.Time) {
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
func (c *rateCache) current(ctx context.Context, read func(context.Context) (*model.RateLimitState, error), now time.Time) (*model.RateLimitState, error) {
	if st, ok := c.get(now); ok {
		return st, nil
	}
	stored, err := read(ctx)
	switch {
	case errors.Is(err, model.ErrNotFound):
		stored = nil
	case err != nil:
		return nil, err
	}
	c.loaded(stored, now)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st, nil
}

// observed keeps a reading from a Strava answer and says whether it should
// be written to the shared item: the first reading of a window or day this
// instance writes, a 429, usage that moved a tenth of a limit since the last
// write, or usage within two reserves of a limit (where the others must
// know at once).
func (c *rateCache) observed(st *model.RateLimitState, refused bool, reserve float64) bool {
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
		if limit > 0 && usage >= limit-reserveOf(limit, 2*reserve) {
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
