package milestones_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ports"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/dynerr"
	"github.com/commitcollect/backend/test/dynamolocal"
	"github.com/commitcollect/backend/test/fixture"
)

func TestUserMilestones(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	for _, e := range []model.Entity{
		&model.Milestone{UserID: "u1", MilestoneID: "b"},
		&model.Milestone{UserID: "u1", MilestoneID: "a"},
		&model.Award{UserID: "u1", MilestoneID: "a", PartIndex: 0},
		&model.Award{UserID: "u1", MilestoneID: "a", PartIndex: 11},
		&model.Milestone{UserID: "u2", MilestoneID: "other"},
		fixture.Workout("u1", 1),
	} {
		if err := s.DB.Put(ctx, s.DB.Tables().Main, e); err != nil {
			t.Fatal(err)
		}
	}
	newer, err := dynamo.Marshal(&model.Milestone{UserID: "u1", MilestoneID: "c"})
	if err != nil {
		t.Fatal(err)
	}
	newer["schemaVersion"] = &types.AttributeValueMemberN{Value: "2"}
	if _, err := s.DB.Client().PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.DB.Tables().Main), Item: newer}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Milestones.UserMilestones(ctx, "u1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Milestones) != 2 || got.Milestones[0].MilestoneID != "a" || got.Milestones[1].MilestoneID != "b" {
		t.Fatalf("milestones: got %+v, want a and b", got.Milestones)
	}
	if got.Milestones[0].Status != model.StatusActive {
		t.Fatalf("legacy milestone not normalized: status %q", got.Milestones[0].Status)
	}
	if len(got.Awards["a"]) != 2 || got.Awards["a"][11].PartIndex != 11 || len(got.Awards["b"]) != 0 {
		t.Fatalf("awards: got %+v", got.Awards)
	}
	if len(got.Unreadable) != 1 || got.Unreadable[0].Key != keys.MilestoneKey("u1", "c") ||
		!errors.Is(got.Unreadable[0].Err, model.ErrUnsupportedSchema) {
		t.Fatalf("unreadable: got %+v, want milestone c with ErrUnsupportedSchema", got.Unreadable)
	}
}

