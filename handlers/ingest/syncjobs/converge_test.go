package syncjobs_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/app"
	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/syncjobs"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/syncstate"
	"github.com/commitcollect/backend/scripts/stravasim"
)

// The tests of this file interleave webhooks (through the real HTTP
// webhook, queue and worker), backfill and reconciliation on one athlete
// while the simulator's activities change, and check that the workout log
// ends equal to what the simulator holds (deleted activities marked
// deleted). The protection they guard is the ordered conditional write
// (store.UpsertWorkout and, for Strava's 404, store.MarkWorkoutHidden: the
// answer whose fetch started last wins, whether it shows the activity or
// answers 404), which all three paths write through: without its
// fetch-order condition the "stale answer loses" and "loses to a delete"
// orderings fail (a delete event is confirmed by a fetch that starts after
// the stale one).

const convergeAthlete = 301

var convergeSettings = syncjobs.SyncSettings{MaxDays: 60, PageSize: 10, ReconcileDays: 14, ReconcileInterval: time.Hour}

// newConvergeRig links u1 to convergeAthlete with 40 days of history (one
// activity a day, ids from 100), synced in pages of 10 and reconciled over
// the last 14 days.
func newConvergeRig(t *testing.T) (*syncRig, []int64) {
	t.Helper()
	r := newSyncRig(t, convergeSettings)
	r.Harness.Worker.Fetch.Reads.PerWindow = 1 << 30 // the athlete cap is not under test
	r.Link("u1", convergeAthlete, 24*time.Hour)
	if err := r.St.DB.Put(context.Background(), r.St.DB.Tables().Main, &model.Profile{UserID: "u1", AthleteID: convergeAthlete}); err != nil {
		t.Fatal(err)
	}
	return r, r.history(convergeAthlete, 100, 40, 24*time.Hour)
}

// publish sends ev to the webhook like Strava does, without waiting for
// the worker.
func (r *syncRig) publish(ev stravasim.Event) error {
	if d, err := r.Sim.Publish(context.Background(), ev); err != nil {
		return fmt.Errorf("publish %s %d: %+v: %w", ev.AspectType, ev.ObjectID, d, err)
	}
	return nil
}

// gate holds the next answer of endpoint (for activityID, 0: any) until
// the returned release is called; the answer is decided when the request
// arrives.
func (r *syncRig) gate(e stravasim.Endpoint, activityID int64) (release func()) {
	ch := make(chan struct{})
	r.Sim.AddFault(stravasim.Fault{Endpoint: e, ActivityID: activityID, Gate: ch})
	var once sync.Once
	release = func() { once.Do(func() { close(ch) }) }
	r.T.Cleanup(release)
	return release
}

// waitUntil polls cond for up to 20 s.
func (r *syncRig) waitUntil(what string, cond func() bool) {
	r.T.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			r.T.Fatalf("timed out waiting until %s", what)
		}
	}
}

// reconcileNow moves the clock to the next reconciliation slot and
// enqueues its jobs; it returns u1's job key.
func (r *syncRig) reconcileNow() string {
	r.T.Helper()
	r.now = r.now.Add(convergeSettings.ReconcileInterval)
	if _, err := r.sched.ReconcileAll(context.Background()); err != nil {
		r.T.Fatalf("ReconcileAll: %v", err)
	}
	return keys.SyncJobKey(syncstate.SyncModeReconcile, "u1", r.now.Truncate(convergeSettings.ReconcileInterval))
}

// drainWith runs the received sync job of key on w until it settles, at
// most rounds runs; safe to call from any goroutine.
func (r *syncRig) drainWith(w *app.Worker, key string, rounds int) error {
	ctx := context.Background()
	for range rounds {
		rec, err := r.St.Outbox.OutboxItem(ctx, key)
		if err != nil {
			return fmt.Errorf("outbox %s: %w", key, err)
		}
		if rec.Status != ops.OutboxReceived {
			return nil
		}
		j, err := ingest.DecodeJob([]byte(rec.Job))
		if err != nil {
			return err
		}
		if err := w.Run(ctx, j); err != nil {
			return fmt.Errorf("run %s: %w", key, err)
		}
	}
	return fmt.Errorf("job %s not settled after %d runs", key, rounds)
}

