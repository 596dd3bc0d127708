package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/dynerr"
	"github.com/commitcollect/backend/test/dynamolocal"
	"github.com/commitcollect/backend/test/fixture"
)

func TestMain(m *testing.M) { dynamolocal.Main(m) }

func TestPutGetRoundTrip(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	end := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	m := &model.Milestone{UserID: "u1", MilestoneID: "m1", MilestoneDefinition: model.MilestoneDefinition{
		ModelID: "rocket", Title: "100 km", Metric: model.MetricDistance, Target: 100000,
		SportTypes: []string{"Run"}, PeriodStartAtUtc: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), PeriodEndAtUtc: &end, PartCount: 10,
	}, Projection: model.Projection{Status: model.StatusActive}}
	if err := s.DB.Put(ctx, s.DB.Tables().Main, m); err != nil {
		t.Fatal(err)
	}
	var got model.Milestone
	if err := s.DB.Get(ctx, s.DB.Tables().Main, keys.MilestoneKey("u1", "m1"), &got); err != nil {
		t.Fatal(err)
	}
	if got.PK != "USER#u1" || got.SK != "MILESTONE#m1" || got.EntityType != model.EntityMilestone || got.SchemaVersion != 1 {
		t.Fatalf("got keys/meta %+v %+v", got.Key, got.Meta)
	}
	if got.Target != 100000 || !got.PeriodEndAtUtc.Equal(end) || got.SportTypes[0] != "Run" || got.PartCount != 10 {
		t.Fatalf("got definition %+v", got.MilestoneDefinition)
	}
	err := s.DB.Get(ctx, s.DB.Tables().Main, keys.MilestoneKey("u1", "nope"), &got)
	if !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("missing item: got %v, want ErrNotFound", err)
	}
}

func TestPutIfAbsentConflict(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	rec := &ops.IdempotencyRecord{IdempotencyKey: "STRAVA#WEBHOOK#activity#1#create#9#100", ExpiresAt: time.Now().Add(time.Hour).Unix()}
	if err := s.DB.PutIfAbsent(ctx, s.DB.Tables().Idempotency, rec); err != nil {
		t.Fatalf("first put: %v", err)
	}
	err := s.DB.PutIfAbsent(ctx, s.DB.Tables().Idempotency, rec)
	if !errors.Is(err, model.ErrConflict) {
		t.Fatalf("second put: got %v, want ErrConflict", err)
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Fatalf("second put: SDK error not kept in chain: %v", err)
	}
	if err := s.DB.PutIfAbsent(ctx, s.DB.Tables().Main, fixture.Workout("u1", 1)); err != nil {
		t.Fatal(err)
	}
	if err := s.DB.PutIfAbsent(ctx, s.DB.Tables().Main, fixture.Workout("u1", 1)); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("main table duplicate: got %v, want ErrConflict", err)
	}
}

func TestUpdateVersionedConflict(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	m := &model.Milestone{UserID: "u1", MilestoneID: "m1", Version: 3}
	if err := s.DB.Put(ctx, s.DB.Tables().Main, m); err != nil {
		t.Fatal(err)
	}
	upd := dynamo.Changes{Set: map[string]any{"progressValue": 42}}
	item, err := s.DB.UpdateVersioned(ctx, s.DB.Tables().Main, m.ItemKey(), 3, upd)
	if err != nil {
		t.Fatalf("update at current version: %v", err)
	}
	var got model.Milestone
	if err := dynamo.Unmarshal(item, &got); err != nil {
		t.Fatal(err)
	}
	if got.Version != 4 || got.ProgressValue != 42 {
		t.Fatalf("got version %d progress %d, want 4 and 42", got.Version, got.ProgressValue)
	}
	_, err = s.DB.UpdateVersioned(ctx, s.DB.Tables().Main, m.ItemKey(), 3, upd)
	if !errors.Is(err, model.ErrConflict) {
		t.Fatalf("stale update: got %v, want ErrConflict", err)
	}
	_, err = s.DB.UpdateVersioned(ctx, s.DB.Tables().Main, keys.MilestoneKey("u1", "gone"), 0, upd)
	if !errors.Is(err, model.ErrConflict) {
		t.Fatalf("update of a missing item must not create it: got %v", err)
	}
}

