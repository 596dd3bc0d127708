package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/commitcollect/backend/scripts/stravasim"
)

// Scenario is one way things fail. Run drives the pipeline through it and
// returns the figures measured once it settled.
type Scenario struct {
	Name string
	// What the scenario does, for the report.
	What string
	Run  func(ctx context.Context, e *Env, full bool) (Figures, error)
	// Limits are Strava's rate limits in the scenario (zero: Strava's own,
	// 100 reads per window).
	Limits stravasim.Limits
	// Window is the scenario's rate-limit window (zero: Window).
	Window time.Duration
}

// Scenarios are the suite, in the order they run. full picks the sizes of
// `make chaos`; otherwise the reduced sizes of `make test`.
var Scenarios = []Scenario{
	{"kill9-after-accept", "events answered 200 while Strava is slow, kill -9, restart on the same CC_DATA_DIR", killAfterAccept, stravasim.Limits{}, 0},
	{"ctrl-c-backlog", "a backlog while Strava is slow, Ctrl-C (SIGINT), restart", ctrlCBacklog, stravasim.Limits{}, 0},
	// Minting needs many reads in little time, and the budget is not what
	// this scenario is about.
	{"kill9-during-minting", "many users × workouts and milestones (a yearly series and a streak too), kill -9 twice while awards are minted", killDuringMinting, roomyLimits, 0},
	{"deliveries", "duplicate, reordered, delete-first and slow-stale deliveries", deliveries, stravasim.Limits{}, 0},
	{"budget-429", "Strava answers 429 with headers saying the 15-minute read budget is spent", budget429, stravasim.Limits{}, 0},
	{"strava-5xx-timeouts", "Strava answers 500/502/503 and times out, at most twice per activity", stravaErrors, stravasim.Limits{}, 0},
	{"forged-flood", "hundreds of forged events for one linked athlete, then real ones", forgedFlood, stravasim.Limits{}, 0},
	{"unsigned-lifecycle", "forged delete and deauthorization, a private activity, a late revoke, a revoke and reconnect, DELETE /v1/me mid-fetch", lifecycle, stravasim.Limits{}, 0},
	{"rotated-app-secret", "the app's secret rotated at Strava: a forged revoke waits, nobody flagged; secret restored: work resumes; a real revoke deletes, a reconnect restores", rotatedSecret, stravasim.Limits{}, 0},
	{"heavy-import", "an athlete imports old-dated activities deep in a history while ten others upload, at Strava's 100 reads a window", heavyImport, stravasim.Limits{}, 0},
	{"noisy-neighbours", "three athletes forge creates for two minutes while ten others upload one activity and one bulk-uploads 250, at 60 reads a minute", noisyNeighbours, noisyLimits, NoisyWindow},
	{"backlog", "a forged backlog past a sweep's read (50,000 due creates of one athlete) before 200 honest athletes' lost hand-offs", backlog, roomyLimits, BacklogWindow},
	{"noisy-neighbours-edits", "the noisy neighbours with forged updates and deletes of ids never stored in place of creates", noisyEdits, noisyLimits, NoisyWindow},
	// Last: its 75,000 items slow the shared DynamoDB Local for whatever
	// runs after it (the backlog, run after it, missed its deadline).
	{"long-life", "a user of twenty years: a weekly series of 1,040 completed periods (12,480 awards minted) and 50,000 older awards; what a read, an event and an export cost there", longLife, roomyLimits, BacklogWindow},
}

// roomyLimits are ten times Strava's.
var roomyLimits = stravasim.Limits{Short: 2000, Daily: 20000, ReadShort: 1000, ReadDaily: 10000}

// Waits of Settle: quiet is how long nothing may change before the
// pipeline counts as settled (longer than a lease plus a sweep, so work a
// sweeper will pick up again is waited for); deferredQuiet is the same for
// work deferred to the next rate-limit window; the deadline bounds the wait.
const (
	quiet         = OutboxLease + 3*time.Second
	deferredQuiet = Window + 3*time.Second
	deadline      = 120 * time.Second
)

func pick(full bool, reduced, fullSize int) int {
	if full {
		return fullSize
	}
	return reduced
}

// period is the milestones' period: the activities start inside it.
func period() (start, end time.Time) {
	now := time.Now().UTC()
	start = time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC).AddDate(0, 0, -45)
	return start, start.AddDate(0, 0, 75)
}

