package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
)

// rotatedSecret: the operator rotates the application's secret at Strava
// and the deployment still has the old one. A forged revocation arrives
// meanwhile (with new activities): nobody may be flagged and nothing
// deleted; the jobs wait. The secret is put right: the work resumes by
// itself, nothing lost, the forged revocation unconfirmed. Then an athlete
// really revokes: the Strava data is gone within the job; they reconnect:
// the same user, and the backfill brings the history back.
func rotatedSecret(ctx context.Context, e *Env, full bool) (Figures, error) {
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	users, err := linkUsers(ctx, e, pick(full, 2, 4), 9100, distanceMilestone(30))
	if err != nil {
		return Figures{}, err
	}
	forged, revoked := users[0], users[1]
	e.DeliverAll(ctx, putRuns(e, users, 3), 4)
	e.WaitIdle(time.Second, 30*time.Second)

	good := e.Sim.ClientSecret()
	e.Sim.RotateClientSecret("rotated-at-strava")
	e.PostOnce(ctx, e.Sim.DeauthorizationEvent(forged.AthleteID))
	late := revoked.AthleteID*1000 + 10
	start, _ := period()
	e.Sim.PutActivity(Activity(late, revoked.AthleteID, "Run", 6000, start.Add(20*time.Hour)))
	e.Send(ctx, "create", late, revoked.AthleteID)
	time.Sleep(3 * time.Second) // the revocation's confirmation meets the refused secret
	for _, u := range users {
		if me, err := e.Me(ctx, u); err != nil || !me.Connected {
			fail("athlete %d: disconnected or flagged while the app's secret was wrong (%+v, %v)", u.AthleteID, me, err)
		}
	}
	if n, _ := e.workoutCount(ctx, forged); n != 3 {
		fail("athlete %d: %d workouts while the forged revocation waited, want 3", forged.AthleteID, n)
	}

	e.Sim.RotateClientSecret(good)
	if !e.waitAudit(ctx, forged, ingest.AuditDeauthUnconfirmed, ingest.AppCredentialsWait+45*time.Second) {
		fail("athlete %d: the forged revocation did not resume once the secret was right", forged.AthleteID)
	}

	e.Sim.RevokeAthlete(revoked.AthleteID)
	e.Deliver(ctx, e.Sim.DeauthorizationEvent(revoked.AthleteID))
	if !e.waitWorkoutCount(ctx, revoked, 0, 30*time.Second) {
		fail("athlete %d: Strava data left after a confirmed revocation", revoked.AthleteID)
	}
	time.Sleep(1100 * time.Millisecond) // grant times have second resolution
	if me, err := e.Login(ctx, revoked); err != nil || me.UserID != revoked.UserID {
		fail("athlete %d: reconnect made user %q (%v), want %s", revoked.AthleteID, me.UserID, err, revoked.UserID)
	}
	if !e.waitWorkoutCount(ctx, revoked, 4, 60*time.Second) {
		fail("athlete %d: the reconnect's backfill did not bring the 4 activities back", revoked.AthleteID)
	}
	f, err := e.Settle(ctx, quiet, deadline)
	f.Lifecycle += len(bad)
	f.Notes = append(f.Notes, limitNotes(bad, 8)...)
	return f, err
}

// workoutCount is how many workouts u has.
func (e *Env) workoutCount(ctx context.Context, u *User) (int, error) {
	ws, _, err := e.workouts(ctx, u.UserID)
	return len(ws), err
}

// waitAudit waits until u's audit trail holds an entry of eventType, or
// limit passes.
func (e *Env) waitAudit(ctx context.Context, u *User, eventType string, limit time.Duration) bool {
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		as, err := e.audits(ctx, u.UserID)
		if err != nil {
			continue
		}
		for _, a := range as {
			if a.EventType == eventType {
				return true
			}
		}
	}
	return false
}
