package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/metering"
	"github.com/commitcollect/backend/test/dynamolocal"
	"github.com/commitcollect/backend/test/fixture"
)

// TestMeterRecordsStoreCalls proves the middleware store.New installs: the
// store's own calls and calls through Store.Client() are accounted in the
// context's meter with the units AWS charges (DynamoDB Local reports
// ConsumedCapacity for each of these operations; the wants below are AWS's
// formulas for items under 1 KB: a write is 1 WCU per item and per index it
// lands in, 2 per item inside a transaction; a strongly consistent read is
// 1 RCU per 4 KB).
func TestMeterRecordsStoreCalls(t *testing.T) {
	t.Parallel()
	st := dynamolocal.NewStore(t)
	tb := st.DB.Tables()
	main := tb.Main

	step := func(name string, want metering.Units, call func(ctx context.Context) error) {
		t.Helper()
		m := metering.NewMeter()
		if err := call(metering.WithMeter(context.Background(), m)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := m.Snapshot().Units; got != want {
			t.Errorf("%s: got %+v, want %+v", name, got, want)
		}
	}
	// A workout lands in the table and in LSI1 (its date-ordered key).
	step("Put workout", metering.Units{Requests: 1, WCU: 2}, func(ctx context.Context) error {
		return st.DB.Put(ctx, main, fixture.Workout("u1", 1))
	})
	// The bounded log: one strongly consistent Query of LSI1 asking for its
	// projection (a list of attribute names instead is charged by Local as a
	// fetch from the table per item, see package metering): 31 workouts of under
	// 512 bytes are at most 4 RCU, all of them LSI1's, none the table's.
	var es []model.Entity
	for i := range 30 {
		w := fixture.Workout("u1", int64(100+i))
		w.StartDateUtc = w.StartDateUtc.Add(time.Duration(i) * time.Hour)
		es = append(es, w)
	}
	if err := st.DB.BatchPut(context.Background(), main, es); err != nil {
		t.Fatal(err)
	}
	m := metering.NewMeter()
	from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	to := from.AddDate(0, 1, 0)
	l, err := st.Workouts.WorkoutLog(metering.WithMeter(context.Background(), m), "u1", []model.Window{{From: from, To: &to}})
	if err != nil || len(l.Workouts) != 31 {
		t.Fatalf("WorkoutLog: got %d workouts, %v; want 31", len(l.Workouts), err)
	}
	got := m.Snapshot()
	if got.Requests != 1 || got.RCU < 1 || got.RCU > 4 || got.ByTable[main].RCU != 0 || got.ByTable[main+"/"+dynamo.IndexLSI1].RCU != got.RCU {
		t.Errorf("WorkoutLog of 31 workouts: got %+v by table %+v, want 1 request, 1-4 RCU, all on LSI1", got.Units, got.ByTable)
	}
	// Two plain items in one transaction: 2 WCU each (Local reports 2 for
	// the table; the meter's transaction floor makes it what AWS charges).
	step("TransactWriteItems via Client()", metering.Units{Requests: 1, WCU: 4}, func(ctx context.Context) error {
		_, err := st.DB.Client().TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(main), Item: dynamo.Item{"PK": sv("USER#u1"), "SK": sv("T#1")}}},
			{Put: &types.Put{TableName: aws.String(main), Item: dynamo.Item{"PK": sv("USER#u1"), "SK": sv("T#2")}}},
		}})
		return err
	})
	// A refused conditional write is a request and a failure; DynamoDB
	// returns no capacity with the error.
	step("PutIfAbsent refused", metering.Units{Requests: 1, Failed: 1}, func(ctx context.Context) error {
		if err := st.DB.PutIfAbsent(ctx, main, fixture.Workout("u1", 1)); err == nil {
			t.Error("PutIfAbsent of an existing workout: got nil, want ErrConflict")
		}
		return nil
	})
	// A store built over another store's client meters each call once.
	again := store.New(st.DB.Client(), tb)
	step("Get through a re-wrapped client", metering.Units{Requests: 1, RCU: 1}, func(ctx context.Context) error {
		var w model.Workout
		return again.DB.Get(ctx, main, keys.WorkoutKey("u1", 1), &w)
	})
}

// TestMeterAbsentAsksNothing: without a meter in the context the request
// goes out as the caller built it (DynamoDB reports no capacity).
func TestMeterAbsentAsksNothing(t *testing.T) {
	t.Parallel()
	st := dynamolocal.NewStore(t)
	in := &dynamodb.PutItemInput{TableName: aws.String(st.DB.Tables().Main), Item: dynamo.Item{"PK": sv("USER#u2"), "SK": sv("X")}}
	out, err := st.DB.Client().PutItem(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if out.ConsumedCapacity != nil {
		t.Errorf("no meter: got ConsumedCapacity %+v, want none asked for", out.ConsumedCapacity)
	}
	m := metering.NewMeter()
	if _, err := st.DB.Client().PutItem(metering.WithMeter(context.Background(), m), in); err != nil {
		t.Fatal(err)
	}
	if in.ReturnConsumedCapacity != "" {
		t.Errorf("caller's input changed: ReturnConsumedCapacity = %q", in.ReturnConsumedCapacity)
	}
	if got := m.Snapshot().WCU; got != 1 {
		t.Errorf("metered put: got %v WCU, want 1", got)
	}
}

func sv(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
