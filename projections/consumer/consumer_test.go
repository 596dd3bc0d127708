package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/projections/consumer"
	"github.com/commitcollect/backend/projections/consumer/trigger"
	"github.com/commitcollect/backend/test/fixture"
)

// TestTenPartsHundredKm is the first scenario, then its second
// (deleting the 50 km workout), with the consumer ignoring its own writes
// in between.
func TestTenPartsHundredKm(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.consumer(consumer.Options{})
	e.putModel("rocket", 10)
	e.putMilestone("u1", "m1", fixture.Definition(fixture.Parts(10)))
	e.putWorkout(fixture.Workout("u1", 101, fixture.Day(1), fixture.Km(25), fixture.Corr("corr-25")))
	e.putWorkout(fixture.Workout("u1", 102, fixture.Day(2), fixture.Km(30), fixture.Corr("corr-30")))
	e.putWorkout(fixture.Workout("u1", 103, fixture.Day(3), fixture.Km(50), fixture.Corr("corr-50")))

	recs := e.newRecords()
	if len(recs) != 4+11 { // 11 model items, 1 milestone, 3 workouts
		t.Logf("stream delivered %d records", len(recs))
	}
	if resp := e.handle(c, recs); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures: %+v", resp.BatchItemFailures)
	}

	m := e.milestone("u1", "m1")
	if m.ProgressValue != 105_000_000 || m.WorkoutsCounted != 3 || m.AwardedParts != 10 || m.Status != model.StatusCompleted ||
		m.Version != 1 || m.WrittenBy != model.WriterProjector {
		t.Fatalf("milestone: got %+v version %d writtenBy %s, want 105000000 mm, 3 workouts, 10 parts, completed, version 1, projector",
			m.Projection, m.Version, m.WrittenBy)
	}
	awards := e.awards("u1", "m1")
	wantTip := []int64{101, 101, 102, 102, 102, 103, 103, 103, 103, 103}
	wantCorr := map[int64]string{101: "corr-25", 102: "corr-30", 103: "corr-50"}
	if len(awards) != 10 {
		t.Fatalf("awards: got %d, want 10", len(awards))
	}
	for i, a := range awards {
		if a.PartIndex != i || a.ActivityID != wantTip[i] || a.CorrelationID != wantCorr[wantTip[i]] ||
			a.PartName != fmt.Sprintf("part-%d", i) || a.PartMetadata["slot"] != fmt.Sprint(i) || a.ModelID != "rocket" {
			t.Errorf("award %d: got %+v, want part %d tipped by %d (%s) with part metadata", i, a, i, wantTip[i], wantCorr[wantTip[i]])
		}
	}
	// Audit: each award under the correlation id of the workout that tipped it.
	for act, corr := range wantCorr {
		want := 0
		for _, tip := range wantTip {
			if tip == act {
				want++
			}
		}
		if got := countEvents(e.audits(corr), consumer.EventAwardMinted); got != want {
			t.Errorf("AWARD_MINTED under %s: got %d, want %d", corr, got, want)
		}
	}
	last := e.userAudits("u1", "corr-50") // the batch's last workout triggered the projection
	// The parts it earned have their AWARD_MINTED entries and the
	// completion its own: no progress entry on top.
	if countEvents(last, consumer.EventProgressUpdated) != 0 || countEvents(last, consumer.EventMilestoneCompleted) != 1 {
		t.Errorf("corr-50 audit: got %v, want one completion and no progress update", eventTypes(last))
	}
	if st := c.Stats(); st.AwardsMinted != 10 || st.Writes != 1 {
		t.Errorf("stats: got %+v, want 10 awards in 1 write", st)
	}

	// The projector's own writes come back on the stream; processing them
	// writes nothing.
	own := e.newRecords()
	if len(own) != 22 { // milestone MODIFY + 10 award INSERTs + their 10 collection entries + the collection summary
		t.Errorf("own writes: got %d records, want 22", len(own))
	}
	before := c.Stats()
	if resp := e.handle(c, own); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures: %+v", resp.BatchItemFailures)
	}
	after := c.Stats()
	if after.Writes != before.Writes || after.RecordsIgnored-before.RecordsIgnored != int64(len(own)) || after.UsersProjected != before.UsersProjected {
		t.Errorf("own writes: stats went %+v → %+v, want every record ignored and nothing written", before, after)
	}
	if got := e.milestone("u1", "m1"); got.Version != 1 {
		t.Errorf("own writes: milestone version %d, want 1", got.Version)
	}
	if more := e.newRecords(); len(more) != 0 {
		t.Errorf("processing own writes produced %d new stream records", len(more))
	}

	// Deleting the 50 km workout lowers progress and keeps every award.
	del := fixture.Workout("u1", 103, fixture.Day(3), fixture.Km(50), fixture.Corr("corr-del"))
	del.IsDeleted = true
	e.putWorkout(del)
	if resp := e.handle(c, e.newRecords()); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures: %+v", resp.BatchItemFailures)
	}
	m = e.milestone("u1", "m1")
	if m.ProgressValue != 55_000_000 || m.WorkoutsCounted != 2 || m.AwardedParts != 10 || m.Status != model.StatusCompleted {
		t.Fatalf("after delete: got %+v, want 55000000 mm, 2 workouts, 10 parts, completed", m.Projection)
	}
	if got := len(e.awards("u1", "m1")); got != 10 {
		t.Fatalf("after delete: %d awards, want 10", got)
	}
	// A new running value alone writes no audit entry: at most one routine
	// audit write per event (the worker's). Protection: stepped.
	if got := e.userAudits("u1", "corr-del"); len(got) != 0 {
		t.Errorf("after delete: audit entries %v under corr-del, want none (only the value changed)", eventTypes(got))
	}
	if !strings.Contains(e.metrics.String(), `"AwardsMinted":10`) || !strings.Contains(e.metrics.String(), consumer.MetricsNamespace) {
		t.Errorf("metrics lines: %s", e.metrics.String())
	}
}

