package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/limits"
	"github.com/commitcollect/backend/model/syncstate"
	"github.com/commitcollect/backend/test/dynamolocal"
	"github.com/commitcollect/backend/test/fixture"
)

// userItems lists the keys left in a user's partition.
func userItems(t *testing.T, s *store.Adapters, userID string) []string {
	t.Helper()
	res, err := s.DB.QueryPrefix(context.Background(), s.DB.Tables().Main, keys.UserPK(userID), "", dynamo.QueryOptions{Projection: []string{"PK", "SK"}})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, it := range res.Items {
		keys = append(keys, fmtKey(it))
	}
	return keys
}

func fmtKey(it dynamo.Item) string {
	pk, _ := it["PK"].(*types.AttributeValueMemberS)
	sk, _ := it["SK"].(*types.AttributeValueMemberS)
	if pk == nil || sk == nil {
		return fmt.Sprint(it)
	}
	return model.Key{PK: pk.Value, SK: sk.Value}.String()
}

// Writers in flight that land after the account deletion remove what they
// wrote: a sync page's workouts and tombstone (its one check), the sync
// state (whose create condition alone would re-create SYNC#STRAVA), a
// milestone (and its count); the guard itself stays. Protections:
// CheckWrites, CheckDeleted in UpdateSyncState and CreateMilestone, the
// guard kept by DeleteUserItems. (A webhook's workout write is removed by
// the projector: consumer TestGuardedWorkoutWritesAreRemovedByTheProjector.)
func TestWritesAfterAccountDeletionLeaveNothing(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	now := time.Now().UTC()
	if err := s.Guard.MarkUserDeleted(ctx, "gone", now); err != nil {
		t.Fatal(err)
	}
	w := fixture.Workout("gone", 7)
	if err := s.Workouts.UpsertWorkout(ctx, w); err != nil {
		t.Fatal(err)
	}
	if err := s.Workouts.MarkWorkoutHidden(ctx, "gone", 1, 8, "c", model.WorkoutHiddenOrDeleted, now.UnixNano(), now); err != nil {
		t.Fatal(err)
	}
	page := []model.Key{keys.WorkoutKey("gone", 7), keys.WorkoutKey("gone", 8)}
	if err := s.Guard.CheckWrites(ctx, "gone", page); !errors.Is(err, model.ErrUserDeleted) || !errors.Is(err, model.ErrConflict) {
		t.Fatalf("page check: got %v, want model.ErrUserDeleted (a conflict)", err)
	}
	_, err := limits.New(s).UpdateSyncState(ctx, "gone", func(st *syncstate.SyncState) error {
		st.State, st.JobKey = syncstate.SyncBackfilling, "job"
		return nil
	})
	if !errors.Is(err, model.ErrUserDeleted) {
		t.Fatalf("sync state write: got %v, want model.ErrUserDeleted", err)
	}
	if err := s.Milestones.CreateMilestone(ctx, &model.Milestone{UserID: "gone", MilestoneID: "m"}); !errors.Is(err, model.ErrUserDeleted) {
		t.Fatalf("milestone creation: got %v, want model.ErrUserDeleted", err)
	}
	if left := userItems(t, s, "gone"); len(left) != 1 || left[0] != keys.UserGuardKey("gone").String() {
		t.Fatalf("left in the deleted user's partition: %v, want only the guard", left)
	}
	if _, err := s.Users.DeleteUserItems(ctx, "gone", "", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Guard.UserGuard(ctx, "gone"); err != nil {
		t.Fatalf("guard after deleting the user's items: %v, want it kept", err)
	}
	// Another user is not affected.
	if err := s.Workouts.UpsertWorkout(ctx, fixture.Workout("alive", 7)); err != nil {
		t.Fatal(err)
	}
	if _, err := limits.New(s).UpdateSyncState(ctx, "alive", func(st *syncstate.SyncState) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if left := userItems(t, s, "alive"); len(left) != 2 {
		t.Fatalf("got %v, want the other user's workout and sync state", left)
	}
}

// The account deletion deletes the user's parked records (by userId, or by
// athleteId when they name no user), keeps everyone else's, and parked
// records expire.
func TestDeleteUserParked(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	now := time.Now().UTC()
	for _, r := range []ops.ParkedRecord{
		{Source: keys.ParkSourceWorker, RecordID: "w-mine", UserID: "u1", AthleteID: 10},
		{Source: keys.ParkSourceWorker, RecordID: "w-athlete-only", AthleteID: 10},
		{Source: keys.ParkSourceProjector, RecordID: "p-mine", UserID: "u1"},
		{Source: keys.ParkSourceWorker, RecordID: "w-other", UserID: "u2", AthleteID: 20},
		{Source: keys.ParkSourceWorker, RecordID: "w-other-athlete", AthleteID: 20},
		// The athlete's record under its new user (signed in again) stays.
		{Source: keys.ParkSourceWorker, RecordID: "w-athlete-new-user", UserID: "u3", AthleteID: 10},
		{Source: keys.ParkSourceProjector, RecordID: "p-other", UserID: "u2"},
	} {
		r.Payload, r.ParkedAtUtc = "{}", now
		if err := s.Parked.Park(ctx, &r); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.Parked.DeleteUserParked(ctx, "u1", 10)
	if err != nil || n != 3 {
		t.Fatalf("got %d, %v; want 3 deleted", n, err)
	}
	var left []string
	for _, src := range []string{keys.ParkSourceWorker, keys.ParkSourceProjector} {
		recs, err := s.Parked.Parked(ctx, src)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			left = append(left, r.RecordID)
			if want := now.Add(model.ParkedRetentionDays * 24 * time.Hour).Unix(); r.ExpiresAt != want {
				t.Fatalf("record %s expires at %d, want %d (parked + %d days)", r.RecordID, r.ExpiresAt, want, model.ParkedRetentionDays)
			}
		}
	}
	want := []string{"w-athlete-new-user", "w-other", "w-other-athlete", "p-other"}
	if len(left) != len(want) {
		t.Fatalf("left %v, want %v", left, want)
	}
	for i := range want {
		if left[i] != want[i] {
			t.Fatalf("left %v, want %v", left, want)
		}
	}
	if n, err := s.Parked.DeleteUserParked(ctx, "u1", 10); err != nil || n != 0 {
		t.Fatalf("re-run: got %d, %v; want nothing left to delete", n, err)
	}
}
