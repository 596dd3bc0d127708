package store_test

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
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/dynerr"
	"github.com/commitcollect/backend/test/dynamolocal"
)

func newUser(userID string, athleteID int64) (*model.Profile, *model.StravaConnection) {
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	return &model.Profile{UserID: userID, AthleteID: athleteID, DisplayName: "A " + userID, CreatedAtUtc: at},
		&model.StravaConnection{UserID: userID, AthleteID: athleteID, AccessToken: "a", RefreshToken: "r", TokenVersion: 1, UpdatedAtUtc: at}
}

func TestCreateUserLinksAnAthleteOnce(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	p, c := newUser("u1", 42)
	if err := s.CreateUser(ctx, p, c); err != nil {
		t.Fatal(err)
	}
	p2, c2 := newUser("u2", 42)
	err := s.CreateUser(ctx, p2, c2)
	var te *dynerr.TransactionError
	if !errors.Is(err, model.ErrConflict) || !errors.As(err, &te) {
		t.Fatalf("second user for athlete 42: got %v, want a TransactionError matching ErrConflict", err)
	}
	if _, err := s.Profile(ctx, "u2"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("half-linked user u2: profile read got %v, want ErrNotFound", err)
	}
	o, err := s.AthleteOwner(ctx, 42)
	if err != nil || o.UserID != "u1" {
		t.Fatalf("owner of 42 = %+v, %v; want u1", o, err)
	}
}