func eventTypes(as []model.AuditEntry) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.EventType
	}
	return out
}

// TestSameBatchTwice: a redelivered batch changes nothing.
func TestSameBatchTwice(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.consumer(consumer.Options{})
	e.putModel("rocket", 10)
	e.putMilestone("u1", "m1", fixture.Definition(fixture.Parts(10)))
	e.putWorkout(fixture.Workout("u1", 1, fixture.Day(1), fixture.Km(42), fixture.Corr("c1")))
	e.putWorkout(fixture.Workout("u1", 2, fixture.Day(2), fixture.Km(12), fixture.Corr("c2")))
	recs := e.newRecords()
	e.handle(c, recs)
	first := e.milestone("u1", "m1")
	st := c.Stats()
	e.handle(c, recs)
	second := e.milestone("u1", "m1")
	if second.Version != first.Version || !reflect.DeepEqual(second.Projection, first.Projection) {
		t.Fatalf("second delivery: got %+v v%d, want %+v v%d", second.Projection, second.Version, first.Projection, first.Version)
	}
	if got := c.Stats(); got.Writes != st.Writes || got.AwardsMinted != 5 {
		t.Fatalf("second delivery: stats %+v, want no new write and 5 awards in all", got)
	}
	if n := len(e.awards("u1", "m1")); n != 5 {
		t.Fatalf("awards: got %d, want 5", n)
	}
}