// linkUsers links n athletes (ids base+1 … base+n), each with the given
// milestones.
func linkUsers(ctx context.Context, e *Env, n int, base int64, ms ...Milestone) ([]*User, error) {
	var out []*User
	for i := range n {
		u, err := e.LinkUser(ctx, base+int64(i)+1)
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			if err := e.AddMilestone(ctx, u, m); err != nil {
				return nil, err
			}
		}
		out = append(out, u)
	}
	return out, nil
}

func distanceMilestone(km float64) Milestone {
	start, end := period()
	return Milestone{ModelID: "saturn-v", Title: fmt.Sprintf("%.0f km", km), Metric: "distance", Target: km * 1000,
		Start: &start, End: &end}
}

func countMilestone(modelID string, workouts int) Milestone {
	start, end := period()
	return Milestone{ModelID: modelID, Title: fmt.Sprintf("%d workouts", workouts), Metric: "count", Target: float64(workouts),
		Start: &start, End: &end}
}

// yearlySeries is a count series repeating every year on the athlete's
// days, from 1 January of the year putRuns runs in: this year's period
// (kept on the series' item) unless that day is in last year.
func yearlySeries(modelID string, workouts int) Milestone {
	start, _ := period()
	return Milestone{ModelID: modelID, Title: fmt.Sprintf("%d workouts a year", workouts), Metric: "count", Target: float64(workouts),
		PeriodStartDate: fmt.Sprintf("%d-01-01", start.Year()), Recurrence: "yearly"}
}

// dayStreak is a streak of days in a row on the athlete's days, from the
// first day of putRuns' runs (UTC days: the runs carry no zone), which
// span 1 + per/24 days.
func dayStreak(modelID string, days int) Milestone {
	start, _ := period()
	return Milestone{ModelID: modelID, Title: fmt.Sprintf("%d days in a row", days), Metric: "streak", StreakUnit: "day",
		Target: float64(days), PeriodStartDate: start.Format(time.DateOnly)}
}

// putRuns creates per runs for each user at Strava and returns their create
// events.
func putRuns(e *Env, users []*User, per int) []stravasim.Event {
	start, _ := period()
	var evs []stravasim.Event
	for j := range per {
		for _, u := range users {
			id := u.AthleteID*1000 + int64(j) + 1
			e.Sim.PutActivity(Activity(id, u.AthleteID, "Run", 5000+float64(j%7)*750, start.Add(time.Duration(j+1)*time.Hour)))
			evs = append(evs, e.Sim.ActivityEvent("create", id, u.AthleteID, nil))
		}
	}
	return evs
}

// every event is answered 200 and the pipeline dies
// before the worker finished; Strava never sends an acknowledged event
// again, so whatever was accepted must survive the crash.
func killAfterAccept(ctx context.Context, e *Env, full bool) (Figures, error) {
	users, err := linkUsers(ctx, e, pick(full, 2, 4), 1000, distanceMilestone(50))
	if err != nil {
		return Figures{}, err
	}
	evs := putRuns(e, users, 10)
	e.Sim.AddFault(stravasim.Fault{Delay: 300 * time.Millisecond, Count: len(evs)})
	e.DeliverAll(ctx, evs, 8)
	e.Kill9()
	e.Sim.ClearFaults()
	if err := e.Start(ctx); err != nil {
		return Figures{}, err
	}
	return e.Settle(ctx, quiet, deadline)
}

// Ctrl-C while a backlog waits on a slow Strava, then a
// restart. Shutdown may leave work for later but must not drop it.
func ctrlCBacklog(ctx context.Context, e *Env, full bool) (Figures, error) {
	users, err := linkUsers(ctx, e, 2, 2000, distanceMilestone(50))
	if err != nil {
		return Figures{}, err
	}
	evs := putRuns(e, users, pick(full, 6, 20))
	e.Sim.AddFault(stravasim.Fault{Delay: 3 * time.Second, Count: len(evs)})
	e.DeliverAll(ctx, evs, 8)
	took, err := e.Interrupt(60 * time.Second)
	e.h.Logf("%s: shutdown took %s (%v)", e.Name, took.Round(100*time.Millisecond), err)
	e.Sim.ClearFaults()
	if err := e.Start(ctx); err != nil {
		return Figures{}, err
	}
	return e.Settle(ctx, quiet, deadline)
}