func TestSaveLoginTokensBumpsTokenVersion(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	p, c := newUser("u1", 7)
	if err := s.CreateUser(ctx, p, c); err != nil {
		t.Fatal(err)
	}
	fresh := &model.StravaConnection{UserID: "u1", AthleteID: 7, AccessToken: "a2", RefreshToken: "r2", Scopes: []string{"read"}}
	if err := s.SaveLoginTokens(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	got, err := s.StravaConnection(ctx, "u1")
	if err != nil || got.TokenVersion != 2 || got.AccessToken != "a2" || got.AthleteGSI1PK != keys.AthletePK(7) {
		t.Fatalf("connection = %+v, %v; want tokenVersion 2 with the new token", got, err)
	}
	// A connection that is gone (deauthorized) is created again.
	if err := s.Delete(ctx, s.Tables().Main, keys.StravaConnectionKey("u1")); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveLoginTokens(ctx, fresh); err != nil || fresh.TokenVersion != 1 {
		t.Fatalf("recreate: %v, tokenVersion %d", err, fresh.TokenVersion)
	}
}

// TestALoginRacingADeletionLeavesNoTokens: the tokens of a login whose
// write lands after the account's deletion began (its guard marked, its
// connection swept) are removed by the write's own check, which says so.
// Protection: SaveLoginTokens' check against the guard (without it the
// deleted account keeps a connection with live tokens).
func TestALoginRacingADeletionLeavesNoTokens(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	p, c := newUser("u9", 9)
	if err := s.CreateUser(ctx, p, c); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkUserDeleted(ctx, "u9", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, s.Tables().Main, keys.StravaConnectionKey("u9")); err != nil { // the deletion's sweep
		t.Fatal(err)
	}
	late := &model.StravaConnection{UserID: "u9", AthleteID: 9, AccessToken: "late", RefreshToken: "late-r", Scopes: []string{"read"}}
	if err := s.SaveLoginTokens(ctx, late); !errors.Is(err, model.ErrUserDeleted) {
		t.Fatalf("login after the deletion began: %v; want ErrUserDeleted", err)
	}
	if got, err := s.StravaConnection(ctx, "u9"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("connection %+v, %v after the deletion; want none", got, err)
	}
}

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
	n, err := catalog.Seed(ctx, s, c)
	if err != nil || n != want {
		t.Fatalf("first seed changed %d items (%v), want %d", n, err, want)
	}
	if n, err := catalog.Seed(ctx, s, c); err != nil || n != 0 {
		t.Fatalf("re-seed changed %d items (%v), want 0", n, err)
	}
	meta, err := s.ModelMeta(ctx, "saturn-v")
	if err != nil || meta.PartCount != 10 || meta.Name != "Saturn V" || meta.CatalogVersion != c.Version {
		t.Fatalf("saturn-v meta = %+v, %v", meta, err)
	}

	// A new version that shrinks a model rewrites it and drops the extra parts.
	m, _ := c.Model("flying-scotsman")
	m.PartCount, m.Parts = 2, m.Parts[:2]
	m.Parts[1].Name = "Frames"
	next := &catalog.Catalog{Version: c.Version + 1, Models: []catalog.Model{m}}
	if n, err := catalog.Seed(ctx, s, next); err != nil || n != 1+1+4 {
		t.Fatalf("shrinking seed changed %d (%v), want 6 (meta, one renamed part, four removed)", n, err)
	}
	parts, _, err := store.QueryEntities[model.ModelPart](ctx, s.DB, s.Tables().Main, keys.ModelPK("flying-scotsman"), keys.PrefixPart, store.QueryOptions{})
	if err != nil || len(parts) != 2 || parts[1].Name != "Frames" {
		t.Fatalf("parts after shrink = %+v, %v", parts, err)
	}
	// The old catalog may not overwrite the newer one.
	if _, err := catalog.Seed(ctx, s, c); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("seeding an older catalog: got %v, want ErrConflict", err)
	}
	if _, err := s.ModelMeta(ctx, "nope"); !errors.Is(err, model.ErrNotFound) {
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
		if err := s.CreateMilestone(ctx, m); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			if err := s.Put(ctx, s.Tables().Main, &model.Award{UserID: "u1", MilestoneID: id, PartIndex: i, PartName: "p"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.CreateMilestone(ctx, &model.Milestone{UserID: "u1", MilestoneID: "ab"}); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("duplicate milestone: %v", err)
	}
	all, truncated, err := s.MilestonesWithAwards(ctx, "u1", "")
	if err != nil || truncated || len(all) != 2 || len(all[0].Awards) != 2 || len(all[1].Awards) != 2 {
		t.Fatalf("all milestones = %+v, %v, %v", all, truncated, err)
	}
	one, _, err := s.MilestonesWithAwards(ctx, "u1", "ab")
	if err != nil || len(one) != 1 || one[0].Milestone.MilestoneID != "ab" || len(one[0].Awards) != 2 || one[0].Awards[1].PartIndex != 1 {
		t.Fatalf("milestone ab = %+v, %v (the prefix must not pull in abc)", one, err)
	}
	if none, _, err := s.MilestonesWithAwards(ctx, "u2", "ab"); err != nil || len(none) != 0 {
		t.Fatalf("another user's read = %+v, %v", none, err)
	}
}

func TestDeleteAthleteOwnerOfOnlyOwnMapping(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	p, c := newUser("u1", 9)
	if err := s.CreateUser(ctx, p, c); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteAthleteOwnerOf(ctx, 9, "someone-else"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AthleteOwner(ctx, 9); err != nil {
		t.Fatalf("mapping of another user was deleted: %v", err)
	}
	if err := s.DeleteAthleteOwnerOf(ctx, 9, "u1"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteAthleteOwnerOf(ctx, 9, "u1"); err != nil {
		t.Fatalf("re-run: %v", err)
	}
	if _, err := s.AthleteOwner(ctx, 9); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("mapping after delete: %v", err)
	}
	n, err := s.DeleteUserItems(ctx, "u1", "", func(p keys.ParsedKey) bool { return p.Kind == keys.KindProfile })
	if err != nil || n != 1 {
		t.Fatalf("DeleteUserItems deleted %d (%v), want 1 (the connection)", n, err)
	}
	if _, err := s.Profile(ctx, "u1"); err != nil {
		t.Fatalf("skipped profile: %v", err)
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
		if err := s.CreateMilestone(ctx, &model.Milestone{UserID: "u1", MilestoneID: fmt.Sprintf("m%02d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	var created atomic.Int64
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.CreateMilestone(ctx, &model.Milestone{UserID: "u1", MilestoneID: fmt.Sprintf("race%d", i)})
			switch {
			case err == nil:
				created.Add(1)
			case !errors.Is(err, model.ErrConflict):
				t.Errorf("racing creation: %v", err)
			}
		}()
	}
	wg.Wait()
	um, err := s.UserMilestones(ctx, "u1")
	if err != nil || len(um.Milestones) > model.MaxMilestonesPerUser || int64(len(um.Milestones)) != model.MaxMilestonesPerUser-3+created.Load() {
		t.Fatalf("got %d milestones (%d racing creations succeeded), %v; want at most %d, each success counted",
			len(um.Milestones), created.Load(), err, model.MaxMilestonesPerUser)
	}
	if err := s.CreateMilestone(ctx, &model.Milestone{UserID: "u1", MilestoneID: "after"}); len(um.Milestones) == model.MaxMilestonesPerUser && !errors.Is(err, model.ErrMilestoneLimit) {
		t.Fatalf("at the cap: got %v, want model.ErrMilestoneLimit", err)
	}
}
