package milestones_test

import (
	"context"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/calendar"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/test/dynamolocal"
)

// TestSeriesPeriodsReadsEveryPeriodPastOnePage: a weekly series of 280
// completed periods with 10 awards each holds 3,080 items, past the 3,000
// one query returns; reading every period finds each one, its newest
// weeks (read last) and their awards included. Protection: paging the
// series' prefix to its end (dynamo.QueryEach); one QueryPrefix drops the
// newest weeks.
func TestSeriesPeriodsReadsEveryPeriodPastOnePage(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	const user, series, weeks, parts = "u-long", "s-long", 280, 10
	first := time.Date(2021, 1, 4, 0, 0, 0, 0, time.UTC) // a Monday
	var es []model.Entity
	for w := range weeks {
		start := calendar.FormatDate(first.AddDate(0, 0, 7*w))
		es = append(es, &model.Milestone{UserID: user, MilestoneID: series, PeriodOf: start,
			MilestoneDefinition: model.MilestoneDefinition{PartCount: parts},
			Projection:          model.Projection{Status: model.StatusCompleted, AwardedParts: parts}})
		for i := range parts {
			es = append(es, &model.Award{UserID: user, MilestoneID: series, PeriodOf: start, PartIndex: i, AwardedAtUtc: first})
		}
	}
	if err := s.DB.BatchPut(ctx, s.DB.Tables().Main, es); err != nil {
		t.Fatal(err)
	}
	got, err := s.Milestones.SeriesPeriods(ctx, user, series, nil)
	if err != nil {
		t.Fatal(err)
	}
	newest := calendar.FormatDate(first.AddDate(0, 0, 7*(weeks-1)))
	if len(got) != weeks || got[newest].Period == nil || len(got[newest].Awards) != parts {
		t.Fatalf("read %d periods (the newest, %s: %+v), want all %d with their %d awards", len(got), newest, got[newest], weeks, parts)
	}
}

// TestDeletingALongSeriesLeavesNoPeriod: deleting a weekly series of 280
// periods with their awards (3,080 items, past one query's page) removes
// its item and every period and award item, the newest included; the
// awards stay in the collection. Protection: the deletion's read of the
// series' prefix to its end (dynamo.QueryEach).
func TestDeletingALongSeriesLeavesNoPeriod(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	const user, series, weeks, parts = "u-del", "s-del", 280, 10
	first := time.Date(2021, 1, 4, 0, 0, 0, 0, time.UTC)
	if err := s.Milestones.CreateMilestone(ctx, &model.Milestone{UserID: user, MilestoneID: series, MilestoneDefinition: model.MilestoneDefinition{
		ModelID: "rocket", Title: "weekly", Metric: model.MetricCount, Target: 1, PartCount: parts, Recurrence: "weekly",
		PeriodStartDate: calendar.FormatDate(first)}, Projection: model.Projection{Status: model.StatusActive}}); err != nil {
		t.Fatal(err)
	}
	var es []model.Entity
	for w := range weeks {
		start := calendar.FormatDate(first.AddDate(0, 0, 7*w))
		es = append(es, &model.Milestone{UserID: user, MilestoneID: series, PeriodOf: start,
			MilestoneDefinition: model.MilestoneDefinition{PartCount: parts}, Projection: model.Projection{Status: model.StatusCompleted}})
		for i := range parts {
			es = append(es, &model.Award{UserID: user, MilestoneID: series, PeriodOf: start, PartIndex: i, AwardedAtUtc: first, Collected: true})
		}
	}
	if err := s.DB.BatchPut(ctx, s.DB.Tables().Main, es); err != nil {
		t.Fatal(err)
	}
	if err := s.Collection.DeleteMilestone(ctx, user, series); err != nil {
		t.Fatal(err)
	}
	left, err := s.Milestones.SeriesPeriods(ctx, user, series, nil)
	if err != nil || len(left) != 0 {
		t.Fatalf("after the deletion %d periods are left (%v), want none", len(left), err)
	}
}

// TestACreateRacingADeleteKeepsTheCount: a user with two milestones and no
// count item yet (an older account); a creation counts them, and before
// its transaction a deletion of one of them commits. The count ends at the
// two milestones there are, not three: the deletion writes the count item
// first, so the creation's transaction fails and reads it again.
// Protection: milestoneCount in DeleteMilestone (without it the deletion
// skips the missing count and the creation stores 3: a slot lost for good).
func TestACreateRacingADeleteKeepsTheCount(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	const user = "u-race"
	def := model.MilestoneDefinition{ModelID: "rocket", Title: "t", Metric: model.MetricCount, Target: 1, PartCount: 1,
		PeriodStartAtUtc: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
	for _, id := range []string{"m1", "m2"} { // written as an older release did: no count item
		if err := s.DB.Put(ctx, s.DB.Tables().Main, &model.Milestone{UserID: user, MilestoneID: id, MilestoneDefinition: def,
			Projection: model.Projection{Status: model.StatusActive}}); err != nil {
			t.Fatal(err)
		}
	}
	raced := false
	s.Milestones.Counted = func(string) {
		if !raced {
			raced = true
			if err := s.Collection.DeleteMilestone(ctx, user, "m1"); err != nil {
				t.Errorf("delete during the creation: %v", err)
			}
		}
	}
	if err := s.Milestones.CreateMilestone(ctx, &model.Milestone{UserID: user, MilestoneID: "m3", MilestoneDefinition: def,
		Projection: model.Projection{Status: model.StatusActive}}); err != nil {
		t.Fatal(err)
	}
	var cnt model.MilestoneCount
	if err := s.DB.Get(ctx, s.DB.Tables().Main, keys.MilestoneCountKey(user), &cnt); err != nil || !raced || cnt.Count != 2 {
		t.Fatalf("count %d (%v, raced %v), want 2: m2 and m3", cnt.Count, err, raced)
	}
}