func TestModelParts(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if err := s.DB.Put(ctx, s.DB.Tables().Main, &model.ModelPart{ModelID: "rocket", PartIndex: i, Name: fmt.Sprint("p", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DB.Put(ctx, s.DB.Tables().Main, &model.ModelMeta{ModelID: "rocket", PartCount: 3}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Milestones.ModelParts(ctx, "rocket")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[2].Name != "p2" {
		t.Fatalf("got %+v, want 3 parts", got)
	}
	none, err := s.Milestones.ModelParts(ctx, "nothing")
	if err != nil || len(none) != 0 {
		t.Fatalf("unknown model: got %v, %v; want empty", none, err)
	}
}

func TestWriteProjection(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	if err := s.DB.Put(ctx, s.DB.Tables().Main, &model.Milestone{UserID: "u1", MilestoneID: "m1", WrittenBy: model.WriterAPI,
		MilestoneDefinition: model.MilestoneDefinition{Title: "keep me", PartCount: 3}}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC)
	w := ports.ProjectionWrite{UserID: "u1", MilestoneID: "m1", ExpectedVersion: 0,
		Projection: model.Projection{ProgressValue: 10, WorkoutsCounted: 1, Status: model.StatusActive, ProjectedAtUtc: &at}}
	if err := s.Milestones.WriteProjection(ctx, w); err != nil {
		t.Fatal(err)
	}
	var m model.Milestone
	if err := s.DB.Get(ctx, s.DB.Tables().Main, keys.MilestoneKey("u1", "m1"), &m); err != nil {
		t.Fatal(err)
	}
	if m.Version != 1 || m.ProgressValue != 10 || m.WrittenBy != model.WriterProjector || m.Title != "keep me" || !m.ProjectedAtUtc.Equal(at) {
		t.Fatalf("after update: %+v", m)
	}
	if err := s.Milestones.WriteProjection(ctx, w); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("stale version: got %v, want ErrConflict", err)
	}

	award := func(i int) *model.Award {
		return &model.Award{UserID: "u1", MilestoneID: "m1", PartIndex: i, ActivityID: 5, CorrelationID: "c5", AwardedAtUtc: at}
	}
	w = ports.ProjectionWrite{UserID: "u1", MilestoneID: "m1", ExpectedVersion: 1, Token: "token-1",
		Projection: model.Projection{ProgressValue: 20, AwardedParts: 2, Status: model.StatusActive},
		Awards:     []*model.Award{award(0), award(1)}}
	if err := s.Milestones.WriteProjection(ctx, w); err != nil {
		t.Fatal(err)
	}
	m = model.Milestone{} // Get does not clear attributes the item no longer has
	if err := s.DB.Get(ctx, s.DB.Tables().Main, keys.MilestoneKey("u1", "m1"), &m); err != nil {
		t.Fatal(err)
	}
	if m.Version != 2 || m.AwardedParts != 2 || m.ProjectedAtUtc != nil {
		t.Fatalf("after mint: version %d %+v", m.Version, m.Projection)
	}
	// The same request with the same token is acknowledged, not applied again.
	if err := s.Milestones.WriteProjection(ctx, w); err != nil {
		t.Fatalf("replayed transaction with the same token: %v", err)
	}
	m = model.Milestone{}
	if err := s.DB.Get(ctx, s.DB.Tables().Main, keys.MilestoneKey("u1", "m1"), &m); err != nil {
		t.Fatal(err)
	}
	if m.Version != 2 || m.AwardedParts != 2 {
		t.Fatalf("after replay: version %d %+v", m.Version, m.Projection)
	}
	// An award that already exists cancels the transaction as a conflict.
	w = ports.ProjectionWrite{UserID: "u1", MilestoneID: "m1", ExpectedVersion: 2, Token: "token-2",
		Projection: model.Projection{ProgressValue: 30, AwardedParts: 3, Status: model.StatusCompleted},
		Awards:     []*model.Award{award(1), award(2)}}
	err := s.Milestones.WriteProjection(ctx, w)
	var te *dynerr.TransactionError
	// Items: the update, then each award and its collection entry.
	if !errors.Is(err, model.ErrConflict) || !errors.As(err, &te) || !slices.Equal(te.FailedIndexes(), []int{1, 2}) {
		t.Fatalf("existing award: got %v, want a conflict on item 1 and its collection entry, item 2", err)
	}
	if err := s.DB.Get(ctx, s.DB.Tables().Main, keys.MilestoneKey("u1", "m1"), &m); err != nil {
		t.Fatal(err)
	}
	if m.Version != 2 || m.AwardedParts != 2 {
		t.Fatalf("cancelled transaction changed the milestone: version %d %+v", m.Version, m.Projection)
	}
}

// TestWriteProjectionAuditsInTheSameTransaction: award items and their
// AWARD_MINTED entries land together (across the two tables) or not at all;
// the same transaction replayed with its token writes nothing twice; an
// entry that exists already cancels the whole write instead of being
// overwritten; more than DynamoDB's 100 items is refused before sending.
func TestWriteProjectionAuditsInTheSameTransaction(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	// Recent dates: DynamoDB Local deletes audit entries past their TTL.
	created := time.Now().UTC().Truncate(time.Second).AddDate(0, 0, -6)
	if err := s.DB.Put(ctx, s.DB.Tables().Main, &model.Milestone{UserID: "ua", MilestoneID: "m1", CreatedAtUtc: created,
		MilestoneDefinition: model.MilestoneDefinition{PartCount: 3}}); err != nil {
		t.Fatal(err)
	}
	at := created.AddDate(0, 0, 6)
	mint := func(version int64, token string, parts ...int) ports.ProjectionWrite {
		w := ports.ProjectionWrite{UserID: "ua", MilestoneID: "m1", ExpectedVersion: version, Token: token,
			Projection: model.Projection{AwardedParts: parts[len(parts)-1] + 1, Status: model.StatusActive}}
		for _, i := range parts {
			w.Awards = append(w.Awards, &model.Award{UserID: "ua", MilestoneID: "m1", PartIndex: i, AwardedAtUtc: at})
			w.Audits = append(w.Audits, model.NewAwardMintedAudit("ua", "m1", created, i, "AWARD_MINTED", "corr", at,
				map[string]string{"partIndex": fmt.Sprint(i)}))
		}
		return w
	}
	audited := func() map[int]bool {
		t.Helper()
		got, err := s.Milestones.AwardAudits(ctx, "ua", "m1", created)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	w := mint(0, "tok-audit-1", 0, 1)
	if err := s.Milestones.WriteProjection(ctx, w); err != nil {
		t.Fatal(err)
	}
	if got := audited(); len(got) != 2 || !got[0] || !got[1] {
		t.Fatalf("audited parts: got %v, want 0 and 1", got)
	}
	var e model.AuditEntry
	if err := s.DB.Get(ctx, s.DB.Tables().Audit, keys.AwardMintedAuditKey("ua", "m1", created, 1), &e); err != nil {
		t.Fatalf("entry under its deterministic key: %v", err)
	}
	if !e.OccurredAtUtc.Equal(at) || e.EventMonthPK != keys.EventMonthPK("AWARD_MINTED", at) || e.ExpiresAt != at.AddDate(0, 0, model.AuditRetentionDays).Unix() {
		t.Fatalf("entry keyed at the milestone's creation but dated at the mint: %+v", e)
	}
	// Replayed with its token: acknowledged, nothing written twice.
	if err := s.Milestones.WriteProjection(ctx, w); err != nil {
		t.Fatalf("replay with the same token: %v", err)
	}
	as, _, err := dynamo.QueryEntities[model.AuditEntry](ctx, s.DB, s.DB.Tables().Audit, keys.UserPK("ua"), keys.PrefixAudit, dynamo.QueryOptions{})
	if err != nil || len(as) != 2 {
		t.Fatalf("audit entries after the replay: %d (%v), want 2", len(as), err)
	}

	// Part 2's entry exists already (say, written by hand): the write that
	// mints part 2 with an entry is cancelled, award and update included.
	stray := model.NewAwardMintedAudit("ua", "m1", created, 2, "AWARD_MINTED", "stray", at, nil)
	if err := s.DB.Put(ctx, s.DB.Tables().Audit, stray); err != nil {
		t.Fatal(err)
	}
	err = s.Milestones.WriteProjection(ctx, mint(1, "tok-audit-2", 2))
	var te *dynerr.TransactionError
	if !errors.Is(err, model.ErrConflict) || !errors.As(err, &te) || len(te.FailedIndexes()) != 1 || te.FailedIndexes()[0] != 3 {
		t.Fatalf("existing audit entry: got %v, want a conflict on item 3 (after the update, the award and its collection entry)", err)
	}
	var award model.Award
	if err := s.DB.Get(ctx, s.DB.Tables().Main, keys.AwardKey("ua", "m1", 2), &award); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("award of the cancelled write: %v, want not found", err)
	}
	if err := s.DB.Get(ctx, s.DB.Tables().Audit, stray.ItemKey(), &e); err != nil || e.CorrelationID != "stray" {
		t.Fatalf("existing entry overwritten: %+v (%v)", e, err)
	}

	big := mint(1, "tok-audit-3", 0)
	for len(big.Awards)+len(big.Audits) < model.TransactionLimit {
		big.Awards = append(big.Awards, big.Awards[0])
	}
	if err := s.Milestones.WriteProjection(ctx, big); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("%d items: got %v, want ErrInvalid", big.Items(), err)
	}
}

// TestAwardAuditsReadsOnlyItsMilestone: entries of a milestone whose id
// merely starts the same, other events and other users are not counted.
func TestAwardAuditsReadsOnlyItsMilestone(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	created := time.Now().UTC().Truncate(time.Second).AddDate(0, 0, -1) // within the audit TTL
	for _, e := range []*model.AuditEntry{
		model.NewAwardMintedAudit("ub", "a", created, 0, "AWARD_MINTED", "c", created, nil),
		model.NewAwardMintedAudit("ub", "a", created, 12, "AWARD_MINTED", "c", created, nil),
		model.NewAwardMintedAudit("ub", "a-01", created, 3, "AWARD_MINTED", "c", created, nil),
		model.NewAwardMintedAudit("ub", "a", created.Add(time.Second), 4, "AWARD_MINTED", "c", created, nil),
		model.NewAwardMintedAudit("uc", "a", created, 5, "AWARD_MINTED", "c", created, nil),
		model.NewAuditEntry(keys.UserPK("ub"), "ub", "MILESTONE_PROGRESS_UPDATED", "c", "r", created, nil),
	} {
		if err := s.Audits.AppendAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Milestones.AwardAudits(ctx, "ub", "a", created)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got[0] || !got[12] {
		t.Fatalf("got %v, want parts 0 and 12", got)
	}
}
