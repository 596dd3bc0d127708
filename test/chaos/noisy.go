package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/commitcollect/backend/handlers/ingest/syncjobs/scheduler"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/retry"
	"github.com/commitcollect/backend/scripts/stravasim"
)

// NoisyWindow is the noisy-neighbours scenario's rate-limit window: Strava's
// stand-in enforces noisyLimits' 60 reads per minute.
const NoisyWindow = time.Minute

var noisyLimits = stravasim.Limits{Short: 600, Daily: 60000, ReadShort: 60, ReadDaily: 30000}

// noisyPlan is the scenario's shape and targets; the full one is the
// scenario Strava's budget must survive, the reduced one its shorter run in
// `make test` (a shorter flood, the same bulk upload and targets).
type noisyPlan struct {
	forgers, perForger, honest, bulk int
	flood, honestAt, bulkAt          time.Duration
	// Targets: each honest activity counted within honestWithin of its
	// webhook, the bulk upload within bulkWithin for at most bulkReads,
	// nothing pending settleWithin after the flood, at most forgedReads
	// per forged create.
	honestWithin, bulkWithin, settleWithin time.Duration
	bulkReads                              int64
	forgedReads                            float64
	// aspects are the forged events' aspects, in turn (creates, or
	// updates and deletes).
	aspects []string
}

func planFor(full bool) noisyPlan {
	p := noisyPlan{forgers: 3, perForger: 600, honest: 10, bulk: 250, flood: 2 * time.Minute, honestAt: 30 * time.Second,
		bulkAt: 45 * time.Second, honestWithin: 150 * time.Second, bulkWithin: 4 * time.Minute, settleWithin: 5 * time.Minute,
		bulkReads: 10, forgedReads: 0.2, aspects: []string{"create"}}
	if !full {
		p.perForger, p.flood, p.honestAt, p.bulkAt = 100, 30*time.Second, 10*time.Second, 15*time.Second
	}
	return p
}

// noisyOutcome is what the scenario measured.
type noisyOutcome struct {
	honestMax, bulkTook, settledAfter time.Duration
	honestLate                        int
	bulkReads, forgedReads            int64
	forged, permanent                 int
	// rechecks are the unseen rechecks the flood booked (pending for
	// hours by design: syncjobs.RecheckUnseen), left out of the outbox
	// that must empty.
	rechecks int
}

// noisyNeighbours: three linked athletes post creates for ids that do not
// exist, evenly over the flood; ten honest athletes upload one activity each
// into it, and one more bulk-uploads a few hundred (a webhook each). Every
// honest activity must be counted in time, the bulk upload for a few list
// pages, the forged creates for a fraction of a read each, settled within
// minutes of the flood and leaving nothing stored for good.
func noisyNeighbours(ctx context.Context, e *Env, full bool) (Figures, error) {
	return noisy(ctx, e, planFor(full))
}

// noisyEdits is noisyNeighbours with a flood of forged updates and deletes
// (of ids never stored) in place of creates.
func noisyEdits(ctx context.Context, e *Env, full bool) (Figures, error) {
	p := planFor(full)
	p.aspects = []string{"update", "delete"}
	return noisy(ctx, e, p)
}

