package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/tableadmin"
	"github.com/commitcollect/backend/test/dynamolocal"
)

// farTTL keeps items claimed at fixed past dates from being deleted by
// DynamoDB Local's TTL sweeper during a test.
const farTTL = 20 * 365 * 24 * time.Hour

func TestOutboxClaimDuplicateAndReclaim(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	now := time.Date(2026, 3, 2, 6, 0, 0, 0, time.UTC)
	rec, err := s.Outbox.ClaimOutboxItem(ctx, "k1", "c1", `{"j":1}`, now, time.Minute, farTTL)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != ops.OutboxReceived || rec.Job != `{"j":1}` || rec.CorrelationID != "c1" || rec.Dispatches != 1 ||
		rec.LeaseUntil != now.Add(time.Minute).UnixMilli() || rec.PendingPK != keys.OutboxPendingPK("k1", 0) ||
		rec.ExpiresAt != now.Add(time.Minute).Add(farTTL).Unix() {
		t.Fatalf("got %+v, want received with job, lease and pending keys", rec)
	}
	// Within the lease: a duplicate.
	dup, err := s.Outbox.ClaimOutboxItem(ctx, "k1", "c2", `{"j":2}`, now.Add(59*time.Second), time.Minute, farTTL)
	if !errors.Is(err, model.ErrConflict) || dup == nil || dup.CorrelationID != "c1" {
		t.Fatalf("within the lease: got %+v, %v; want ErrConflict with the stored item", dup, err)
	}
	// After the lease: the redelivery claims it again, keeping job and correlation.
	later := now.Add(61 * time.Second)
	again, err := s.Outbox.ClaimOutboxItem(ctx, "k1", "c3", `{"j":3}`, later, time.Minute, farTTL)
	if err != nil {
		t.Fatalf("after the lease: got %v, want a re-claim", err)
	}
	if again.Job != `{"j":1}` || again.CorrelationID != "c1" || again.Dispatches != 2 || again.LeaseUntil != later.Add(time.Minute).UnixMilli() ||
		!again.CreatedAtUtc.Equal(now) {
		t.Fatalf("got %+v, want the original job and correlation, 2 dispatches, a new lease", again)
	}
	// Done: a duplicate forever, and out of the pending index.
	if err := s.Outbox.SettleOutboxItem(ctx, "k1", ops.OutboxDone, "", later); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Outbox.ClaimOutboxItem(ctx, "k1", "c4", "{}", later.Add(time.Hour), time.Minute, farTTL); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("after done: got %v, want ErrConflict", err)
	}
	got, err := s.Outbox.OutboxItem(ctx, "k1")
	if err != nil || got.Status != ops.OutboxDone || got.PendingPK != "" || got.PendingSK != "" {
		t.Fatalf("got %+v, %v; want done without pending keys", got, err)
	}
	// Settling twice is a conflict; settling a missing item is not found.
	if err := s.Outbox.SettleOutboxItem(ctx, "k1", ops.OutboxParked, "late", later); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("second settle: got %v, want ErrConflict", err)
	}
	if err := s.Outbox.SettleOutboxItem(ctx, "nope", ops.OutboxDone, "", later); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("missing: got %v, want ErrNotFound", err)
	}
}

