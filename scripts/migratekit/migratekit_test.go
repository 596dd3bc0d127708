package migratekit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/tableadmin"
	"github.com/commitcollect/backend/scripts/migratekit"
	"github.com/commitcollect/backend/test/dynamolocal"
)

func TestMain(m *testing.M) { dynamolocal.Main(m) }

// oldStore is a main table as deployments had it before LSI1.
func oldStore(t *testing.T, db *dynamodb.Client) *store.Adapters {
	t.Helper()
	tables := dynamo.TableNames(dynamolocal.UniquePrefix())
	spec := tableadmin.Specs(tables)[0]
	spec.LSIs = nil
	ctx := context.Background()
	if _, err := db.CreateTable(ctx, tableadmin.CreateTableInput(spec)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(tables.Main)})
	})
	if err := dynamodb.NewTableExistsWaiter(db).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(tables.Main)}, time.Minute); err != nil {
		t.Fatal(err)
	}
	return store.New(db, tables)
}

// putLegacy writes e as old code did: without LSI1SK.
func putLegacy(t *testing.T, st *store.Adapters, es ...model.Entity) {
	t.Helper()
	for _, e := range es {
		item, err := dynamo.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		delete(item, dynamo.AttrLSI1SK)
		if _, err := st.DB.Client().PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(st.DB.Tables().Main), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCopyKeysWorkoutsAndBringsWhatHangsOffUsers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := dynamolocal.Clients(t)
	src := oldStore(t, db)
	dst := store.New(db, dynamolocal.MustCreateTables(t, db))
	march := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	end := march.AddDate(0, 1, 0)
	var es []model.Entity
	athlete := map[string]int64{"u1": 100, "u2": 200, "u3": 300}
	for _, u := range []string{"u1", "u2", "u3"} {
		es = append(es, &model.Profile{UserID: u, CreatedAtUtc: march},
			&model.StravaConnection{UserID: u, AthleteID: athlete[u], AccessToken: "a", RefreshToken: "r"},
			&model.AthleteOwner{AthleteID: athlete[u], UserID: u},
			&model.Milestone{UserID: u, MilestoneID: "m", MilestoneDefinition: model.MilestoneDefinition{ModelID: "rocket", Title: "t",
				Metric: model.MetricCount, Target: 3, PeriodStartAtUtc: march, PeriodEndAtUtc: &end, PartCount: 1}})
		for i, id := range []int64{5, 123456789012, 77} {
			es = append(es, &model.Workout{UserID: u, ActivityID: id, SportType: "Run", StartDateUtc: march.AddDate(0, 0, i+1), UpdatedAtUtc: march})
		}
	}
	es = append(es, &model.ModelMeta{ModelID: "rocket", Name: "Rocket", PartCount: 1}, &model.ModelPart{ModelID: "rocket", Name: "p"})
	putLegacy(t, src, es...)
	// A delete that overtook its create: no start date, so no index key.
	if err := src.Workouts.MarkWorkoutHidden(ctx, "u1", 100, 9, "c", model.WorkoutHiddenOrDeleted, march.UnixNano(), march); err != nil {
		t.Fatal(err)
	}

	if _, err := migratekit.Copy(ctx, src, src, migratekit.Options{}); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("copy onto a table without LSI1: got %v, want ErrInvalid", err)
	}
	sum, err := migratekit.Copy(ctx, src, dst, migratekit.Options{ModelIDs: []string{"rocket"}})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Users != 3 || sum.Keyed != 9 {
		t.Fatalf("summary %s, want 3 users and 9 workouts keyed", sum)
	}
	for _, u := range []string{"u1", "u2", "u3"} {
		wl, err := dst.Workouts.WorkoutLog(ctx, u, []model.Window{{From: march, To: &end}})
		if err != nil {
			t.Fatal(err)
		}
		if len(wl.Workouts) != 3 || wl.Workouts[0].ActivityID != 77 || wl.Workouts[2].ActivityID != 5 {
			t.Fatalf("%s: log on the new table %+v, want the 3 workouts newest first", u, wl.Workouts)
		}
		if got, err := dst.Users.ResolveAthlete(ctx, athlete[u]); err != nil || got != u {
			t.Fatalf("athlete mapping of %s: %q, %v", u, got, err)
		}
	}
	if parts, err := dst.Milestones.ModelParts(ctx, "rocket"); err != nil || len(parts) != 1 {
		t.Fatalf("model parts: %v, %v", parts, err)
	}
	if w, err := dst.Workouts.Workout(ctx, "u1", 9); err != nil || !w.IsDeleted {
		t.Fatalf("tombstone: %+v, %v", w, err)
	}

	// Catch-up: the old stack updated one workout and wrote a new one; the
	// new stack already wrote a newer state of another.
	later := march.Add(time.Hour)
	putLegacy(t, src,
		&model.Workout{UserID: "u1", ActivityID: 5, SportType: "Ride", StartDateUtc: march.AddDate(0, 0, 1), UpdatedAtUtc: later},
		&model.Workout{UserID: "u1", ActivityID: 6, SportType: "Run", StartDateUtc: march.AddDate(0, 0, 20), UpdatedAtUtc: later},
		&model.Workout{UserID: "u2", ActivityID: 77, SportType: "Run", StartDateUtc: march.AddDate(0, 0, 3), UpdatedAtUtc: march})
	if err := dst.DB.Put(ctx, dst.DB.Tables().Main, &model.Workout{UserID: "u2", ActivityID: 77, SportType: "Swim",
		StartDateUtc: march.AddDate(0, 0, 3), UpdatedAtUtc: later}); err != nil {
		t.Fatal(err)
	}
	if _, err := migratekit.Copy(ctx, src, dst, migratekit.Options{Newer: true}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		user  string
		id    int64
		sport string
	}{{"u1", 5, "Ride"}, {"u1", 6, "Run"}, {"u2", 77, "Swim"}} {
		w, err := dst.Workouts.Workout(ctx, c.user, c.id)
		if err != nil || w.SportType != c.sport || w.DateSK == "" {
			t.Fatalf("after catch-up %s/%d: %+v, %v; want sport %s with its date key", c.user, c.id, w, err, c.sport)
		}
	}
}

func TestBackfillKeysWorkoutsInPlace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := dynamolocal.NewStore(t)
	march := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	putLegacy(t, st, &model.Profile{UserID: "u1"},
		&model.Workout{UserID: "u1", ActivityID: 1, SportType: "Run", StartDateUtc: march},
		&model.Workout{UserID: "u1", ActivityID: 22, SportType: "Run", StartDateUtc: march.Add(time.Hour)})
	all := []model.Window{{}}
	if wl, err := st.Workouts.WorkoutLog(ctx, "u1", all); err != nil || len(wl.Workouts) != 0 {
		t.Fatalf("before backfill the index holds %d workouts (%v), want 0", len(wl.Workouts), err)
	}
	sum, err := migratekit.Backfill(ctx, st, migratekit.Options{})
	if err != nil || sum.Keyed != 2 {
		t.Fatalf("backfill: %s, %v; want 2 keyed", sum, err)
	}
	wl, err := st.Workouts.WorkoutLog(ctx, "u1", all)
	if err != nil || len(wl.Workouts) != 2 || wl.Workouts[0].ActivityID != 22 {
		t.Fatalf("after backfill: %+v, %v", wl.Workouts, err)
	}
	if sum, err := migratekit.Backfill(ctx, st, migratekit.Options{}); err != nil || sum.Keyed != 0 {
		t.Fatalf("second backfill: %s, %v; want nothing to do", sum, err)
	}
}
