package warm

import (
	"fmt"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model/strava"
)

// TestListedMemoryKeepsWhoseWalkListedWhatAndForHowLong: what a walk listed
// is found for its athlete and user only, within listedTTL, and is gone
// once the athlete is forgotten (a deauthorization) or the memory is full.
// Protections: the user in the key (a reconnect as another user would be
// written a page its token never read), the TTL, forget and the bound.
func TestListedMemoryKeepsWhoseWalkListedWhatAndForHowLong(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	page := []strava.Activity{{ID: 1}, {ID: 2}}
	cases := []struct {
		name    string
		act     func(l *Listed)
		athlete int64
		user    string
		id      int64
		at      time.Time
		want    bool
	}{
		{"listed", nil, 9, "u1", 2, t0.Add(time.Minute), true},
		{"another user of the athlete", nil, 9, "u2", 2, t0, false},
		{"another athlete", nil, 8, "u1", 2, t0, false},
		{"not on the page", nil, 9, "u1", 3, t0, false},
		{"older than listedTTL", nil, 9, "u1", 1, t0.Add(listedTTL + time.Second), false},
		{"the athlete forgotten", func(l *Listed) { l.Forget(9) }, 9, "u1", 1, t0, false},
		{"another athlete forgotten", func(l *Listed) { l.Forget(8) }, 9, "u1", 1, t0, true},
		{"the memory full", func(l *Listed) {
			l.Remember(7, "u7", make([]strava.Activity, listedMaxEntries-1), t0)
		}, 9, "u1", 1, t0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var l Listed
			l.Remember(9, "u1", page, t0)
			if c.act != nil {
				c.act(&l)
			}
			if _, started, ok := l.Activity(c.athlete, c.user, c.id, c.at); ok != c.want || (ok && !started.Equal(t0)) {
				t.Fatalf("listed = %v at %v, want %v at %v", ok, started, c.want, t0)
			}
		})
	}
}

// TestSettlesOnlyCreatesReceivedBeforeThePage: which of a burst's events
// the memory of a page may settle. Protections: the kind check (an update
// asks what the activity is now), the check of every event of the
// activity (not the last one only), and the receipt check (an event
// received after the page was read).
func TestSettlesOnlyCreatesReceivedBeforeThePage(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ev := func(aspect string, id int64, received time.Time) ingest.Job {
		return ingest.Job{ReceivedAtUtc: received, Event: ingest.Event{ObjectType: ingest.ObjectActivity, ObjectID: id, AspectType: aspect, OwnerID: 9}}
	}
	before, after := t0.Add(-time.Second), t0.Add(time.Second)
	cases := []struct {
		name  string
		burst []ingest.Job
		want  string
	}{
		{"a create received before the page", []ingest.Job{ev("create", 1, before)}, "[1]"},
		{"a create received after the page", []ingest.Job{ev("create", 1, after)}, "[]"},
		{"a create with no receipt", []ingest.Job{ev("create", 1, time.Time{})}, "[]"},
		{"an update received before the page", []ingest.Job{ev("update", 1, before)}, "[]"},
		{"an update, then the create again", []ingest.Job{ev("update", 1, after), ev("create", 1, before)}, "[]"},
		{"two creates, one received after the page", []ingest.Job{ev("create", 1, before), ev("create", 1, after)}, "[]"},
		{"an activity the page did not list", []ingest.Job{ev("create", 3, before), ev("create", 2, before)}, "[2]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var l Listed
			l.Remember(9, "u1", []strava.Activity{{ID: 1}, {ID: 2}}, t0)
			var got []int64
			for _, r := range l.Settles(c.burst, "u1", t0.Add(time.Minute)) {
				got = append(got, r.Activity.ID)
				if !r.Started.Equal(t0) || r.Job.Event.ObjectID != r.Activity.ID {
					t.Fatalf("remembered %+v, want page start %v and the activity's own event", r, t0)
				}
			}
			if s := fmt.Sprint(got); s != c.want && !(s == "[]" && c.want == "[]") {
				t.Fatalf("settles %s, want %s", s, c.want)
			}
		})
	}
}