func noisy(ctx context.Context, e *Env, p noisyPlan) (Figures, error) {
	forgers, err := linkUsers(ctx, e, p.forgers, 9000)
	if err != nil {
		return Figures{}, err
	}
	honest, err := linkUsers(ctx, e, p.honest+1, 9100, countMilestone("saturn-v", 1000))
	if err != nil {
		return Figures{}, err
	}
	bulk, honest := honest[p.honest], honest[:p.honest]
	start, _ := period()
	for _, f := range forgers { // a short real history: one list page
		for j := range 5 {
			e.Sim.PutActivity(Activity(f.AthleteID*1000+int64(j), f.AthleteID, "Run", 5000, start.Add(time.Duration(j+1)*time.Hour)))
		}
	}
	began := time.Now()
	floodDone := make(chan time.Time, 1)
	go func() { e.forge(ctx, forgers, p); floodDone <- time.Now() }()

	var out noisyOutcome
	sent := map[*User]time.Time{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // the honest uploads
		defer wg.Done()
		sleepUntil(ctx, began.Add(p.honestAt))
		for _, u := range honest {
			id := u.AthleteID*1000 + 1
			e.Sim.PutActivity(Activity(id, u.AthleteID, "Run", 8000, time.Now().UTC().Add(-time.Hour)))
			mu.Lock()
			sent[u] = time.Now()
			mu.Unlock()
			go e.Deliver(ctx, e.Sim.ActivityEvent("create", id, u.AthleteID, nil))
		}
	}()
	go func() { // the bulk upload
		defer wg.Done()
		sleepUntil(ctx, began.Add(p.bulkAt))
		var evs []stravasim.Event
		for i := range p.bulk {
			id := bulk.AthleteID*1000 + int64(i) + 1
			e.Sim.PutActivity(Activity(id, bulk.AthleteID, "Ride", 20000, time.Now().UTC().Add(-time.Duration(i+1)*time.Hour)))
			evs = append(evs, e.Sim.ActivityEvent("create", id, bulk.AthleteID, nil))
		}
		mu.Lock()
		sent[bulk] = time.Now()
		mu.Unlock()
		e.DeliverAll(ctx, evs, 8)
	}()
	wg.Wait()
	out.honestMax, out.honestLate, out.bulkTook = e.waitCounted(ctx, honest, bulk, sent, p)
	users := append(append(append([]*User{}, forgers...), honest...), bulk)
	out.settledAfter, out.rechecks = e.waitEmptyOutbox(ctx, <-floodDone, p.settleWithin, began, users)
	out.bulkReads = e.Sim.ReadsOf(bulk.AthleteID)
	for _, f := range forgers {
		out.forgedReads += e.Sim.ReadsOf(f.AthleteID)
		n, err := e.permanentWorkouts(ctx, f)
		if err != nil {
			return Figures{}, err
		}
		out.permanent += n
	}
	out.forged = p.forgers * p.perForger
	fig, err := e.Settle(ctx, OutboxLease+3*time.Second, deadline)
	fig.Missed, fig.Notes = out.judge(p, fig.Notes)
	return fig, err
}