func TestTransactionCancelledReasons(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	award := &model.Award{UserID: "u1", MilestoneID: "m1", PartIndex: 0, AwardedAtUtc: time.Now()}
	if err := s.DB.Put(ctx, s.DB.Tables().Main, award); err != nil {
		t.Fatal(err)
	}
	if err := s.DB.Put(ctx, s.DB.Tables().Main, &model.Milestone{UserID: "u1", MilestoneID: "m1", Version: 1}); err != nil {
		t.Fatal(err)
	}
	upd, err := s.DB.VersionedUpdateInput(s.DB.Tables().Main, keys.MilestoneKey("u1", "m1"), 1,
		dynamo.Changes{Set: map[string]any{"awardedParts": 2}})
	if err != nil {
		t.Fatal(err)
	}
	dup, err := s.DB.TransactPutIfAbsent(s.DB.Tables().Main, &model.Award{UserID: "u1", MilestoneID: "m1", PartIndex: 0})
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := s.DB.TransactPutIfAbsent(s.DB.Tables().Main, &model.Award{UserID: "u1", MilestoneID: "m1", PartIndex: 1})
	if err != nil {
		t.Fatal(err)
	}
	err = s.DB.Transact(ctx, []types.TransactWriteItem{dynamo.TransactUpdate(upd), dup, fresh}, "")
	var te *dynerr.TransactionError
	if !errors.As(err, &te) || !errors.Is(err, model.ErrConflict) {
		t.Fatalf("got %v, want a TransactionError matching ErrConflict", err)
	}
	if want := []string{"None", "ConditionalCheckFailed", "None"}; fmt.Sprint(te.Reasons) != fmt.Sprint(want) {
		t.Fatalf("reasons: got %v, want %v", te.Reasons, want)
	}
	if fi := te.FailedIndexes(); len(fi) != 1 || fi[0] != 1 {
		t.Fatalf("failed indexes: got %v, want [1]", fi)
	}
	// Nothing of the cancelled transaction was applied.
	var m model.Milestone
	if err := s.DB.Get(ctx, s.DB.Tables().Main, keys.MilestoneKey("u1", "m1"), &m); err != nil || m.Version != 1 || m.AwardedParts != 0 {
		t.Fatalf("milestone after cancelled transaction: %+v %v", m.Projection, err)
	}
	// The same transaction without the duplicate commits, and a retry with
	// the same client request token is deduplicated server-side.
	items := []types.TransactWriteItem{dynamo.TransactUpdate(upd), fresh}
	if err := s.DB.Transact(ctx, items, "m1-v1-token"); err != nil {
		t.Fatal(err)
	}
	if err := s.DB.Transact(ctx, items, "m1-v1-token"); err != nil {
		t.Fatalf("retry with the same token: got %v, want success (idempotent)", err)
	}
}

