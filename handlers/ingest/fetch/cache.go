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
//
// Beside them, the list pages its walks read (listedMemory, below) save
// Strava reads instead: a bulk upload served by several bursts reads its
// pages once.
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
	// listed: what this instance's walks listed (listedMemory, below).
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

// What a warm worker remembers of its walks' list pages (burst.go):
//
// A bulk upload whose webhooks arrive over more than one gather tick is
// served by more than one burst, and each would walk the same list pages
// again. So every activity a walk lists is remembered for listedTTL, with
// the fetch start of the page that listed it, and a later burst of the
// same athlete and user writes a create it finds there as that walk would
// have written it (the ordered write, by that page's fetch start) without
// reading a page. Only creates: an update or a delete asks what the
// activity is now, which a page read before it cannot say. A remembered
// write is never the last word: a later fetch or a delete's tombstone is
// ordered after it and wins. A deauthorization processed here forgets the
// athlete (athleteCache.drop). Bounded by listedMaxEntries (full: emptied).
const (
	listedTTL        = 2 * time.Minute
	listedMaxEntries = 5000
)

// listedKey is whose walk listed an activity: the athlete, and the user
// whose token read it (a reconnect as another user does not see them).
type listedKey struct {
	athleteID int64
	userID    string
}

// listedActivity is an activity as a page listed it, and that page's fetch
// start.
type listedActivity struct {
	a       strava.Activity
	started time.Time
}

// listedMemory is the remembered activities; the zero value is ready and
// safe for concurrent use.
type listedMemory struct {
	mu sync.Mutex
	n  int
	m  map[listedKey]map[int64]listedActivity
}

// remember records the activities of a page whose fetch started at started.
func (l *listedMemory) remember(athleteID int64, userID string, acts []strava.Activity, started time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil || l.n+len(acts) > listedMaxEntries {
		l.m, l.n = map[listedKey]map[int64]listedActivity{}, 0
	}
	k := listedKey{athleteID, userID}
	page := l.m[k]
	if page == nil {
		page = map[int64]listedActivity{}
		l.m[k] = page
	}
	for _, a := range acts {
		if _, ok := page[a.ID]; !ok {
			l.n++
		}
		if started.After(page[a.ID].started) {
			page[a.ID] = listedActivity{a: a, started: started}
		}
	}
}

// listed returns the activity a page listed for the athlete and user within
// listedTTL of now, and that page's fetch start.
func (l *listedMemory) listed(athleteID int64, userID string, activityID int64, now time.Time) (strava.Activity, time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.m[listedKey{athleteID, userID}][activityID]
	if !ok || now.Sub(e.started) > listedTTL || now.Before(e.started.Add(-time.Minute)) {
		return strava.Activity{}, time.Time{}, false
	}
	return e.a, e.started, true
}

// forget drops what the athlete's walks listed, for every user.
func (l *listedMemory) forget(athleteID int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, page := range l.m {
		if k.athleteID == athleteID {
			l.n -= len(page)
			delete(l.m, k)
		}
	}
}
