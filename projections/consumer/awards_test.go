package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ports"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/projections/consumer"
	"github.com/commitcollect/backend/test/fixture"
)

// faultyStore is the real store with faults injected around it: writes after
// the mint transaction that never happen (a process killed right after it),
// and a concurrent writer that bumps the milestone's version just before the
// n-th projection write (so that write fails, as after a kill between two
// transactions).
type faultyStore struct {
	consumer.MilestoneStore
	consumer.AuditLog
	db *dynamo.DB // the out-of-band bump's
	// auditDown makes every best-effort audit write fail.
	auditDown bool
	// bumpBeforeWrite, when > 0, is the projection write (1-based) before
	// which the milestone's version is bumped out of band.
	bumpBeforeWrite int64
	writes          atomic.Int64
}

func (f *faultyStore) AppendAudit(ctx context.Context, e *model.AuditEntry) error {
	if f.auditDown {
		return fmt.Errorf("append audit %s: killed before it was written", e.EventType)
	}
	return f.AuditLog.AppendAudit(ctx, e)
}

func (f *faultyStore) WriteProjection(ctx context.Context, w ports.ProjectionWrite) error {
	if n := f.writes.Add(1); n == f.bumpBeforeWrite {
		var m model.Milestone
		if err := f.db.Get(ctx, f.db.Tables().Main, keys.MilestoneKey(w.UserID, w.MilestoneID), &m); err != nil {
			return err
		}
		if _, err := f.db.UpdateVersioned(ctx, f.db.Tables().Main, keys.MilestoneKey(w.UserID, w.MilestoneID), m.Version,
			dynamo.Changes{Set: map[string]any{"writtenBy": "concurrent"}}); err != nil {
			return err
		}
	}
	return f.MilestoneStore.WriteProjection(ctx, w)
}

// mintAudits counts the AWARD_MINTED entries of a user's milestone by part,
// read from the user's whole audit partition (not by the deterministic keys
// the code writes, so a stray entry under another key counts too).
func (e *env) mintAudits(user, milestoneID string) map[int]int {
	e.t.Helper()
	as, _, err := dynamo.QueryEntities[model.AuditEntry](e.ctx, e.s.DB, e.s.DB.Tables().Audit, keys.UserPK(user), keys.PrefixAudit, dynamo.QueryOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[int]int{}
	for _, a := range as {
		if a.EventType != consumer.EventAwardMinted || a.Details["milestoneId"] != milestoneID {
			continue
		}
		i, err := strconv.Atoi(a.Details["partIndex"])
		if err != nil {
			e.t.Fatalf("AWARD_MINTED without a part index: %+v", a)
		}
		out[i]++
	}
	return out
}

// checkAudited fails unless every award item of the milestone has exactly
// one AWARD_MINTED entry and no entry exists without its award; it returns
// how many awards there are.
func (e *env) checkAudited(user, milestoneID string) int {
	e.t.Helper()
	audits := e.mintAudits(user, milestoneID)
	awards := e.awards(user, milestoneID)
	for _, a := range awards {
		if audits[a.PartIndex] != 1 {
			e.t.Errorf("award %d has %d AWARD_MINTED entries, want 1", a.PartIndex, audits[a.PartIndex])
		}
	}
	if len(audits) != len(awards) {
		e.t.Errorf("%d parts audited, %d awards", len(audits), len(awards))
	}
	return len(awards)
}

// longRun puts one workout that earns every part of hundredKm.
func (e *env) longRun(user string) {
	e.putWorkout(fixture.Workout(user, 500, fixture.Day(1), fixture.Km(120), fixture.Corr("corr-long")))
}

// Each test has its own user id: one DynamoDB Local shares ClientRequestTokens
// across all its tables, and the token is derived from user and milestone.

// TestAwardsAndTheirAuditLandTogether: the process dies right after the mint
// transaction (every later write fails). Every award still has its
// AWARD_MINTED entry, because it was in the same transaction.
func TestAwardsAndTheirAuditLandTogether(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.putModel("rocket", 10)
	e.putMilestone("u-together", "m1", fixture.Definition(fixture.Parts(10)))
	e.putWorkout(fixture.Workout("u-together", 101, fixture.Day(1), fixture.Km(25), fixture.Corr("corr-25")))
	e.putWorkout(fixture.Workout("u-together", 102, fixture.Day(2), fixture.Km(30), fixture.Corr("corr-30")))
	st := e.stores()
	fs := &faultyStore{MilestoneStore: st.Milestones, AuditLog: st.Audits, auditDown: true}
	st.Milestones, st.Audits = fs, fs
	c := consumer.New(st, consumer.Options{Metrics: e.metrics})
	if resp := e.handle(c, e.newRecords()); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures: %+v", resp.BatchItemFailures)
	}
	if n := e.checkAudited("u-together", "m1"); n != 5 {
		t.Fatalf("awards: got %d, want 5", n)
	}
	// Under the tipping workout's correlation id, as before.
	if got := countEvents(e.audits("corr-30"), consumer.EventAwardMinted); got != 3 {
		t.Fatalf("AWARD_MINTED under corr-30: got %d, want 3", got)
	}
}

