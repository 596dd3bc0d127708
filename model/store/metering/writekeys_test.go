package metering

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func sAV(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

// Item is an item's attributes, as the store writes them.
type Item = map[string]types.AttributeValue

// testTables are the tables of testSchemas (tableadmin.KeySchemas of the
// product's specs gives the same keys; model/store tests that).
type testTables struct{ Main, Audit, Idempotency string }

const (
	IndexGSI1  = "GSI1"
	AttrLSI1SK = "LSI1SK"
)

func testSchemas(tb testTables) []KeySchema {
	both := []Index{{Name: "GSI1", Key: "GSI1PK"}, {Name: "GSI2", Key: "GSI2PK"}}
	return []KeySchema{
		{Name: tb.Main, HashKey: "PK", GSIs: both, LSIs: []Index{{Name: "LSI1", Key: AttrLSI1SK}}},
		{Name: tb.Audit, HashKey: "PK", GSIs: both},
		{Name: tb.Idempotency, HashKey: "IdempotencyKey", GSIs: []Index{{Name: "Pending", Key: "PendingPK"}}},
	}
}

// hot returns the figures of one scope.
func hot(t *testing.T, w *WriteKeys, scope string) HotKey {
	t.Helper()
	for _, h := range w.Hottest() {
		if h.Scope == scope {
			return h
		}
	}
	return HotKey{Scope: scope}
}

func TestWriteKeysRecordWrites(t *testing.T) {
	t.Parallel()
	tb := testTables{Main: "p-CommitCollect", Audit: "p-CommitCollectAudit", Idempotency: "p-CommitCollectIdempotency"}
	gsi1 := map[string]types.Capacity{IndexGSI1: {CapacityUnits: aws.Float64(1)}}
	tests := []struct {
		name     string
		params   any
		consumed []types.ConsumedCapacity
		want     map[string]HotKey // by scope: Writes, Unknown, Key, Count
	}{
		{"put: table key and every index key the item carries", &dynamodb.PutItemInput{TableName: aws.String(tb.Main),
			Item: Item{"PK": sAV("USER#1"), "SK": sAV("W#1"), "GSI1PK": sAV("ATHLETE#9"), AttrLSI1SK: sAV("2026")}}, nil,
			map[string]HotKey{tb.Main: {Writes: 1, Key: "USER#1", Count: 1}, tb.Main + "/GSI1": {Writes: 1, Key: "ATHLETE#9", Count: 1},
				tb.Main + "/LSI1": {Writes: 1, Key: "USER#1", Count: 1}}},
		{"put on the hash-only outbox with its sparse index key", &dynamodb.PutItemInput{TableName: aws.String(tb.Idempotency),
			Item: Item{"IdempotencyKey": sAV("k1"), "PendingPK": sAV("OUTBOX#PENDING#2")}}, nil,
			map[string]HotKey{tb.Idempotency: {Writes: 1, Key: "k1", Count: 1},
				tb.Idempotency + "/Pending": {Writes: 1, Key: "OUTBOX#PENDING#2", Count: 1}}},
		{"update: SET of an index key (plain and if_not_exists) counts it", &dynamodb.UpdateItemInput{TableName: aws.String(tb.Audit),
			Key:                       Item{"PK": sAV("USER#1"), "SK": sAV("A#1")},
			UpdateExpression:          aws.String("SET #0 = :0, #1 = if_not_exists(#1, :1)\nREMOVE #2\n"),
			ExpressionAttributeNames:  map[string]string{"#0": "GSI2PK", "#1": "GSI1PK", "#2": "x"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":0": sAV("EVENT#X#202601"), ":1": sAV("CORR#1")}}, nil,
			map[string]HotKey{tb.Audit: {Writes: 1, Key: "USER#1", Count: 1}, tb.Audit + "/GSI2": {Writes: 1, Key: "EVENT#X#202601", Count: 1},
				tb.Audit + "/GSI1": {Writes: 1, Key: "CORR#1", Count: 1}}},
		{"update leaving the index key: unknown when DynamoDB reports the index written", &dynamodb.UpdateItemInput{TableName: aws.String(tb.Main),
			Key: Item{"PK": sAV("USER#1"), "SK": sAV("STRAVA")}, UpdateExpression: aws.String("SET #0 = :0"),
			ExpressionAttributeNames: map[string]string{"#0": "accessToken"}, ExpressionAttributeValues: map[string]types.AttributeValue{":0": sAV("t")}},
			[]types.ConsumedCapacity{{TableName: aws.String(tb.Main), GlobalSecondaryIndexes: gsi1}},
			map[string]HotKey{tb.Main: {Writes: 1, Key: "USER#1", Count: 1}, tb.Main + "/GSI1": {Unknown: 1}}},
		{"delete: the table key; the index unknown", &dynamodb.DeleteItemInput{TableName: aws.String(tb.Main),
			Key: Item{"PK": sAV("USER#2"), "SK": sAV("W#1")}}, []types.ConsumedCapacity{{TableName: aws.String(tb.Main), GlobalSecondaryIndexes: gsi1}},
			map[string]HotKey{tb.Main: {Writes: 1, Key: "USER#2", Count: 1}, tb.Main + "/GSI1": {Unknown: 1}}},
		{"batch: every put and delete", &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{tb.Main: {
			{PutRequest: &types.PutRequest{Item: Item{"PK": sAV("USER#3"), "SK": sAV("W#1")}}},
			{PutRequest: &types.PutRequest{Item: Item{"PK": sAV("USER#3"), "SK": sAV("W#2")}}},
			{DeleteRequest: &types.DeleteRequest{Key: Item{"PK": sAV("USER#4"), "SK": sAV("W#1")}}}}}}, nil,
			map[string]HotKey{tb.Main: {Writes: 3, Key: "USER#3", Count: 2}}},
		{"transaction: every item in its own table", &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(tb.Audit), Item: Item{"PK": sAV("USER#5"), "SK": sAV("A"), "GSI2PK": sAV("EVENT#M")}}},
			{Update: &types.Update{TableName: aws.String(tb.Main), Key: Item{"PK": sAV("USER#5"), "SK": sAV("M#1")}, UpdateExpression: aws.String("SET #a = :a"),
				ExpressionAttributeNames: map[string]string{"#a": "v"}, ExpressionAttributeValues: map[string]types.AttributeValue{":a": sAV("1")}}},
			{Delete: &types.Delete{TableName: aws.String(tb.Main), Key: Item{"PK": sAV("USER#5"), "SK": sAV("X")}}}}}, nil,
			map[string]HotKey{tb.Audit: {Writes: 1, Key: "USER#5", Count: 1}, tb.Audit + "/GSI2": {Writes: 1, Key: "EVENT#M", Count: 1},
				tb.Main: {Writes: 2, Key: "USER#5", Count: 2}}},
		{"reads are not writes", &dynamodb.GetItemInput{TableName: aws.String(tb.Main), Key: Item{"PK": sAV("USER#1"), "SK": sAV("S")}}, nil,
			map[string]HotKey{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := NewWriteKeys(testSchemas(tb), 0)
			w.recordWrites(tt.params, tt.consumed)
			got := map[string]HotKey{}
			for _, h := range w.Hottest() {
				got[h.Scope] = HotKey{Writes: h.Writes, Unknown: h.Unknown, Key: h.Key, Count: h.Count}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestWriteKeysBounded: with topK counters, a hot key among many cold ones
// is kept with a count that overstates it by at most its error, the number
// of keys kept never exceeds topK, and the share is an upper bound.
func TestWriteKeysBounded(t *testing.T) {
	t.Parallel()
	w := NewWriteKeys(nil, 8)
	for i := range 1000 {
		w.add("T", fmt.Sprintf("cold-%d", i))
		if i%4 == 0 {
			w.add("T", "hot")
		}
	}
	h := hot(t, w, "T")
	if h.Writes != 1250 || h.Keys != 8 || h.Key != "hot" {
		t.Fatalf("got %+v, want 1250 writes, 8 keys kept, hottest \"hot\"", h)
	}
	if h.Count < 250 || h.Count-h.Error > 250 {
		t.Errorf("hot key: count %d error %d, want count ≥ 250 ≥ count-error", h.Count, h.Error)
	}
	if h.Share() < 0.2 {
		t.Errorf("share %.3f, want ≥ 0.2 (an upper bound of the true 0.2)", h.Share())
	}
}

func TestSetAssignments(t *testing.T) {
	t.Parallel()
	v := map[string]types.AttributeValue{":0": sAV("a"), ":1": sAV("b"), ":2": sAV("c")}
	n := map[string]string{"#0": "A", "#1": "B", "#2": "C"}
	tests := []struct {
		expr string
		want []string
	}{
		{"SET #0 = :0, #1 = :1\n", []string{"A", "B"}},
		{"REMOVE #2\nSET #0 = if_not_exists(#0, :0)\n", []string{"A"}},
		{"SET #0 = list_append(#0, :0), #1 = :1 ADD #2 :2", []string{"B"}},
		{"SET #0.x = :0, #2 = #1 + :2", nil},
		{"", nil},
	}
	for _, tt := range tests {
		got := setAssignments(tt.expr, n, v)
		var names []string
		for _, k := range []string{"A", "B", "C"} {
			if _, ok := got[k]; ok {
				names = append(names, k)
			}
		}
		if !reflect.DeepEqual(names, tt.want) {
			t.Errorf("%q: got %v, want %v", tt.expr, names, tt.want)
		}
	}
}

// TestCountWriteKeysFollowsStartMeter: a meter started from one that counts
// keys counts into the same WriteKeys, once even when two meters in the
// chain share it; a meter without one records nothing.
func TestCountWriteKeysFollowsStartMeter(t *testing.T) {
	t.Parallel()
	w := NewWriteKeys(nil, 0)
	root := NewMeter()
	root.CountWriteKeys(w)
	child := &Meter{parent: root}
	child.CountWriteKeys(w)
	if got := child.writeKeys(); len(got) != 1 || got[0] != w {
		t.Fatalf("child.writeKeys() = %v, want [w]", got)
	}
	if got := NewMeter().writeKeys(); len(got) != 0 {
		t.Errorf("a plain meter's writeKeys() = %v, want none", got)
	}
	var nilMeter *Meter
	nilMeter.CountWriteKeys(w) // no panic
	if got := nilMeter.writeKeys(); got != nil {
		t.Errorf("nil meter: %v", got)
	}
}
