package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/rules"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/test/dynamolocal"
	"github.com/commitcollect/backend/test/fixture"
)

func seedConnection(t *testing.T, s *store.Adapters, user string, athlete int64, version int64) {
	t.Helper()
	ctx := context.Background()
	c := &model.StravaConnection{UserID: user, AthleteID: athlete, AccessToken: "a", RefreshToken: "r",
		ExpiresAtUtc: time.Now().Add(time.Hour).UTC(), TokenVersion: version, Scopes: []string{"read"}}
	if err := s.DB.Put(ctx, s.DB.Tables().Main, c); err != nil {
		t.Fatal(err)
	}
	o := &model.AthleteOwner{AthleteID: athlete, UserID: user, CreatedAtUtc: time.Now().UTC()}
	if err := s.DB.Put(ctx, s.DB.Tables().Main, o); err != nil {
		t.Fatal(err)
	}
}

func TestIngestResolveAthlete(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	seedConnection(t, s, "u1", 77, 1)
	got, err := s.Users.ResolveAthlete(ctx, 77)
	if err != nil || got != "u1" {
		t.Fatalf("got %q, %v; want u1", got, err)
	}
	// Without the owner item the connection is found through GSI1.
	if err := s.DB.Delete(ctx, s.DB.Tables().Main, keys.AthleteOwnerKey(77)); err != nil {
		t.Fatal(err)
	}
	if got, err = s.Users.ResolveAthlete(ctx, 77); err != nil || got != "u1" {
		t.Fatalf("via GSI1: got %q, %v; want u1", got, err)
	}
	if _, err := s.Users.ResolveAthlete(ctx, 78); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("unknown athlete: got %v, want ErrNotFound", err)
	}
}

func TestIngestUpsertWorkoutPreservesCreatedAndDeletion(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	w := fixture.Workout("u1", 5)
	w.CreatedAtUtc, w.UpdatedAtUtc, w.CorrelationID = t0, t0, "c1"
	if err := s.Workouts.UpsertWorkout(ctx, w); err != nil {
		t.Fatal(err)
	}
	w2 := fixture.Workout("u1", 5)
	w2.SportType, w2.CreatedAtUtc, w2.UpdatedAtUtc, w2.CorrelationID = "Ride", t0.Add(time.Hour), t0.Add(time.Hour), "c2"
	w2.ElapsedTimeSeconds, w2.Flags = 1900, &rules.Flags{Trainer: true} // Strava's marks are the activity's content too
	if err := s.Workouts.UpsertWorkout(ctx, w2); err != nil {
		t.Fatal(err)
	}
	got, err := s.Workouts.Workout(ctx, "u1", 5)
	if err != nil {
		t.Fatal(err)
	}
	if !got.CreatedAtUtc.Equal(t0) || got.SportType != "Ride" || got.CorrelationID != "c2" || !got.UpdatedAtUtc.Equal(t0.Add(time.Hour)) {
		t.Fatalf("got %+v, want createdAt %v kept, sportType Ride, correlation c2", got, t0)
	}
	if err := s.Workouts.MarkWorkoutHidden(ctx, "u1", 9, 5, "c3", model.WorkoutHiddenOrDeleted, t0.Add(2*time.Hour).UnixNano(), t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	// An upsert that does not order (no fetch instant) never revives.
	if err := s.Workouts.UpsertWorkout(ctx, w2); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("unordered upsert after the 404: got %v, want ErrConflict", err)
	}
	got, _ = s.Workouts.Workout(ctx, "u1", 5)
	if !got.IsDeleted || got.DeletedAtUtc == nil || !got.CreatedAtUtc.Equal(t0) ||
		got.DeletedReason != model.WorkoutHiddenOrDeleted || got.FetchStartedAtNs != t0.Add(2*time.Hour).UnixNano() {
		t.Fatalf("got %+v, want a hidden-or-deleted workout created at %v carrying the 404's fetch instant", got, t0)
	}
	// The activity was deleted or made private on Strava: its tombstone
	// keeps none of its content, only ids and order.
	if got.Name != "" || got.SportType != "" || got.DistanceMeters != 0 || got.MovingTimeSeconds != 0 ||
		got.TotalElevationGain != 0 || !got.StartDateUtc.IsZero() || got.StartDateLocal != "" || got.DateSK != "" ||
		got.ElapsedTimeSeconds != 0 || got.Flags != nil {
		t.Fatalf("tombstone keeps content: %+v", got)
	}
}

