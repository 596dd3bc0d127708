package rebuildkit_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/scripts/rebuildkit"
	"github.com/commitcollect/backend/scripts/rebuildkit/cli"
	"github.com/commitcollect/backend/scripts/rebuildkit/redrive"
)

// corrupt sets a milestone's stored progress to a wrong value.
func corrupt(t testing.TB, st *store.Adapters, user, milestone string) model.Milestone {
	t.Helper()
	m := milestones(t, st, user)[milestone]
	if _, err := st.DB.UpdateVersioned(context.Background(), st.DB.Tables().Main, m.Key, m.Version,
		dynamo.Changes{Set: map[string]any{"progressValue": int64(1)}}); err != nil {
		t.Fatal(err)
	}
	return m
}

func parkedIDs(t testing.TB, st *store.Adapters, source string) []string {
	t.Helper()
	recs, err := st.Parked.Parked(context.Background(), source)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.RecordID)
	}
	return ids
}

func TestRedriveParkedRecords(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	seedModel(t, h.st)
	seedUsers(t, h.st, names("p", 2), 10)
	if code, _ := h.rebuildJSON(t, "--all"); code != cli.ExitOK {
		t.Fatal("initial rebuild failed")
	}
	good := corrupt(t, h.st, "p000", "dist")

	// What the projector parks: the stream record as JSON.
	park := func(source, id string, payload any) {
		b, _ := json.Marshal(payload)
		if err := h.st.Parked.Park(ctx, &ops.ParkedRecord{Source: source, RecordID: id, Reason: "test", Payload: string(b)}); err != nil {
			t.Fatal(err)
		}
	}
	rec := func(k model.Key) events.DynamoDBEventRecord {
		return events.DynamoDBEventRecord{EventID: "ev", EventName: "MODIFY", Change: events.DynamoDBStreamRecord{SequenceNumber: "1",
			Keys: map[string]events.DynamoDBAttributeValue{"PK": events.NewStringAttribute(k.PK), "SK": events.NewStringAttribute(k.SK)}}}
	}
	park(keys.ParkSourceProjector, "ev-1", rec(keys.WorkoutKey("p000", 3)))
	park(keys.ParkSourceProjector, "ev-2", rec(keys.MilestoneKey("p000", "dist")))
	park(keys.ParkSourceProjector, "ev-3", rec(keys.ModelPartKey("rocket", 1))) // no user: cannot be redriven
	park(keys.ParkSourceWorker, "job-ok", map[string]any{"correlationId": "ok", "event": map[string]any{"object_id": 1}})
	park(keys.ParkSourceWorker, "job-bad", map[string]any{"correlationId": "bad", "event": map[string]any{"object_id": 2}})

	var jobs []string
	h.env.ProcessJob = func(_ context.Context, job json.RawMessage) error {
		var j struct{ CorrelationID string }
		_ = json.Unmarshal(job, &j)
		jobs = append(jobs, j.CorrelationID)
		if j.CorrelationID == "bad" {
			return errors.New("strava still down")
		}
		return nil
	}

	code, out, errOut := h.run(t, cli.RedriveMain, "--source", "all")
	if code != cli.ExitError {
		t.Fatalf("redrive: got exit %d, want %d (records kept)\n%s\n%s", code, cli.ExitError, out, errOut)
	}
	if !strings.Contains(out, "redrive projector: redriven=2 kept=1 users=1") || !strings.Contains(out, "redrive worker: redriven=1 kept=1") ||
		!strings.Contains(out, "ev-3: no user") || !strings.Contains(out, "job-bad: worker failed again: strava still down") {
		t.Fatalf("redrive output:\n%s", out)
	}
	if got := parkedIDs(t, h.st, keys.ParkSourceProjector); !slices.Equal(got, []string{"ev-3"}) {
		t.Fatalf("projector records still parked: got %v, want [ev-3]", got)
	}
	if got := parkedIDs(t, h.st, keys.ParkSourceWorker); !slices.Equal(got, []string{"job-bad"}) {
		t.Fatalf("worker records still parked: got %v, want [job-bad]", got)
	}
	if got := milestones(t, h.st, "p000")["dist"]; got.ProgressValue != good.ProgressValue {
		t.Fatalf("p000/dist: got progress %d, want %d restored by the redriven recompute", got.ProgressValue, good.ProgressValue)
	}
	slices.Sort(jobs)
	if !slices.Equal(jobs, []string{"bad", "ok"}) {
		t.Fatalf("worker saw %v, want each parked job once", jobs)
	}
	// Redriving again is harmless: the kept ones are tried again, nothing else.
	jobs = nil
	if code, _, _ := h.run(t, cli.RedriveMain, "--source", "worker"); code != cli.ExitError || !slices.Equal(jobs, []string{"bad"}) {
		t.Fatalf("second redrive: got exit %d, jobs %v; want only the failing job again", code, jobs)
	}
}

