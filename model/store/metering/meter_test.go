package metering

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"reflect"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func cu(table string, total float64) types.ConsumedCapacity {
	return types.ConsumedCapacity{TableName: aws.String(table), CapacityUnits: aws.Float64(total), Table: &types.Capacity{CapacityUnits: aws.Float64(total)}}
}

func TestMeterRecord(t *testing.T) {
	t.Parallel()
	indexed := types.ConsumedCapacity{
		TableName: aws.String("Main"), CapacityUnits: aws.Float64(3),
		Table:                  &types.Capacity{CapacityUnits: aws.Float64(1)},
		LocalSecondaryIndexes:  map[string]types.Capacity{"LSI1": {CapacityUnits: aws.Float64(1)}},
		GlobalSecondaryIndexes: map[string]types.Capacity{"GSI1": {CapacityUnits: aws.Float64(1)}},
	}
	split := types.ConsumedCapacity{TableName: aws.String("Main"), CapacityUnits: aws.Float64(3), ReadCapacityUnits: aws.Float64(1), WriteCapacityUnits: aws.Float64(2)}
	tests := []struct {
		name      string
		op        string
		given     []types.ConsumedCapacity
		failed    bool
		want      Units
		wantTable map[string]Units
	}{
		{"read op counts read units", "GetItem", []types.ConsumedCapacity{cu("Main", 0.5)}, false,
			Units{Requests: 1, RCU: 0.5}, map[string]Units{"Main": {RCU: 0.5}}},
		{"query is a read", "Query", []types.ConsumedCapacity{cu("Main", 2)}, false,
			Units{Requests: 1, RCU: 2}, map[string]Units{"Main": {RCU: 2}}},
		{"write op counts write units, indexes apart", "PutItem", []types.ConsumedCapacity{indexed}, false,
			Units{Requests: 1, WCU: 3}, map[string]Units{"Main": {WCU: 1}, "Main/LSI1": {WCU: 1}, "Main/GSI1": {WCU: 1}}},
		{"DynamoDB's read/write split wins", "TransactWriteItems", []types.ConsumedCapacity{split}, false,
			Units{Requests: 1, RCU: 1, WCU: 2}, map[string]Units{"Main": {RCU: 1, WCU: 2}}},
		{"batch over two tables", "BatchWriteItem", []types.ConsumedCapacity{cu("Main", 4), cu("Audit", 1)}, false,
			Units{Requests: 1, WCU: 5}, map[string]Units{"Main": {WCU: 4}, "Audit": {WCU: 1}}},
		{"failed call is a request without units", "UpdateItem", nil, true,
			Units{Requests: 1, Failed: 1}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := NewMeter()
			m.Record(tt.op, tt.given, tt.failed)
			got := m.Snapshot()
			if got.Units != tt.want {
				t.Errorf("total: got %+v, want %+v", got.Units, tt.want)
			}
			if got.ByOp[tt.op] != tt.want {
				t.Errorf("byOp[%s]: got %+v, want %+v", tt.op, got.ByOp[tt.op], tt.want)
			}
			if len(tt.wantTable) > 0 && !reflect.DeepEqual(got.ByTable, tt.wantTable) {
				t.Errorf("byTable: got %+v, want %+v", got.ByTable, tt.wantTable)
			}
		})
	}
}