// TestConcurrentBatchesConflict interleaves two projections of one user
// deterministically: A reads, B reads and writes a newer log, A's write
// conflicts, A re-reads and retries. No progress is lost, no award doubled.
func TestConcurrentBatchesConflict(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.putModel("rocket", 10)
	e.putMilestone("u1", "m1", fixture.Definition(fixture.Parts(10)))
	e.putWorkout(fixture.Workout("u1", 1, fixture.Day(1), fixture.Km(35), fixture.Corr("c1")))
	batchA := e.newRecords()

	p := newPaused()
	a := e.consumer(consumer.Options{BeforeWrite: p.beforeWrite})
	b := e.consumer(consumer.Options{})
	finishA := e.start(a, p, batchA)
	e.putWorkout(fixture.Workout("u1", 2, fixture.Day(2), fixture.Km(40), fixture.Corr("c2")))
	if resp := e.handle(b, e.newRecords()); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("B failures: %+v", resp.BatchItemFailures)
	}
	if respA := finishA(); len(respA.BatchItemFailures) != 0 {
		t.Fatalf("A failures: %+v", respA.BatchItemFailures)
	}
	if got := a.Stats().ConflictsRetried; got < 1 {
		t.Fatalf("A retried %d conflicts, want at least 1", got)
	}
	m := e.milestone("u1", "m1")
	if m.ProgressValue != 75_000_000 || m.AwardedParts != 7 {
		t.Fatalf("milestone: got %+v, want 75000000 mm and 7 parts", m.Projection)
	}
	if got := a.Stats().AwardsMinted + b.Stats().AwardsMinted; got != 7 {
		t.Fatalf("awards minted: A+B = %d, want 7", got)
	}
	if n := len(e.awards("u1", "m1")); n != 7 {
		t.Fatalf("award items: got %d, want 7", n)
	}
}

// TestConcurrentBatchesStress hands overlapping batches of one user to
// goroutines while workouts keep arriving.
func TestConcurrentBatchesStress(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.consumer(consumer.Options{MaxAttempts: 20})
	e.putModel("rocket", 20)
	def := fixture.Definition(fixture.Parts(20))
	e.putMilestone("u1", "m1", def)
	e.newRecords()
	const n = 24
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []events.DynamoDBBatchItemFailure
	for i := 0; i < n; i++ {
		e.putWorkout(fixture.Workout("u1", int64(i+1), fixture.Day(i%28), fixture.Km(5), fixture.Corr(fmt.Sprintf("c%d", i+1))))
		recs := e.newRecords()
		for g := 0; g < 2; g++ { // every batch twice, concurrently
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := c.Handle(e.ctx, events.DynamoDBEvent{Records: recs})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Errorf("Handle: %v", err)
				}
				failures = append(failures, resp.BatchItemFailures...)
			}()
		}
	}
	wg.Wait()
	if len(failures) != 0 {
		t.Fatalf("failures: %+v", failures)
	}
	m := e.milestone("u1", "m1")
	if m.ProgressValue != n*5_000_000 || m.WorkoutsCounted != n || m.AwardedParts != 20 {
		t.Fatalf("milestone: got %+v, want %d mm from %d workouts, 20 parts", m.Projection, n*5_000_000, n)
	}
	if st := c.Stats(); st.AwardsMinted != 20 {
		t.Fatalf("awards minted %d times, want 20 (stats %+v)", st.AwardsMinted, st)
	}
	t.Logf("stress: %+v", c.Stats())
}