// kill -9 twice while many users' awards are being
// minted; each restart resumes from the stream checkpoint. The events come
// in three waves, and each of the first two kills lands while its wave is
// being minted (no event is sent while the pipeline is down).
func killDuringMinting(ctx context.Context, e *Env, full bool) (Figures, error) {
	per := pick(full, 12, 30)
	// The streak of two days reaches its target when the runs span two
	// days (half its ten parts on one).
	users, err := linkUsers(ctx, e, pick(full, 4, 20), 3000, countMilestone("endeavour", per), countMilestone("saturn-v", per),
		yearlySeries("saturn-v", per), dayStreak("saturn-v", 2))
	if err != nil {
		return Figures{}, err
	}
	expected := len(users) * (12 + 10 + 10 + 5*min(1+per/24, 2))
	evs := putRuns(e, users, per)
	// A slightly slow Strava spreads each wave's workouts, and so its
	// minting, over seconds.
	e.Sim.AddFault(stravasim.Fault{Delay: 100 * time.Millisecond, Count: len(evs)})
	wave := (len(evs) + 2) / 3
	for i := 0; i < len(evs); i += wave {
		before, err := e.Awards(ctx)
		if err != nil {
			return Figures{}, err
		}
		e.DeliverAll(ctx, evs[i:min(i+wave, len(evs))], 8)
		if i+wave >= len(evs) {
			break // the last wave is minted undisturbed
		}
		n, err := waitAwards(ctx, e, before+expected/3/4, 30*time.Second)
		if err != nil {
			return Figures{}, err
		}
		e.h.Logf("%s: kill at %d awards (%d before the wave, %d expected in all)", e.Name, n, before, expected)
		e.Kill9()
		if err := e.Start(ctx); err != nil {
			return Figures{}, err
		}
	}
	f, err := e.Settle(ctx, quiet, deadline)
	if n, aerr := e.Awards(ctx); aerr == nil { // each milestone and the series' period earn all their parts
		e.h.Logf("%s: %d awards of %d expected", e.Name, n, expected)
	}
	return f, err
}

// waitAwards returns the moment it sees a user's award count grow while
// the total reaches want (a mint transaction just committed: what follows
// it is under way), when no award appeared for 3 s (minting stalled: kill
// anyway), or after limit. It reads one user at a time, back to back, so
// it notices a mint within a query's time.
func waitAwards(ctx context.Context, e *Env, want int, limit time.Duration) (int, error) {
	end := time.Now().Add(limit)
	seen := map[string]int{}
	total, grew := 0, time.Now()
	for i := 0; ; i++ {
		u := e.Users[i%len(e.Users)]
		n, err := e.AwardsOf(ctx, u)
		if err != nil {
			return total, err
		}
		if n > seen[u.UserID] {
			total += n - seen[u.UserID]
			seen[u.UserID], grew = n, time.Now()
			if total >= want && i >= len(e.Users) {
				return total, nil
			}
		}
		if time.Since(grew) > 3*time.Second || time.Now().After(end) {
			return total, nil
		}
	}
}

// the same event three times, an
// update before its create, a delete before its create, and a create whose
// fetch is answered slowly (the old state) after a newer update was
// fetched and stored.
func deliveries(ctx context.Context, e *Env, full bool) (Figures, error) {
	users, err := linkUsers(ctx, e, 1, 4000, distanceMilestone(100))
	if err != nil {
		return Figures{}, err
	}
	u := users[0]
	start, _ := period()
	at := func(i int) time.Time { return start.Add(time.Duration(i) * 3 * time.Hour) }
	for k := range pick(full, 1, 3) {
		base := u.AthleteID*1000 + int64(k)*10
		// Slow-stale first, on an idle pipeline, so the only request in
		// flight is its fetch.
		e.WaitIdle(time.Second, 30*time.Second)
		stale := base + 1
		e.Sim.PutActivity(Activity(stale, u.AthleteID, "Run", 5000, at(10*k+1)))
		e.Sim.AddFault(stravasim.Fault{ActivityID: stale, Delay: 2500 * time.Millisecond})
		e.Send(ctx, "create", stale, u.AthleteID)
		if !e.WaitInFlight(1, 10*time.Second) {
			e.h.Logf("%s: the slow fetch of %d never started", e.Name, stale)
		}
		e.Sim.UpdateActivity(stale, func(a *stravasim.Activity) { a.SportType, a.Distance = "Ride", 40000 })
		e.Send(ctx, "update", stale, u.AthleteID)

		// The same event three times (Strava's retries, a replay).
		dup := base + 2
		e.Sim.PutActivity(Activity(dup, u.AthleteID, "Run", 7000, at(10*k+2)))
		ev := e.Send(ctx, "create", dup, u.AthleteID)
		e.Deliver(ctx, ev)
		e.Deliver(ctx, ev)

		// Reordered: the update arrives before the create.
		re := base + 3
		e.Sim.PutActivity(Activity(re, u.AthleteID, "Run", 8000, at(10*k+3)))
		e.Sim.UpdateActivity(re, func(a *stravasim.Activity) { a.Distance = 9000 })
		e.Send(ctx, "update", re, u.AthleteID)
		e.Send(ctx, "create", re, u.AthleteID)

		// Delete first: the activity is gone at Strava, its delete
		// overtakes its create.
		del := base + 4
		e.Sim.PutActivity(Activity(del, u.AthleteID, "Run", 6000, at(10*k+4)))
		e.Sim.DeleteActivity(del)
		e.Send(ctx, "delete", del, u.AthleteID)
		e.Send(ctx, "create", del, u.AthleteID)
	}
	return e.Settle(ctx, quiet, deadline)
}

