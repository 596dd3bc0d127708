package warm

import (
	"sync"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model/strava"
)

// What a warm worker remembers of its walks' list pages (fetch/burst.go):
//
// A bulk upload whose webhooks arrive over more than one gather tick is
// served by more than one burst, and each would walk the same list pages
// again. So every activity a walk lists is remembered for listedTTL, with
// the fetch start of the page that listed it, and a later burst of the
// same athlete and user writes a create it finds there as that walk would
// have written it (the ordered write, by that page's fetch start) without
// reading a page (Settles). Only creates received before that page was
// read, and only when no other event of the burst names the activity: an
// update or a delete asks what the activity is now, which a page read
// before it cannot say, and no event received after a page was read is
// settled by the memory of it (an edit at Strava may lie between). A remembered
// write is never the last word: a later fetch or a delete's tombstone is
// ordered after it and wins. A deauthorization processed here forgets the
// athlete (Athletes.Drop). Bounded by listedMaxEntries (full: emptied).
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

// Listed is the remembered activities; the zero value is ready and
// safe for concurrent use.
type Listed struct {
	mu sync.Mutex
	n  int
	m  map[listedKey]map[int64]listedActivity
}

// Remember records the activities of a page whose fetch started at started.
func (l *Listed) Remember(athleteID int64, userID string, acts []strava.Activity, started time.Time) {
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

// Activity returns the activity a page listed for the athlete and user within
// listedTTL of now, and that page's fetch start.
func (l *Listed) Activity(athleteID int64, userID string, activityID int64, now time.Time) (strava.Activity, time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.m[listedKey{athleteID, userID}][activityID]
	if !ok || now.Sub(e.started) > listedTTL || now.Before(e.started.Add(-time.Minute)) {
		return strava.Activity{}, time.Time{}, false
	}
	return e.a, e.started, true
}

// Forget drops what the athlete's walks listed, for every user.
func (l *Listed) Forget(athleteID int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, page := range l.m {
		if k.athleteID == athleteID {
			l.n -= len(page)
			delete(l.m, k)
		}
	}
}

// Remembered is an activity a page listed, to be written as that page's
// walk would have (by Started, its fetch start).
type Remembered struct {
	Activity strava.Activity
	Started  time.Time
	// Job is the burst's event the write answers.
	Job ingest.Job
}

// Settles returns the activities of burst (one athlete's gathered events)
// that a page listed lately for the athlete and userID, and that may be
// written from it at now: those whose every event in the burst is a
// create received before the page was read.
func (l *Listed) Settles(burst []ingest.Job, userID string, now time.Time) []Remembered {
	events := map[int64][]ingest.Job{}
	var ids []int64
	for _, sub := range burst {
		id := sub.Event.ObjectID
		if events[id] == nil {
			ids = append(ids, id)
		}
		events[id] = append(events[id], sub)
	}
	var out []Remembered
	for _, id := range ids {
		subs := events[id]
		a, started, ok := l.Activity(subs[0].Event.OwnerID, userID, id, now)
		for _, sub := range subs {
			ok = ok && sub.Event.Kind() == ingest.KindActivityCreate && !sub.ReceivedAtUtc.IsZero() && sub.ReceivedAtUtc.Before(started)
		}
		if ok {
			out = append(out, Remembered{Activity: a, Started: started, Job: subs[0]})
		}
	}
	return out
}
