package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/handoff"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
)

// BacklogWindow is the backlog scenario's rate-limit window. Reaching past
// the backlog costs a write per forged item (the set-aside), about 45,000,
// and DynamoDB Local here takes them at some hundreds a second where
// DynamoDB takes thousands: so the window is a minute, not the suite's
// 10 s. At Strava's 15 minutes the figure is a small part of one window.
const BacklogWindow = time.Minute

// backlog: while the pipeline is down, one linked athlete's forged creates
// (50,000 in `make chaos`, ids Strava never had) pile up due, all at one
// instant, and after them one honest create each of 200 athletes (hand-offs
// lost, due a moment later). The pipeline starts again. Every honest
// athlete's workout must be written within two windows: the sweeps read
// 10,000 due items at most, so they must set the forged backlog aside to
// reach anybody behind it. The reduced run tries the same shape at a tenth
// (5,000 forged items against a read of 1,000, CC_SWEEP_READ) beside 50
// honest athletes. Protection: the sweeper's set-aside
// (handoff.Sweeper.Asides); without it no read reaches the honest items
// until the forged ones are settled, hours of the victim's allowance away.
func backlog(ctx context.Context, e *Env, full bool) (Figures, error) {
	forged, honestN := pick(full, 5000, 50000), pick(full, 50, 200)
	if !full {
		e.Extra = append(e.Extra, "CC_SWEEP_READ=1000")
	}
	users, err := linkUsers(ctx, e, honestN+1, 9400)
	if err != nil {
		return Figures{}, err
	}
	victim, honest := users[0], users[1:]
	if _, err := e.Interrupt(30 * time.Second); err != nil {
		return Figures{}, err
	}
	now := time.Now().UTC()
	at := now.Add(time.Second)
	var recs []model.Entity
	for i := range forged {
		recs = append(recs, dueItem(victim.AthleteID*1000000+int64(i), victim.AthleteID, now, at))
	}
	for i, u := range honest {
		id := u.AthleteID * 100000
		e.Sim.PutActivity(Activity(id, u.AthleteID, "Run", 5000, now.Add(-time.Hour)))
		recs = append(recs, dueItem(id, u.AthleteID, now, at.Add(time.Duration(1+i)*time.Millisecond)))
	}
	if err := e.putAll(ctx, recs); err != nil {
		return Figures{}, err
	}
	seeded := time.Since(now)
	if err := e.Start(ctx); err != nil {
		return Figures{}, err
	}
	started := time.Now()
	worst := e.waitEachWritten(ctx, honest, 4*e.Window)
	sweeps, aside := e.sweepsSettingAside()
	fmt.Printf("backlog: forged=%d honest=%d seeded_in=%s honest_served=%d/%d honest_max=%s windows=%.1f sweeps_setting_aside=%d set_aside=%d per_forged=%.2f reads=%d\n",
		forged, len(honest), seeded.Round(time.Second), worst.served, len(honest), worst.took.Round(100*time.Millisecond),
		worst.took.Seconds()/e.Window.Seconds(), sweeps, aside, float64(aside)/float64(forged), e.Reads()-e.readsBefore)
	fig, err := e.Figures(ctx, false)
	// The design's bound is in sweeps: each full read sets aside all but a
	// burst's worth of the forged items it read. Wall time is printed: it
	// is DynamoDB Local's write rate here (about 16 s a sweep of 9,500
	// writes alone, twice that after the suite's other scenarios).
	read := pick(full, 1000, handoff.DefaultSweepRead)
	bound := forged/(read-handoff.AsideKeep) + 1
	if worst.served < len(honest) || sweeps > bound {
		fig.Missed++
		fig.Notes = append(fig.Notes, fmt.Sprintf("missed: %d of %d honest athletes written within %s (the last after %s), %d sweeps set items aside (bound %d; started %s)",
			worst.served, len(honest), 4*e.Window, worst.took, sweeps, bound, started.UTC().Format(time.TimeOnly)))
	}
	return fig, err
}

// dueItem is the outbox item of an activity create, received at now and
// due at due for the sweeper (a hand-off lost).
func dueItem(activity, owner int64, now, due time.Time) model.Entity {
	ev := ingest.Event{ObjectType: "activity", AspectType: "create", ObjectID: activity, OwnerID: owner,
		SubscriptionID: SubscriptionID, EventTime: now.Unix()}
	key := ev.IdempotencyKey()
	job, _ := json.Marshal(ingest.Job{Event: ev, CorrelationID: key, IdempotencyKey: key, ReceivedAtUtc: now})
	return &ops.IdempotencyRecord{IdempotencyKey: key, CorrelationID: key, CreatedAtUtc: now, UpdatedAtUtc: now,
		Status: ops.OutboxReceived, Job: string(job), NotBefore: due.UnixMilli(), TTLSeconds: int64(model.OutboxTTL / time.Second),
		ExpiresAt: due.Add(model.OutboxTTL).Unix(), PendingPK: keys.OutboxPendingPK(key, 0), PendingSK: keys.OutboxPendingSK(due, key)}
}

// putAll writes outbox items straight into the idempotency table, eight
// batches at once.
func (e *Env) putAll(ctx context.Context, recs []model.Entity) error {
	const writers = 8
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Go(func() {
			var part []model.Entity
			for i := w * 25; i < len(recs); i += writers * 25 {
				part = append(part, recs[i:min(i+25, len(recs))]...)
			}
			errs[w] = e.Store.DB.BatchPut(ctx, e.Store.DB.Tables().Idempotency, part)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("seed the outbox: %w", err)
		}
	}
	return nil
}

// servedAll is how many of some users had a workout written, and when the
// last of them did.
type servedAll struct {
	served int
	took   time.Duration
}

// waitEachWritten waits, at most limit, until every one of users has a
// workout, and says how many did and how long after the call the last one
// took.
func (e *Env) waitEachWritten(ctx context.Context, users []*User, limit time.Duration) servedAll {
	from := time.Now()
	left := map[string]bool{}
	for _, u := range users {
		left[u.UserID] = true
	}
	var out servedAll
	for len(left) > 0 && time.Since(from) <= limit && ctx.Err() == nil {
		for id := range left {
			if ws, _, err := e.workouts(ctx, id); err == nil && len(ws) > 0 {
				delete(left, id)
				out.served, out.took = out.served+1, time.Since(from)
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	return out
}

// sweepsSettingAside counts, from the child's log, the sweeps that set
// items aside and the items they set aside.
func (e *Env) sweepsSettingAside() (sweeps, items int) {
	raw, err := os.ReadFile(e.logPath)
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		var l struct {
			Msg      string `json:"msg"`
			SetAside int    `json:"setAside"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "sweep" && l.SetAside > 0 {
			sweeps, items = sweeps+1, items+l.SetAside
		}
	}
	return sweeps, items
}
