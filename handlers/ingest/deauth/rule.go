package deauth

import (
	"time"

	"github.com/commitcollect/backend/model"
)

// An athlete id is public, so anyone can post deauthorizations in a real
// athlete's name. Each is confirmed at Strava before anything is removed
// (confirmRevoked); what a confirmation costs is the application's, never
// the athlete's allowance, and the rule below keeps it to one confirmation
// per athlete per deauthCheckGap however many events name the athlete:
//
//   - an event older than the connection's grant is stale (the athlete
//     revoked, then connected again);
//   - an event older than Strava's last "honoured" answer for this grant
//     (StravaConnection.HonouredAtUtc, less deauthClockSkew) is stale too:
//     Strava refreshed the grant and answered with it after the event, so
//     the event revoked nothing;
//   - while a confirmation began less than deauthCheckGap ago, the event
//     waits for it (a deferral to the gap's end, no Strava call); when it
//     runs again, that confirmation's answer usually makes it stale.
//
// A real deauthorization therefore waits at most deauthCheckGap behind a
// forged one, and is then confirmed: Strava refuses the revoked grant.
const (
	// deauthCheckGap is the least time between two confirmations of one
	// athlete's grant.
	deauthCheckGap = time.Minute
	// deauthClockSkew is how far Strava's event times and our clock may
	// disagree: an event this close before an honoured answer is asked
	// about again rather than dropped.
	deauthClockSkew = 5 * time.Second
)

// deauthStep is what a deauthorization event does to a live connection.
type deauthStep int

const (
	// deauthConfirm: ask Strava whether the grant is revoked.
	deauthConfirm deauthStep = iota
	// deauthStale: the event cannot have revoked this grant; drop it.
	deauthStale
	// deauthWait: a confirmation of this grant began moments ago; try
	// again at the returned time.
	deauthWait
)

// ruleOnDeauth decides, without calling Strava, what a deauthorization at
// revokedAt does to the connection c at now (see the rule above).
func ruleOnDeauth(revokedAt time.Time, c *model.StravaConnection, now time.Time) (deauthStep, time.Time) {
	// event_time has second resolution: an event of the grant's own
	// second may be newer and goes on to Strava's confirmation.
	if revokedAt.Before(c.GrantTime().Truncate(time.Second)) {
		return deauthStale, time.Time{}
	}
	if h := c.HonouredAtUtc; h != nil && revokedAt.Before(h.Add(-deauthClockSkew)) {
		return deauthStale, time.Time{}
	}
	if c.DeauthCheckAtMs > 0 {
		if next := time.UnixMilli(c.DeauthCheckAtMs).Add(deauthCheckGap); now.Before(next) {
			return deauthWait, next.UTC()
		}
	}
	return deauthConfirm, time.Time{}
}
