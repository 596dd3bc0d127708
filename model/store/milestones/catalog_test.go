package milestones_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/catalog"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/test/dynamolocal"
)

func TestSeedCatalogIsIdempotent(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	c, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, m := range c.Models {
		want += 1 + m.PartCount
	}
	n, err := catalog.Seed(ctx, s.Milestones, c)
	if err != nil || n != want {
		t.Fatalf("first seed changed %d items (%v), want %d", n, err, want)
	}
	if n, err := catalog.Seed(ctx, s.Milestones, c); err != nil || n != 0 {
		t.Fatalf("re-seed changed %d items (%v), want 0", n, err)
	}
	meta, err := s.Milestones.ModelMeta(ctx, "saturn-v")
	if err != nil || meta.PartCount != 10 || meta.Name != "Saturn V" || meta.CatalogVersion != c.Version {
		t.Fatalf("saturn-v meta = %+v, %v", meta, err)
	}

	// A new version that shrinks a model rewrites it and drops the extra parts.
	m, _ := c.Model("flying-scotsman")
	m.PartCount, m.Parts = 2, m.Parts[:2]
	m.Parts[1].Name = "Frames"
	next := &catalog.Catalog{Version: c.Version + 1, Models: []catalog.Model{m}}
	if n, err := catalog.Seed(ctx, s.Milestones, next); err != nil || n != 1+1+4 {
		t.Fatalf("shrinking seed changed %d (%v), want 6 (meta, one renamed part, four removed)", n, err)
	}
	parts, _, err := dynamo.QueryEntities[model.ModelPart](ctx, s.DB, s.DB.Tables().Main, keys.ModelPK("flying-scotsman"), keys.PrefixPart, dynamo.QueryOptions{})
	if err != nil || len(parts) != 2 || parts[1].Name != "Frames" {
		t.Fatalf("parts after shrink = %+v, %v", parts, err)
	}
	// The old catalog may not overwrite the newer one.
	if _, err := catalog.Seed(ctx, s.Milestones, c); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("seeding an older catalog: got %v, want ErrConflict", err)
	}
	if _, err := s.Milestones.ModelMeta(ctx, "nope"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("unknown model: %v", err)
	}
}

func TestUserMilestonesGroupsAwards(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, id := range []string{"ab", "abc"} {
		m := &model.Milestone{UserID: "u1", MilestoneID: id, MilestoneDefinition: model.MilestoneDefinition{
			ModelID: "road-bike", Title: id, Metric: model.MetricCount, Target: 4, PeriodStartAtUtc: start, PartCount: 8}}
		if err := s.Milestones.CreateMilestone(ctx, m); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			if err := s.DB.Put(ctx, s.DB.Tables().Main, &model.Award{UserID: "u1", MilestoneID: id, PartIndex: i, PartName: "p"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Milestones.CreateMilestone(ctx, &model.Milestone{UserID: "u1", MilestoneID: "ab"}); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("duplicate milestone: %v", err)
	}
	all, truncated, err := s.Milestones.MilestonesWithAwards(ctx, "u1", "")
	if err != nil || truncated || len(all) != 2 || len(all[0].Awards) != 2 || len(all[1].Awards) != 2 {
		t.Fatalf("all milestones = %+v, %v, %v", all, truncated, err)
	}
	one, _, err := s.Milestones.MilestonesWithAwards(ctx, "u1", "ab")
	if err != nil || len(one) != 1 || one[0].Milestone.MilestoneID != "ab" || len(one[0].Awards) != 2 || one[0].Awards[1].PartIndex != 1 {
		t.Fatalf("milestone ab = %+v, %v (the prefix must not pull in abc)", one, err)
	}
	if none, _, err := s.Milestones.MilestonesWithAwards(ctx, "u2", "ab"); err != nil || len(none) != 0 {
		t.Fatalf("another user's read = %+v, %v", none, err)
	}
}

// TestConcurrentMilestoneCreationsStopAtTheCap: creations racing at the
// cap never exceed model.MaxMilestonesPerUser (the count is part of the
// creating transaction, conditioned on the value read).
func TestConcurrentMilestoneCreationsStopAtTheCap(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	for i := range model.MaxMilestonesPerUser - 3 {
		if err := s.Milestones.CreateMilestone(ctx, &model.Milestone{UserID: "u1", MilestoneID: fmt.Sprintf("m%02d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	var created atomic.Int64
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.Milestones.CreateMilestone(ctx, &model.Milestone{UserID: "u1", MilestoneID: fmt.Sprintf("race%d", i)})
			switch {
			case err == nil:
				created.Add(1)
			case !errors.Is(err, model.ErrConflict):
				t.Errorf("racing creation: %v", err)
			}
		}()
	}
	wg.Wait()
	um, err := s.Milestones.UserMilestones(ctx, "u1")
	if err != nil || len(um.Milestones) > model.MaxMilestonesPerUser || int64(len(um.Milestones)) != model.MaxMilestonesPerUser-3+created.Load() {
		t.Fatalf("got %d milestones (%d racing creations succeeded), %v; want at most %d, each success counted",
			len(um.Milestones), created.Load(), err, model.MaxMilestonesPerUser)
	}
	if err := s.Milestones.CreateMilestone(ctx, &model.Milestone{UserID: "u1", MilestoneID: "after"}); len(um.Milestones) == model.MaxMilestonesPerUser && !errors.Is(err, model.ErrMilestoneLimit) {
		t.Fatalf("at the cap: got %v, want model.ErrMilestoneLimit", err)
	}
}
