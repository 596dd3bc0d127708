package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/commitcollect/backend/scripts/stravasim"
)

// Strava's webhooks are unsigned, so an event is a hint to ask
// Strava, never proof; and every lifecycle path converges while work for the
// athlete is in flight. Through external interfaces only:
//
//  1. a forged delete for an activity Strava still serves (the workout stays);
//  2. an activity made private (Strava answers 404, its delete event is
//     honoured as hidden-or-deleted), then public again (it counts again);
//  3. a forged deauthorization while the athlete's grant is valid (still
//     connected, same user);
//  4. a late deauthorization: the athlete revokes, connects again, and the
//     revoke's event arrives after the reconnect (still connected);
//  5. a confirmed deauthorization (the grant fails at Strava): disconnected,
//     every workout scheduled for deletion; a reconnect within the retention
//     window finds the same user with nothing scheduled any more;
//  6. DELETE /v1/me while a slow fetch for that user is in flight: nothing is
//     left in the user's partition once the fetch lands.
//
// Violations of 3–6 (and of the hidden state in 2) are counted as Lifecycle
// with a note each; 1 and 2 also show as driftStrava.
func lifecycle(ctx context.Context, e *Env, full bool) (Figures, error) {
	rounds := pick(full, 1, 3)
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	start, _ := period()
	for r := range rounds {
		base := int64(8000 + r*10)
		users, err := linkUsers(ctx, e, 4, base, distanceMilestone(30))
		if err != nil {
			return Figures{}, err
		}
		forgedDel, forgedDeauth, late, revoked := users[0], users[1], users[2], users[3]
		// An athlete who granted activity:read only: their private
		// activities answer 404 to us.
		hidden, err := e.LinkUserScoped(ctx, base+5, "read,activity:read")
		if err != nil {
			return Figures{}, err
		}
		if err := e.AddMilestone(ctx, hidden, distanceMilestone(30)); err != nil {
			return Figures{}, err
		}
		evs := putRuns(e, []*User{forgedDel, hidden, revoked}, 3)
		e.DeliverAll(ctx, evs, 4)
		e.WaitIdle(time.Second, 30*time.Second)

		// 1. A forged delete of an activity Strava still serves: one shot,
		// from someone who is not Strava.
		alive := forgedDel.AthleteID*1000 + 1
		e.PostOnce(ctx, e.Sim.ActivityEvent("delete", alive, forgedDel.AthleteID, nil))

		// 2. Made private at Strava (404 to our grant), Strava's delete
		// event; then public again and its update event.
		priv := hidden.AthleteID*1000 + 2
		e.Sim.SetPrivate(priv, true)
		e.Send(ctx, "delete", priv, hidden.AthleteID)
		if !e.waitWorkout(ctx, hidden, priv, func(deleted bool, _ int64) bool { return deleted }, 20*time.Second) {
			fail("activity %d made private: not hidden after its delete event", priv)
		}
		e.Sim.SetPrivate(priv, false)
		e.Send(ctx, "update", priv, hidden.AthleteID)

		// 3. A forged deauthorization while the grant is valid.
		e.PostOnce(ctx, e.Sim.DeauthorizationEvent(forgedDeauth.AthleteID))

		// 4. A late deauthorization: revoked at Strava, connected again a
		// moment later; the revoke's event is delivered after the reconnect.
		e.Sim.RevokeAthlete(late.AthleteID)
		lateEvent := e.Sim.DeauthorizationEvent(late.AthleteID)
		time.Sleep(1100 * time.Millisecond) // event times have second resolution
		if me, err := e.Login(ctx, late); err != nil {
			fail("athlete %d: reconnect before the late revoke: %v", late.AthleteID, err)
		} else if me.UserID != late.UserID {
			fail("athlete %d: reconnect made user %s, not %s", late.AthleteID, me.UserID, late.UserID)
		}
		e.Deliver(ctx, lateEvent)

		// 5. A confirmed deauthorization, then a reconnect: the Strava data
		// is gone within the job; the same user comes back, and the
		// reconnect's backfill brings the history back.
		e.Sim.RevokeAthlete(revoked.AthleteID)
		e.Deliver(ctx, e.Sim.DeauthorizationEvent(revoked.AthleteID))
		if !e.waitWorkoutCount(ctx, revoked, 0, 30*time.Second) {
			fail("athlete %d: confirmed deauthorization left workouts behind", revoked.AthleteID)
		}
		if me, err := e.Me(ctx, revoked); err != nil || me.Connected {
			fail("athlete %d: still connected after a confirmed deauthorization (%v)", revoked.AthleteID, err)
		}
		time.Sleep(1100 * time.Millisecond)
		if me, err := e.Login(ctx, revoked); err != nil {
			fail("athlete %d: reconnect after deauthorization: %v", revoked.AthleteID, err)
		} else if me.UserID != revoked.UserID {
			fail("athlete %d: reconnect made user %s, not %s (the old profile and awards orphaned)", revoked.AthleteID, me.UserID, revoked.UserID)
		}
		if !e.waitWorkoutCount(ctx, revoked, 3, 60*time.Second) {
			fail("athlete %d: the reconnect's backfill did not bring the history back", revoked.AthleteID)
		}

		// 6. DELETE /v1/me while a slow fetch for the user is in flight.
		gone, err := e.LinkUser(ctx, base+6)
		if err != nil {
			return Figures{}, err
		}
		slow := gone.AthleteID*1000 + 1
		e.Sim.PutActivity(Activity(slow, gone.AthleteID, "Run", 7000, start.Add(time.Hour)))
		e.Sim.AddFault(stravasim.Fault{ActivityID: slow, Delay: 2 * time.Second})
		e.Send(ctx, "create", slow, gone.AthleteID)
		if !e.WaitInFlight(1, 10*time.Second) {
			e.h.Logf("%s: the slow fetch of %d never started", e.Name, slow)
		}
		rep, err := e.DeleteAccount(ctx, gone)
		if err != nil || rep.Status != "deleted" {
			fail("athlete %d: DELETE /v1/me: %+v %v", gone.AthleteID, rep, err)
		}
		e.Forget(gone)
		e.WaitIdle(2*time.Second, 30*time.Second)
		time.Sleep(OutboxLease) // a re-dispatched job would land by now
		if left, err := e.UserItems(ctx, gone.UserID); err != nil {
			return Figures{}, err
		} else if len(left) > 0 {
			fail("user %s deleted with a fetch in flight: %d items left (%v)", gone.UserID, len(left), left)
		}

		f, err := e.Settle(ctx, quiet, deadline)
		if err != nil {
			return f, err
		}
		// After settling: the forged and the late deauthorization left the
		// athletes connected; nothing of the deleted user came back.
		for _, u := range []*User{forgedDeauth, late} {
			me, err := e.Me(ctx, u)
			switch {
			case err != nil:
				fail("athlete %d: %v", u.AthleteID, err)
			case !me.Connected:
				fail("athlete %d disconnected by a forged or late deauthorization", u.AthleteID)
			}
		}
		if left, err := e.UserItems(ctx, gone.UserID); err == nil && len(left) > 0 {
			fail("user %s deleted: %d items came back after settling (%v)", gone.UserID, len(left), left)
		}
		if r == rounds-1 {
			f.Lifecycle += len(bad)
			f.Notes = append(f.Notes, limitNotes(bad, 8)...)
			return f, nil
		}
	}
	return Figures{}, fmt.Errorf("lifecycle: no rounds")
}

// waitWorkout waits until u's workout of the activity satisfies ok (given
// isDeleted and expiresAt) or limit passes.
func (e *Env) waitWorkout(ctx context.Context, u *User, activityID int64, ok func(deleted bool, expiresAt int64) bool, limit time.Duration) bool {
	end := time.Now().Add(limit)
	for time.Now().Before(end) {
		ws, _, err := e.workouts(ctx, u.UserID)
		if err == nil {
			for _, w := range ws {
				if w.ActivityID == activityID && ok(w.IsDeleted, w.ExpiresAt) {
					return true
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// waitWorkoutCount waits until u has exactly n workouts (live or marked),
// or limit passes.
func (e *Env) waitWorkoutCount(ctx context.Context, u *User, n int, limit time.Duration) bool {
	end := time.Now().Add(limit)
	for time.Now().Before(end) {
		if ws, _, err := e.workouts(ctx, u.UserID); err == nil && len(ws) == n {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

func limitNotes(ns []string, n int) []string {
	if len(ns) <= n {
		return ns
	}
	return append(ns[:n:n], fmt.Sprintf("… and %d more", len(ns)-n))
}
