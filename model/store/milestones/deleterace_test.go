package milestones_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ports"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/test/dynamolocal"
)

// TestAMintRacingADeleteLeavesNoAward: a projector mints a milestone's
// first part after the deletion read the milestone and before its
// transaction. No award item of the milestone is left; the award stays in
// the collection (awards are permanent). Protection: the award keys are
// read after the deletion's transaction (deleteLeftovers); read before, the
// new award item outlives its milestone.
func TestAMintRacingADeleteLeavesNoAward(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	const user = "u-mintdel"
	at := time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC)
	if err := s.Milestones.CreateMilestone(ctx, &model.Milestone{UserID: user, MilestoneID: "m1", MilestoneDefinition: model.MilestoneDefinition{
		ModelID: "rocket", Title: "t", Metric: model.MetricCount, Target: 2, PartCount: 2, PeriodStartAtUtc: at},
		Projection: model.Projection{Status: model.StatusActive}}); err != nil {
		t.Fatal(err)
	}
	raced := false
	s.Collection.Deleting = func(string, string) {
		raced = true
		w := ports.ProjectionWrite{UserID: user, MilestoneID: "m1", ExpectedVersion: 0, Token: "race-1",
			Projection: model.Projection{ProgressValue: 1, AwardedParts: 1, Status: model.StatusActive},
			Awards:     []*model.Award{{UserID: user, MilestoneID: "m1", PartIndex: 0, ActivityID: 7, AwardedAtUtc: at}}}
		if err := s.Milestones.WriteProjection(ctx, w); err != nil {
			t.Errorf("mint during the deletion: %v", err)
		}
	}
	if err := s.Collection.DeleteMilestone(ctx, user, "m1"); err != nil {
		t.Fatal(err)
	}
	left, err := s.DB.QueryPrefix(ctx, s.DB.Tables().Main, keys.UserPK(user), keys.AwardSKPrefix("m1"), dynamo.QueryOptions{})
	if err != nil || !raced || len(left.Items) != 0 {
		t.Fatalf("%d award items left after the deletion (%v, raced %v), want none", len(left.Items), err, raced)
	}
	collected, _, err := s.Collection.CollectedAwards(ctx, user, "", 10)
	if err != nil || len(collected) != 1 {
		t.Fatalf("collection holds %d awards (%v), want the one minted", len(collected), err)
	}
}

// TestAPeriodOfADeletedSeriesIsNeitherStartedNorMinted: once a series'
// item is gone, a projector that read it before the deletion can neither
// start a period's item nor mint on a period's own item left for the
// deletion's sweep: both fail as a conflict (the projector re-reads and
// finds no series), and nothing is written, no collection entry either.
// Protections: the series' check in StartPeriod and in WriteProjection's
// mint on a period's own item (without either the write lands after the
// deletion).
func TestAPeriodOfADeletedSeriesIsNeitherStartedNorMinted(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	const user, series, week = "u-gone", "s-gone", "2026-03-02"
	at := time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC)
	period := &model.Milestone{UserID: user, MilestoneID: series, PeriodOf: week, CreatedAtUtc: at,
		MilestoneDefinition: model.MilestoneDefinition{PartCount: 2}, Projection: model.Projection{Status: model.StatusActive}}
	if err := s.Milestones.StartPeriod(ctx, period); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("starting a period of no series: %v, want a conflict", err)
	}
	if err := s.DB.Get(ctx, s.DB.Tables().Main, keys.SeriesPeriodKey(user, series, week), &model.Milestone{}); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("a period item of no series: %v, want none", err)
	}
	if err := s.DB.Put(ctx, s.DB.Tables().Main, period); err != nil { // left behind, not yet swept
		t.Fatal(err)
	}
	w := ports.ProjectionWrite{UserID: user, MilestoneID: series, PeriodOf: week, ExpectedVersion: 0, Token: "gone-1",
		Projection: model.Projection{ProgressValue: 1, AwardedParts: 1, Status: model.StatusActive},
		Awards:     []*model.Award{{UserID: user, MilestoneID: series, PeriodOf: week, PartIndex: 0, ActivityID: 7, AwardedAtUtc: at}}}
	if err := s.Milestones.WriteProjection(ctx, w); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("a mint on a period of no series: %v, want a conflict", err)
	}
	if collected, _, err := s.Collection.CollectedAwards(ctx, user, "", 10); err != nil || len(collected) != 0 {
		t.Fatalf("collection holds %d awards (%v), want none", len(collected), err)
	}
}

// TestStartPeriodKeepsTheFirstStart: the second start of a period writes
// nothing and takes the createdAtUtc the item keeps, under which its
// awards' audit entries are keyed. Protection: StartPeriod's read of the
// stored item on a conflict.
func TestStartPeriodKeepsTheFirstStart(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	const user, series, week = "u-twice", "s-twice", "2026-03-02"
	first := time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC)
	if err := s.Milestones.CreateMilestone(ctx, &model.Milestone{UserID: user, MilestoneID: series, MilestoneDefinition: model.MilestoneDefinition{
		ModelID: "rocket", Title: "weekly", Metric: model.MetricCount, Target: 1, PartCount: 2, Recurrence: "weekly",
		PeriodStartDate: "2026-02-02"}, Projection: model.Projection{Status: model.StatusActive}}); err != nil {
		t.Fatal(err)
	}
	for i, p := range []*model.Milestone{
		{UserID: user, MilestoneID: series, PeriodOf: week, CreatedAtUtc: first},
		{UserID: user, MilestoneID: series, PeriodOf: week, CreatedAtUtc: first.Add(time.Second)},
	} {
		if err := s.Milestones.StartPeriod(ctx, p); err != nil || !p.CreatedAtUtc.Equal(first) {
			t.Fatalf("start %d: %v, createdAtUtc %s; want the first start's %s", i+1, err, p.CreatedAtUtc, first)
		}
	}
}
