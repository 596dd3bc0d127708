package deauth

import (
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
)

// TestRuleOnDeauth: which deauthorizations are stale, which wait for a
// confirmation begun moments ago, and which ask Strava. Protections: each
// case names the clause of ruleOnDeauth it fails without.
func TestRuleOnDeauth(t *testing.T) {
	granted := time.Date(2026, 3, 1, 8, 0, 0, 500e6, time.UTC)
	honoured := granted.Add(time.Hour)
	ms := func(t time.Time) int64 { return t.UnixMilli() }
	cases := []struct {
		name      string
		revokedAt time.Time
		honoured  *time.Time
		checkAtMs int64
		now       time.Time
		want      deauthStep
		until     time.Time
	}{
		{name: "before the grant: stale (grant clause)", revokedAt: granted.Add(-time.Second), now: honoured, want: deauthStale},
		{name: "in the grant's second: asked", revokedAt: granted.Truncate(time.Second), now: honoured, want: deauthConfirm},
		{name: "before strava honoured the grant: stale (honoured clause)", revokedAt: honoured.Add(-deauthClockSkew - time.Second),
			honoured: &honoured, checkAtMs: ms(honoured), now: honoured.Add(10 * time.Second), want: deauthStale},
		{name: "within the clock skew of the honoured answer: not stale, waits for the gap", revokedAt: honoured.Add(-time.Second),
			honoured: &honoured, checkAtMs: ms(honoured), now: honoured.Add(10 * time.Second), want: deauthWait, until: honoured.Add(deauthCheckGap)},
		{name: "after a check begun moments ago: waits (gap clause)", revokedAt: honoured.Add(time.Second),
			checkAtMs: ms(honoured), now: honoured.Add(30 * time.Second), want: deauthWait, until: honoured.Add(deauthCheckGap)},
		{name: "after the gap: asked again", revokedAt: honoured.Add(time.Second), honoured: &honoured,
			checkAtMs: ms(honoured), now: honoured.Add(deauthCheckGap), want: deauthConfirm},
		{name: "never checked: asked", revokedAt: honoured, now: honoured, want: deauthConfirm},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conn := &model.StravaConnection{GrantedAtUtc: &granted, HonouredAtUtc: c.honoured, DeauthCheckAtMs: c.checkAtMs}
			step, until := ruleOnDeauth(c.revokedAt, conn, c.now)
			if step != c.want || !until.Equal(c.until) {
				t.Fatalf("got %v until %v, want %v until %v", step, until, c.want, c.until)
			}
		})
	}
}