// divergence lists where u1's workout log disagrees with what the
// simulator holds now for convergeAthlete: every activity is a live
// workout with the same normalized fields, every id in deleted is a
// workout marked deleted, and no other live workout exists.
func (r *syncRig) divergence(deleted []int64) []string {
	r.T.Helper()
	held := r.Sim.Activities()
	got := map[int64]model.Workout{}
	for _, w := range r.Workouts("u1") {
		got[w.ActivityID] = w
	}
	var out []string
	for id, a := range held {
		if a.AthleteID != convergeAthlete {
			continue
		}
		w, ok := got[id]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("activity %d: no workout", id))
		case w.IsDeleted:
			out = append(out, fmt.Sprintf("activity %d: workout marked deleted, strava holds it", id))
		case w.SportType != a.SportType || w.DistanceMeters != a.Distance || w.TotalElevationGain != a.TotalElevationGain ||
			w.MovingTimeSeconds != a.MovingTime || !w.StartDateUtc.Equal(a.StartDate):
			out = append(out, fmt.Sprintf("activity %d: workout %s %.1f m %d s, strava %s %.1f m %d s",
				id, w.SportType, w.DistanceMeters, w.MovingTimeSeconds, a.SportType, a.Distance, a.MovingTime))
		}
	}
	for id, w := range got {
		_, onStrava := held[id]
		switch {
		case slices.Contains(deleted, id) && !w.IsDeleted:
			out = append(out, fmt.Sprintf("activity %d: deleted on strava, workout live (%.1f m)", id, w.DistanceMeters))
		case !onStrava && !w.IsDeleted:
			out = append(out, fmt.Sprintf("activity %d: live workout strava does not hold", id))
		}
	}
	for _, id := range deleted {
		if _, ok := got[id]; !ok {
			out = append(out, fmt.Sprintf("activity %d: deleted on strava, no tombstone", id))
		}
	}
	slices.Sort(out)
	return out
}

func (r *syncRig) requireConverged(deleted []int64) {
	r.T.Helper()
	if d := r.divergence(deleted); len(d) > 0 {
		r.T.Fatalf("workout log differs from strava in %d places:\n%v", len(d), d)
	}
}

func edit(name string, distance float64) func(*stravasim.Activity) {
	return func(a *stravasim.Activity) { a.Name, a.Distance, a.MovingTime = name, distance, a.MovingTime+60 }
}