func TestOutboxDeferKeepsItDuplicateUntilNotBefore(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	now := time.Date(2026, 3, 2, 6, 1, 0, 0, time.UTC)
	if _, err := s.Outbox.ClaimOutboxItem(ctx, "k1", "c1", "{}", now, time.Minute, farTTL); err != nil {
		t.Fatal(err)
	}
	reset := time.Date(2026, 3, 2, 6, 15, 0, 0, time.UTC)
	if err := s.Outbox.DeferOutboxItem(ctx, "k1", reset, "budget", false, now); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Outbox.OutboxItem(ctx, "k1")
	if got.Status != ops.OutboxReceived || got.NotBefore != reset.UnixMilli() || got.LeaseUntil != 0 || got.Deferrals != 1 ||
		got.Failures != 0 || got.PendingSK != keys.OutboxPendingSK(reset, "k1") || !got.DueAt().Equal(reset) {
		t.Fatalf("got %+v, want received, due at the reset, one deferral", got)
	}
	// A redelivery after the lease but before the reset is still a duplicate.
	if _, err := s.Outbox.ClaimOutboxItem(ctx, "k1", "c2", "{}", now.Add(5*time.Minute), time.Minute, farTTL); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("before the reset: got %v, want ErrConflict", err)
	}
	due, err := s.Pending.DueOutboxItems(ctx, reset.Add(-time.Millisecond), 10)
	if err != nil || len(due) != 0 {
		t.Fatalf("before the reset: got %d due, %v; want none", len(due), err)
	}
	due, err = s.Pending.DueOutboxItems(ctx, reset, 10)
	if err != nil || len(due) != 1 || due[0].IdempotencyKey != "k1" {
		t.Fatalf("at the reset: got %+v, %v; want k1", due, err)
	}
	if err := s.Outbox.DeferOutboxItem(ctx, "k1", reset.Add(time.Minute), "retry", true, now); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Outbox.OutboxItem(ctx, "k1"); got.Failures != 1 || got.Deferrals != 1 {
		t.Fatalf("got %+v, want one failure and one deferral", got)
	}
	if err := s.Outbox.SettleOutboxItem(ctx, "k1", ops.OutboxParked, "bad", now); err != nil {
		t.Fatal(err)
	}
	if err := s.Outbox.DeferOutboxItem(ctx, "k1", reset, "late", false, now); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("defer after park: got %v, want ErrConflict", err)
	}
	if got, _ := s.Outbox.OutboxItem(ctx, "k1"); got.Status != ops.OutboxParked || got.Reason != "bad" {
		t.Fatalf("got %+v, want parked with the reason", got)
	}
}

// TestOutboxHeldAndDeferredItemsAreTheSweepers: an item held at the claim
// (a create gathered for a burst) or deferred by the worker stays a
// duplicate to a redelivery after it is due, until it is settled: the
// sweeper may have it in flight in a burst, which leases the athlete, not
// the item. The sweeper leases it; once that hand-off's lease lapses, a
// redelivery takes it again as it takes any lost hand-off. Protection:
// reclaimCondition's "no not-before time" (without it the redelivery at
// the gather tick takes the held item and its job runs twice, the flaky
// demo's "duplicate webhook answered accepted").
func TestOutboxHeldAndDeferredItemsAreTheSweepers(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	now := time.Date(2026, 3, 2, 6, 0, 3, 0, time.UTC)
	tick := now.Add(7 * time.Second)
	held, err := s.Outbox.HoldOutboxItem(ctx, "held", "c1", `{"j":1}`, now, tick, farTTL)
	if err != nil {
		t.Fatal(err)
	}
	if held.Status != ops.OutboxReceived || held.NotBefore != tick.UnixMilli() || held.LeaseUntil != 0 ||
		held.PendingSK != keys.OutboxPendingSK(tick, "held") || held.ExpiresAt != tick.Add(farTTL).Unix() {
		t.Fatalf("got %+v, want received, not before the tick, in the pending index at the tick", held)
	}
	if _, err := s.Outbox.ClaimOutboxItem(ctx, "deferred", "c2", "{}", now, time.Minute, farTTL); err != nil {
		t.Fatal(err)
	}
	if err := s.Outbox.DeferOutboxItem(ctx, "deferred", tick, "gathered", false, now); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"held", "deferred"} {
		for _, at := range []time.Time{now.Add(time.Second), tick, tick.Add(time.Hour)} {
			if rec, err := s.Outbox.ClaimOutboxItem(ctx, key, "c3", "{}", at, time.Minute, farTTL); !errors.Is(err, model.ErrConflict) {
				t.Fatalf("%s: redelivery at %s: got %+v, %v; want ErrConflict", key, at.Sub(now), rec, err)
			}
			if _, err := s.Outbox.HoldOutboxItem(ctx, key, "c3", "{}", at, at.Add(time.Second), farTTL); !errors.Is(err, model.ErrConflict) {
				t.Fatalf("%s: held again at %s: got %v, want ErrConflict", key, at.Sub(now), err)
			}
		}
	}
	// The sweeper leases the held item; a lost hand-off of the sweeper's is
	// taken again by a redelivery once its lease lapses.
	if _, err := s.Outbox.LeaseOutboxItem(ctx, "held", tick, time.Minute); err != nil {
		t.Fatalf("sweeper's lease at the tick: %v", err)
	}
	if _, err := s.Outbox.ClaimOutboxItem(ctx, "held", "c4", "{}", tick.Add(59*time.Second), time.Minute, farTTL); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("within the sweeper's lease: got %v, want ErrConflict", err)
	}
	again, err := s.Outbox.ClaimOutboxItem(ctx, "held", "c5", "{}", tick.Add(61*time.Second), time.Minute, farTTL)
	if err != nil || again.Job != `{"j":1}` || again.CorrelationID != "c1" || again.Dispatches != 3 {
		t.Fatalf("after the sweeper's lease: got %+v, %v; want the original job taken again, 3 dispatches", again, err)
	}
}

