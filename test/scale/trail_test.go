package scale

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestATrailKeepsWhatTheWorkerLoggedAboutAnActivity(t *testing.T) {
	t.Parallel()
	tr := newTrail()
	var h slog.Handler = &logCapture{window: time.Second, shared: &logShared{deferred: map[time.Time][2]int{}, trail: tr}, reads: newReadLog(time.Second)}
	log := slog.New(h)
	ctx := context.Background()
	job := log.With("activityId", int64(42), "eventType", "activity.create")
	job.InfoContext(ctx, "job deferred", "reason", "window cap", "notBefore", "2026-11-28T17:00:10Z")
	job.InfoContext(ctx, "workout written", "writeStatus", "written", "sportType", "Run")
	log.InfoContext(ctx, "burst served", "pages", 1) // names no activity
	log.With("activityId", int64(7)).DebugContext(ctx, "below info")

	steps := tr.of(42)
	if len(steps) != 2 || steps[0].msg != "job deferred" || steps[1].msg != "workout written" {
		t.Fatalf("trail of 42 = %+v, want the deferral then the write", steps)
	}
	if steps[0].detail != "reason=window cap notBefore=2026-11-28T17:00:10Z" || steps[1].detail != "writeStatus=written" {
		t.Errorf("details = %q, %q: want only the kept attributes", steps[0].detail, steps[1].detail)
	}
	if _, ok := tr.written(42, steps[0].at); !ok {
		t.Error("written(42) not found")
	}
	if got := tr.since(42, steps[1].at); len(got) != 1 || got[0].msg != "workout written" {
		t.Errorf("since the write = %+v, want the write alone", got)
	}
	if got := tr.of(7); len(got) != 0 {
		t.Errorf("a debug line was kept: %+v", got)
	}
	for i := range maxTrailSteps + 3 {
		job.InfoContext(ctx, "job finished", "n", i)
	}
	if n := len(tr.of(42)); n != maxTrailSteps {
		t.Errorf("trail of 42 holds %d steps, want the bound %d", n, maxTrailSteps)
	}
}

func TestASlowWebhookLineSaysWhereItsLagWent(t *testing.T) {
	t.Parallel()
	day := time.Date(2026, 11, 28, 17, 0, 0, 0, time.UTC)
	x := &expectation{since: day.Add(time.Minute), activity: 42, athlete: 9, kind: "create"}
	x.acked = x.since.Add(200 * time.Millisecond)
	l := slowWebhook{x: x, queued: 200 * time.Millisecond, worker: 14 * time.Second, stream: time.Second, dayStart: day, projector: "projector busy 1s",
		steps: []step{{at: x.since.Add(300 * time.Millisecond), msg: "job deferred", detail: "reason=window cap"}}}
	want := "create of activity 42 (athlete 9) at 1m0s of the day (17:01:00 UTC): queue + POST 200ms, then 14s to written, 1s to the projector (projector busy 1s); " +
		"worker: [+300ms job deferred reason=window cap]"
	if got := l.line(); got != want {
		t.Errorf("line() =\n%q, want\n%q", got, want)
	}
	l.writtenUnlogged, l.steps = true, nil
	if got := l.line(); !strings.Contains(got, "written and handed to the projector; worker: nothing logged with its id") {
		t.Errorf("a burst-written webhook's line = %q", got)
	}
}

func TestBusySaysWhatTheProjectorDidWhileARecordWaited(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 28, 17, 0, 0, 0, time.UTC)
	tr := newTracker()
	tr.batches = []batch{
		{at: at, took: 2 * time.Second, records: 1, byPK: map[string]int{"USER#a": 1}}, // ran 1 s of the wait
		{at: at.Add(2 * time.Second), took: 3 * time.Second, records: 9, byPK: map[string]int{"USER#b": 8, "USER#a": 1}},
		{at: at.Add(5 * time.Second), took: time.Second, records: 4, byPK: map[string]int{"USER#d": 4}}, // the record's own batch
	}
	want := "projector busy 4s in 2 batches of 10 records (most of USER#b: 8)"
	if got := tr.busy(at.Add(time.Second), at.Add(5*time.Second)); got != want {
		t.Errorf("busy = %q, want %q", got, want)
	}
	if got := tr.busy(at.Add(6*time.Second), at.Add(8*time.Second)); got != "the projector was handed nothing meanwhile" {
		t.Errorf("busy in a quiet spell = %q", got)
	}
}
