package plankit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/commitcollect/backend/handlers/ingest/syncjobs"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/catalog"
	"github.com/commitcollect/backend/model/retry"
	"github.com/commitcollect/backend/model/store/metering"
	"github.com/commitcollect/backend/scripts/ddblocal"
	"github.com/commitcollect/backend/scripts/runkit"
	"github.com/commitcollect/backend/scripts/stravasim"
)

// MeasureOptions shape a measurement.
type MeasureOptions struct {
	// Endpoint is a running DynamoDB(-compatible) endpoint; empty starts
	// DynamoDB Local (java, `make dynamodb-local`) for the measurement.
	Endpoint string
	// Warm events per class averaged (after one warm-up event per athlete).
	Events int
	// BackfillActivities is the history the backfill athlete has at Strava
	// (at most one page: capped at the page size).
	BackfillActivities int
	// HistoryDays and ReconcileDays configure the stack (CC_SYNC_MAX_DAYS,
	// CC_RECONCILE_DAYS).
	HistoryDays, ReconcileDays int
	// Log receives the stack's errors (nil: discarded).
	Log io.Writer
	// Timeout bounds one unit of work reaching quiet (default 60 s).
	Timeout time.Duration
}

// Measure runs the pipeline's real code (scripts/runkit: the api's
// handler, the worker, the stream reader feeding the projector, the sync
// scheduler) on DynamoDB Local against the Strava simulator, and returns
// what each unit of work costs as the product's capacity meters
// (Stack.Capacity, metering.StartMeter per request, job and batch) record it:
// webhook creates (with and without an active milestone), updates and
// deletes, one deauthorization, one backfill page and one reconcile of an
// unchanged athlete. Each unit is sent alone and measured from the meters'
// growth until the stack is quiet again (the bench's method: test/bench).
//
// The per-event DynamoDB units come from a measurement run at every start (Measure): the local stack
// (scripts/runkit — the api's handler, the worker, the stream reader feeding the projector, the sync
// scheduler: the Lambdas' code) on DynamoDB Local (started like the tests do, test/dynamolocal, or
// -endpoint) against the Strava simulator (scripts/stravasim), read from the product's capacity meters
// (model/store/metering/meter.go: Stack.Capacity and metering.StartMeter per request, job and batch). Each unit
// of work is sent alone and costed from the meters' growth until the stack is quiet again, the method of
// the bench (test/bench; metering.Units.Sub subtracts the snapshots): a warm webhook create for an athlete with
// an active milestone and for one without, a pushed update, a delete (api accept + worker + projector), a
// new connect's backfill page of the default history (enqueue + worker + projection of the imported
// workouts), a reconcile of an unchanged athlete (ReconcileAll's enqueue — the operator's full round, without
// the scheduled step's milestone/sync-state/LSI1 checks of a few RCU — + the worker's page), and a
// deauthorization of the backfilled athlete. The figures are DynamoDB Local's ConsumedCapacity accounting
// (the meter's package doc lists where it differs from AWS: transactions are floored to AWS's 2 units per
// item; a Query that finds nothing reports 0 where AWS charges 0.5 RCU). They measure the code as it is:
// re-run the tool after the reconciliation and hot-key rework, and the plan follows.
func Measure(ctx context.Context, o MeasureOptions) (Measured, error) {
	if o.Events <= 0 {
		o.Events = 3
	}
	if o.Timeout <= 0 {
		o.Timeout = time.Minute
	}
	if o.BackfillActivities <= 0 {
		o.BackfillActivities = 1
	}
	o.BackfillActivities = min(o.BackfillActivities, syncjobs.DefaultSyncPageSize)
	logW := o.Log
	if logW == nil {
		logW = io.Discard
	}
	env := map[string]string{
		"CC_HTTP_ADDR": "127.0.0.1:0", "CC_STRAVA_SIM_ADDR": "127.0.0.1:0", "CC_TABLE_PREFIX": ddblocal.UniquePrefix(),
		"DYNAMODB_ENDPOINT": o.Endpoint, "CC_ATHLETE_READS_PER_WINDOW": "0",
		"CC_SYNC_MAX_DAYS": strconv.Itoa(max(o.HistoryDays, 1)), "CC_RECONCILE_DAYS": strconv.Itoa(max(o.ReconcileDays, 1)),
	}
	st, err := runkit.Start(ctx, runkit.Options{
		Getenv: func(k string) string { return env[k] },
		Log:    slog.New(slog.NewJSONHandler(logW, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err != nil {
		return Measured{}, fmt.Errorf("measure: start the local stack: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		st.Close(cctx)
	}()
	r := &run{st: st, sim: st.Sim, sched: metering.NewMeter(), timeout: o.Timeout, next: time.Now().Unix() * 1000}
	m := Measured{Reads: map[string]float64{},
		Source: fmt.Sprintf("local stack on %s with the Strava simulator; %d warm events per class", st.DynamoDBEndpoint, o.Events)}
	if err := r.measure(ctx, o, &m); err != nil {
		return Measured{}, fmt.Errorf("measure: %w", err)
	}
	return m, nil
}

type run struct {
	st      *runkit.Stack
	sim     *stravasim.Server
	sched   *metering.Meter
	timeout time.Duration
	next    int64
}

func (r *run) id() int64 { r.next++; return r.next }

// snap is every meter at one instant.
type snap struct{ api, worker, projector, sched metering.Snapshot }

func (r *run) snap() snap {
	c := r.st.Capacity
	return snap{c.API.Snapshot(), c.Worker.Snapshot(), c.Projector.Snapshot(), r.sched.Snapshot()}
}

func (s snap) units() [4]metering.Units {
	return [4]metering.Units{s.api.Units, s.worker.Units, s.projector.Units, s.sched.Units}
}

// quiet waits until the worker's queue is drained, the outbox holds no
// pending item, and no meter has moved for a while (the projector's batches
// land after the worker's job), and returns the meters then. Silence alone
// is not enough: a job deferred or left to the sweeper (a sync held to its
// share, a hand-off past the queue's room) makes no call until it is due,
// and a loaded machine stretches that past any pause.
func (r *run) quiet(ctx context.Context) (snap, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	const still = 700 * time.Millisecond // several stream polls (100 ms) with nothing new
	prev, since := r.snap(), time.Now()
	for {
		if err := r.st.Queue.Wait(ctx); err != nil {
			return snap{}, fmt.Errorf("the worker queue did not drain: %w", err)
		}
		backlog, err := r.st.Store.Pending.PendingOutbox(ctx, time.Now())
		if err != nil {
			return snap{}, fmt.Errorf("read the outbox's backlog: %w", err)
		}
		if backlog.Pending > 0 {
			since = time.Now()
			if err := retry.Sleep(ctx, 100*time.Millisecond); err != nil {
				return snap{}, fmt.Errorf("%d outbox items still pending: %w", backlog.Pending, err)
			}
			continue
		}
		if err := retry.Sleep(ctx, 100*time.Millisecond); err != nil {
			return snap{}, errors.New("the stack kept calling DynamoDB: never quiet")
		}
		cur := r.snap()
		if cur.units() != prev.units() {
			prev, since = cur, time.Now()
			continue
		}
		if time.Since(since) >= still {
			return cur, nil
		}
	}
}

// stages returns what the meters recorded between two quiet instants,
// divided by n units; the scheduler's figures count as the api stage.
func stages(before, after snap, n int) Stages {
	per := func(a, b metering.Snapshot) Cost {
		u := a.Units.Sub(b.Units)
		return Cost{float64(u.Requests), u.RCU, u.WCU}.Scale(1 / float64(n))
	}
	return Stages{API: per(after.api, before.api).Add(per(after.sched, before.sched)),
		Worker: per(after.worker, before.worker), Projector: per(after.projector, before.projector)}
}

func (r *run) reads() int64 {
	s := r.sim.Stats()
	return s.ActivityRequests + s.ListRequests
}

// unit runs do (one unit of work, or n of them) from a quiet stack to a
// quiet stack and returns its cost and Strava reads per unit.
func (r *run) unit(ctx context.Context, n int, do func() error) (Stages, float64, error) {
	before, err := r.quiet(ctx)
	if err != nil {
		return Stages{}, 0, err
	}
	reads := r.reads()
	if err := do(); err != nil {
		return Stages{}, 0, err
	}
	after, err := r.quiet(ctx)
	if err != nil {
		return Stages{}, 0, err
	}
	return stages(before, after, n), float64(r.reads()-reads) / float64(n), nil
}

func (r *run) publish(ctx context.Context, ev stravasim.Event) error {
	d, err := r.sim.Publish(ctx, ev)
	if err != nil {
		return fmt.Errorf("deliver %s %s %d: %w", ev.ObjectType, ev.AspectType, ev.ObjectID, err)
	}
	if len(d.Statuses) == 0 || d.Statuses[len(d.Statuses)-1] != http.StatusOK {
		return fmt.Errorf("deliver %s %s %d: answers %v", ev.ObjectType, ev.AspectType, ev.ObjectID, d.Statuses)
	}
	return nil
}

// user links a new simulator athlete to a new user (as sign-in does,
// without its backfill).
func (r *run) user(ctx context.Context, userID string) (int64, error) {
	athlete := r.id()
	r.sim.AddAthlete(stravasim.Athlete{ID: athlete, Firstname: "Capacity"})
	tok := r.sim.IssueTokens(athlete, 12*time.Hour)
	now := time.Now().UTC()
	err := r.st.Store.Users.CreateUser(ctx, &model.Profile{UserID: userID, AthleteID: athlete, DisplayName: userID, CreatedAtUtc: now},
		&model.StravaConnection{UserID: userID, AthleteID: athlete, AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken,
			ExpiresAtUtc: tok.ExpiresAt, Scopes: tok.Scope, TokenVersion: 1, UpdatedAtUtc: now})
	if err != nil {
		return 0, fmt.Errorf("create user %s: %w", userID, err)
	}
	return athlete, nil
}

// milestone gives the user an active distance milestone over the last 30
// days (and one ahead): it overlaps the reconcile window.
func (r *run) milestone(ctx context.Context, userID string) error {
	cat, err := catalog.Default()
	if err != nil {
		return fmt.Errorf("load catalog: %w", err)
	}
	now := time.Now().UTC()
	end := now.AddDate(0, 0, 1)
	def := model.MilestoneDefinition{ModelID: cat.Models[0].ModelID, Title: "Capacity month", Metric: model.MetricDistance,
		Target: 1e9, PeriodStartAtUtc: now.AddDate(0, 0, -30), PeriodEndAtUtc: &end, PartCount: cat.Models[0].PartCount}
	m := &model.Milestone{UserID: userID, MilestoneID: "month", MilestoneDefinition: def,
		Projection: model.Projection{Status: model.StatusActive}, CreatedAtUtc: now, WrittenBy: model.WriterAPI}
	if err := r.st.Store.Milestones.CreateMilestone(ctx, m); err != nil {
		return fmt.Errorf("create milestone of %s: %w", userID, err)
	}
	return nil
}

// activity puts a new activity of the athlete at Strava, started ago.
func (r *run) activity(athlete int64, ago time.Duration) int64 {
	id := r.id()
	r.sim.PutActivity(stravasim.Activity{ID: id, AthleteID: athlete, Name: "Capacity run", SportType: "Run", Distance: 5000,
		MovingTime: 1500, ElapsedTime: 1600, StartDate: time.Now().UTC().Add(-ago)})
	return id
}

// creates publishes one warm-up and then n measured create events of the
// athlete (activities of the last days); it returns their ids.
func (r *run) creates(ctx context.Context, athlete int64, n int, into *Stages, reads *float64) ([]int64, error) {
	warm := r.activity(athlete, 50*time.Hour)
	if _, _, err := r.unit(ctx, 1, func() error { return r.publish(ctx, r.sim.ActivityEvent("create", warm, athlete, nil)) }); err != nil {
		return nil, err
	}
	var ids []int64
	s, rd, err := r.unit(ctx, n, func() error {
		for i := range n {
			id := r.activity(athlete, time.Duration(i+1)*26*time.Hour)
			ids = append(ids, id)
			if err := r.publish(ctx, r.sim.ActivityEvent("create", id, athlete, nil)); err != nil {
				return err
			}
			// One at a time: a unit is one event's path, not a batch.
			if _, err := r.quiet(ctx); err != nil {
				return err
			}
		}
		return nil
	})
	*into, *reads = s, rd
	return ids, err
}

// measure measures each unit of work in turn into m.
func (r *run) measure(ctx context.Context, o MeasureOptions, m *Measured) error {
	ids, a1, err := r.webhooks(ctx, o.Events, m)
	if err != nil {
		return err
	}
	if err := r.edits(ctx, ids, a1, m); err != nil {
		return err
	}
	a3, err := r.backfill(ctx, o, m)
	if err != nil {
		return err
	}
	if err := r.reconcile(ctx, m); err != nil {
		return err
	}
	// The backfilled athlete leaves: revoked at Strava first, so the event
	// is confirmed (a forged one would cost one read and remove nothing).
	m.Deauth, m.Reads["deauth"], err = r.unit(ctx, 1, func() error {
		r.sim.RevokeAthlete(a3)
		return r.publish(ctx, r.sim.DeauthorizationEvent(a3))
	})
	if err != nil {
		return fmt.Errorf("deauthorization: %w", err)
	}
	m.DeauthWorkouts = o.BackfillActivities
	return nil
}

// webhooks measures n creates of an athlete with an active milestone and n
// of one without; it returns the first one's activities and athlete.
func (r *run) webhooks(ctx context.Context, n int, m *Measured) ([]int64, int64, error) {
	a1, err := r.user(ctx, "capacity-milestone")
	if err != nil {
		return nil, 0, err
	}
	if err := r.milestone(ctx, "capacity-milestone"); err != nil {
		return nil, 0, err
	}
	a2, err := r.user(ctx, "capacity-plain")
	if err != nil {
		return nil, 0, err
	}
	var rd float64
	ids, err := r.creates(ctx, a1, n, &m.Create, &rd)
	if err != nil {
		return nil, 0, fmt.Errorf("create events: %w", err)
	}
	m.Reads["create"] = rd
	if _, err := r.creates(ctx, a2, n, &m.CreateNoMilestone, &rd); err != nil {
		return nil, 0, fmt.Errorf("create events without milestone: %w", err)
	}
	return ids, a1, nil
}

// edits measures pushed edits, then deletes, of the athlete's activities.
func (r *run) edits(ctx context.Context, ids []int64, athlete int64, m *Measured) error {
	var err error
	m.Update, m.Reads["update"], err = r.unit(ctx, len(ids), func() error {
		for i, id := range ids {
			r.sim.UpdateActivity(id, func(a *stravasim.Activity) { a.Distance += 1000; a.Name = "Edited " + strconv.Itoa(i) })
			if err := r.publish(ctx, r.sim.ActivityEvent("update", id, athlete, map[string]string{"title": "Edited " + strconv.Itoa(i)})); err != nil {
				return err
			}
			if _, err := r.quiet(ctx); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("update events: %w", err)
	}
	m.Delete, m.Reads["delete"], err = r.unit(ctx, len(ids), func() error {
		for _, id := range ids {
			r.sim.DeleteActivity(id)
			if err := r.publish(ctx, r.sim.ActivityEvent("delete", id, athlete, nil)); err != nil {
				return err
			}
			if _, err := r.quiet(ctx); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete events: %w", err)
	}
	return nil
}

// backfill measures a new connect's backfill, per page of history; it
// returns the athlete.
func (r *run) backfill(ctx context.Context, o MeasureOptions, m *Measured) (int64, error) {
	const backfillUser = "capacity-backfill"
	a3, err := r.user(ctx, backfillUser)
	if err != nil {
		return 0, err
	}
	k := o.BackfillActivities
	spread := time.Duration(max(o.HistoryDays, 1)) * 24 * time.Hour / time.Duration(k+1)
	for i := range k {
		r.activity(a3, time.Duration(i+1)*spread)
	}
	sctx := metering.WithMeter(ctx, r.sched)
	var rd float64
	m.BackfillPage, rd, err = r.unit(ctx, 1, func() error {
		ok, err := r.st.Scheduler.EnsureBackfill(sctx, backfillUser, "capacity")
		if err == nil && !ok {
			err = errors.New("no backfill enqueued")
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("backfill: %w", err)
	}
	m.Reads["backfill"] = rd
	if rd > 1 {
		// More than one page: report per page.
		m.BackfillPage = m.BackfillPage.scale(1 / rd)
		m.Reads["backfill"] = 1
	}
	m.BackfillActivities = int(math.Round(float64(k) / math.Max(rd, 1)))
	return a3, nil
}

// reconcile measures a reconciliation round over the athletes, none
// changed, per page.
func (r *run) reconcile(ctx context.Context, m *Measured) error {
	before, err := r.quiet(ctx)
	if err != nil {
		return err
	}
	readsBefore := r.reads()
	res, err := r.st.Scheduler.ReconcileAll(metering.WithMeter(ctx, r.sched))
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	if res.Enqueued == 0 {
		return fmt.Errorf("reconcile enqueued nothing (%+v)", res)
	}
	after, err := r.quiet(ctx)
	if err != nil {
		return err
	}
	m.ReconcilePage = stages(before, after, res.Enqueued)
	m.Reads["reconcile"] = float64(r.reads()-readsBefore) / float64(res.Enqueued)
	return nil
}

func (s Stages) scale(f float64) Stages {
	return Stages{s.API.Scale(f), s.Worker.Scale(f), s.Projector.Scale(f)}
}