// TestWebhooksBackfillAndReconcileConvergeInEveryOrdering places one change
// exactly where it makes an answer in flight stale; each ordering must end
// with the log equal to the simulator.
func TestWebhooksBackfillAndReconcileConvergeInEveryOrdering(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, r *syncRig, ids []int64) (deleted []int64)
	}{{
		// Newest fetch wins: the backfill listed the activity, then the
		// athlete edited it and the webhook wrote the edit; the backfill's
		// write comes last.
		name: "backfill's stale answer loses to a webhook edit",
		run: func(t *testing.T, r *syncRig, ids []int64) []int64 {
			x := ids[3]
			var once sync.Once
			r.counted.beforeUpsert = func(w *model.Workout) {
				if w.ActivityID == x {
					once.Do(func() {
						r.Sim.UpdateActivity(x, edit("Edited", 7777))
						r.Deliver(r.Sim.ActivityEvent("update", x, convergeAthlete, map[string]string{"title": "Edited"}))
					})
				}
			}
			r.drain(r.backfill("u1"), 20)
			if r.counted.stale != 1 {
				t.Errorf("got %d stale sync writes dropped, want 1", r.counted.stale)
			}
			return nil
		},
	}, {
		// The newest fetch wins: the backfill listed the activity, then it
		// was deleted and the delete event confirmed (404, fetched after
		// the list); the backfill's write comes last.
		name: "backfill's stale answer loses to a delete",
		run: func(t *testing.T, r *syncRig, ids []int64) []int64 {
			x := ids[12]
			var once sync.Once
			r.counted.beforeUpsert = func(w *model.Workout) {
				if w.ActivityID == x {
					once.Do(func() {
						r.Sim.DeleteActivity(x)
						r.Deliver(r.Sim.ActivityEvent("delete", x, convergeAthlete, nil))
					})
				}
			}
			r.drain(r.backfill("u1"), 20)
			r.drain(r.reconcileNow(), 10) // absence from the list changes nothing
			return []int64{x}
		},
	}, {
		// Newest fetch wins: a webhook's fetch is answered slowly with the
		// activity as it was; meanwhile a silent edit (distance: no event)
		// is written by the next reconciliation. The webhook's answer lands
		// last.
		name: "webhook's slow fetch loses to a later reconciliation",
		run: func(t *testing.T, r *syncRig, ids []int64) []int64 {
			r.drain(r.backfill("u1"), 20)
			x := ids[1]
			r.Sim.UpdateActivity(x, func(a *stravasim.Activity) { a.Name = "Renamed" })
			release := r.gate(stravasim.EndpointActivity, x)
			fetches := r.Sim.Stats().ActivityRequests
			if err := r.publish(r.Sim.ActivityEvent("update", x, convergeAthlete, map[string]string{"title": "Renamed"})); err != nil {
				t.Fatal(err)
			}
			r.waitUntil("the webhook's fetch reached strava", func() bool { return r.Sim.Stats().ActivityRequests > fetches })
			r.Sim.UpdateActivity(x, edit("Renamed", 8888))
			r.drain(r.reconcileNow(), 10)
			if w := r.Workout("u1", x); w.DistanceMeters != 8888 {
				t.Fatalf("reconciliation: got %.1f m, want the silent edit's 8888", w.DistanceMeters)
			}
			release()
			r.Wait()
			return nil
		},
	}, {
		// The newest fetch wins: a create's fetch is answered slowly (the
		// activity still existed); meanwhile the activity is deleted and its
		// delete event confirmed by a later fetch (404). The create's
		// answer lands last.
		name: "webhook's slow create loses to its delete",
		run: func(t *testing.T, r *syncRig, _ []int64) []int64 {
			r.drain(r.backfill("u1"), 20)
			n := int64(900)
			r.Sim.PutActivity(stravasim.Activity{ID: n, AthleteID: convergeAthlete, Name: "New", SportType: "Run", Distance: 3000,
				MovingTime: 900, ElapsedTime: 950, StartDate: r.now.Add(-2 * time.Hour).Truncate(time.Second)})
			release := r.gate(stravasim.EndpointActivity, n)
			fetches := r.Sim.Stats().ActivityRequests
			if err := r.publish(r.Sim.ActivityEvent("create", n, convergeAthlete, nil)); err != nil {
				t.Fatal(err)
			}
			r.waitUntil("the create's fetch reached strava", func() bool { return r.Sim.Stats().ActivityRequests > fetches })
			r.Sim.DeleteActivity(n)
			if err := r.publish(r.Sim.ActivityEvent("delete", n, convergeAthlete, nil)); err != nil {
				t.Fatal(err)
			}
			r.waitUntil("the delete was written", func() bool {
				w, err := r.St.Workouts.Workout(context.Background(), "u1", n)
				return err == nil && w.IsDeleted
			})
			release()
			r.Wait()
			return []int64{n}
		},
	}, {
		// Newest fetch wins: a reconciliation's list is answered slowly;
		// meanwhile one listed activity is edited (with its event) and
		// another deleted (with its event, confirmed by a 404 fetched after
		// the list). The list lands last.
		name: "reconciliation's slow list loses to webhook edits and deletes",
		run: func(t *testing.T, r *syncRig, ids []int64) []int64 {
			r.drain(r.backfill("u1"), 20)
			x, y := ids[0], ids[2]
			release := r.gate(stravasim.EndpointList, 0)
			lists := r.Sim.Stats().ListRequests
			key := r.reconcileNow()
			done := make(chan error, 1)
			go func() { done <- r.drainWith(r.worker, key, 10) }()
			r.waitUntil("the reconciliation's list reached strava", func() bool { return r.Sim.Stats().ListRequests > lists })
			r.Sim.UpdateActivity(x, edit("Edited", 6666))
			r.Deliver(r.Sim.ActivityEvent("update", x, convergeAthlete, map[string]string{"title": "Edited"}))
			r.Sim.DeleteActivity(y)
			r.Deliver(r.Sim.ActivityEvent("delete", y, convergeAthlete, nil))
			release()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			return []int64{y}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, ids := newConvergeRig(t)
			deleted := tc.run(t, r, ids)
			r.requireConverged(deleted)
		})
	}
}

