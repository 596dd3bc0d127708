package fetch

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
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
const (
	cacheMaxEntries = 10000
	athleteTTL      = 15 * time.Minute
	tokenSkew       = 5 * time.Minute
)

// errStaleCache says a cached athlete entry was refused: process again
// from the table.
var errStaleCache = errors.New("cached athlete mapping or token refused")

// TokenSource is a TokenProvider that also says when the token expires and
// whose it is (strava.Refresher); the worker caches its tokens.
//
// Tokens (strava.Refresher, golang.org/x/oauth2 with credentials in the form
// body): a token expiring within 5 minutes is refreshed. One worker takes a
// short lease on the connection (conditional update on tokenVersion),
// refreshes and persists the rotated pair with tokenVersion = v → v+1; the
// others wait and re-read, so a race refreshes once. A worker that still
// loses the conditional write re-reads and uses the winner's token. A refresh
// token Strava refuses flags the connection needsReauth. Tokens are stored
// sealed (model/secrets; see the README's Security section).
type TokenSource interface {
	Token(ctx context.Context, userID string) (strava.Token, error)
}

type athleteEntry struct {
	userID     string
	resolvedAt time.Time
	token      string
	tokenUntil time.Time // use token only before this
}

type athleteCache struct {
	mu sync.Mutex
	m  map[int64]athleteEntry
	// creates: a create event is fetched without a coalescing check (its
	// activity is new) unless this instance saw more than
	// ingest.CreatesBeforeGather creates of the athlete in the current rate
	// window: a bulk upload, or a flood of forged or replayed creates. Then
	// fetched (no request) coalesces repeated ids and ids Strava already
	// answered 404 for, and the rest are gathered for a burst (burst.go).
	creates ingest.Crowd
	fetched map[int64]time.Time // activity id → when its last fetch here started
	// listed: what this instance's walks listed (listed.go).
	listed listedMemory
}

// sawFetch records that this instance fetched the activity (an answer or a
// 404 was written) in a fetch that started at started.
func (c *athleteCache) sawFetch(activityID int64, started time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fetched == nil || len(c.fetched) >= cacheMaxEntries {
		c.fetched = make(map[int64]time.Time)
	}
	if started.After(c.fetched[activityID]) {
		c.fetched[activityID] = started
	}
}

// fetchedAfter says whether this instance fetched the activity in a fetch
// that started after t (within athleteTTL of now).
func (c *athleteCache) fetchedAfter(activityID int64, t, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	started, ok := c.fetched[activityID]
	return ok && started.After(t) && now.Sub(started) <= athleteTTL
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
	c.listed.forget(athleteID)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, athleteID)
}
