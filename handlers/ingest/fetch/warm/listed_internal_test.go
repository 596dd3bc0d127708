package warm

import (
	"testing"
	"time"

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
