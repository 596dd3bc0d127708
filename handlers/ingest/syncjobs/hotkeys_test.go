package syncjobs_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/syncjobs"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/strava"
	"github.com/commitcollect/backend/model/syncstate"
	"github.com/commitcollect/backend/test/ingesttest"
)

// rateCountingStore counts the sync path's reads and writes of the shared
// rate-limit item (RATELIMIT#STRAVA/STATE).
type rateCountingStore struct {
	syncjobs.SyncPacing
	reads, writes atomic.Int64
}

func (c *rateCountingStore) RateLimitState(ctx context.Context) (*ops.RateLimitState, error) {
	c.reads.Add(1)
	return c.SyncPacing.RateLimitState(ctx)
}

func (c *rateCountingStore) RecordRateLimit(ctx context.Context, r *ops.RateLimitState) error {
	c.writes.Add(1)
	return c.SyncPacing.RecordRateLimit(ctx, r)
}

// TestSyncPagesUseTheInstanceRateCache: a backfill of many pages, run
// within one rateStateTTL, reads the shared rate-limit item at most once
// and writes it only when the reading changed materially (the first
// reading of the window), never once per page. Protection: the Syncer's
// budget.RateCache (checkBudget through budget.RateCache.current, RecordRateLimit only
// when budget.RateCache.observed says so).
func TestSyncPagesUseTheInstanceRateCache(t *testing.T) {
	t.Parallel()
	settings := syncjobs.SyncSettings{MaxDays: 365, PageSize: 10}
	r := newSyncRig(t, settings)
	r.Link("u1", 61, time.Hour)
	r.history(61, 6000, 75, 24*time.Hour) // 8 pages: usage stays under a tenth of the simulator's read limit
	all := r.counted.stores
	counted := &rateCountingStore{SyncPacing: all.Pacing}
	all.Pacing = counted
	client := strava.NewClient(r.Sim.URL, nil)
	refresher := strava.NewRefresher(strava.OAuthConfig(r.Sim.URL, r.Sim.ClientID(), r.Sim.ClientSecret(), ""), r.St.Connections, client.HTTPClient())
	r.worker.Sync = syncjobs.NewSyncer(all, refresher, client, ingesttest.Log())
	r.worker.Sync.Settings = settings
	// A clock that moves a millisecond per look: the whole backfill is
	// well within one rateStateTTL however slow the machine is.
	// It starts mid-day and mid-way through the real 15-minute window:
	// at a window's (or the day's) start the paced allowance is smaller
	// than the 8 pages, and the test failed when run in the first minute
	// of a window.
	var ticks atomic.Int64
	start := time.Now().UTC().Truncate(24 * time.Hour).Add(12 * time.Hour).
		Add(time.Now().UTC().Sub(time.Now().UTC().Truncate(time.Hour)).Truncate(15 * time.Minute)).Add(10 * time.Minute)
	r.worker.Sync.Now = func() time.Time { return start.Add(time.Duration(ticks.Add(1)) * time.Millisecond) }
	key := r.backfill("u1")
	runs := r.drain(key, 30)
	if runs < 8 {
		t.Fatalf("got %d pages, want at least 8 for the count to mean something", runs)
	}
	if n := counted.reads.Load(); n > 1 {
		t.Errorf("got %d reads of the shared rate-limit item over %d pages, want at most 1 (one per %s)", n, runs, "rateStateTTL")
	}
	// The simulator's usage grows by one read per page, below a tenth of
	// its limits: only the window's first reading is material.
	if n := counted.writes.Load(); n > 1 {
		t.Errorf("got %d writes of the shared rate-limit item over %d pages, want at most 1 (no write for an unchanged reading)", n, runs)
	}
}

// TestSyncPageAuditEntriesAreRoutine: the audit entries of a backfill's
// pages carry no index keys, so parallel syncs write nothing into the audit
// table's GSI2 partition of the month (EVENT#STRAVA_SYNC_PAGE#{yyyyMM}).
// Protection: NewRoutineAuditEntry for AuditSyncPage in Syncer.audit.
func TestSyncPageAuditEntriesAreRoutine(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, syncjobs.SyncSettings{MaxDays: 365, PageSize: 10})
	r.Link("u1", 62, time.Hour)
	r.history(62, 6200, 45, 24*time.Hour)
	runs := r.drain(r.backfill("u1"), 20)
	pages := r.Audits(keys.UserPK("u1"))[ingest.AuditSyncPage]
	if len(pages) != runs || runs < 5 {
		t.Fatalf("got %d page audit entries for %d pages, want one per page (at least 5)", len(pages), runs)
	}
	for _, e := range pages {
		if e.EventMonthPK != "" || e.CorrelationPK != "" {
			t.Fatalf("page audit entry %s indexed under %q / %q, want no index keys", e.SK, e.EventMonthPK, e.CorrelationPK)
		}
	}
	res, err := r.St.DB.QueryPrefix(context.Background(), r.St.DB.Tables().Audit,
		keys.EventMonthPK(ingest.AuditSyncPage, time.Now()), "", dynamo.QueryOptions{Index: dynamo.IndexGSI2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != 0 {
		t.Fatalf("got %d sync-page entries in the audit GSI2 month partition, want 0", len(res.Items))
	}
}

// TestReconcileCompletionAuditIsRoutine: a reconciliation's
// STRAVA_SYNC_COMPLETED entry carries no index keys (one per athlete with
// a milestone per interval would make EVENT#STRAVA_SYNC_COMPLETED#{month}
// the audit GSI2's hottest partition, as the scale run showed), while a
// backfill's (one per connect) stays indexed for the operator. Protection:
// the reconcile-mode case of NewRoutineAuditEntry in Syncer.audit.
func TestReconcileCompletionAuditIsRoutine(t *testing.T) {
	t.Parallel()
	r, _ := newConvergeRig(t)
	r.drain(r.backfill("u1"), 20)
	r.drain(r.reconcileNow(), 10)
	byMode := map[string][]model.AuditEntry{}
	for _, e := range r.Audits(keys.UserPK("u1"))[ingest.AuditSyncCompleted] {
		byMode[e.Details["mode"]] = append(byMode[e.Details["mode"]], e)
	}
	if len(byMode[syncstate.SyncModeBackfill]) != 1 || len(byMode[syncstate.SyncModeReconcile]) != 1 {
		t.Fatalf("got %d backfill and %d reconcile completions, want one each", len(byMode[syncstate.SyncModeBackfill]), len(byMode[syncstate.SyncModeReconcile]))
	}
	if e := byMode[syncstate.SyncModeReconcile][0]; e.EventMonthPK != "" || e.CorrelationPK != "" {
		t.Errorf("reconcile completion indexed under %q / %q, want no index keys", e.EventMonthPK, e.CorrelationPK)
	}
	if e := byMode[syncstate.SyncModeBackfill][0]; e.EventMonthPK != keys.EventMonthPK(ingest.AuditSyncCompleted, e.OccurredAtUtc) {
		t.Errorf("backfill completion indexed under %q, want the event-month partition", e.EventMonthPK)
	}
}