// shardRecords reads a whole shard of the table's stream.
func shardRecords(t testing.TB, h *harness) (string, string, []types.Record) {
	t.Helper()
	ctx := context.Background()
	arn, err := h.env.StreamARN(ctx)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := h.streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range desc.StreamDescription.Shards {
		it, err := h.streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: sh.ShardId,
			ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		var recs []types.Record
		for iter, empty := it.ShardIterator, 0; iter != nil && empty < 2; {
			out, err := h.streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Records) == 0 {
				empty++
			}
			recs = append(recs, out.Records...)
			iter = out.NextShardIterator
		}
		if len(recs) > 0 {
			return arn, aws.ToString(sh.ShardId), recs
		}
	}
	t.Fatal("no stream records")
	return "", "", nil
}

// envelope turns the projector DLQ fixture into a message about shard and
// the records from..to.
func envelope(t testing.TB, arn, shard, from, to string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/sqs/projector-stream-batch.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	info := m["DDBStreamBatchInfo"].(map[string]any)
	info["streamArn"], info["shardId"], info["startSequenceNumber"], info["endSequenceNumber"] = arn, shard, from, to
	out, _ := json.Marshal(m)
	return out
}

func TestRedriveStreamBatchMessage(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	seedModel(t, h.st)
	users := names("s", 3)
	seedUsers(t, h.st, users, 6)
	if code, _ := h.rebuildJSON(t, "--all"); code != cli.ExitOK {
		t.Fatal("initial rebuild failed")
	}
	// The batch the projector gave up on: three new workouts of s001.
	for _, w := range workouts("s001", 1, 6, 9) {
		if err := h.st.DB.Put(context.Background(), h.st.DB.Tables().Main, w); err != nil {
			t.Fatal(err)
		}
	}
	arn, shard, recs := shardRecords(t, h)
	first, last := aws.ToString(recs[len(recs)-3].Dynamodb.SequenceNumber), aws.ToString(recs[len(recs)-1].Dynamodb.SequenceNumber)
	corrupt(t, h.st, "s002", "count") // not in the batch: must stay corrupt

	rd := &redrive.Redriver{Recompute: h.env.Recompute, Streams: h.streams, Logger: h.env.Logger}
	got, err := rebuildkit.ReadRange(context.Background(), h.streams, rebuildkit.StreamBatch{StreamARN: arn, ShardID: shard, StartSequenceNumber: first, EndSequenceNumber: last})
	if err != nil || len(got) != 3 || got[0].Change.SequenceNumber != first || got[2].Change.SequenceNumber != last {
		t.Fatalf("ReadRange: got %d records, %v; want s001's 3 new workouts from %s to %s", len(got), err, first, last)
	}
	done, affected, note := rd.HandleMessage(context.Background(), envelope(t, arn, shard, first, last))
	if !done || !slices.Equal(affected, []string{"s001"}) || note != "" {
		t.Fatalf("HandleMessage: got done=%v users=%v note=%q, want s001 recomputed and the message done", done, affected, note)
	}
	if m := milestones(t, h.st, "s001")["count"]; m.WorkoutsCounted != 9 {
		t.Fatalf("s001/count: got %d workouts counted, want the batch's 3 new ones projected (9)", m.WorkoutsCounted)
	}
	if code, rep := h.verifyJSON(t, "--user", "s001"); code != cli.ExitOK {
		t.Fatalf("verify s001 after redrive: exit %d %v", code, rep.Drift)
	}
	if code, _ := h.verifyJSON(t, "--user", "s002"); code != cli.ExitDrift {
		t.Fatalf("verify s002: got exit %d, want drift (not in the batch, so not redriven)", code)
	}

	// A batch from a shard the stream no longer has: say so, keep the
	// message, point at verify and rebuild.
	done, _, note = rd.HandleMessage(context.Background(), envelope(t, arn, "shardId-00000001000000000000-deadbeef", first, last))
	if done || !strings.Contains(note, "no longer in the stream") || !strings.Contains(note, "rebuild --user") {
		t.Fatalf("trimmed batch: got done=%v note=%q, want the message kept with a rebuild recommendation", done, note)
	}
	// Not a Lambda failure record: kept.
	if done, _, note := rd.HandleMessage(context.Background(), []byte(`{"hello":"world"}`)); done || !strings.Contains(note, "not a Lambda failure record") {
		t.Fatalf("garbage: got done=%v note=%q", done, note)
	}
	// A worker job without a worker wired: kept, with the flag to use.
	job, _ := os.ReadFile("testdata/sqs/worker-retries-exhausted.json")
	if done, _, note := rd.HandleMessage(context.Background(), job); done || !strings.Contains(note, "--invoke-worker") {
		t.Fatalf("worker job without worker: got done=%v note=%q", done, note)
	}
	var seen json.RawMessage
	rd.ProcessJob = func(_ context.Context, j json.RawMessage) error { seen = j; return nil }
	if done, _, _ := rd.HandleMessage(context.Background(), job); !done || !strings.Contains(string(seen), `"correlationId": "0f8c2a9e5b7d4e31a6c0d9b8e7f61234"`) {
		t.Fatalf("worker job: got done=%v payload %s, want the job handed to the worker", done, seen)
	}
}