// TestWebhooksBackfillAndReconcileConvergeConcurrently runs a backfill, a
// reconciliation and a stream of changes with their webhooks (and silent
// edits, which only a reconciliation sees) at once, with slow Strava answers
// at random, for a few seeds. Once the changes stop and a reconciliation
// has run after the last silent edit, the log equals the simulator.
func TestWebhooksBackfillAndReconcileConvergeConcurrently(t *testing.T) {
	t.Parallel()
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			r, ids := newConvergeRig(t)
			rng := rand.New(rand.NewPCG(seed, 15))
			for range 6 {
				r.Sim.AddFault(stravasim.Fault{Endpoint: stravasim.EndpointList, Delay: time.Duration(rng.IntN(150)) * time.Millisecond})
				r.Sim.AddFault(stravasim.Fault{Delay: time.Duration(rng.IntN(150)) * time.Millisecond})
			}
			// Started first so that it can run before the backfill takes
			// the user's sync state over.
			rkey := r.reconcileNow()
			bkey := r.backfill("u1")
			reconciler := r.newSyncWorker(convergeSettings)
			errs := make(chan error, 3)
			var wg sync.WaitGroup
			wg.Go(func() { errs <- r.drainWith(reconciler, rkey, 20) })
			wg.Go(func() { errs <- r.drainWith(r.worker, bkey, 40) })

			// The changes, with the webhooks Strava sends for them. Silent
			// edits stay within the reconciliation window (the newest 12
			// days); the others may touch any activity.
			live := slices.Clone(ids)
			var deleted []int64
			var silent, edited, created int
			next := int64(1000)
			wg.Go(func() {
				for range 30 {
					r.Sim.SetUsage(0, 0, 0, 0) // the budget is not under test
					time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
					var err error
					switch op := rng.IntN(10); {
					case op < 3: // silent edit: distance and time, no event
						x := live[rng.IntN(len(live))]
						if a, ok := r.Sim.Activities()[x]; ok && a.StartDate.After(r.now.AddDate(0, 0, -12)) {
							r.Sim.UpdateActivity(x, edit(a.Name, float64(rng.IntN(20000))))
							silent++
						}
					case op < 6: // edit with a title change: an update event
						// Strava's event carries the new title: two edits of one
						// activity in the same second with the same updates are
						// one event to Strava and to our idempotency key.
						x := live[rng.IntN(len(live))]
						title := fmt.Sprintf("T%d", rng.IntN(1000))
						r.Sim.UpdateActivity(x, edit(title, float64(rng.IntN(20000))))
						err = r.publish(r.Sim.ActivityEvent("update", x, convergeAthlete, map[string]string{"title": title}))
						edited++
					case op < 8 && len(live) > 10: // delete: a delete event
						i := rng.IntN(len(live))
						x := live[i]
						live = slices.Delete(live, i, i+1)
						deleted = append(deleted, x)
						r.Sim.DeleteActivity(x)
						err = r.publish(r.Sim.ActivityEvent("delete", x, convergeAthlete, nil))
					default: // create: a create event
						next++
						r.Sim.PutActivity(stravasim.Activity{ID: next, AthleteID: convergeAthlete, Name: "New", SportType: "Ride",
							Distance: float64(rng.IntN(50000)), MovingTime: int64(600 + rng.IntN(3600)), ElapsedTime: 5000,
							StartDate: r.now.Add(-time.Duration(rng.IntN(10*24*3600)) * time.Second).Truncate(time.Second)})
						live = append(live, next)
						err = r.publish(r.Sim.ActivityEvent("create", next, convergeAthlete, nil))
						created++
					}
					if err != nil {
						errs <- err
						return
					}
				}
			})
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			r.Wait()
			r.Sim.ClearFaults()
			r.Sim.SetUsage(0, 0, 0, 0)
			st := r.state("u1")
			writes, _ := r.counted.writes()
			stale := r.counted.stale
			r.drain(r.reconcileNow(), 10)
			final, _ := r.counted.writes()
			stats := r.Sim.Stats()
			t.Logf("seed %d: %d changes (%d silent edits, %d webhook edits, %d deletes, %d creates); "+
				"before the final reconciliation: state %s, %d sync writes, %d stale sync writes dropped; "+
				"the final reconciliation wrote %d; %d list requests, %d activity requests",
				seed, silent+edited+len(deleted)+created, silent, edited, len(deleted), created,
				st.State, writes, stale, final-writes, stats.ListRequests, stats.ActivityRequests)
			r.requireConverged(deleted)
		})
	}
}
