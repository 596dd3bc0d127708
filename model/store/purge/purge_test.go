package purge_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/limits"
	"github.com/commitcollect/backend/model/store/purge"
	"github.com/commitcollect/backend/model/syncstate"
	"github.com/commitcollect/backend/test/dynamolocal"
	"github.com/commitcollect/backend/test/fixture"
	"github.com/commitcollect/backend/test/privacyscan"
)

func TestMain(m *testing.M) { dynamolocal.Main(m) }

// TestPurgeStravaDataLeavesNoStravaData: after a revocation's purge the
// user's partition holds no workout, sync state, owner mapping, Strava name
// or id; awards and audit entries stay without Strava ids; milestones stay;
// the keyed-hash mapping finds the user and holds no id in the clear; a
// second run changes nothing. Protections: each step of PurgeStravaData.
func TestPurgeStravaDataLeavesNoStravaData(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	pu := purge.New(s)
	ctx := context.Background()
	const athlete = 987654321
	c := &model.StravaConnection{UserID: "u1", AthleteID: athlete, AccessToken: "a", RefreshToken: "r",
		ExpiresAtUtc: time.Now().Add(time.Hour).UTC(), TokenVersion: 1, Scopes: []string{"read"}}
	if err := s.DB.Put(ctx, s.DB.Tables().Main, c); err != nil {
		t.Fatal(err)
	}
	if err := s.DB.Put(ctx, s.DB.Tables().Main, &model.AthleteOwner{AthleteID: athlete, UserID: "u1", CreatedAtUtc: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	put := func(e model.Entity) {
		if err := s.DB.Put(ctx, s.DB.Tables().Main, e); err != nil {
			t.Fatal(err)
		}
	}
	put(&model.Profile{UserID: "u1", AthleteID: athlete, DisplayName: "Ada Lovelace", CreatedAtUtc: now})
	put(&model.Milestone{UserID: "u1", MilestoneID: "m1"})
	award := model.Award{UserID: "u1", MilestoneID: "m1", PartIndex: 0, ActivityID: 424242424242, AwardedAtUtc: now}
	put(&award)
	if err := s.Collection.CollectAwards(ctx, []model.Award{award}); err != nil { // its entry in the collection
		t.Fatal(err)
	}
	periodAward := model.Award{UserID: "u1", MilestoneID: "s1", PeriodOf: "2026-03-02", PartIndex: 0, ActivityID: 424242424242, AwardedAtUtc: now}
	put(&periodAward) // an award of a series' period
	put(&syncstate.SyncState{UserID: "u1", AthleteID: athlete})
	var workouts []model.Entity // more than one transaction of deletes
	for id := int64(1); id <= 150; id++ {
		workouts = append(workouts, fixture.Workout("u1", id, fixture.Stored(now)))
	}
	if err := s.DB.BatchPut(ctx, s.DB.Tables().Main, workouts); err != nil {
		t.Fatal(err)
	}
	s.Audits.Audit(ctx, slog.New(slog.DiscardHandler), model.NewAuditEntry(keys.UserPK("u1"), "u1", "STRAVA_ACTIVITY_CREATE", "c", "r", now,
		map[string]string{"athleteId": "987654321", "activityId": "424242424242", "sportType": "Run", "reason": "kept"}))
	grant, err := s.Connections.StravaConnectionGrant(ctx, "u1")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Connections.RevokeStravaConnection(ctx, grant, now.Truncate(time.Second), now, now); err != nil {
		t.Fatal(err)
	}
	for run := 0; run < 2; run++ {
		if _, err := pu.PurgeStravaData(ctx, "u1", athlete, now.Truncate(time.Second)); err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
	}
	if u, err := pu.RevokedAthleteOwner(ctx, athlete); err != nil || u != "u1" {
		t.Fatalf("revoked owner: %q, %v; want u1", u, err)
	}
	if _, err := s.Users.ResolveAthlete(ctx, athlete); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("owner mapping: %v; want it gone", err)
	}
	left := map[string]bool{}
	// Ids long enough that a keyed hash's hex never holds them by chance
	// (a 4-digit id did, once in a while); numbers are read as stored.
	clear := []string{"987654321", "Ada Lovelace", "424242424242", "WORKOUT#", "SYNC#"}
	if _, err := privacyscan.Scan(ctx, s.DB.Client(), []string{s.DB.Tables().Main, s.DB.Tables().Audit}, func(table string, it map[string]types.AttributeValue) {
		if c, ok := privacyscan.Holding(it, clear); ok {
			t.Errorf("%s still holds %q: %v", table, c, privacyscan.Values(it))
		}
		if et, ok := it["entityType"].(*types.AttributeValueMemberS); ok {
			left[et.Value] = true
		}
	}); err != nil {
		t.Fatal(err)
	}
	for _, kept := range []string{"MILESTONE", "AWARD", "PROFILE", "AUDIT"} {
		if !left[kept] {
			t.Errorf("no %s left (kinds left: %v); what the athlete made here stays", kept, left)
		}
	}
	// The awards and the collection entry, read as awards too.
	var a model.Award
	if err := s.DB.Get(ctx, s.DB.Tables().Main, keys.AwardKey("u1", "m1", 0), &a); err != nil || a.ActivityID != 0 {
		t.Errorf("award %+v, %v: want it kept without its activity id", a, err)
	}
	if err := s.DB.Get(ctx, s.DB.Tables().Main, periodAward.ItemKey(), &a); err != nil || a.ActivityID != 0 {
		t.Errorf("award of a series' period %+v, %v: want it kept without its activity id", a, err)
	}
	entries, _, err := s.Collection.CollectedAwards(ctx, "u1", "", 10)
	if err != nil || len(entries) != 1 || entries[0].ActivityID != 0 {
		t.Errorf("collection %+v, %v: want the award's entry kept without its activity id", entries, err)
	}
}

// TestPurgeStopsAtAReconnect: a purge still running when the athlete signs
// in again (the login clears the revocation from the guard and restores the
// owner mapping and identity) leaves the reconnected athlete's profile,
// workouts, sync state, award ids and owner mapping alone. Protection:
// whileRevoked on every step (without it the late purge deletes the
// reconnect's backfill and unlinks the athlete, whose next events are then
// dropped as of no user).
func TestPurgeStopsAtAReconnect(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	pu := purge.New(s)
	ctx := context.Background()
	const athlete = 555000111
	now := time.Now().UTC().Truncate(time.Second)
	for _, e := range []model.Entity{
		&model.StravaConnection{UserID: "u2", AthleteID: athlete, AccessToken: "a", RefreshToken: "r", ExpiresAtUtc: now.Add(time.Hour), TokenVersion: 1},
		&model.AthleteOwner{AthleteID: athlete, UserID: "u2", CreatedAtUtc: now},
		&model.Profile{UserID: "u2", AthleteID: athlete, DisplayName: "Grace Hopper", CreatedAtUtc: now},
		&model.Award{UserID: "u2", MilestoneID: "m1", PartIndex: 0, ActivityID: 777000111222, AwardedAtUtc: now},
	} {
		if err := s.DB.Put(ctx, s.DB.Tables().Main, e); err != nil {
			t.Fatal(err)
		}
	}
	grant, err := s.Connections.StravaConnectionGrant(ctx, "u2")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Connections.RevokeStravaConnection(ctx, grant, now, now, now); err != nil {
		t.Fatal(err)
	}
	// The reconnect, before the purge got past its workouts.
	if err := s.Connections.ClearStravaRevocation(ctx, "u2", now, now); err != nil {
		t.Fatal(err)
	}
	if err := s.DB.Put(ctx, s.DB.Tables().Main, &syncstate.SyncState{UserID: "u2", AthleteID: athlete}); err != nil {
		t.Fatal(err)
	}
	if err := s.Workouts.UpsertWorkout(ctx, fixture.Workout("u2", 31, fixture.Stored(now))); err != nil { // the reconnect's backfill
		t.Fatal(err)
	}
	if _, err := pu.PurgeStravaData(ctx, "u2", athlete, now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Workouts.Workout(ctx, "u2", 31); err != nil {
		t.Errorf("the reconnect's workout: %v; want it kept", err)
	}
	if p, err := s.Users.Profile(ctx, "u2"); err != nil || p.AthleteID != athlete || p.DisplayName != "Grace Hopper" {
		t.Errorf("profile %+v, %v: want the reconnected athlete's id and name kept", p, err)
	}
	if u, err := s.Users.ResolveAthlete(ctx, athlete); err != nil || u != "u2" {
		t.Errorf("owner mapping: %q, %v: want it kept for u2", u, err)
	}
	if _, err := limits.New(s).SyncState(ctx, "u2"); err != nil {
		t.Errorf("sync state: %v: want the reconnect's kept", err)
	}
	var a model.Award
	if err := s.DB.Get(ctx, s.DB.Tables().Main, keys.AwardKey("u2", "m1", 0), &a); err != nil || a.ActivityID != 777000111222 {
		t.Errorf("award %+v, %v: want its activity id kept", a, err)
	}
}

// TestReconnectInTheMiddleOfThePurgeLosesNoHistory reconnects the athlete
// after the purge's first chunk of workout deletes: the purge stops there,
// the workouts not yet reached stay, and no sync state is left that says the
// history was imported, so the reconnect's backfill imports the deleted
// ones again (syncjobs' reimport test proves that step). Protection: the
// sync state deleted before any workout (deleted after them, it survives a
// reconnect in the middle and the backfill imports nothing).
func TestReconnectInTheMiddleOfThePurgeLosesNoHistory(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	pu := purge.New(s)
	ctx := context.Background()
	const athlete, workouts = 555000222, 2*model.TransactionLimit + 10
	now := time.Now().UTC().Truncate(time.Second)
	for _, e := range []model.Entity{
		&model.StravaConnection{UserID: "u3", AthleteID: athlete, AccessToken: "a", RefreshToken: "r", ExpiresAtUtc: now.Add(time.Hour), TokenVersion: 1},
		&model.AthleteOwner{AthleteID: athlete, UserID: "u3", CreatedAtUtc: now},
		&model.Profile{UserID: "u3", AthleteID: athlete, DisplayName: "Ada Lovelace", CreatedAtUtc: now},
		&syncstate.SyncState{UserID: "u3", AthleteID: athlete, ImportedFromUtc: now.AddDate(-1, 0, 0), ImportedCount: workouts},
	} {
		if err := s.DB.Put(ctx, s.DB.Tables().Main, e); err != nil {
			t.Fatal(err)
		}
	}
	for i := range workouts {
		if err := s.Workouts.UpsertWorkout(ctx, fixture.Workout("u3", int64(9000+i), fixture.Stored(now))); err != nil {
			t.Fatal(err)
		}
	}
	grant, err := s.Connections.StravaConnectionGrant(ctx, "u3")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Connections.RevokeStravaConnection(ctx, grant, now, now, now); err != nil {
		t.Fatal(err)
	}
	chunks := 0
	pu.AfterChunk(func(int) {
		if chunks++; chunks == 1 { // the athlete signs in again here
			if err := s.Connections.ClearStravaRevocation(ctx, "u3", now, now); err != nil {
				t.Error(err)
			}
		}
	})
	n, err := pu.PurgeStravaData(ctx, "u3", athlete, now)
	if err != nil {
		t.Fatal(err)
	}
	left, _, err := dynamo.QueryEntities[model.Workout](ctx, s.DB, s.DB.Tables().Main, keys.UserPK("u3"), keys.PrefixWorkoutStrava, dynamo.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("purge stopped by a reconnect: %d items deleted, %d of %d workouts left", n, len(left), workouts)
	if chunks != 1 || len(left) == 0 || len(left) == workouts {
		t.Fatalf("%d chunks deleted, %d of %d workouts left: want the purge stopped after its first chunk", chunks, len(left), workouts)
	}
	if st, err := limits.New(s).SyncState(ctx, "u3"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("sync state %+v, %v after a purge that deleted workouts: want none, so the reconnect imports the history again", st, err)
	}
	if u, err := s.Users.ResolveAthlete(ctx, athlete); err != nil || u != "u3" {
		t.Errorf("owner mapping: %q, %v: want it kept for the reconnected athlete", u, err)
	}
}
