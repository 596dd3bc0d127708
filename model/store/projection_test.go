package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ports"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/dynerr"
	"github.com/commitcollect/backend/model/store/tableadmin"
	"github.com/commitcollect/backend/test/dynamolocal"
	"github.com/commitcollect/backend/test/fixture"
)

func TestWorkoutLogReadsOnlyWhatTheMathNeeds(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	w := fixture.Workout("u1", 7)
	w.Name, w.AthleteID, w.CorrelationID, w.TotalElevationGain, w.MovingTimeSeconds = "Morning run", 99, "corr-7", 12.5, 1800
	if err := s.Put(ctx, s.Tables().Main, w); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, s.Tables().Main, &model.Milestone{UserID: "u1", MilestoneID: "m1"}); err != nil {
		t.Fatal(err)
	}
	wl, err := s.WorkoutLog(ctx, "u1", allTime)
	if err != nil {
		t.Fatal(err)
	}
	got := wl.Workouts
	if len(got) != 1 || wl.Truncated {
		t.Fatalf("got %d workouts (truncated %v), want 1", len(got), wl.Truncated)
	}
	g := got[0]
	if g.ActivityID != 7 || g.UserID != "u1" || g.DistanceMeters != 5000 || g.TotalElevationGain != 12.5 || g.MovingTimeSeconds != 1800 ||
		g.SportType != "Run" || !g.StartDateUtc.Equal(w.StartDateUtc) || g.CorrelationID != "corr-7" {
		t.Fatalf("projected fields: got %+v", g)
	}
	if g.Name != "" || g.AthleteID != 0 || !g.CreatedAtUtc.IsZero() {
		t.Fatalf("fields outside the projection were read: %+v", g)
	}
}

// allTime is the window of a milestone without period bounds.
var allTime = []model.Window{{}}

// mixedID returns distinct activity ids of 1 to 12 digits, in an order that
// is neither their numeric nor their string order.
func mixedID(i int) int64 {
	digits := []int64{1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000, 10000000000, 100000000000}
	return digits[(i*7)%len(digits)]*10 + int64(i)*1000000000000 + 7
}

func TestWorkoutLogGuardrailKeepsNewest(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	base := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	n := model.MaxWorkoutsToInspect + 1
	es := make([]model.Entity, n)
	for i := range es {
		w := fixture.Workout("u1", mixedID(n-i)) // ids against date order
		w.StartDateUtc = base.Add(time.Duration(i) * time.Hour)
		es[i] = w
	}
	if err := s.BatchPut(ctx, s.Tables().Main, es); err != nil {
		t.Fatal(err)
	}
	wl, err := s.WorkoutLog(ctx, "u1", allTime)
	if err != nil {
		t.Fatal(err)
	}
	second := base.Add(time.Hour)
	if len(wl.Workouts) != model.MaxWorkoutsToInspect || !wl.Truncated || !wl.ExactFrom.Equal(second) {
		t.Fatalf("got %d workouts, truncated %v, exact from %v; want %d, true, %v",
			len(wl.Workouts), wl.Truncated, wl.ExactFrom, model.MaxWorkoutsToInspect, second)
	}
	for i, w := range wl.Workouts {
		if want := base.Add(time.Duration(n-1-i) * time.Hour); !w.StartDateUtc.Equal(want) {
			t.Fatalf("workout %d started %v, want %v (newest first, oldest left out)", i, w.StartDateUtc, want)
		}
	}
}

func TestWorkoutLogAtTheGuardrailIsExact(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	march := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	es := make([]model.Entity, 0, model.MaxWorkoutsToInspect+50)
	for i := range model.MaxWorkoutsToInspect {
		w := fixture.Workout("u1", int64(i+1))
		w.StartDateUtc = march.Add(time.Duration(i) * time.Minute)
		es = append(es, w)
	}
	for i := range 50 { // older than the window: not read, so not a truncation
		w := fixture.Workout("u1", int64(100000+i))
		w.StartDateUtc = march.Add(-time.Duration(i+1) * time.Hour)
		es = append(es, w)
	}
	if err := s.BatchPut(ctx, s.Tables().Main, es); err != nil {
		t.Fatal(err)
	}
	wl, err := s.WorkoutLog(ctx, "u1", []model.Window{{From: march}})
	if err != nil {
		t.Fatal(err)
	}
	if len(wl.Workouts) != model.MaxWorkoutsToInspect || wl.Truncated {
		t.Fatalf("got %d workouts, truncated %v; want %d, false", len(wl.Workouts), wl.Truncated, model.MaxWorkoutsToInspect)
	}
}

