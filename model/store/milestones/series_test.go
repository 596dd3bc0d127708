package milestones_test

import (
	"context"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/calendar"
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
	if err := s.BatchPut(ctx, s.Tables().Main, es); err != nil {
		t.Fatal(err)
	}
	got, err := s.SeriesPeriods(ctx, user, series, nil)
	if err != nil {
		t.Fatal(err)
	}
	newest := calendar.FormatDate(first.AddDate(0, 0, 7*(weeks-1)))
	if len(got) != weeks || got[newest].Period == nil || len(got[newest].Awards) != parts {
		t.Fatalf("read %d periods (the newest, %s: %+v), want all %d with their %d awards", len(got), newest, got[newest], weeks, parts)
	}
}
