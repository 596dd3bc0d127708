// Package warm is what a warm worker keeps between events (one Lambda
// instance, or the local stack's process). Each memory saves a DynamoDB
// request or a Strava read and is never the last word:
//
//   - Athletes: athlete → user and that user's access token. Used only for
//     create and update events; deletes and deauthorizations resolve from
//     the table. A cached mapping is confirmed by what follows it: a token
//     read for the user must belong to the athlete, and Strava must accept
//     the token. Any refusal (no connection, needs re-authorization, another
//     athlete's connection, 401) drops the entry and the event is processed
//     again from the table, so an athlete who deauthorized and reconnected as
//     another user (processed by another instance) is never routed to the old
//     user: Strava revokes the old user's tokens at deauthorization. A token
//     is used only until shortly before it expires (the fetcher's
//     tokenSkew). A deauthorization processed here drops the entry once
//     handled. Beside it, the instance's own fetches, for coalescing.
//   - Listed: the list pages its walks read (listed.go), which save Strava
//     reads: a bulk upload served by several bursts reads its pages once.
//
// Each is bounded by MaxEntries (full: emptied) and a TTL.
package warm

import (
	"sync"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
)

// MaxEntries bounds each of the instance's maps (full: emptied).
const MaxEntries = 10000

// athleteTTL is how long an athlete's entry, and a fetch remembered, are
// kept.
const athleteTTL = 15 * time.Minute

// Entry is what the cache keeps of an athlete: its user, when that was
// resolved from the table, and the user's access token.
type Entry struct {
	UserID     string
	ResolvedAt time.Time
	Token      string
	TokenUntil time.Time // use Token only before this
}

// Athletes is the athlete cache and the instance's memory of its own
// fetches; the zero value is ready and safe for concurrent use.
type Athletes struct {
	mu sync.Mutex
	m  map[int64]Entry
	// Creates: a create event is fetched without a coalescing check (its
	// activity is new) unless this instance saw more than
	// ingest.CreatesBeforeGather creates of the athlete in the current rate
	// window: a bulk upload, or a flood of forged or replayed creates. Then
	// fetched (no request) coalesces repeated ids and ids Strava already
	// answered 404 for, and the rest are gathered for a burst (fetch/burst.go).
	Creates ingest.Crowd
	fetched map[int64]time.Time // activity id → when its last fetch here started
	// Listed: what this instance's walks listed (listed.go).
	Listed Listed
}

// SawFetch records that this instance fetched the activity (an answer or a
// 404 was written) in a fetch that started at started.
func (c *Athletes) SawFetch(activityID int64, started time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fetched == nil || len(c.fetched) >= MaxEntries {
		c.fetched = make(map[int64]time.Time)
	}
	if started.After(c.fetched[activityID]) {
		c.fetched[activityID] = started
	}
}

// FetchedAfter says whether this instance fetched the activity in a fetch
// that started after t (within athleteTTL of now).
func (c *Athletes) FetchedAfter(activityID int64, t, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	started, ok := c.fetched[activityID]
	return ok && started.After(t) && now.Sub(started) <= athleteTTL
}

// Get returns the athlete's entry unless it is older than athleteTTL (its
// token emptied once past TokenUntil).
func (c *Athletes) Get(athleteID int64, now time.Time) (Entry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[athleteID]
	if !ok || now.Sub(e.ResolvedAt) > athleteTTL || now.Before(e.ResolvedAt.Add(-time.Minute)) {
		return Entry{}, false
	}
	if !now.Before(e.TokenUntil) {
		e.Token = ""
	}
	return e, true
}

// Put caches the athlete's entry.
func (c *Athletes) Put(athleteID int64, e Entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= MaxEntries {
		c.m = make(map[int64]Entry)
	}
	c.m[athleteID] = e
}

// Drop forgets the athlete's entry (Listed.Forget forgets what its walks
// listed).
func (c *Athletes) Drop(athleteID int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, athleteID)
}