func TestIngestMarkHiddenCreatesTombstone(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	if err := s.Workouts.MarkWorkoutHidden(ctx, "u1", 9, 6, "c1", model.WorkoutHiddenOrDeleted, now.UnixNano(), now); err != nil {
		t.Fatal(err)
	}
	got, err := s.Workouts.Workout(ctx, "u1", 6)
	if err != nil {
		t.Fatal(err)
	}
	if !got.IsDeleted || got.ActivityID != 6 || got.AthleteID != 9 || got.EntityType != model.EntityWorkout || !got.CreatedAtUtc.Equal(now) {
		t.Fatalf("got %+v, want a deleted tombstone for activity 6", got)
	}
	// Nothing was stored before: the tombstone only orders fetches in
	// flight, so it expires; a fetch that shows the activity keeps it for
	// good. Protection: the not-found tombstone's expiry (removing it
	// leaves an item for good per forged create).
	if got.ExpiresAt != now.Add(model.NotFoundTombstoneTTL).Unix() {
		t.Fatalf("tombstone of a never-stored activity expires at %d, want %d", got.ExpiresAt, now.Add(model.NotFoundTombstoneTTL).Unix())
	}
	shown := &model.Workout{UserID: "u1", AthleteID: 9, ActivityID: 6, SportType: "Run", DistanceMeters: 5000, StartDateUtc: now,
		CreatedAtUtc: now, UpdatedAtUtc: now, FetchStartedAtNs: now.Add(time.Second).UnixNano()}
	shown.Stamp()
	if err := s.Workouts.UpsertWorkout(ctx, shown); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Workouts.Workout(ctx, "u1", 6); err != nil || got.IsDeleted || got.ExpiresAt != 0 {
		t.Fatalf("revived: got %+v, %v; want a live workout without expiry", got, err)
	}
	later := now.Add(time.Minute)
	if err := s.Workouts.MarkWorkoutHidden(ctx, "u1", 9, 6, "c2", model.WorkoutHiddenOrDeleted, later.UnixNano(), later); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Workouts.Workout(ctx, "u1", 6); err != nil || !got.IsDeleted || got.ExpiresAt != 0 {
		t.Fatalf("a stored workout's 404: got %+v, %v; want a tombstone that never expires", got, err)
	}
	if err := s.Workouts.MarkWorkoutHidden(ctx, "u1", 9, 7, "c1", model.WorkoutHiddenOrDeleted, 0, now); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("a 404 without its fetch instant: got %v, want ErrInvalid", err)
	}
}