// TestOutboxSweeperLeaseIsExclusive: two sweepers listing the same due item
// race to lease it; exactly one wins, so it is dispatched once per lapse.
func TestOutboxSweeperLeaseIsExclusive(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	now := time.Date(2026, 3, 2, 6, 0, 0, 0, time.UTC)
	if _, err := s.Outbox.ClaimOutboxItem(ctx, "k1", "c1", "{}", now, time.Minute, farTTL); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Outbox.LeaseOutboxItem(ctx, "k1", now.Add(30*time.Second), time.Minute); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("within the lease: got %v, want ErrConflict", err)
	}
	at := now.Add(2 * time.Minute)
	var wins sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for range 4 {
		wins.Add(1)
		go func() {
			defer wins.Done()
			if _, err := s.Outbox.LeaseOutboxItem(ctx, "k1", at, time.Minute); err == nil {
				mu.Lock()
				won++
				mu.Unlock()
			} else if !errors.Is(err, model.ErrConflict) {
				t.Error(err)
			}
		}()
	}
	wins.Wait()
	if won != 1 {
		t.Fatalf("got %d winning leases, want 1", won)
	}
	if _, err := s.Outbox.LeaseOutboxItem(ctx, "missing", at, time.Minute); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("missing: got %v, want ErrNotFound", err)
	}
}