func TestWorkoutLogReadsOnlyTheWindows(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	march := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	april := march.AddDate(0, 1, 0)
	june, july := march.AddDate(0, 3, 0), march.AddDate(0, 4, 0)
	at := map[int64]time.Time{
		1:            march.Add(-time.Nanosecond), // before
		2:            march,                       // first instant of March: in
		3:            april.Add(-time.Nanosecond), // last instant of March: in
		4:            april,                       // first instant of April: out
		5:            june.AddDate(0, 0, 3),       // in June
		6:            july,                        // out
		7:            time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC),
		8:            march.AddDate(0, 0, 9), // March again, short id
		123456789012: march.AddDate(0, 0, 9),
	}
	var es []model.Entity
	for id, t0 := range at {
		w := fixture.Workout("u1", id)
		w.StartDateUtc = t0
		es = append(es, w)
	}
	other := fixture.Workout("u2", 2) // another user's March workout
	other.StartDateUtc = march
	es = append(es, other)
	if err := s.BatchPut(ctx, s.Tables().Main, es); err != nil {
		t.Fatal(err)
	}
	// A tombstone (a delete that overtook its create) has no date: never read.
	if err := s.MarkWorkoutHidden(ctx, "u1", 1, 99, "c", model.WorkoutHiddenOrDeleted, march.UnixNano(), march); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		windows []model.Window
		want    []int64
	}{
		{"March", []model.Window{{From: march, To: &april}}, []int64{3, 123456789012, 8, 2}},
		{"March and June, merged newest first", []model.Window{{From: june, To: &july}, {From: march, To: &april}, {From: march.AddDate(0, 0, 5), To: &april}},
			[]int64{5, 3, 123456789012, 8, 2}},
		{"from June on", []model.Window{{From: june}}, []int64{7, 6, 5}},
		{"no milestones", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			wl, err := s.WorkoutLog(ctx, "u1", tt.windows)
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, w := range wl.Workouts {
				got = append(got, w.ActivityID)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) || wl.Truncated {
				t.Fatalf("got %v (truncated %v), want %v", got, wl.Truncated, tt.want)
			}
		})
	}
}

func TestWorkoutLogCutNeverSplitsAnInstant(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	n := model.MaxWorkoutsToInspect + 1
	es := make([]model.Entity, n)
	for i := range es {
		w := fixture.Workout("u1", int64(10*i+5))
		w.StartDateUtc = base.Add(time.Duration(i) * time.Second)
		es[i] = w
	}
	// The oldest two share an instant; only one of them fits the guardrail.
	es[1].(*model.Workout).StartDateUtc = base
	if err := s.BatchPut(ctx, s.Tables().Main, es); err != nil {
		t.Fatal(err)
	}
	wl, err := s.WorkoutLog(ctx, "u1", allTime)
	if err != nil {
		t.Fatal(err)
	}
	want := base.Add(2 * time.Second)
	if len(wl.Workouts) != model.MaxWorkoutsToInspect-1 || !wl.Truncated || !wl.ExactFrom.Equal(want) {
		t.Fatalf("got %d workouts, truncated %v, exact from %v; want %d, true, %v",
			len(wl.Workouts), wl.Truncated, wl.ExactFrom, model.MaxWorkoutsToInspect-1, want)
	}
}