// TestMilestoneCreatedAfterWorkouts: the milestone's INSERT projects it from
// the existing log.
func TestMilestoneCreatedAfterWorkouts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.consumer(consumer.Options{})
	e.putModel("rocket", 4)
	e.putWorkout(fixture.Workout("u1", 1, fixture.Day(1), fixture.Km(60), fixture.Corr("c1")))
	e.putWorkout(fixture.Workout("u1", 2, fixture.Day(2), fixture.Km(45), fixture.Corr("c2")))
	e.handle(c, e.newRecords())
	if st := c.Stats(); st.Writes != 0 {
		t.Fatalf("no milestone yet, but %d writes", st.Writes)
	}
	e.putMilestone("u1", "m1", fixture.Definition(fixture.Parts(4)))
	recs := e.newRecords()
	if len(recs) != 1 || recs[0].EventName != "INSERT" {
		t.Fatalf("want one milestone INSERT record, got %d", len(recs))
	}
	e.handle(c, recs)
	m := e.milestone("u1", "m1")
	if m.ProgressValue != 105_000_000 || m.AwardedParts != 4 || m.Status != model.StatusCompleted {
		t.Fatalf("milestone: got %+v, want 105000000 mm, 4 parts, completed", m.Projection)
	}
	tips := []int64{}
	for _, a := range e.awards("u1", "m1") {
		tips = append(tips, a.ActivityID)
	}
	if !slices.Equal(tips, []int64{1, 1, 2, 2}) {
		t.Fatalf("tipping activities: got %v, want [1 1 2 2]", tips)
	}

	// A definition change (here: the target doubles) re-projects; awards
	// stay.
	def := fixture.Definition(fixture.Parts(4))
	def.Target = 400000
	m.MilestoneDefinition, m.WrittenBy = def, model.WriterAPI
	if err := e.s.DB.Put(e.ctx, e.s.DB.Tables().Main, &m); err != nil {
		t.Fatal(err)
	}
	recs = e.newRecords()
	if d := trigger.Classify(recs[len(recs)-1]); d.Action != trigger.Recompute {
		t.Fatalf("definition change classified %v (%s)", d.Action, d.Reason)
	}
	e.handle(c, recs)
	if got := e.milestone("u1", "m1"); got.AwardedParts != 4 || got.Status != model.StatusCompleted || got.ProgressValue != 105_000_000 {
		t.Fatalf("after definition change: got %+v", got.Projection)
	}
}

// putRaw writes an item the model types could not produce (a newer schema,
// a malformed attribute).
func (e *env) putRaw(item map[string]types.AttributeValue) {
	e.t.Helper()
	if _, err := e.s.DB.Client().PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String(e.s.DB.Tables().Main), Item: item}); err != nil {
		e.t.Fatal(err)
	}
}

func rawWorkout(t *testing.T, w *model.Workout, edit func(map[string]types.AttributeValue)) map[string]types.AttributeValue {
	t.Helper()
	item, err := dynamo.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	edit(item)
	return item
}

