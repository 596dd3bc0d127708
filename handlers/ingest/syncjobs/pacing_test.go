package syncjobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/budget"
	"github.com/commitcollect/backend/handlers/ingest/syncjobs"
	"github.com/commitcollect/backend/model/ops"
)

// TestDeployedPacingAtMidnightAndNoon runs a backfill with the pacing as
// deployed (the production defaults of both head starts, which every
// pipeline test replaces with a whole day) five minutes after midnight UTC
// and at noon: it lists as many pages as the smaller of the window's and
// the day's paced allowances, then waits for the next pacing slot of the
// same day, never the next day. Protection: the day's head start of one
// short window (without it, just after midnight the day's allowance is
// nothing and a backfill waits for a slot computed from zero).
func TestDeployedPacingAtMidnightAndNoon(t *testing.T) {
	t.Parallel()
	// Tomorrow (UTC), so that no item's TTL lies in the past for DynamoDB
	// Local to expire.
	day := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, 1)
	for _, at := range []time.Time{day.Add(5*time.Minute + 30*time.Second), day.Add(12*time.Hour + 30*time.Second)} {
		t.Run(at.Format("15:04"), func(t *testing.T) {
			t.Parallel()
			settings := syncjobs.SyncSettings{MaxDays: 365, PageSize: 20, BudgetShare: 0.5, HeadStart: syncjobs.DefaultSyncHeadStart, DayHeadStart: asDeployed}
			r := newSyncRig(t, settings)
			r.now = at
			r.sched.Now = func() time.Time { return r.now }
			r.worker.Sync.Now = func() time.Time { return r.now }
			r.worker.Runner.Now = r.worker.Sync.Now
			r.worker.Fetch.Now = r.worker.Sync.Now
			ctx := context.Background()
			r.Link("u1", 61, 48*time.Hour)
			r.history(61, 6000, 400, 12*time.Hour) // 20 pages of 20
			if err := r.Budget.RecordRateLimit(ctx, &ops.RateLimitState{ShortLimit: 200, DailyLimit: 2000, ReadShortLimit: 100, ReadDailyLimit: 1000,
				WindowStartedUtc: at.Truncate(15 * time.Minute), DayUtc: at.Format(time.DateOnly), UpdatedAtUtc: at}); err != nil {
				t.Fatal(err)
			}
			if ok, err := r.sched.EnsureBackfill(ctx, "u1", "test"); !ok || err != nil {
				t.Fatalf("EnsureBackfill: %v, %v", ok, err)
			}
			key := backfillKey(t, r)
			short := 15 * time.Minute
			want := min(budget.PacedAllowance(100, 0.5, at, short, time.Duration(syncjobs.DefaultSyncHeadStart*float64(short))),
				budget.PacedAllowance(1000, 0.5, at, 24*time.Hour, short))
			lists := r.Sim.Stats().ListRequests
			var rec *ops.IdempotencyRecord
			for range 40 {
				var err error
				if rec, err = r.St.Outbox.OutboxItem(ctx, key); err != nil {
					t.Fatal(err)
				}
				if rec.Status != ops.OutboxReceived || rec.NotBefore > r.now.UnixMilli() {
					break // settled, or waiting (a deferral; the enqueue's lease does not count)
				}
				j, err := ingest.DecodeJob([]byte(rec.Job))
				if err != nil {
					t.Fatal(err)
				}
				if err := r.worker.Run(ctx, j.WithOutbox(rec)); err != nil {
					t.Fatal(err)
				}
			}
			pages := int(r.Sim.Stats().ListRequests - lists)
			t.Logf("at %s: %d pages listed (paced allowance %d), then due again at %s", at.Format("15:04:05"), pages, want, rec.DueAt().Format("15:04:05"))
			if pages != want || want < 1 {
				t.Fatalf("%d pages listed at %s, want the paced allowance %d (at least one)", pages, at.Format("15:04:05"), want)
			}
			if due := rec.DueAt(); rec.Status != ops.OutboxReceived || due.Sub(at) > time.Hour || due.Format(time.DateOnly) != at.Format(time.DateOnly) {
				t.Fatalf("job %s due at %s; want it waiting for a pacing slot of the same day", rec.Status, due)
			}
		})
	}
}

// backfillKey finds the rig's one pending sync job.
func backfillKey(t *testing.T, r *syncRig) string {
	t.Helper()
	due, err := r.St.Pending.DueOutboxItems(context.Background(), r.now.Add(time.Hour), 10)
	if err != nil || len(due) != 1 {
		t.Fatalf("pending sync jobs: %d, %v; want one", len(due), err)
	}
	return due[0].IdempotencyKey
}
