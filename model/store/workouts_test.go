package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/store/dynamo"
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
	if err := s.DB.Put(ctx, s.DB.Tables().Main, w); err != nil {
		t.Fatal(err)
	}
	if err := s.DB.Put(ctx, s.DB.Tables().Main, &model.Milestone{UserID: "u1", MilestoneID: "m1"}); err != nil {
		t.Fatal(err)
	}
	wl, err := s.Workouts.WorkoutLog(ctx, "u1", allTime)
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
	if err := s.DB.BatchPut(ctx, s.DB.Tables().Main, es); err != nil {
		t.Fatal(err)
	}
	wl, err := s.Workouts.WorkoutLog(ctx, "u1", allTime)
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
	if err := s.DB.BatchPut(ctx, s.DB.Tables().Main, es); err != nil {
		t.Fatal(err)
	}
	wl, err := s.Workouts.WorkoutLog(ctx, "u1", []model.Window{{From: march}})
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
	if err := s.DB.BatchPut(ctx, s.DB.Tables().Main, es); err != nil {
		t.Fatal(err)
	}
	// A tombstone (a delete that overtook its create) has no date: never read.
	if err := s.Workouts.MarkWorkoutHidden(ctx, "u1", 1, 99, "c", model.WorkoutHiddenOrDeleted, march.UnixNano(), march); err != nil {
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
			wl, err := s.Workouts.WorkoutLog(ctx, "u1", tt.windows)
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
	if err := s.DB.BatchPut(ctx, s.DB.Tables().Main, es); err != nil {
		t.Fatal(err)
	}
	wl, err := s.Workouts.WorkoutLog(ctx, "u1", allTime)
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
	item, err := dynamo.Marshal(fixture.Workout("u1", 1))
	if err != nil {
		t.Fatal(err)
	}
	item["schemaVersion"] = &types.AttributeValueMemberN{Value: "5"}
	if _, err := s.DB.Client().PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.DB.Tables().Main), Item: item}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Workouts.WorkoutLog(ctx, "u1", allTime); !errors.Is(err, model.ErrUnsupportedSchema) {
		t.Fatalf("got %v, want ErrUnsupportedSchema", err)
	}
}

func TestCreateTablesRefusesAMainTableWithoutTheDateIndex(t *testing.T) {
	t.Parallel()
	db, _ := dynamolocal.Clients(t)
	ctx := context.Background()
	tables := dynamo.TableNames(dynamolocal.UniquePrefix())
	old := tableadmin.Specs(tables)[0]
	old.LSIs = nil // as deployments created it before LSI1
	if _, err := db.CreateTable(ctx, tableadmin.CreateTableInput(old)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tableadmin.DeleteTables(context.Background(), db, tables) })
	err := tableadmin.CreateTables(ctx, db, tables)
	if !errors.Is(err, model.ErrInvalid) || !strings.Contains(err.Error(), dynamo.IndexLSI1) {
		t.Fatalf("CreateTables over an old main table: got %v, want ErrInvalid naming %s", err, dynamo.IndexLSI1)
	}
}