// TestPoisonAndFailureIsolation: in one batch, a poison record is parked
// (not reported), a user whose projection keeps conflicting fails with the
// sequence number of its first record, and the other users are projected.
func TestPoisonAndFailureIsolation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.putModel("rocket", 10)
	for _, u := range []string{"ua", "ub", "stuck"} {
		e.putMilestone(u, "m1", fixture.Definition(fixture.Parts(10)))
	}
	e.newRecords()

	e.putWorkout(fixture.Workout("ua", 1, fixture.Day(1), fixture.Km(20), fixture.Corr("ca")))
	e.putRaw(rawWorkout(t, fixture.Workout("poison", 9, fixture.Day(1), fixture.Km(20), fixture.Corr("cp")), func(item map[string]types.AttributeValue) {
		item["schemaVersion"] = &types.AttributeValueMemberN{Value: "99"}
	}))
	e.putWorkout(fixture.Workout("stuck", 3, fixture.Day(1), fixture.Km(20), fixture.Corr("cs1")))
	e.putRaw(rawWorkout(t, fixture.Workout("poison", 10, fixture.Day(1), fixture.Km(20), fixture.Corr("cp2")), func(item map[string]types.AttributeValue) {
		item["distanceMeters"] = &types.AttributeValueMemberS{Value: "far"}
	}))
	e.putWorkout(fixture.Workout("ub", 2, fixture.Day(1), fixture.Km(30), fixture.Corr("cb")))
	e.putWorkout(fixture.Workout("stuck", 4, fixture.Day(2), fixture.Km(20), fixture.Corr("cs2")))
	recs := e.newRecords()
	if len(recs) != 6 {
		t.Fatalf("want 6 records, got %d", len(recs))
	}

	// Whoever projects "stuck" always finds its milestone moved under it.
	c := e.consumer(consumer.Options{MaxAttempts: 3, BeforeWrite: func(ctx context.Context, userID string) {
		if userID != "stuck" {
			return
		}
		m := e.milestone("stuck", "m1")
		if _, err := e.s.DB.UpdateVersioned(ctx, e.s.DB.Tables().Main, m.ItemKey(), m.Version, dynamo.Changes{Set: map[string]any{"writtenBy": "api"}}); err != nil {
			t.Errorf("bump version: %v", err)
		}
	}})
	resp := e.handle(c, recs)
	want := []events.DynamoDBBatchItemFailure{{ItemIdentifier: recs[2].Change.SequenceNumber}}
	if !reflect.DeepEqual(resp.BatchItemFailures, want) {
		t.Fatalf("batch item failures: got %+v, want %+v (stuck's first record)", resp.BatchItemFailures, want)
	}
	if got := e.milestone("ua", "m1"); got.ProgressValue != 20_000_000 || got.AwardedParts != 2 {
		t.Errorf("ua: got %+v, want 20000000 mm, 2 parts", got.Projection)
	}
	if got := e.milestone("ub", "m1"); got.ProgressValue != 30_000_000 || got.AwardedParts != 3 {
		t.Errorf("ub: got %+v, want 30000000 mm, 3 parts", got.Projection)
	}
	if got := e.milestone("stuck", "m1"); got.ProgressValue != 0 {
		t.Errorf("stuck: got %+v, want nothing projected", got.Projection)
	}
	parked, err := e.s.Parked.Parked(e.ctx, keys.ParkSourceProjector)
	if err != nil {
		t.Fatal(err)
	}
	if len(parked) != 2 {
		t.Fatalf("parked: got %d records, want 2", len(parked))
	}
	var reasons []string
	for _, p := range parked {
		reasons = append(reasons, p.Reason)
		var rec events.DynamoDBEventRecord
		if err := json.Unmarshal([]byte(p.Payload), &rec); err != nil || (rec.EventID != recs[1].EventID && rec.EventID != recs[3].EventID) {
			t.Errorf("parked payload is not the record: %v %q", err, p.Payload[:min(len(p.Payload), 80)])
		}
	}
	joined := strings.Join(reasons, " | ")
	if !strings.Contains(joined, "schemaVersion 99") || !strings.Contains(joined, "unmarshal") {
		t.Errorf("park reasons: %s", joined)
	}
	if got := countEvents(e.audits("cp"), consumer.EventRecordParked); got != 1 {
		t.Errorf("parked audit under cp: got %d, want 1", got)
	}
	if st := c.Stats(); st.RecordsParked != 2 || st.RecordsFailed != 2 || st.ConflictsRetried < 2 {
		t.Errorf("stats: %+v, want 2 parked, 2 failed, ≥2 conflicts", st)
	}

	// Lambda redelivers from the failed record: once the interference is
	// gone, the rest of the batch goes through.
	ok := e.consumer(consumer.Options{})
	if resp := e.handle(ok, recs[2:]); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("redelivery failures: %+v", resp.BatchItemFailures)
	}
	if got := e.milestone("stuck", "m1"); got.ProgressValue != 40_000_000 {
		t.Errorf("stuck after redelivery: got %+v, want 40000000 mm", got.Projection)
	}
}