func TestOutboxPendingIndexIsSparse(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	now := time.Date(2026, 3, 2, 6, 0, 0, 0, time.UTC)
	const n = 12
	for i := range n {
		at := now.Add(time.Duration(i) * time.Second)
		if _, err := s.Outbox.ClaimOutboxItem(ctx, fmt.Sprintf("k%02d", i), "c", "{}", at, time.Minute, farTTL); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 { // settle four: they leave the index
		if err := s.Outbox.SettleOutboxItem(ctx, fmt.Sprintf("k%02d", i), ops.OutboxDone, "", now); err != nil {
			t.Fatal(err)
		}
	}
	b, err := s.Pending.PendingOutbox(ctx, now.Add(time.Minute+5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// k04..k11 pending; due by 06:01:05 are those claimed by 06:00:05 (k04, k05).
	if b.Pending != 8 || b.Due != 2 || !b.OldestCreatedAtUtc.Equal(now.Add(4*time.Second)) {
		t.Fatalf("got backlog %+v, want 8 pending, 2 due, oldest k04", b)
	}
	due, err := s.Pending.DueOutboxItems(ctx, now.Add(time.Hour), 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != 5 || due[0].IdempotencyKey != "k04" || due[4].IdempotencyKey != "k08" {
		keys := []string{}
		for _, d := range due {
			keys = append(keys, d.IdempotencyKey)
		}
		t.Fatalf("got due %v, want the 5 oldest due (k04..k08)", keys)
	}
}

// TestOutboxTablesGainTheIndex: a data directory made before the outbox has
// an idempotency table without the pending index; CreateTables adds it.
func TestOutboxTablesGainTheIndex(t *testing.T) {
	t.Parallel()
	db := dynamolocal.Private(t) // an index built on a table that exists: see Private
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tables := dynamo.TableNames(dynamolocal.UniquePrefix())
	old := tableadmin.Specs(tables)[3]
	old.GSIs = nil
	if _, err := db.CreateTable(ctx, tableadmin.CreateTableInput(old)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tableadmin.DeleteTables(context.Background(), db, tables) })
	if err := tableadmin.CreateTables(ctx, db, tables); err != nil {
		t.Fatal(err)
	}
	s := store.New(db, tables)
	if _, err := s.Outbox.ClaimOutboxItem(ctx, "k1", "c", "{}", time.Now(), 0, time.Hour); err != nil {
		t.Fatal(err)
	}
	due, err := s.Pending.DueOutboxItems(ctx, time.Now().Add(time.Second), 10)
	if err != nil || len(due) != 1 {
		t.Fatalf("got %d due, %v; want the item through the added index", len(due), err)
	}
}

// A pending item never expires while pending: every claim, lease and
// deferral puts its TTL after the moment it is next due, and the settle
// keeps it ttl after the settle.
func TestOutboxPendingItemNeverExpiresBeforeItIsDue(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	now := time.Now().UTC()
	const ttl = 7 * 24 * time.Hour
	check := func(step string) *ops.IdempotencyRecord {
		t.Helper()
		rec, err := s.Outbox.OutboxItem(ctx, "k")
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if due := rec.DueAt(); !time.Unix(rec.ExpiresAt, 0).After(due) {
			t.Fatalf("%s: expiresAt %s, due %s; want the TTL after the due time",
				step, time.Unix(rec.ExpiresAt, 0).UTC().Format(time.RFC3339), due.Format(time.RFC3339))
		}
		return rec
	}
	if _, err := s.Outbox.ClaimOutboxItem(ctx, "k", "c", "{}", now, time.Minute, ttl); err != nil {
		t.Fatal(err)
	}
	check("claim")
	// Deferred far beyond the claim's TTL (a sync share spent for days).
	far := now.Add(30 * 24 * time.Hour)
	if err := s.Outbox.DeferOutboxItem(ctx, "k", far, "sync share spent", false, now); err != nil {
		t.Fatal(err)
	}
	if rec := check("deferral"); rec.ExpiresAt != far.Add(ttl).Unix() {
		t.Fatalf("deferral: expiresAt %d, want %d (ttl after the not-before time)", rec.ExpiresAt, far.Add(ttl).Unix())
	}
	// The sweeper leases it long after it became due (a sweeper stopped for
	// days): the TTL moves with the lease.
	leased := far.Add(8 * 24 * time.Hour)
	if _, err := s.Outbox.LeaseOutboxItem(ctx, "k", leased, time.Minute); err != nil {
		t.Fatal(err)
	}
	check("lease")
	settled := leased.Add(2 * time.Minute)
	if err := s.Outbox.SettleOutboxItem(ctx, "k", ops.OutboxDone, "", settled); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Outbox.OutboxItem(ctx, "k")
	if err != nil || rec.ExpiresAt != settled.Add(ttl).Unix() {
		t.Fatalf("settle: got %+v, %v; want expiresAt %d (ttl after the settle)", rec, err, settled.Add(ttl).Unix())
	}
}

// TestOutboxMarkParkedTravelsWithTheLease: the park's mark changes nothing
// but the flag, which the next lease returns (so the dispatched job knows
// its parked record must go once done); a missing item is not found.
func TestOutboxMarkParkedTravelsWithTheLease(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	now := time.Date(2026, 3, 2, 6, 0, 0, 0, time.UTC)
	before, err := s.Outbox.ClaimOutboxItem(ctx, "k1", "c1", `{"j":1}`, now, time.Minute, farTTL)
	if err != nil {
		t.Fatal(err)
	}
	if before.ParkedRecord {
		t.Fatalf("a fresh claim says parked: %+v", before)
	}
	if err := s.Outbox.MarkOutboxParked(ctx, "k1"); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Outbox.LeaseOutboxItem(ctx, "k1", now.Add(2*time.Minute), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !rec.ParkedRecord || rec.Status != ops.OutboxReceived || rec.Dispatches != 2 || rec.Job != before.Job {
		t.Fatalf("got %+v, want the item received, leased a second time and marked parked", rec)
	}
	if err := s.Outbox.MarkOutboxParked(ctx, "nope"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("missing: got %v, want ErrNotFound", err)
	}
}

// TestPendingItemsSpreadOverTheShards: claimed outbox items spread over at
// least keys.DefaultOutboxShards partitions of the pending index, the
// sweeper's listing finds the due ones in every shard (including an item a
// 4-shard writer placed, read by a store configured with fewer shards), and
// the index entries carry no job: the lease returns the whole item.
// Protections: the default shard count, pendingShards' legacy floor, and
// the Pending index's INCLUDE projection (store.PendingIndexAttributes).
func TestPendingItemsSpreadOverTheShards(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	now := time.Date(2026, 3, 2, 6, 0, 0, 0, time.UTC)
	const n = 320
	shards := map[string]bool{}
	for i := range n {
		rec, err := s.Outbox.ClaimOutboxItem(ctx, fmt.Sprintf("job-%d", i), fmt.Sprintf("c%d", i), `{"job":"payload"}`, now, time.Minute, farTTL)
		if err != nil {
			t.Fatal(err)
		}
		shards[rec.PendingPK] = true
	}
	if len(shards) < 32 {
		t.Fatalf("%d pending items spread over %d shards, want at least 32", n, len(shards))
	}
	// An item written when the count was 4, in shard 3.
	legacy := ""
	for i := 0; legacy == ""; i++ {
		if k := fmt.Sprintf("legacy-%d", i); keys.OutboxPendingPK(k, keys.LegacyOutboxShards) == keys.OutboxPendingShardPK(3) {
			legacy = k
		}
	}
	old := store.New(s.DB.Client(), s.DB.Tables())
	old.DB.OutboxShards = keys.LegacyOutboxShards
	if _, err := old.Outbox.ClaimOutboxItem(ctx, legacy, "c-legacy", `{"job":"legacy"}`, now, time.Minute, farTTL); err != nil {
		t.Fatal(err)
	}

	due, err := s.Pending.DueOutboxItems(ctx, now.Add(2*time.Minute), 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != n+1 {
		t.Fatalf("sweeper listed %d due items, want %d (every shard)", len(due), n+1)
	}
	for _, d := range due {
		if d.Job != "" {
			t.Fatalf("pending index entry %s carries the job %q, want keys, correlation id and creation only", d.IdempotencyKey, d.Job)
		}
		if d.CorrelationID == "" || !d.CreatedAtUtc.Equal(now) {
			t.Fatalf("pending index entry %+v lacks what the sweeper logs and measures", d)
		}
	}
	rec, err := s.Outbox.LeaseOutboxItem(ctx, due[0].IdempotencyKey, now.Add(2*time.Minute), time.Minute)
	if err != nil || rec.Job == "" {
		t.Fatalf("lease: got %+v, %v; want the whole item", rec, err)
	}
	// A store configured with fewer shards than the legacy count still reads
	// the legacy shards.
	few := store.New(s.DB.Client(), s.DB.Tables())
	few.DB.OutboxShards = 2
	due, err = few.Pending.DueOutboxItems(ctx, now.Add(2*time.Minute), 1000)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range due {
		found = found || d.IdempotencyKey == legacy
	}
	if !found {
		t.Fatalf("a 2-shard reader did not find the item in legacy shard 3")
	}
}