// Strava says the 15-minute read budget is spent. Jobs
// must wait for the window to reset, not be parked.
func budget429(ctx context.Context, e *Env, full bool) (Figures, error) {
	users, err := linkUsers(ctx, e, 1, 5000, distanceMilestone(50))
	if err != nil {
		return Figures{}, err
	}
	evs := putRuns(e, users, pick(full, 8, 20))
	e.Sim.SpendReadWindow(0) // until the window ends, for Strava and for us
	e.DeliverAll(ctx, evs, 4)
	return e.Settle(ctx, deferredQuiet, deadline)
}

// Strava's 5xx answers and timeouts, at most two per activity: within the
// retry budget, so every activity must end up written.
func stravaErrors(ctx context.Context, e *Env, full bool) (Figures, error) {
	users, err := linkUsers(ctx, e, 1, 6000, distanceMilestone(50))
	if err != nil {
		return Figures{}, err
	}
	evs := putRuns(e, users, pick(full, 8, 16))
	timeout := StravaTimeout + 2*time.Second
	for i, ev := range evs {
		id := ev.ObjectID
		switch i % 4 {
		case 0:
			e.Sim.AddFault(stravasim.Fault{ActivityID: id, Status: 500, Count: 2})
		case 1:
			e.Sim.AddFault(stravasim.Fault{ActivityID: id, Status: 503})
			e.Sim.AddFault(stravasim.Fault{ActivityID: id, Status: 502})
		case 2:
			e.Sim.AddFault(stravasim.Fault{ActivityID: id, Delay: timeout})
		case 3:
			e.Sim.AddFault(stravasim.Fault{ActivityID: id, Status: 502})
			e.Sim.AddFault(stravasim.Fault{ActivityID: id, Delay: timeout})
		}
	}
	e.DeliverAll(ctx, evs, 4)
	return e.Settle(ctx, quiet, deadline)
}

// one source forges hundreds of events for a linked
// athlete — activities that do not exist, and a few ids repeated with
// fresh event times to get past deduplication — then Strava sends real
// ones. Every accepted event must be handled, the real ones included.
func forgedFlood(ctx context.Context, e *Env, full bool) (Figures, error) {
	users, err := linkUsers(ctx, e, 1, 7000, distanceMilestone(50))
	if err != nil {
		return Figures{}, err
	}
	u := users[0]
	n := pick(full, 120, 300)
	now := time.Now().Unix()
	forged := make([]stravasim.Event, n)
	for i := range n {
		id := u.AthleteID*1000 + 500 + int64(i) // never existed
		if i%2 == 1 {
			id = u.AthleteID*1000 + 900 + int64(i%4) // four ids, again and again
		}
		forged[i] = stravasim.Event{ObjectType: "activity", ObjectID: id, AspectType: "create", Updates: map[string]string{},
			OwnerID: u.AthleteID, SubscriptionID: SubscriptionID, EventTime: now + int64(i)}
	}
	sem := make(chan struct{}, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, ev := range forged {
			sem <- struct{}{}
			go func() { defer func() { <-sem }(); e.PostOnce(ctx, ev) }()
		}
		for range cap(sem) {
			sem <- struct{}{}
		}
	}()
	<-done
	real := putRuns(e, users, 3)
	e.DeliverAll(ctx, real, 1)
	return e.Settle(ctx, deferredQuiet, deadline)
}