// TestRecomputeUserDryRunAndRepair: drift is reported without writing, then
// repaired by the same code the stream uses.
func TestRecomputeUserDryRunAndRepair(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.consumer(consumer.Options{})
	e.putModel("rocket", 10)
	e.putMilestone("u1", "m1", fixture.Definition(fixture.Parts(10)))
	e.putWorkout(fixture.Workout("u1", 1, fixture.Day(1), fixture.Km(50), fixture.Corr("c1")))
	e.handle(c, e.newRecords())

	// Drift: a lost award item and a progress value that does not match.
	if err := e.s.DB.Delete(e.ctx, e.s.DB.Tables().Main, keys.AwardKey("u1", "m1", 3)); err != nil {
		t.Fatal(err)
	}
	m := e.milestone("u1", "m1")
	if _, err := e.s.DB.UpdateVersioned(e.ctx, e.s.DB.Tables().Main, m.ItemKey(), m.Version, dynamo.Changes{Set: map[string]any{"progressValue": 1}}); err != nil {
		t.Fatal(err)
	}
	e.putWorkout(fixture.Workout("u1", 2, fixture.Day(2), fixture.Km(10), fixture.Corr("c2"))) // not yet projected
	drifted := e.milestone("u1", "m1")

	rep, err := c.RecomputeUser(e.ctx, "u1", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Milestones) != 1 || rep.Workouts != 2 {
		t.Fatalf("report: %+v", rep)
	}
	mr := rep.Milestones[0]
	wantDiffs := []string{
		"progressValue: stored 1, recomputed 60000000",
		"workoutsCounted: stored 1, recomputed 2",
		"awardedParts: stored 5, recomputed 6",
		"week sums: stored map[2930:{50000000 1}], recomputed map[2930:{60000000 2}]",
		"award items missing for parts [3]",
	}
	if !reflect.DeepEqual(mr.Diffs(), wantDiffs) || !mr.Drift() || mr.Written {
		t.Fatalf("dry run diffs: got %q (written %v), want %q", mr.Diffs(), mr.Written, wantDiffs)
	}
	if !slices.Equal(mr.NewParts, []int{5}) || !slices.Equal(mr.Minted, []int{3, 5}) {
		t.Fatalf("dry run parts: new %v minted %v, want [5] and [3 5]", mr.NewParts, mr.Minted)
	}
	if got := e.milestone("u1", "m1"); got.Version != drifted.Version || got.ProgressValue != 1 || len(e.awards("u1", "m1")) != 4 {
		t.Fatalf("dry run wrote something: %+v v%d", got.Projection, got.Version)
	}

	rep, err = c.RecomputeUser(e.ctx, "u1", false)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Milestones[0].Written {
		t.Fatalf("repair did not write: %+v", rep.Milestones[0])
	}
	got := e.milestone("u1", "m1")
	if got.ProgressValue != 60_000_000 || got.AwardedParts != 6 || got.Version != drifted.Version+1 {
		t.Fatalf("after repair: %+v v%d", got.Projection, got.Version)
	}
	var parts []int
	for _, a := range e.awards("u1", "m1") {
		parts = append(parts, a.PartIndex)
	}
	if !slices.Equal(parts, []int{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("award items after repair: %v", parts)
	}
	rep, err = c.RecomputeUser(e.ctx, "u1", true)
	if err != nil || rep.Milestones[0].Drift() {
		t.Fatalf("after repair a dry run still finds drift: %v %q", err, rep.Milestones[0].Diffs())
	}
}

// TestRecomputeUserFailsClosedOnNewerWorkout: a workout written by newer code
// stops the projection instead of being guessed at.
func TestRecomputeUserFailsClosedOnNewerWorkout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.consumer(consumer.Options{})
	e.putModel("rocket", 10)
	e.putMilestone("u1", "m1", fixture.Definition(fixture.Parts(10)))
	e.putRaw(rawWorkout(t, fixture.Workout("u1", 1, fixture.Day(1), fixture.Km(50), fixture.Corr("c1")), func(item map[string]types.AttributeValue) {
		item["schemaVersion"] = &types.AttributeValueMemberN{Value: "2"}
	}))
	_, err := c.RecomputeUser(e.ctx, "u1", false)
	if !errors.Is(err, model.ErrUnsupportedSchema) {
		t.Fatalf("got %v, want ErrUnsupportedSchema", err)
	}
	if got := e.milestone("u1", "m1"); got.Version != 0 {
		t.Fatalf("milestone written despite unreadable log: %+v", got)
	}
}