// TestNinetyNinePartsMintedAndAuditedAtOnce: 99 awards, their 99 collection
// entries and 99 audit entries, plus the update and the collection
// summary's, are four times DynamoDB's transaction limit; the mint is split
// into version-checked transactions, each within the limit.
func TestNinetyNinePartsMintedAndAuditedAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.putModel("rocket", 99)
	e.putMilestone("u-99", "m1", fixture.Definition(fixture.Parts(99)))
	e.longRun("u-99")
	c := e.consumer(consumer.Options{})
	rep, err := c.RecomputeUser(e.ctx, "u-99", false)
	if err != nil {
		t.Fatal(err)
	}
	if n := e.checkAudited("u-99", "m1"); n != 99 {
		t.Fatalf("awards: got %d, want 99", n)
	}
	m := e.milestone("u-99", "m1")
	if m.AwardedParts != 99 || m.Status != model.StatusCompleted || m.Version != 4 || rep.Milestones[0].Version != 4 {
		t.Fatalf("milestone: %+v version %d (report %d), want 99 parts, completed, version 4 (four transactions)",
			m.Projection, m.Version, rep.Milestones[0].Version)
	}
	if st := c.Stats(); st.Writes != 4 || st.AwardsMinted != 99 {
		t.Fatalf("stats: %+v, want 4 writes and 99 awards", st)
	}
}

// TestCrashBetweenMintTransactionsLeavesAConsistentPrefix: the second of the
// four transactions fails (a concurrent version bump; a kill between them
// looks the same to the data). What is stored is a consistent prefix: every
// award has its audit entry, awardedParts counts exactly the awards that
// exist, status is not completed. The next recompute mints the rest, each
// part audited once.
func TestCrashBetweenMintTransactionsLeavesAConsistentPrefix(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.putModel("rocket", 99)
	e.putMilestone("u-crash", "m1", fixture.Definition(fixture.Parts(99)))
	e.longRun("u-crash")
	st := e.stores()
	fs := &faultyStore{MilestoneStore: st.Milestones, AuditLog: st.Audits, db: e.s.DB, bumpBeforeWrite: 2}
	st.Milestones, st.Audits = fs, fs
	crashing := consumer.New(st, consumer.Options{Metrics: e.metrics, MaxAttempts: 1})
	if _, err := crashing.RecomputeUser(e.ctx, "u-crash", false); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("second transaction: got %v, want a conflict", err)
	}
	n := e.checkAudited("u-crash", "m1")
	m := e.milestone("u-crash", "m1")
	if n == 0 || n >= 99 || m.AwardedParts != n || m.Status != model.StatusActive {
		t.Fatalf("after the failed second transaction: %d awards, milestone %+v; want a partial prefix counted exactly, active", n, m.Projection)
	}
	for i, a := range e.awards("u-crash", "m1") {
		if a.PartIndex != i {
			t.Fatalf("awards are not a prefix: award %d is part %d", i, a.PartIndex)
		}
	}

	c := e.consumer(consumer.Options{})
	if _, err := c.RecomputeUser(e.ctx, "u-crash", false); err != nil {
		t.Fatal(err)
	}
	if n := e.checkAudited("u-crash", "m1"); n != 99 {
		t.Fatalf("after the next recompute: %d awards, want 99", n)
	}
	if m := e.milestone("u-crash", "m1"); m.AwardedParts != 99 || m.Status != model.StatusCompleted {
		t.Fatalf("after the next recompute: %+v", m.Projection)
	}
}

// TestRetriedMintAuditsOnce: the same batch delivered twice and the same
// user recomputed again audit each part once; an award item lost (deleted
// by hand) is minted again without a second AWARD_MINTED entry and without
// the transaction failing on the entry that exists.
func TestRetriedMintAuditsOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.putModel("rocket", 10)
	e.putMilestone("u-retry", "m1", fixture.Definition(fixture.Parts(10)))
	e.putWorkout(fixture.Workout("u-retry", 101, fixture.Day(1), fixture.Km(25), fixture.Corr("corr-25")))
	recs := e.newRecords()
	c := e.consumer(consumer.Options{MaxAttempts: 2})
	for range 2 {
		if resp := e.handle(c, recs); len(resp.BatchItemFailures) != 0 {
			t.Fatalf("failures: %+v", resp.BatchItemFailures)
		}
	}
	if _, err := c.RecomputeUser(e.ctx, "u-retry", false); err != nil {
		t.Fatal(err)
	}
	if n := e.checkAudited("u-retry", "m1"); n != 2 {
		t.Fatalf("awards: got %d, want 2", n)
	}

	if err := e.s.DB.Delete(e.ctx, e.s.DB.Tables().Main, keys.AwardKey("u-retry", "m1", 1)); err != nil {
		t.Fatal(err)
	}
	rep, err := c.RecomputeUser(e.ctx, "u-retry", false)
	if err != nil {
		t.Fatalf("re-minting a lost award item: %v", err)
	}
	if got := rep.Milestones[0].Minted; len(got) != 1 || got[0] != 1 {
		t.Fatalf("minted %v, want [1]", got)
	}
	if n := e.checkAudited("u-retry", "m1"); n != 2 {
		t.Fatalf("awards after the repair: got %d, want 2", n)
	}
}