// TestIngestTombstoneOrdering: a 404 (MarkWorkoutHidden) and an answer that
// shows the activity (UpsertWorkout) are ordered by their fetch start alone:
// the newest fetch wins both ways, a legacy tombstone (no fetch instant, an
// old unconfirmed delete event) is revived by any ordered answer, and an
// upsert that does not order never revives.
func TestIngestTombstoneOrdering(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	type step struct {
		op       string // "show" (UpsertWorkout), "hide" (MarkWorkoutHidden), "legacy" (a tombstone without fetch instant)
		fetch    int64  // fetch start, in seconds after t0 (0: unordered)
		conflict bool   // the step is refused with ErrConflict
	}
	tests := []struct {
		name        string
		steps       []step
		wantDeleted bool
		wantFetch   int64
	}{
		{"older fetch never overwrites a newer tombstone",
			[]step{{"show", 1, false}, {"hide", 3, false}, {"show", 2, true}}, true, 3},
		{"newer fetch revives an older tombstone",
			[]step{{"show", 1, false}, {"hide", 2, false}, {"show", 3, false}}, false, 3},
		{"legacy tombstone without fetch instant is revived",
			[]step{{"legacy", 0, false}, {"show", 1, false}}, false, 1},
		{"legacy tombstone of a workout without fetch instant is revived",
			[]step{{"show", 0, false}, {"legacy", 0, false}, {"show", 1, false}}, false, 1},
		{"legacy tombstone over a fetched workout is revived by a newer fetch",
			[]step{{"show", 1, false}, {"legacy", 0, false}, {"show", 2, false}}, false, 2},
		{"unordered upsert never revives",
			[]step{{"show", 1, false}, {"hide", 2, false}, {"show", 0, true}}, true, 2},
		{"a 404 confirmed later wins over older answers",
			[]step{{"show", 2, false}, {"hide", 3, false}}, true, 3},
		{"an older 404 never hides a newer answer",
			[]step{{"show", 3, false}, {"hide", 2, true}}, false, 3},
		{"a 404 that overtook the create's write wins over that create",
			[]step{{"hide", 2, false}, {"show", 1, true}}, true, 2},
		{"hidden, shown, hidden again",
			[]step{{"show", 1, false}, {"hide", 2, false}, {"show", 3, false}, {"hide", 4, false}}, true, 4},
		{"same fetch instant does not overwrite",
			[]step{{"show", 2, false}, {"hide", 2, true}}, false, 2},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := int64(100 + i)
			for j, st := range tt.steps {
				at := t0.Add(time.Duration(j) * time.Minute)
				var fetchNs int64
				if st.fetch > 0 {
					fetchNs = t0.Add(time.Duration(st.fetch) * time.Second).UnixNano()
				}
				var err error
				switch st.op {
				case "show":
					w := fixture.Workout("u1", id)
					w.DistanceMeters, w.UpdatedAtUtc, w.FetchStartedAtNs = float64(1000*(j+1)), at, fetchNs
					err = s.Workouts.UpsertWorkout(ctx, w)
				case "hide":
					err = s.Workouts.MarkWorkoutHidden(ctx, "u1", 9, id, "c", model.WorkoutHiddenOrDeleted, fetchNs, at)
				case "legacy":
					err = putLegacyTombstone(ctx, s, "u1", id, at)
				}
				if st.conflict != errors.Is(err, model.ErrConflict) || (!st.conflict && err != nil) {
					t.Fatalf("step %d %+v: got %v, want conflict=%v", j, st, err, st.conflict)
				}
			}
			got, err := s.Workouts.Workout(ctx, "u1", id)
			if err != nil {
				t.Fatal(err)
			}
			wantFetch := t0.Add(time.Duration(tt.wantFetch) * time.Second).UnixNano()
			if got.IsDeleted != tt.wantDeleted || got.FetchStartedAtNs != wantFetch {
				t.Fatalf("got isDeleted=%v fetch=%d, want %v %d (%+v)", got.IsDeleted, got.FetchStartedAtNs, tt.wantDeleted, wantFetch, got)
			}
			if tt.wantDeleted != (got.DeletedAtUtc != nil) || tt.wantDeleted != (got.DeletedReason == model.WorkoutHiddenOrDeleted) {
				t.Fatalf("got deletedAtUtc %v reason %q, want both set only on a tombstone", got.DeletedAtUtc, got.DeletedReason)
			}
			if !tt.wantDeleted && (got.SportType != "Run" || got.DistanceMeters == 0) {
				t.Fatalf("got %+v, want the revived workout's fields", got)
			}
		})
	}
}

// putLegacyTombstone writes what a delete event wrote before deletes were
// confirmed: isDeleted and deletedAtUtc, no reason, and the fetch instant
// of the answer it overwrote, if any.
func putLegacyTombstone(ctx context.Context, s *store.Adapters, user string, id int64, at time.Time) error {
	w, err := s.Workouts.Workout(ctx, user, id)
	switch {
	case errors.Is(err, model.ErrNotFound):
		w = &model.Workout{UserID: user, AthleteID: 9, ActivityID: id, CreatedAtUtc: at}
	case err != nil:
		return err
	}
	w.IsDeleted, w.DeletedAtUtc, w.UpdatedAtUtc = true, &at, at
	return s.DB.Put(ctx, s.DB.Tables().Main, w)
}

