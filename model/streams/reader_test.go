package streams_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/streams"
	"github.com/commitcollect/backend/test/dynamolocal"
	"github.com/commitcollect/backend/test/fixture"
)

func TestMain(m *testing.M) { dynamolocal.Main(m) }

type env struct {
	s   *store.Adapters
	arn string
	api streams.API
}

func newEnv(t testing.TB) env {
	t.Helper()
	x := dynamolocal.NewStreamed(t)
	return env{s: x.Store, arn: x.ARN, api: x.Streams}
}

func (e env) putWorkouts(t testing.TB, user string, from, to int64) {
	t.Helper()
	for i := from; i <= to; i++ {
		w := fixture.Workout(user, i, fixture.Metres(float64(i)), fixture.Start(time.Unix(1700000000+i, 0)))
		if err := e.s.DB.Put(context.Background(), e.s.DB.Tables().Main, w); err != nil {
			t.Fatal(err)
		}
	}
}

func sks(recs []events.DynamoDBEventRecord) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Change.Keys["SK"].String()
	}
	return out
}

func TestReadAllConvertsLikeLambda(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.putWorkouts(t, "u1", 1, 3)
	if _, err := e.s.DB.UpdateVersioned(ctx, e.s.DB.Tables().Main, keys.WorkoutKey("u1", 2), 0, dynamo.Changes{Set: map[string]any{"isDeleted": true}}); err != nil {
		t.Fatal(err)
	}
	recs, err := streams.ReadAll(ctx, e.api, e.arn)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(sks(recs)), "[WORKOUT#STRAVA#1 WORKOUT#STRAVA#2 WORKOUT#STRAVA#3 WORKOUT#STRAVA#2]"; got != want {
		t.Fatalf("records: got %s, want %s", got, want)
	}
	mod := recs[3]
	if mod.EventName != "MODIFY" || mod.EventSource != "aws:dynamodb" || mod.EventSourceArn != e.arn || mod.AWSRegion == "" {
		t.Fatalf("envelope: %+v", mod)
	}
	if !mod.Change.NewImage["isDeleted"].Boolean() || mod.Change.OldImage["isDeleted"].Boolean() {
		t.Fatalf("images: new %v old %v", mod.Change.NewImage["isDeleted"], mod.Change.OldImage["isDeleted"])
	}
	if mod.Change.StreamViewType != "NEW_AND_OLD_IMAGES" || mod.Change.SequenceNumber == "" || mod.Change.ApproximateCreationDateTime.IsZero() {
		t.Fatalf("change: %+v", mod.Change)
	}
	// The record survives a JSON round trip through aws-lambda-go's types,
	// which is how the projector Lambda receives it.
	b, err := json.Marshal(events.DynamoDBEvent{Records: recs})
	if err != nil {
		t.Fatal(err)
	}
	var back events.DynamoDBEvent
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sks(back.Records), sks(recs)) || back.Records[3].Change.NewImage["distanceMeters"].Number() != "2" {
		t.Fatalf("round trip changed the records")
	}
	// And it has exactly the fields of aws-lambda-go's own fixture.
	want := fixtureFields(t)
	got := jsonFields(t, b)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("record fields:\n got %v\nwant %v", got, want)
	}
}

// fixtureFields reads aws-lambda-go's testdata/dynamodb-event.json from the
// module cache and lists the field names of a record and of its change.
func fixtureFields(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/aws/aws-lambda-go").Output()
	if err != nil {
		t.Fatalf("locate aws-lambda-go: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "events", "testdata", "dynamodb-event.json"))
	if err != nil {
		t.Fatal(err)
	}
	return jsonFields(t, b)
}

func jsonFields(t *testing.T, b []byte) []string {
	t.Helper()
	var ev struct {
		Records []map[string]json.RawMessage `json:"Records"`
	}
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	for _, r := range ev.Records {
		for k := range r {
			set[k] = true
		}
		var change map[string]json.RawMessage
		if err := json.Unmarshal(r["dynamodb"], &change); err != nil {
			t.Fatal(err)
		}
		for k := range change {
			if k != "OldImage" { // the fixture's records are all INSERTs
				set["dynamodb."+k] = true
			}
		}
	}
	delete(set, "userIdentity") // only TTL deletions carry it
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestPartialBatchFailureRetriesFromFailedRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.putWorkouts(t, "u1", 1, 6)
	var delivered [][]string
	failedOnce := false
	h := func(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		delivered = append(delivered, sks(ev.Records))
		for _, r := range ev.Records {
			if r.Change.Keys["SK"].String() == "WORKOUT#STRAVA#4" && !failedOnce {
				failedOnce = true
				return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{{ItemIdentifier: r.Change.SequenceNumber}}}, nil
			}
		}
		return events.DynamoDBEventResponse{}, nil
	}
	r := streams.NewReader(e.api, e.arn, streams.Options{})
	if err := r.Drain(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"WORKOUT#STRAVA#1", "WORKOUT#STRAVA#2", "WORKOUT#STRAVA#3", "WORKOUT#STRAVA#4", "WORKOUT#STRAVA#5", "WORKOUT#STRAVA#6"},
		{"WORKOUT#STRAVA#4", "WORKOUT#STRAVA#5", "WORKOUT#STRAVA#6"},
	}
	if !reflect.DeepEqual(delivered, want) {
		t.Fatalf("deliveries:\n got %v\nwant %v", delivered, want)
	}
	if r.Stats.Retries != 1 || r.Stats.Records != 6 {
		t.Fatalf("stats: %+v", r.Stats)
	}
}

func TestDiscardAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.putWorkouts(t, "u1", 1, 3)
	var discarded []string
	h := func(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		return events.DynamoDBEventResponse{}, fmt.Errorf("always broken")
	}
	r := streams.NewReader(e.api, e.arn, streams.Options{MaxAttempts: 2, OnDiscard: func(_ context.Context, recs []events.DynamoDBEventRecord, cause error) {
		discarded = append(discarded, sks(recs)...)
	}})
	if err := r.Drain(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	if len(discarded) != 3 || r.Stats.Discarded != 3 {
		t.Fatalf("discarded %v, stats %+v", discarded, r.Stats)
	}
}

func TestRestartResumesFromCheckpoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cp := &streams.FileCheckpoints{Path: filepath.Join(t.TempDir(), "checkpoints.json")}
	collect := func() []string {
		var got []string
		r := streams.NewReader(e.api, e.arn, streams.Options{Checkpoints: cp, BatchSize: 2})
		err := r.Drain(context.Background(), func(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
			got = append(got, sks(ev.Records)...)
			return events.DynamoDBEventResponse{}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	e.putWorkouts(t, "u1", 1, 5)
	if got := collect(); len(got) != 5 {
		t.Fatalf("first run: %v", got)
	}
	e.putWorkouts(t, "u1", 6, 7)
	if got, want := collect(), []string{"WORKOUT#STRAVA#6", "WORKOUT#STRAVA#7"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after restart: got %v, want %v (nothing reprocessed)", got, want)
	}
}

func TestRunStopsOnCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.putWorkouts(t, "u1", 1, 2)
	ctx, cancel := context.WithCancel(context.Background())
	seen := make(chan int, 10)
	done := make(chan error, 1)
	r := streams.NewReader(e.api, e.arn, streams.Options{PollInterval: 20 * time.Millisecond})
	go func() {
		done <- r.Run(ctx, func(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
			seen <- len(ev.Records)
			return events.DynamoDBEventResponse{}, nil
		})
	}()
	total := 0
	for total < 3 {
		select {
		case n := <-seen:
			total += n
			if total == 2 {
				e.putWorkouts(t, "u1", 3, 3) // written while the reader runs
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("reader delivered %d records, want 3", total)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop on cancel")
	}
}

// TestBatchingWindowGathersABurst: while records keep coming, a reader with
// a batching window waits the window after each busy round (one that
// delivered at least busyRound records), so once a batch was busy, the rest
// of a burst of 40 records written over about three seconds comes in at
// most three batches, each at least a window after a busy one; a lone record
// after a quiet spell is delivered at once, not a window later. Protection:
// Options.BatchingWindow (without it the rest comes in batches a poll
// apart, one or two per write).
//
// One run, with margins that load cannot erase: a gap after a busy batch is
// a lower bound (a wait is never shorter than the window, however loaded the
// machine); the batches before the first busy one are not counted (a loaded
// machine shows a write of five as 3 + 2, neither busy); and the lone
// record has the whole window as its margin.
func TestBatchingWindowGathersABurst(t *testing.T) {
	t.Parallel()
	const window = 2 * time.Second
	batches, lone := burst(t, window)
	var gaps []string
	busy, afterBusy := 0, 0
	for i := 1; i < len(batches); i++ {
		gap := batches[i].at.Sub(batches[i-1].at)
		gaps = append(gaps, fmt.Sprintf("%d→%s", batches[i-1].n, gap.Round(time.Millisecond)))
		if batches[i-1].n >= 4 { // busyRound
			busy++
			if gap < window*9/10 {
				t.Fatalf("a batch of %d records followed %s later; want at least the window, %s (gaps %v)", batches[i-1].n, gap, window, gaps)
			}
		}
		if busy > 0 {
			afterBusy++
		}
	}
	t.Logf("a burst of 40 records over about three seconds: %d batches, %d after the first busy one, gaps after each (size→gap) %v (window %s); a lone record after %s",
		len(batches), afterBusy, gaps, window, lone)
	if busy == 0 || afterBusy > 3 || lone >= window {
		t.Fatalf("%d batches after the first busy one (%d busy ones followed by another), lone record after %s; want the window seen after a busy batch, the rest of the burst in at most 3 batches and the lone record within the window",
			afterBusy, busy, lone)
	}
}

// TestABacklogIsReadBackToBack: records already waiting fill batch after
// batch, and the reader hands them over without the batching window
// between them, as the event source mapping invokes as soon as a batch is
// full. Protection: pauseAfter's full batch (without it, a backlog of
// three batches waits two windows, 20 s here, and every record behind it
// waits as long). One run, with the window itself as the margin.
func TestABacklogIsReadBackToBack(t *testing.T) {
	t.Parallel()
	const window = 10 * time.Second
	e := newEnv(t)
	e.putWorkouts(t, "backlog", 1, 30)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan batch, 100)
	r := streams.NewReader(e.api, e.arn, streams.Options{BatchSize: 10, PollInterval: 20 * time.Millisecond, BatchingWindow: window})
	start := time.Now()
	go func() {
		_ = r.Run(ctx, func(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
			got <- batch{len(ev.Records), time.Now()}
			return events.DynamoDBEventResponse{}, nil
		})
	}()
	var sizes []int
	for n := 0; n < 30; {
		select {
		case b := <-got:
			n += b.n
			sizes = append(sizes, b.n)
		case <-time.After(3 * window):
			t.Fatalf("backlog not read after %s: batches %v", 3*window, sizes)
		}
	}
	took := time.Since(start)
	t.Logf("a backlog of 30 records, batch size 10: batches %v in %s (window %s)", sizes, took.Round(time.Millisecond), window)
	if took >= window {
		t.Errorf("the backlog took %s, at least one batching window (%s): the reader waited between full batches", took, window)
	}
}

// batch is one delivery of the reader: how many records, and when.
type batch struct {
	n  int
	at time.Time
}

// burst runs a reader with the batching window over a fresh stream: one lone
// record (how long it took), then 40 records written 5 at a time over about
// three seconds (each batch carrying them: its size and when it came).
func burst(t *testing.T, window time.Duration) (batches []batch, lone time.Duration) {
	t.Helper()
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan batch, 100)
	r := streams.NewReader(e.api, e.arn, streams.Options{PollInterval: 20 * time.Millisecond, BatchingWindow: window})
	go func() {
		_ = r.Run(ctx, func(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
			got <- batch{len(ev.Records), time.Now()}
			return events.DynamoDBEventResponse{}, nil
		})
	}()
	sent := time.Now()
	e.putWorkouts(t, "lone", 1, 1)
	select {
	case b := <-got:
		lone = b.at.Sub(sent)
	case <-time.After(30 * time.Second):
		t.Fatal("lone record never delivered")
	}
	for i := range int64(8) { // 8 writes of 5 workouts at once (BatchWriteItem)
		var ws []model.Entity
		for id := 1 + i*5; id <= 5+i*5; id++ {
			ws = append(ws, &model.Workout{UserID: "burst", ActivityID: id, SportType: "Run", StartDateUtc: time.Unix(1700000000+id, 0).UTC()})
		}
		if err := e.s.DB.BatchPut(context.Background(), e.s.DB.Tables().Main, ws); err != nil {
			t.Fatal(err)
		}
		time.Sleep(400 * time.Millisecond)
	}
	for total := 0; total < 40; {
		select {
		case b := <-got:
			batches, total = append(batches, b), total+b.n
		case <-time.After(30 * time.Second):
			t.Fatalf("burst: %d of 40 records delivered", total)
		}
	}
	return batches, lone
}
