package milestones_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/ports"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/metering"
	"github.com/commitcollect/backend/test/dynamolocal"
)

// mint mints parts of a milestone of modelID for user, in transactions of
// 30 awards, as the projector does.
func mint(t *testing.T, s *store.Adapters, user, milestone, modelID string, parts int) {
	t.Helper()
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 7, 0, 0, 0, time.UTC)
	if err := s.DB.Put(ctx, s.DB.Tables().Main, &model.Milestone{UserID: user, MilestoneID: milestone, MilestoneDefinition: model.MilestoneDefinition{
		ModelID: modelID, Title: milestone, Metric: model.MetricCount, Target: float64(parts), PartCount: parts, PeriodStartAtUtc: at},
		Projection: model.Projection{Status: model.StatusActive}}); err != nil {
		t.Fatal(err)
	}
	for v, from := int64(0), 0; from < parts; v, from = v+1, from+30 {
		w := ports.ProjectionWrite{UserID: user, MilestoneID: milestone, ExpectedVersion: v,
			Projection: model.Projection{AwardedParts: min(parts, from+30), Status: model.StatusActive}}
		for i := from; i < min(parts, from+30); i++ {
			w.Awards = append(w.Awards, &model.Award{UserID: user, MilestoneID: milestone, ModelID: modelID, PartIndex: i,
				ActivityID: 1, AwardedAtUtc: at.Add(time.Duration(i) * time.Second)})
		}
		if err := s.Milestones.WriteProjection(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
}

// olderEntries files n collection entries of model rocket (parts 0 to
// parts-1 in turn) as a release before the summary did: unmarked, counted
// by no summary.
func olderEntries(t *testing.T, s *store.Adapters, user string, n, parts int) {
	t.Helper()
	at := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	items := make([]dynamo.Item, 0, n)
	for i := range n {
		a := &model.Award{UserID: user, MilestoneID: fmt.Sprintf("old%d", i/parts), ModelID: "rocket", PartIndex: i % parts,
			AwardedAtUtc: at.Add(time.Duration(i) * time.Hour), Collected: true}
		item, err := dynamo.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		k := a.CollectedKey()
		item["PK"], item["SK"] = &types.AttributeValueMemberS{Value: k.PK}, &types.AttributeValueMemberS{Value: k.SK}
		items = append(items, item)
	}
	if err := s.DB.BatchPutItems(context.Background(), s.DB.Tables().Main, items); err != nil {
		t.Fatal(err)
	}
}

// TestCollectionSummaryCountsEachEntryOnce: a collection of 30 entries
// from before the summary (nothing counts them) and 5 minted since (the
// mint counts them): the summary is incomplete until SummarizeCollection
// counts the 30, 10 at a time, then whole; counting again adds nothing.
// Protections: the mint's summary update (the 5 would be missing), the
// walk's skip of marked entries (a re-run would find none to count only
// through conflicts), the header only once every entry is counted.
func TestCollectionSummaryCountsEachEntryOnce(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	const user = "u-sum"
	olderEntries(t, s, user, 30, 10) // filed by an older release: no summary counts them
	mint(t, s, user, "new", "rocket", 5)
	sums, complete, err := s.Collection.CollectionSummary(ctx, user)
	if err != nil || complete || sums["rocket"][0] != 1 || len(sums["rocket"]) != 5 {
		t.Fatalf("before counting the older entries: %v complete %v (%v); want the 5 minted, incomplete", sums, complete, err)
	}
	var rounds []string
	for range 5 {
		n, done, err := s.Collection.SummarizeCollection(ctx, user, 10)
		if err != nil {
			t.Fatal(err)
		}
		rounds = append(rounds, fmt.Sprintf("%d %v", n, done))
		if done {
			break
		}
	}
	if fmt.Sprint(rounds) != "[10 false 10 false 10 true]" {
		t.Fatalf("rounds of 10: %v; want three of 10, the header with the last", rounds)
	}
	if n, done, err := s.Collection.SummarizeCollection(ctx, user, 0); err != nil || n != 0 || !done {
		t.Fatalf("again: %d %v %v; want nothing counted", n, done, err)
	}
	sums, complete, err = s.Collection.CollectionSummary(ctx, user)
	want := map[int]int{0: 4, 1: 4, 2: 4, 3: 4, 4: 4, 5: 3, 6: 3, 7: 3, 8: 3, 9: 3}
	if err != nil || !complete || fmt.Sprint(sums["rocket"]) != fmt.Sprint(want) {
		t.Fatalf("summary %v complete %v (%v); want %v", sums, complete, err, want)
	}
}

// TestCollectionSummaryCostsTheSameAtAnySize: reading the summary of 60
// awards and of 1,188 (12 milestones of 99 parts, two models) costs the
// same requests and read units, and counts every award. Protection: the
// summary (counting the entries costs a read unit per 4 KB of them).
func TestCollectionSummaryCostsTheSameAtAnySize(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	cost := map[string]metering.Snapshot{}
	for _, tt := range []struct {
		user       string
		milestones int
		parts      int
	}{{"u-small", 2, 30}, {"u-large", 12, 99}} {
		for m := range tt.milestones {
			mint(t, s, tt.user, fmt.Sprintf("m%02d", m), []string{"rocket", "yacht"}[m%2], tt.parts)
		}
		if _, done, err := s.Collection.SummarizeCollection(ctx, tt.user, 0); err != nil || !done {
			t.Fatalf("%s: %v %v", tt.user, done, err)
		}
		mctx, meter := metering.StartMeter(ctx)
		sums, complete, err := s.Collection.CollectionSummary(mctx, tt.user)
		total := 0
		for _, parts := range sums {
			for _, n := range parts {
				total += n
			}
		}
		if err != nil || !complete || total != tt.milestones*tt.parts {
			t.Fatalf("%s: %d awards counted (%v, complete %v), want %d", tt.user, total, err, complete, tt.milestones*tt.parts)
		}
		cost[tt.user] = meter.Snapshot()
	}
	small, large := cost["u-small"], cost["u-large"]
	t.Logf("summary read: 60 awards %d requests %.1f RCU; 1,188 awards %d requests %.1f RCU", small.Requests, small.RCU, large.Requests, large.RCU)
	if small.Requests != large.Requests || small.RCU != large.RCU {
		t.Fatalf("60 awards cost %+v, 1,188 cost %+v: want the same", small.Units, large.Units)
	}
}

// TestCollectionSummaryCountsRacingWritersOnce: four walks counting the
// same 120 older entries at once, and two recomputes filing the same two
// legacy awards (both read them uncollected), count each entry once.
// Protections: the mark's condition in SummarizeCollection (an entry not
// yet marked; without it the walks count an entry once each) and
// CollectAwards' condition on an unsummarized entry (without it the second
// filing counts again).
func TestCollectionSummaryCountsRacingWritersOnce(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	const user = "u-race-sum"
	olderEntries(t, s, user, 120, 4)
	at := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	var legacy []model.Award
	for i := range 2 {
		a := model.Award{UserID: user, MilestoneID: "m1", ModelID: "yacht", PartIndex: i, AwardedAtUtc: at.AddDate(0, 1, i)}
		if err := s.DB.Put(ctx, s.DB.Tables().Main, &a); err != nil {
			t.Fatal(err)
		}
		legacy = append(legacy, a)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := s.Collection.SummarizeCollection(ctx, user, 0); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for range 2 { // two recomputes, each holding the awards as read before either filed them
		if err := s.Collection.CollectAwards(ctx, legacy); err != nil {
			t.Fatal(err)
		}
	}
	sums, complete, err := s.Collection.CollectionSummary(ctx, user)
	want := "map[rocket:map[0:30 1:30 2:30 3:30] yacht:map[0:1 1:1]]"
	if err != nil || !complete || fmt.Sprint(sums) != want {
		t.Fatalf("summary %v complete %v (%v); want %s", sums, complete, err, want)
	}
}