func TestWorkoutLogFailsClosed(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	item, err := store.Marshal(fixture.Workout("u1", 1))
	if err != nil {
		t.Fatal(err)
	}
	item["schemaVersion"] = &types.AttributeValueMemberN{Value: "5"}
	if _, err := s.Client().PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.Tables().Main), Item: item}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WorkoutLog(ctx, "u1", allTime); !errors.Is(err, model.ErrUnsupportedSchema) {
		t.Fatalf("got %v, want ErrUnsupportedSchema", err)
	}
}

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
		if err := s.Put(ctx, s.Tables().Main, e); err != nil {
			t.Fatal(err)
		}
	}
	newer, err := store.Marshal(&model.Milestone{UserID: "u1", MilestoneID: "c"})
	if err != nil {
		t.Fatal(err)
	}
	newer["schemaVersion"] = &types.AttributeValueMemberN{Value: "2"}
	if _, err := s.Client().PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.Tables().Main), Item: newer}); err != nil {
		t.Fatal(err)
	}
	got, err := s.UserMilestones(ctx, "u1")
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
		if err := s.Put(ctx, s.Tables().Main, &model.ModelPart{ModelID: "rocket", PartIndex: i, Name: fmt.Sprint("p", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put(ctx, s.Tables().Main, &model.ModelMeta{ModelID: "rocket", PartCount: 3}); err != nil {
		t.Fatal(err)
	}
	got, err := s.ModelParts(ctx, "rocket")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[2].Name != "p2" {
		t.Fatalf("got %+v, want 3 parts", got)
	}
	none, err := s.ModelParts(ctx, "nothing")
	if err != nil || len(none) != 0 {
		t.Fatalf("unknown model: got %v, %v; want empty", none, err)
	}
}

func TestWriteProjection(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	if err := s.Put(ctx, s.Tables().Main, &model.Milestone{UserID: "u1", MilestoneID: "m1", WrittenBy: model.WriterAPI,
		MilestoneDefinition: model.MilestoneDefinition{Title: "keep me", PartCount: 3}}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC)
	w := ports.ProjectionWrite{UserID: "u1", MilestoneID: "m1", ExpectedVersion: 0,
		Projection: model.Projection{ProgressValue: 10, WorkoutsCounted: 1, Status: model.StatusActive, ProjectedAtUtc: &at}}
	if err := s.WriteProjection(ctx, w); err != nil {
		t.Fatal(err)
	}
	var m model.Milestone
	if err := s.Get(ctx, s.Tables().Main, keys.MilestoneKey("u1", "m1"), &m); err != nil {
		t.Fatal(err)
	}
	if m.Version != 1 || m.ProgressValue != 10 || m.WrittenBy != model.WriterProjector || m.Title != "keep me" || !m.ProjectedAtUtc.Equal(at) {
		t.Fatalf("after update: %+v", m)
	}
	if err := s.WriteProjection(ctx, w); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("stale version: got %v, want ErrConflict", err)
	}

	award := func(i int) *model.Award {
		return &model.Award{UserID: "u1", MilestoneID: "m1", PartIndex: i, ActivityID: 5, CorrelationID: "c5", AwardedAtUtc: at}
	}
	w = ports.ProjectionWrite{UserID: "u1", MilestoneID: "m1", ExpectedVersion: 1, Token: "token-1",
		Projection: model.Projection{ProgressValue: 20, AwardedParts: 2, Status: model.StatusActive},
		Awards:     []*model.Award{award(0), award(1)}}
	if err := s.WriteProjection(ctx, w); err != nil {
		t.Fatal(err)
	}
	m = model.Milestone{} // Get does not clear attributes the item no longer has
	if err := s.Get(ctx, s.Tables().Main, keys.MilestoneKey("u1", "m1"), &m); err != nil {
		t.Fatal(err)
	}
	if m.Version != 2 || m.AwardedParts != 2 || m.ProjectedAtUtc != nil {
		t.Fatalf("after mint: version %d %+v", m.Version, m.Projection)
	}
	// The same request with the same token is acknowledged, not applied again.
	if err := s.WriteProjection(ctx, w); err != nil {
		t.Fatalf("replayed transaction with the same token: %v", err)
	}
	m = model.Milestone{}
	if err := s.Get(ctx, s.Tables().Main, keys.MilestoneKey("u1", "m1"), &m); err != nil {
		t.Fatal(err)
	}
	if m.Version != 2 || m.AwardedParts != 2 {
		t.Fatalf("after replay: version %d %+v", m.Version, m.Projection)
	}
	// An award that already exists cancels the transaction as a conflict.
	w = ports.ProjectionWrite{UserID: "u1", MilestoneID: "m1", ExpectedVersion: 2, Token: "token-2",
		Projection: model.Projection{ProgressValue: 30, AwardedParts: 3, Status: model.StatusCompleted},
		Awards:     []*model.Award{award(1), award(2)}}
	err := s.WriteProjection(ctx, w)
	var te *dynerr.TransactionError
	// Items: the update, then each award and its collection entry.
	if !errors.Is(err, model.ErrConflict) || !errors.As(err, &te) || !slices.Equal(te.FailedIndexes(), []int{1, 2}) {
		t.Fatalf("existing award: got %v, want a conflict on item 1 and its collection entry, item 2", err)
	}
	if err := s.Get(ctx, s.Tables().Main, keys.MilestoneKey("u1", "m1"), &m); err != nil {
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
	if err := s.Put(ctx, s.Tables().Main, &model.Milestone{UserID: "ua", MilestoneID: "m1", CreatedAtUtc: created,
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
		got, err := s.AwardAudits(ctx, "ua", "m1", created)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	w := mint(0, "tok-audit-1", 0, 1)
	if err := s.WriteProjection(ctx, w); err != nil {
		t.Fatal(err)
	}
	if got := audited(); len(got) != 2 || !got[0] || !got[1] {
		t.Fatalf("audited parts: got %v, want 0 and 1", got)
	}
	var e model.AuditEntry
	if err := s.Get(ctx, s.Tables().Audit, keys.AwardMintedAuditKey("ua", "m1", created, 1), &e); err != nil {
		t.Fatalf("entry under its deterministic key: %v", err)
	}
	if !e.OccurredAtUtc.Equal(at) || e.EventMonthPK != keys.EventMonthPK("AWARD_MINTED", at) || e.ExpiresAt != at.AddDate(0, 0, model.AuditRetentionDays).Unix() {
		t.Fatalf("entry keyed at the milestone's creation but dated at the mint: %+v", e)
	}
	// Replayed with its token: acknowledged, nothing written twice.
	if err := s.WriteProjection(ctx, w); err != nil {
		t.Fatalf("replay with the same token: %v", err)
	}
	as, _, err := store.QueryEntities[model.AuditEntry](ctx, s.DB, s.Tables().Audit, keys.UserPK("ua"), keys.PrefixAudit, store.QueryOptions{})
	if err != nil || len(as) != 2 {
		t.Fatalf("audit entries after the replay: %d (%v), want 2", len(as), err)
	}

	// Part 2's entry exists already (say, written by hand): the write that
	// mints part 2 with an entry is cancelled, award and update included.
	stray := model.NewAwardMintedAudit("ua", "m1", created, 2, "AWARD_MINTED", "stray", at, nil)
	if err := s.Put(ctx, s.Tables().Audit, stray); err != nil {
		t.Fatal(err)
	}
	err = s.WriteProjection(ctx, mint(1, "tok-audit-2", 2))
	var te *dynerr.TransactionError
	if !errors.Is(err, model.ErrConflict) || !errors.As(err, &te) || len(te.FailedIndexes()) != 1 || te.FailedIndexes()[0] != 3 {
		t.Fatalf("existing audit entry: got %v, want a conflict on item 3 (after the update, the award and its collection entry)", err)
	}
	var award model.Award
	if err := s.Get(ctx, s.Tables().Main, keys.AwardKey("ua", "m1", 2), &award); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("award of the cancelled write: %v, want not found", err)
	}
	if err := s.Get(ctx, s.Tables().Audit, stray.ItemKey(), &e); err != nil || e.CorrelationID != "stray" {
		t.Fatalf("existing entry overwritten: %+v (%v)", e, err)
	}

	big := mint(1, "tok-audit-3", 0)
	for len(big.Awards)+len(big.Audits) < model.TransactionLimit {
		big.Awards = append(big.Awards, big.Awards[0])
	}
	if err := s.WriteProjection(ctx, big); !errors.Is(err, model.ErrInvalid) {
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
		if err := s.AppendAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.AwardAudits(ctx, "ub", "a", created)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got[0] || !got[12] {
		t.Fatalf("got %v, want parts 0 and 12", got)
	}
}

func TestCreateTablesRefusesAMainTableWithoutTheDateIndex(t *testing.T) {
	t.Parallel()
	db, _ := dynamolocal.Clients(t)
	ctx := context.Background()
	tables := store.TableNames(dynamolocal.UniquePrefix())
	old := tableadmin.Specs(tables)[0]
	old.LSIs = nil // as deployments created it before LSI1
	if _, err := db.CreateTable(ctx, tableadmin.CreateTableInput(old)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tableadmin.DeleteTables(context.Background(), db, tables) })
	err := tableadmin.CreateTables(ctx, db, tables)
	if !errors.Is(err, model.ErrInvalid) || !strings.Contains(err.Error(), store.IndexLSI1) {
		t.Fatalf("CreateTables over an old main table: got %v, want ErrInvalid naming %s", err, store.IndexLSI1)
	}
}
