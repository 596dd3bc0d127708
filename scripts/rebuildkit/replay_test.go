package rebuildkit

import (
	"context"
	"slices"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
)

func record(seq string, k model.Key) events.DynamoDBEventRecord {
	return events.DynamoDBEventRecord{EventName: "INSERT", Change: events.DynamoDBStreamRecord{
		SequenceNumber: seq,
		Keys:           map[string]events.DynamoDBAttributeValue{"PK": events.NewStringAttribute(k.PK), "SK": events.NewStringAttribute(k.SK)},
	}}
}

func TestTriggerUserAndAffectedUsers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		given    events.DynamoDBEventRecord
		wantUser string
		want     bool
	}{
		{"workout", record("1", keys.WorkoutKey("u1", 7)), "u1", true},
		{"milestone", record("2", keys.MilestoneKey("u2", "m")), "u2", true},
		{"award is the projector's own output", record("3", keys.AwardKey("u1", "m", 0)), "", false},
		{"profile", record("4", keys.ProfileKey("u1")), "", false},
		{"model part", record("5", keys.ModelPartKey("rocket", 1)), "", false},
		{"parked record", record("6", keys.ParkedKey("PROJECTOR", "x")), "", false},
		{"numeric keys", events.DynamoDBEventRecord{Change: events.DynamoDBStreamRecord{Keys: map[string]events.DynamoDBAttributeValue{
			"PK": events.NewNumberAttribute("1"), "SK": events.NewStringAttribute("x")}}}, "", false},
	}
	var recs []events.DynamoDBEventRecord
	for _, tt := range tests {
		recs = append(recs, tt.given)
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := TriggerUser(tt.given)
			if got != tt.wantUser || ok != tt.want {
				t.Fatalf("got %q %v, want %q %v", got, ok, tt.wantUser, tt.want)
			}
		})
	}
	recs = append(recs, record("9", keys.WorkoutKey("u1", 8)))
	if got, want := AffectedUsers(recs), []string{"u1", "u2"}; !slices.Equal(got, want) {
		t.Fatalf("AffectedUsers: got %v, want %v", got, want)
	}
	if u, ok := RecordUser(record("1", keys.AwardKey("u3", "m", 1))); u != "u3" || !ok {
		t.Fatalf("RecordUser(award): got %q %v, want u3", u, ok)
	}
}

func TestReplayerFiltersAndForwards(t *testing.T) {
	t.Parallel()
	batch := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		record("10", keys.WorkoutKey("u1", 1)),
		record("11", keys.WorkoutKey("u2", 1)),
		record("12", keys.MilestoneKey("u1", "m")),
		record("13", keys.WorkoutKey("u3", 1)),
	}}
	var got []string
	rp := &Replayer{User: "u1", Forward: func(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		for _, r := range ev.Records {
			got = append(got, r.Change.SequenceNumber)
		}
		return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{{ItemIdentifier: "12"}}}, nil
	}}
	resp, err := rp.Handle(context.Background(), batch)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"10", "12"}) {
		t.Fatalf("forwarded %v, want only u1's records 10 and 12", got)
	}
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "12" {
		t.Fatalf("got response %+v, want the projector's partial failure passed through", resp)
	}
	// A batch without the user's records is not forwarded at all.
	got = nil
	if _, err := rp.Handle(context.Background(), events.DynamoDBEvent{Records: batch.Records[3:]}); err != nil || got != nil {
		t.Fatalf("got %v forwarded, %v; want nothing", got, err)
	}

	dry := &Replayer{DryRun: true}
	for range 2 { // a replayed burst: duplicates are harmless
		if _, err := dry.Handle(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
	}
	st := dry.Stats()
	if !slices.Equal(st.Users, []string{"u1", "u2", "u3"}) || st.Records != 8 || st.Forwarded != 0 {
		t.Fatalf("dry run: got %+v, want users u1 u2 u3 from 8 records, nothing forwarded", st)
	}
	rec := &recorder{}
	sum := dry.DryRunReport(context.Background(), rec.recompute)
	if sum.Users != 3 || len(sum.Drift) != 3 || sum.Drift[0].UserID != "u1" {
		t.Fatalf("dry-run report: got %s %v, want a dry recompute of each of the 3 users", sum, sum.Drift)
	}
}

func TestDecodeInvoke(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		given   lambda.InvokeOutput
		want    []string // failed identifiers
		wantErr bool
	}{
		{name: "all done, empty payload", given: lambda.InvokeOutput{StatusCode: 200}},
		{name: "all done, null", given: lambda.InvokeOutput{StatusCode: 200, Payload: []byte("null")}},
		{name: "all done, no failures", given: lambda.InvokeOutput{StatusCode: 200, Payload: []byte(`{"batchItemFailures":[]}`)}},
		{name: "partial failure", given: lambda.InvokeOutput{StatusCode: 200, Payload: []byte(`{"batchItemFailures":[{"itemIdentifier":"4200"}]}`)}, want: []string{"4200"}},
		{name: "function error", given: lambda.InvokeOutput{StatusCode: 200, FunctionError: aws.String("Unhandled"), Payload: []byte(`{"errorMessage":"boom"}`)}, wantErr: true},
		{name: "throttled status", given: lambda.InvokeOutput{StatusCode: 429}, wantErr: true},
		{name: "not a batch response", given: lambda.InvokeOutput{StatusCode: 200, Payload: []byte(`"ok"`)}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp, err := DecodeInvoke("commitcollect-projector", &tt.given)
			if (err != nil) != tt.wantErr {
				t.Fatalf("got error %v, want error %v", err, tt.wantErr)
			}
			var got []string
			for _, f := range resp.BatchItemFailures {
				got = append(got, f.ItemIdentifier)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("got failures %v, want %v", got, tt.want)
			}
		})
	}
}
