package consumer_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/projections/consumer"
	"github.com/commitcollect/backend/test/fixture"
)

// TestMintFilesEachAwardInTheCollection: the mint writes each award's
// collection entry in its own transaction, with the part's name and
// metadata as they were then; a later catalog change alters neither the
// award nor its entry. Protection: the collection Put in WriteProjection
// (without it the collection is empty).
func TestMintFilesEachAwardInTheCollection(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.putModel("rocket", 10)
	e.putMilestone("u-coll", "m1", fixture.Definition(fixture.Parts(10)))
	e.putWorkout(fixture.Workout("u-coll", 101, fixture.Day(1), fixture.Km(30), fixture.Corr("corr-30")))
	c := e.consumer(consumer.Options{PartsTTL: -1})
	if _, err := c.RecomputeUser(e.ctx, "u-coll", false); err != nil {
		t.Fatal(err)
	}
	if err := e.s.DB.Put(e.ctx, e.s.DB.Tables().Main, &model.ModelPart{ModelID: "rocket", PartIndex: 0, Name: "renamed"}); err != nil {
		t.Fatal(err)
	}
	e.putWorkout(fixture.Workout("u-coll", 102, fixture.Day(2), fixture.Km(30), fixture.Corr("corr-60")))
	if _, err := c.RecomputeUser(e.ctx, "u-coll", false); err != nil {
		t.Fatal(err)
	}
	entries, next, err := e.s.Collection.CollectedAwards(e.ctx, "u-coll", "", 100)
	if err != nil || next != "" || len(entries) != 6 {
		t.Fatalf("collection: %d entries (next %q), %v; want 6", len(entries), next, err)
	}
	byPart := map[int]model.Award{}
	for _, a := range entries {
		byPart[a.PartIndex] = a
	}
	for _, a := range e.awards("u-coll", "m1") {
		got := byPart[a.PartIndex]
		if !a.Collected || got.ModelID != "rocket" || got.PartName != a.PartName || got.ActivityID != a.ActivityID ||
			!got.AwardedAtUtc.Equal(a.AwardedAtUtc) || got.PartName == "renamed" {
			t.Errorf("award %+v, its entry %+v: want the same award, filed, named as at its mint", a, got)
		}
	}
	if byPart[0].PartName == "" || byPart[3].PartName == "renamed" {
		t.Errorf("entries %+v: want part names copied at the mint", byPart)
	}
}

// TestLegacyAwardsAreFiledOnce: awards minted before the collection (no
// collected mark) are filed by the next recompute of their milestone, once:
// a second recompute files nothing (no CollectAwards call at all).
// Protection: Consumer.collect's check of the collected mark.
func TestLegacyAwardsAreFiledOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.putModel("rocket", 10)
	e.putMilestone("u-legacy", "m1", fixture.Definition(fixture.Parts(10)))
	e.putWorkout(fixture.Workout("u-legacy", 101, fixture.Day(1), fixture.Km(20), fixture.Corr("corr-20")))
	minted := time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)
	for i := range 2 { // as an older release left them: award items only
		a := &model.Award{UserID: "u-legacy", MilestoneID: "m1", ModelID: "rocket", PartIndex: i, PartName: "old",
			AwardedAtUtc: minted, ActivityID: 101}
		if err := e.s.DB.Put(e.ctx, e.s.DB.Tables().Main, a); err != nil {
			t.Fatal(err)
		}
	}
	st := e.stores()
	spy := &collectSpy{Collector: st.Collection}
	st.Collection = spy
	c := consumer.New(st, consumer.Options{Metrics: e.metrics})
	for i := range 2 {
		if _, err := c.RecomputeUser(e.ctx, "u-legacy", false); err != nil {
			t.Fatal(err)
		}
		if n := spy.calls.Load(); n != 1 {
			t.Fatalf("after recompute %d: %d CollectAwards calls, want exactly 1 (filed once)", i+1, n)
		}
	}
	entries, _, err := e.s.Collection.CollectedAwards(e.ctx, "u-legacy", "", 100)
	if err != nil || len(entries) != 2 {
		t.Fatalf("collection: %+v, %v; want the two legacy awards", entries, err)
	}
	for _, a := range entries {
		if a.ItemKey() != keys.AwardKey("u-legacy", "m1", a.PartIndex) || !a.AwardedAtUtc.Equal(minted) || a.PartName != "old" {
			t.Errorf("entry %+v: want the legacy award as it was", a)
		}
	}
	for _, a := range e.awards("u-legacy", "m1") {
		if !a.Collected {
			t.Errorf("award %d not marked collected", a.PartIndex)
		}
	}
}

// collectSpy is the real store, counting CollectAwards calls.
type collectSpy struct {
	consumer.Collector
	calls atomic.Int64
}

func (s *collectSpy) CollectAwards(ctx context.Context, awards []model.Award) error {
	s.calls.Add(1)
	return s.Collector.CollectAwards(ctx, awards)
}