// forge posts each forger's events evenly over the flood (p.aspects in
// turn), one attempt each (a forger does not retry), ids that never existed.
func (e *Env) forge(ctx context.Context, forgers []*User, p noisyPlan) {
	every := p.flood / time.Duration(p.perForger)
	t := time.NewTicker(every)
	defer t.Stop()
	sem := make(chan struct{}, 16)
	now := time.Now().Unix()
	for i := range p.perForger {
		for _, f := range forgers {
			ev := stravasim.Event{ObjectType: "activity", ObjectID: f.AthleteID*1_000_000 + 500_000 + int64(i), AspectType: p.aspects[i%len(p.aspects)],
				Updates: map[string]string{}, OwnerID: f.AthleteID, SubscriptionID: SubscriptionID, EventTime: now + int64(i)}
			sem <- struct{}{}
			go func() { defer func() { <-sem }(); e.PostOnce(ctx, ev) }()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	for range cap(sem) {
		sem <- struct{}{}
	}
}

// waitCounted polls the honest athletes' milestones until each counts its
// upload (the bulk athlete all of them) or the targets' time is long past;
// it returns the slowest honest latency, how many were late, and how long
// the bulk upload took.
func (e *Env) waitCounted(ctx context.Context, honest []*User, bulk *User, sent map[*User]time.Time, p noisyPlan) (time.Duration, int, time.Duration) {
	took := map[*User]time.Duration{}
	limit := time.Now().Add(max(p.honestWithin, p.bulkWithin) + time.Minute)
	for len(took) < len(honest)+1 && time.Now().Before(limit) && ctx.Err() == nil {
		for _, u := range append(honest, bulk) {
			if _, ok := took[u]; ok {
				continue
			}
			want := 1
			if u == bulk {
				want = p.bulk
			}
			if n, _ := e.counted(ctx, u); n >= want {
				took[u] = time.Since(sent[u])
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	var worst time.Duration
	late := 0
	for _, u := range honest {
		d, ok := took[u]
		if !ok {
			d = time.Since(sent[u])
		}
		worst = max(worst, d)
		if !ok || d > p.honestWithin {
			late++
		}
	}
	bulkTook, ok := took[bulk]
	if !ok {
		bulkTook = -1
	}
	return worst, late, bulkTook
}

// counted is how many workouts u's first milestone counts.
func (e *Env) counted(ctx context.Context, u *User) (int, error) {
	um, err := e.Store.Milestones.UserMilestones(ctx, u.UserID)
	if err != nil || len(um.Milestones) == 0 {
		return 0, err
	}
	return um.Milestones[0].WorkoutsCounted, nil
}

// waitEmptyOutbox waits until nothing is pending in the outbox, at most
// limit after from, and returns how long after from that was (-1: never).
func (e *Env) waitEmptyOutbox(ctx context.Context, from time.Time, limit time.Duration, began time.Time, users []*User) (time.Duration, int) {
	for time.Since(from) <= limit && ctx.Err() == nil {
		rechecks := e.bookedRechecks(ctx, began, users)
		if b, err := e.Store.Pending.PendingOutbox(ctx, time.Now()); err == nil && b.Pending == rechecks {
			return time.Since(from), rechecks
		}
		time.Sleep(500 * time.Millisecond)
	}
	return -1, e.bookedRechecks(ctx, began, users)
}

// bookedRechecks counts the users' unseen rechecks waiting in the outbox,
// booked in the slots since began (syncjobs.RecheckUnseen).
func (e *Env) bookedRechecks(ctx context.Context, began time.Time, users []*User) int {
	n := 0
	for slot := began.UTC().Truncate(scheduler.UnseenSlot); !slot.After(time.Now()); slot = slot.Add(scheduler.UnseenSlot) {
		for _, u := range users {
			rec, err := e.Store.Outbox.OutboxItem(ctx, keys.SyncJobKey(scheduler.UnseenKeyMode, u.UserID, slot))
			if err == nil && rec.Status == ops.OutboxReceived {
				n++
			}
		}
	}
	return n
}

// permanentWorkouts counts u's stored workouts of activities Strava never
// had that would never expire.
func (e *Env) permanentWorkouts(ctx context.Context, u *User) (int, error) {
	ws, _, err := e.workouts(ctx, u.UserID)
	if err != nil {
		return 0, err
	}
	at := e.Sim.Activities()
	n := 0
	for _, w := range ws {
		if _, ok := at[w.ActivityID]; !ok && w.ExpiresAt == 0 {
			n++
		}
	}
	return n, nil
}

// judge prints the scenario's figures and returns the targets missed, each
// with a note.
func (o noisyOutcome) judge(p noisyPlan, notes []string) (int, []string) {
	perForged := float64(o.forgedReads) / float64(max(o.forged, 1))
	fmt.Printf("noisy: flood=%s honest_max=%s late=%d bulk=%d counted_in=%s bulk_reads=%d forged=%d forged_reads=%d reads_per_forged=%.3f pending_zero_after_flood=%s rechecks_booked=%d permanent_forged=%d\n",
		strings.Join(p.aspects, "+"), o.honestMax.Round(100*time.Millisecond), o.honestLate, p.bulk, o.bulkTook.Round(100*time.Millisecond), o.bulkReads,
		o.forged, o.forgedReads, perForged, o.settledAfter.Round(100*time.Millisecond), o.rechecks, o.permanent)
	missed := 0
	miss := func(ok bool, format string, args ...any) {
		if !ok {
			missed++
			notes = append(notes, "missed: "+fmt.Sprintf(format, args...))
		}
	}
	miss(o.honestLate == 0, "%d honest activities not counted within %s (slowest %s)", o.honestLate, p.honestWithin, o.honestMax)
	miss(o.bulkTook >= 0 && o.bulkTook <= p.bulkWithin, "bulk upload counted in %s, target %s", o.bulkTook, p.bulkWithin)
	miss(o.bulkReads <= p.bulkReads, "bulk upload took %d reads, target %d", o.bulkReads, p.bulkReads)
	miss(perForged <= p.forgedReads, "%.3f reads per forged event, target %.1f", perForged, p.forgedReads)
	miss(o.settledAfter >= 0, "outbox still pending %s after the flood (besides %d booked rechecks)", p.settleWithin, o.rechecks)
	// One recheck per athlete and slot, however many events: the flood may
	// straddle a slot's end.
	miss(o.rechecks <= 2*p.forgers, "%d unseen rechecks booked for %d forgers, want at most two each", o.rechecks, p.forgers)
	miss(o.permanent == 0, "%d permanent items for forged creates", o.permanent)
	return missed, notes
}

func sleepUntil(ctx context.Context, t time.Time) { _ = retry.Sleep(ctx, time.Until(t)) }