// TestHandRaisedCounterIsNotMinted: observation 6 on the live path. A
// counter raised by hand is lowered to what is justified, nothing is minted
// past it, the milestone does not complete, and the report says why.
func TestHandRaisedCounterIsNotMinted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.putModel("rocket", 12)
	e.putMilestone("u-raised", "m1", fixture.Definition(fixture.Parts(12)))
	e.putWorkout(fixture.Workout("u-raised", 101, fixture.Day(1), fixture.Km(50), fixture.Corr("corr-50"))) // earns 6 of 12
	c := e.consumer(consumer.Options{})
	if _, err := c.RecomputeUser(e.ctx, "u-raised", false); err != nil {
		t.Fatal(err)
	}
	m := e.milestone("u-raised", "m1")
	if _, err := e.s.DB.UpdateVersioned(e.ctx, e.s.DB.Tables().Main, keys.MilestoneKey("u-raised", "m1"), m.Version,
		dynamo.Changes{Set: map[string]any{"awardedParts": 12}}); err != nil {
		t.Fatal(err)
	}
	dry, err := c.RecomputeUser(e.ctx, "u-raised", true)
	if err != nil {
		t.Fatal(err)
	}
	mr := dry.Milestones[0]
	if len(mr.Minted) != 0 || mr.Recomputed.AwardedParts != 6 || len(mr.Unjustified) != 6 || mr.Unjustified[0] != 6 {
		t.Fatalf("dry run: minted %v, recomputed %+v, unjustified %v; want nothing minted, 6 parts, 6..11 unjustified",
			mr.Minted, mr.Recomputed, mr.Unjustified)
	}
	if msg := mr.UnjustifiedMessage(); msg == "" || !mr.Drift() {
		t.Fatalf("no drift reported for the raised counter: %v", mr.Diffs())
	}
	if _, err := c.RecomputeUser(e.ctx, "u-raised", false); err != nil {
		t.Fatal(err)
	}
	m = e.milestone("u-raised", "m1")
	if m.AwardedParts != 6 || m.Status != model.StatusActive {
		t.Fatalf("after recompute: %+v, want the counter back at 6 and active", m.Projection)
	}
	if n := e.checkAudited("u-raised", "m1"); n != 6 {
		t.Fatalf("awards: got %d, want 6", n)
	}
}

// TestLegacyAuditedAwardsStay: awards minted before audit keys were
// deterministic have their AWARD_MINTED entries keyed at the second of the
// mint. They still justify their awards when the log no longer earns them;
// an award item with no entry at all does not.
func TestLegacyAuditedAwardsStay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.putModel("rocket", 10)
	e.putMilestone("u-legacy", "m1", fixture.Definition(fixture.Parts(10)))
	e.putWorkout(fixture.Workout("u-legacy", 101, fixture.Day(1), fixture.Km(10), fixture.Corr("corr-10"))) // earns part 0 only
	// Ten days ago: well within the audit retention, so age alone justifies nothing.
	mintedAt := time.Now().UTC().AddDate(0, 0, -10).Truncate(time.Second).Add(500 * time.Millisecond)
	for i := range 4 {
		if err := e.s.DB.Put(e.ctx, e.s.DB.Tables().Main, &model.Award{UserID: "u-legacy", MilestoneID: "m1", ModelID: "rocket",
			PartIndex: i, AwardedAtUtc: mintedAt, ActivityID: 99}); err != nil {
			t.Fatal(err)
		}
		if i == 3 {
			continue // its entry was lost (observation 3)
		}
		legacy := model.NewAuditEntry(keys.UserPK("u-legacy"), "u-legacy", consumer.EventAwardMinted, "corr-old",
			fmt.Sprintf("old-digest-%d", i), mintedAt, map[string]string{"milestoneId": "m1", "partIndex": strconv.Itoa(i)})
		if err := e.s.Audits.AppendAudit(e.ctx, legacy); err != nil {
			t.Fatal(err)
		}
	}
	m := e.milestone("u-legacy", "m1")
	if _, err := e.s.DB.UpdateVersioned(e.ctx, e.s.DB.Tables().Main, m.Key, m.Version,
		dynamo.Changes{Set: map[string]any{"awardedParts": 4}}); err != nil {
		t.Fatal(err)
	}
	c := e.consumer(consumer.Options{})
	rep, err := c.RecomputeUser(e.ctx, "u-legacy", false)
	if err != nil {
		t.Fatal(err)
	}
	mr := rep.Milestones[0]
	if got := e.milestone("u-legacy", "m1"); got.AwardedParts != 3 || len(mr.Unjustified) != 1 || mr.Unjustified[0] != 3 || len(mr.Minted) != 0 {
		t.Fatalf("got %+v, unjustified %v, minted %v; want 3 parts kept (legacy entries), part 3 unjustified, nothing minted",
			got.Projection, mr.Unjustified, mr.Minted)
	}
}