func TestTransactFloor(t *testing.T) {
	t.Parallel()
	put := func(table string) types.TransactWriteItem {
		return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(table)}}
	}
	tests := []struct {
		name  string
		in    any
		given []types.ConsumedCapacity
		want  Units
	}{
		{"Local's one-item figure raised to 2 per item", &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{put("Main"), put("Main"), put("Main")}},
			[]types.ConsumedCapacity{cu("Main", 2)}, Units{Requests: 1, WCU: 6}},
		{"a larger reported figure is kept", &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{put("Main"), put("Main")}},
			[]types.ConsumedCapacity{cu("Main", 10)}, Units{Requests: 1, WCU: 10}},
		{"a table missing from the report is added", &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{put("Main"), put("Audit")}},
			[]types.ConsumedCapacity{cu("Main", 2)}, Units{Requests: 1, WCU: 4}},
		{"index shares stay as reported", &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{put("Audit"), put("Audit")}},
			[]types.ConsumedCapacity{{TableName: aws.String("Audit"), CapacityUnits: aws.Float64(4), Table: &types.Capacity{CapacityUnits: aws.Float64(2)},
				GlobalSecondaryIndexes: map[string]types.Capacity{"GSI1": {CapacityUnits: aws.Float64(2)}}}}, Units{Requests: 1, WCU: 6}},
		{"transactional reads", &dynamodb.TransactGetItemsInput{TransactItems: []types.TransactGetItem{{Get: &types.Get{TableName: aws.String("Main")}}, {Get: &types.Get{TableName: aws.String("Main")}}}},
			[]types.ConsumedCapacity{cu("Main", 2)}, Units{Requests: 1, RCU: 4}},
		{"other operations untouched", &dynamodb.PutItemInput{TableName: aws.String("Main")},
			[]types.ConsumedCapacity{cu("Main", 1)}, Units{Requests: 1, WCU: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			op, _, _ := askCapacity(tt.in)
			m := NewMeter()
			m.Record(op, withFloor(tt.given, transactFloor(tt.in)), false)
			if got := m.Snapshot().Units; got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestAskCapacityCopiesEveryOperation(t *testing.T) {
	t.Parallel()
	inputs := []any{&dynamodb.GetItemInput{}, &dynamodb.PutItemInput{}, &dynamodb.UpdateItemInput{}, &dynamodb.DeleteItemInput{},
		&dynamodb.QueryInput{}, &dynamodb.BatchGetItemInput{}, &dynamodb.BatchWriteItemInput{},
		&dynamodb.TransactGetItemsInput{}, &dynamodb.TransactWriteItemsInput{}}
	for _, in := range inputs {
		op, p, ok := askCapacity(in)
		if !ok || op == "" || p == in {
			t.Errorf("%T: got op %q ok %v (copied %v), want a named copy", in, op, ok, p != in)
			continue
		}
		if got := reflect.ValueOf(p).Elem().FieldByName("ReturnConsumedCapacity").String(); got != string(types.ReturnConsumedCapacityIndexes) {
			t.Errorf("%s: got ReturnConsumedCapacity %q, want INDEXES", op, got)
		}
		if got := reflect.ValueOf(in).Elem().FieldByName("ReturnConsumedCapacity").String(); got != "" {
			t.Errorf("%s: caller's input changed to %q", op, got)
		}
	}
	if _, _, ok := askCapacity(&dynamodb.DescribeTableInput{}); ok {
		t.Error("DescribeTable: got ok, want no capacity asked (it reports none)")
	}
}

func TestSnapshotAddAndLog(t *testing.T) {
	t.Parallel()
	a, b := NewMeter(), NewMeter()
	a.Record("GetItem", []types.ConsumedCapacity{cu("Main", 1)}, false)
	b.Record("GetItem", []types.ConsumedCapacity{cu("Main", 0.5)}, false)
	b.Record("PutItem", []types.ConsumedCapacity{cu("Main", 2)}, false)
	sa, sb := a.Snapshot(), b.Snapshot()
	sum := sa.Add(sb)
	want := Snapshot{Units: Units{Requests: 3, RCU: 1.5, WCU: 2},
		ByOp:    map[string]Units{"GetItem": {Requests: 2, RCU: 1.5}, "PutItem": {Requests: 1, WCU: 2}},
		ByTable: map[string]Units{"Main": {RCU: 1.5, WCU: 2}}}
	if !reflect.DeepEqual(sum, want) {
		t.Errorf("sum: got %+v, want %+v", sum, want)
	}
	if sa.Requests != 1 || sa.ByOp["GetItem"].Requests != 1 {
		t.Errorf("Add changed its receiver: %+v", sa)
	}
	if z := (Snapshot{}).Add(Snapshot{}); z.ByOp != nil || z.Units != (Units{}) {
		t.Errorf("zero sum: got %+v", z)
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "capacity", sum, sum.Attr())
	var line struct {
		Requests int
		RCU      float64 `json:"rcu"`
		WCU      float64 `json:"wcu"`
		Capacity struct {
			Requests int
			RCU      float64 `json:"rcu"`
			WCU      float64 `json:"wcu"`
			Ops      map[string]map[string]float64
		}
	}
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	if line.Capacity.Requests != 3 || line.Capacity.RCU != 1.5 || line.Capacity.WCU != 2 || line.Capacity.Ops["PutItem"]["wcu"] != 2 {
		t.Errorf("log line, grouped: got %s", buf.String())
	}
	if line.Requests != 3 || line.RCU != 1.5 || line.WCU != 2 {
		t.Errorf("log line, inline (Attr): got %s", buf.String())
	}
}

func TestStartMeterAddsToParent(t *testing.T) {
	t.Parallel()
	ctx, outer := StartMeter(context.Background())
	if outer.parent != nil {
		t.Fatalf("outer meter: got parent %p, want none", outer.parent)
	}
	ctxA, a := StartMeter(ctx)
	_, b := StartMeter(ctx)
	if MeterFrom(ctxA) != a {
		t.Fatal("StartMeter: ctx does not carry the new meter")
	}
	a.Record("GetItem", []types.ConsumedCapacity{cu("Main", 1)}, false)
	b.Record("PutItem", []types.ConsumedCapacity{cu("Main", 2)}, false)
	if got := a.Snapshot().Units; got != (Units{Requests: 1, RCU: 1}) {
		t.Errorf("invocation a: got %+v", got)
	}
	if got := outer.Snapshot().Units; got != (Units{Requests: 2, RCU: 1, WCU: 2}) {
		t.Errorf("outer: got %+v, want both invocations", got)
	}
}

func TestMeterNilAndConcurrent(t *testing.T) {
	t.Parallel()
	var nilMeter *Meter
	nilMeter.Record("GetItem", []types.ConsumedCapacity{cu("Main", 1)}, false)
	if got := nilMeter.Snapshot(); got.Requests != 0 {
		t.Errorf("nil meter: got %+v, want zero", got)
	}
	var m Meter
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.Record("PutItem", []types.ConsumedCapacity{cu("Main", 1)}, false)
		}()
	}
	wg.Wait()
	if got := m.Snapshot(); got.Requests != 50 || got.WCU != 50 {
		t.Errorf("concurrent: got %+v, want 50 requests, 50 WCU", got.Units)
	}
}