func TestIngestTokenLeaseAndSave(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	seedConnection(t, s, "u1", 7, 3)
	now := time.Now()
	if err := s.Connections.AcquireTokenRefreshLease(ctx, "u1", 3, now, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.Connections.AcquireTokenRefreshLease(ctx, "u1", 3, now, now.Add(time.Minute)); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("second lease: got %v, want ErrConflict", err)
	}
	// A lapsed lease can be taken over.
	if err := s.Connections.AcquireTokenRefreshLease(ctx, "u1", 3, now.Add(2*time.Minute), now.Add(3*time.Minute)); err != nil {
		t.Fatalf("lapsed lease: got %v, want nil", err)
	}
	v, err := s.Connections.SaveRefreshedToken(ctx, "u1", 3, "a2", "r2", now.Add(6*time.Hour), now)
	if err != nil || v != 4 {
		t.Fatalf("save: got %d, %v; want 4", v, err)
	}
	if _, err := s.Connections.SaveRefreshedToken(ctx, "u1", 3, "a3", "r3", now.Add(6*time.Hour), now); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("stale save: got %v, want ErrConflict", err)
	}
	c, err := s.Connections.StravaConnection(ctx, "u1")
	if err != nil {
		t.Fatal(err)
	}
	if c.AccessToken != "a2" || c.RefreshToken != "r2" || c.TokenVersion != 4 {
		t.Fatalf("got %+v, want a2/r2 at version 4", c)
	}
	// The lease went with the save: version 4 can be leased at once.
	if err := s.Connections.AcquireTokenRefreshLease(ctx, "u1", 4, now, now.Add(time.Minute)); err != nil {
		t.Fatalf("lease after save: %v", err)
	}
	if err := s.Connections.MarkNeedsReauth(ctx, "u1", now); err != nil {
		t.Fatal(err)
	}
	if c, _ = s.Connections.StravaConnection(ctx, "u1"); !c.NeedsReauth {
		t.Fatal("got needsReauth false, want true")
	}
	if err := s.Connections.MarkNeedsReauth(ctx, "nobody", now); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("missing connection: got %v, want ErrNotFound", err)
	}
}