func TestBatchWrite60(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	var es []model.Entity
	for i := int64(1); i <= 60; i++ {
		es = append(es, fixture.Workout("u1", i))
	}
	if err := s.DB.BatchPut(ctx, s.DB.Tables().Main, es); err != nil {
		t.Fatal(err)
	}
	ws, truncated, err := dynamo.QueryEntities[model.Workout](ctx, s.DB, s.DB.Tables().Main, keys.UserPK("u1"), keys.PrefixWorkoutStrava, dynamo.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 60 || truncated {
		t.Fatalf("got %d workouts (truncated %v), want 60", len(ws), truncated)
	}
	var ks []model.Key
	for _, w := range ws {
		ks = append(ks, w.ItemKey())
	}
	if err := s.DB.BatchDelete(ctx, s.DB.Tables().Main, ks); err != nil {
		t.Fatal(err)
	}
	res, err := s.DB.QueryPrefix(ctx, s.DB.Tables().Main, keys.UserPK("u1"), "", dynamo.QueryOptions{})
	if err != nil || len(res.Items) != 0 {
		t.Fatalf("after batch delete: %d items, %v", len(res.Items), err)
	}
}

func TestQueryGuardrail(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	var es []model.Entity
	for i := int64(1); i <= model.MaxWorkoutsToInspect+1; i++ {
		es = append(es, fixture.Workout("u1", i))
	}
	// A milestone in the same partition must not count as a workout.
	es = append(es, &model.Milestone{UserID: "u1", MilestoneID: "m"})
	if err := s.DB.BatchPut(ctx, s.DB.Tables().Main, es); err != nil {
		t.Fatal(err)
	}
	proj := dynamo.QueryOptions{Projection: []string{"activityId", "distanceMeters"}}
	res, err := s.DB.QueryPrefix(ctx, s.DB.Tables().Main, keys.UserPK("u1"), keys.PrefixWorkoutStrava, proj)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != model.MaxWorkoutsToInspect || !res.Truncated {
		t.Fatalf("got %d items truncated=%v, want %d truncated", len(res.Items), res.Truncated, model.MaxWorkoutsToInspect)
	}
	if _, ok := res.Items[0]["sportType"]; ok {
		t.Fatalf("projection expression ignored: %v", res.Items[0])
	}
	// Exactly at a smaller limit, with nothing after it, is not truncated.
	res, err = s.DB.QueryPrefix(ctx, s.DB.Tables().Main, keys.UserPK("u1"), keys.PrefixWorkoutStrava, dynamo.QueryOptions{Limit: 10})
	if err != nil || len(res.Items) != 10 || !res.Truncated {
		t.Fatalf("limit 10: got %d truncated=%v err=%v", len(res.Items), res.Truncated, err)
	}
	res, err = s.DB.QueryPrefix(ctx, s.DB.Tables().Main, keys.UserPK("u1"), keys.PrefixMilestone, dynamo.QueryOptions{Limit: 1})
	if err != nil || len(res.Items) != 1 || res.Truncated {
		t.Fatalf("exact fit: got %d truncated=%v err=%v", len(res.Items), res.Truncated, err)
	}
}

func TestSchemaVersionFailsClosed(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	future, err := attributevalue.MarshalMap(map[string]any{
		"PK": "USER#u1", "SK": "WORKOUT#STRAVA#7", "entityType": "WORKOUT", "schemaVersion": 99, "activityId": 7,
	})
	if err != nil {
		t.Fatal(err)
	}
	legacy, err := attributevalue.MarshalMap(map[string]any{
		"PK": "USER#u1", "SK": "WORKOUT#STRAVA#8", "distanceMeters": 1000, "sportType": "Ride",
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, item := range []dynamo.Item{future, legacy} {
		if _, err := s.DB.Client().PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.DB.Tables().Main), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	var w model.Workout
	err = s.DB.Get(ctx, s.DB.Tables().Main, keys.WorkoutKey("u1", 7), &w)
	var sve *model.SchemaVersionError
	if !errors.Is(err, model.ErrUnsupportedSchema) || !errors.As(err, &sve) || sve.Got != 99 {
		t.Fatalf("future version: got %v, want SchemaVersionError(99)", err)
	}
	var old model.Workout
	if err := s.DB.Get(ctx, s.DB.Tables().Main, keys.WorkoutKey("u1", 8), &old); err != nil {
		t.Fatalf("legacy item: %v", err)
	}
	if old.SchemaVersion != 1 || old.UserID != "u1" || old.ActivityID != 8 || old.EntityType != model.EntityWorkout {
		t.Fatalf("legacy item not normalized: %+v", old)
	}
	_, _, err = dynamo.QueryEntities[model.Workout](ctx, s.DB, s.DB.Tables().Main, keys.UserPK("u1"), keys.PrefixWorkoutStrava, dynamo.QueryOptions{})
	if !errors.Is(err, model.ErrUnsupportedSchema) {
		t.Fatalf("query over a future item: got %v, want ErrUnsupportedSchema", err)
	}
}