// TestIngestRevokeStravaConnection: a confirmed deauthorization removes the
// tokens (only of the grant it confirmed) and records the revocation in the
// guard; a later write of Strava data removes itself; a reconnect clears
// the revocation. Protections: the grant condition of
// RevokeStravaConnection; the guard check's revoked case.
func TestIngestRevokeStravaConnection(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	seedConnection(t, s, "u1", 7, 1)
	for id := int64(1); id <= 30; id++ {
		if err := s.Workouts.UpsertWorkout(ctx, fixture.Workout("u1", id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DB.Put(ctx, s.DB.Tables().Main, &model.Milestone{UserID: "u1", MilestoneID: "m1"}); err != nil {
		t.Fatal(err)
	}
	seen, err := s.Connections.StravaConnectionGrant(ctx, "u1")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	revokedAt := now.Add(-time.Minute).Truncate(time.Second)
	exp := now.Add(30 * 24 * time.Hour)
	if err := s.Connections.RevokeStravaConnection(ctx, seen, revokedAt, exp, now); err != nil {
		t.Fatal(err)
	}
	// A login after the revocation is a new grant (at tokenVersion 1 again):
	// a second run of the same revocation must not remove it.
	if err := s.Connections.SaveLoginTokens(ctx, &model.StravaConnection{UserID: "u1", AthleteID: 7, AccessToken: "a2", RefreshToken: "r2",
		ExpiresAtUtc: now.Add(time.Hour), UpdatedAtUtc: now}); err != nil {
		t.Fatal(err)
	}
	if c, err := s.Connections.StravaConnectionGrant(ctx, "u1"); err != nil || c.TokenVersion != seen.TokenVersion || !c.GrantTime().Equal(now) {
		t.Fatalf("got %+v, %v; want the login's grant at version %d", c, err, seen.TokenVersion)
	}
	if err := s.Connections.RevokeStravaConnection(ctx, seen, revokedAt, exp, now); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("revoke of a replaced grant: got %v, want ErrConflict", err)
	}
	if _, err := s.Connections.StravaConnection(ctx, "u1"); err != nil {
		t.Fatalf("the new grant must stay: %v", err)
	}
	seen, err = s.Connections.StravaConnectionGrant(ctx, "u1")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Connections.RevokeStravaConnection(ctx, seen, revokedAt, exp, now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Connections.StravaConnection(ctx, "u1"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("connection: got %v, want ErrNotFound", err)
	}
	g, err := s.Guard.UserGuard(ctx, "u1")
	if err != nil || !g.Revoked() || !g.StravaRevokedAtUtc.Equal(revokedAt) {
		t.Fatalf("guard %+v, %v; want revoked at %s", g, err, revokedAt)
	}
	// A later write (a sync page in flight) is removed by its check.
	if err := s.Workouts.UpsertWorkout(ctx, fixture.Workout("u1", 99)); err != nil {
		t.Fatal(err)
	}
	if err := s.Guard.CheckWrites(ctx, "u1", []model.Key{keys.WorkoutKey("u1", 99)}); !errors.Is(err, model.ErrStravaRevoked) {
		t.Fatalf("write after the revocation: got %v, want model.ErrStravaRevoked", err)
	}
	if _, err := s.Workouts.Workout(ctx, "u1", 99); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("workout written after the revocation: %v, want it removed", err)
	}
	// A reconnect clears the revocation it read, and only that one.
	if err := s.Connections.ClearStravaRevocation(ctx, "u1", revokedAt.Add(time.Second), now); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("clear another revocation: got %v, want ErrConflict", err)
	}
	if err := s.Connections.ClearStravaRevocation(ctx, "u1", revokedAt, now); err != nil {
		t.Fatal(err)
	}
	if g, err := s.Guard.UserGuard(ctx, "u1"); err != nil || g.Revoked() {
		t.Fatalf("guard %+v, %v; want not revoked", g, err)
	}
	if err := s.Workouts.UpsertWorkout(ctx, fixture.Workout("u1", 99)); err != nil {
		t.Fatalf("write after the reconnect: %v", err)
	}
	if err := s.Guard.CheckWrites(ctx, "u1", []model.Key{keys.WorkoutKey("u1", 99)}); err != nil {
		t.Fatalf("check after the reconnect: %v", err)
	}
}

// TestIngestLegacyGrantTimeIsKept: a connection written before grantedAtUtc
// existed keeps, as its grant time, the updatedAtUtc of its last login or
// refresh when Strava's refusal flags it later, and when sealing rewrites
// it. Protections: MarkNeedsReauth leaving updatedAtUtc; SealPlainConnection
// copying it into grantedAtUtc.
func TestIngestLegacyGrantTimeIsKept(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	granted := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	k := keys.StravaConnectionKey("u1")
	legacy := dynamo.Item{ // schema version 1: plain tokens, no grantedAtUtc
		"PK": &types.AttributeValueMemberS{Value: k.PK}, "SK": &types.AttributeValueMemberS{Value: k.SK},
		"entityType":    &types.AttributeValueMemberS{Value: string(model.EntityStravaConnection)},
		"schemaVersion": &types.AttributeValueMemberN{Value: "1"},
		"userId":        &types.AttributeValueMemberS{Value: "u1"},
		"athleteId":     &types.AttributeValueMemberN{Value: "7"},
		"accessToken":   &types.AttributeValueMemberS{Value: "plain-access"},
		"refreshToken":  &types.AttributeValueMemberS{Value: "plain-refresh"},
		"tokenVersion":  &types.AttributeValueMemberN{Value: "3"},
		"updatedAtUtc":  &types.AttributeValueMemberS{Value: granted.Format(time.RFC3339Nano)},
	}
	if _, err := s.DB.Client().PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.DB.Tables().Main), Item: legacy}); err != nil {
		t.Fatal(err)
	}
	flagged := granted.Add(48 * time.Hour)
	if err := s.Connections.MarkNeedsReauth(ctx, "u1", flagged); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Connections.StravaConnectionGrant(ctx, "u1"); err != nil || !got.GrantTime().Equal(granted) {
		t.Fatalf("flagged: grant %v, %v; want %s kept", got, err, granted)
	}
	if done, err := s.Connections.SealConnection(ctx, "u1", flagged.Add(time.Hour)); err != nil || !done {
		t.Fatalf("seal: %v, %v; want it rewritten", done, err)
	}
	got, err := s.Connections.StravaConnectionGrant(ctx, "u1")
	if err != nil || !got.GrantTime().Equal(granted) || got.NeedsReauthAtUtc == nil || !got.NeedsReauthAtUtc.Equal(flagged) {
		t.Fatalf("sealed: grant %v, %v; want grant time %s kept and flagged at %s", got, err, granted, flagged)
	}
}
