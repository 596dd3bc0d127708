package fetch_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/app"
	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/test/ingesttest"
)

// An athlete deauthorizes (processed by another instance) and reconnects as
// another user: the instance that cached athlete → old user (and the old
// user's token) must write the next activity under the new user.
// Protection: the athlete cache's confirmation (a refused cached token or
// mapping sends the event back to the table).
func TestCachedAthleteDoesNotOutliveReconnectAsAnotherUser(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	ctx := context.Background()
	h.Link("old", 10, time.Hour)
	h.Activity(100, 10, "Run")
	warm := h.NewWorker()
	if err := warm.Process(ctx, ingesttest.Job(h.Sim.ActivityEvent("create", 100, 10, nil))); err != nil {
		t.Fatal(err)
	}
	h.Sim.RevokeAthlete(10) // Strava revokes the tokens, then sends the deauthorization
	if err := h.NewWorker().Process(ctx, ingesttest.Job(h.Sim.DeauthorizationEvent(10))); err != nil {
		t.Fatal(err)
	}
	h.Link("new", 10, time.Hour)
	h.Activity(101, 10, "Ride")
	if err := warm.Process(ctx, ingesttest.Job(h.Sim.ActivityEvent("create", 101, 10, nil))); err != nil {
		t.Fatal(err)
	}
	if w := h.Workout("new", 101); w.SportType != "Ride" {
		t.Fatalf("got %+v under the new user, want the ride", w)
	}
	if _, err := h.St.Workouts.Workout(ctx, "old", 101); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("the old user got the activity (err %v)", err)
	}
	if c, err := h.Connection("new"); err != nil || c.NeedsReauth {
		t.Fatalf("got connection %+v, %v; want the new user's connection intact", c, err)
	}
	// The same instance processing the deauthorization forgets at once.
	h.Sim.RevokeAthlete(10)
	if err := warm.Process(ctx, ingesttest.Job(h.Sim.DeauthorizationEvent(10))); err != nil {
		t.Fatal(err)
	}
	h.Link("third", 10, time.Hour)
	h.Activity(102, 10, "Swim")
	before := h.Sim.Stats()
	if err := warm.Process(ctx, ingesttest.Job(h.Sim.ActivityEvent("create", 102, 10, nil))); err != nil {
		t.Fatal(err)
	}
	if w := h.Workout("third", 102); w.SportType != "Swim" {
		t.Fatalf("got %+v, want the swim under the third user", w)
	}
	if after := h.Sim.Stats(); after.ActivityRequests-before.ActivityRequests != 1 {
		t.Fatalf("%d activity requests, want 1 (no refused token tried)", after.ActivityRequests-before.ActivityRequests)
	}
}

// A cached token is not used past its expiry (minus the refresh skew): the
// worker reads the connection again, where another instance stored the
// rotated token. Protection: the token's deadline in the athlete cache.
func TestCachedTokenIsNotUsedAfterExpiry(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	ctx := context.Background()
	h.Link("u1", 10, 7*time.Minute) // cached for 2 minutes: 5 before expiry it must be refreshed
	h.Activity(100, 10, "Run")
	h.Activity(101, 10, "Run")
	w := h.NewWorker()
	if err := w.Process(ctx, ingesttest.Job(h.Sim.ActivityEvent("create", 100, 10, nil))); err != nil {
		t.Fatal(err)
	}
	// Another instance refreshed: the old token is gone at Strava, the new
	// one is stored. Our clock is past the old token's expiry minus skew.
	h.Sim.RevokeAthlete(10)
	h.Link("u1", 10, time.Hour)
	ingesttest.SetClock(w, func() time.Time { return time.Now().UTC().Add(3 * time.Minute) }) // the mapping is still fresh
	before := h.Sim.Stats()
	if err := w.Process(ctx, ingesttest.Job(h.Sim.ActivityEvent("create", 101, 10, nil))); err != nil {
		t.Fatal(err)
	}
	after := h.Sim.Stats()
	if req, ok := after.ActivityRequests-before.ActivityRequests, after.ActivityFetches-before.ActivityFetches; req != 1 || ok != 1 {
		t.Fatalf("%d activity requests, %d answered 200; want one, with the stored token", req, ok)
	}
	h.Workout("u1", 101)
}

// Instances share Strava's rate budget through the stored reading: one whose
// reading nears a limit writes it at once, and another that read the stored
// state less than its cache life ago reads it again after that and defers
// without calling Strava. Protection: the material-change rule of the
// reading's write and the rate cache's life.
func TestRateReadingNearTheLimitReachesOtherInstances(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	ctx := context.Background()
	h.Link("u1", 10, time.Hour)
	for id := int64(400); id < 404; id++ {
		h.Activity(id, 10, "Run")
	}
	base := time.Now().UTC().Truncate(15 * time.Minute).Add(7 * time.Minute) // mid-window
	a, b := h.NewWorker(), h.NewWorker()
	ingesttest.SetClock(a, func() time.Time { return base })
	ingesttest.SetClock(b, func() time.Time { return base })
	h.Sim.SetUsage(10, 10, 10, 10)
	for i, w := range []*app.Worker{b, a} { // both have read and recorded a low reading
		if err := w.Process(ctx, ingesttest.Job(h.Sim.ActivityEvent("create", int64(400+i), 10, nil))); err != nil {
			t.Fatal(err)
		}
	}
	h.Sim.SetUsage(10, 10, 94, 94)
	if err := a.Process(ctx, ingesttest.Job(h.Sim.ActivityEvent("create", 402, 10, nil))); err != nil {
		t.Fatal(err) // its answer says 95 of 100
	}
	ingesttest.SetClock(b, func() time.Time { return base.Add(11 * time.Second) })
	before := h.Sim.Stats().ActivityRequests
	var de *ingest.DeferError
	if err := b.Process(ctx, ingesttest.Job(h.Sim.ActivityEvent("create", 403, 10, nil))); !errors.As(err, &de) {
		t.Fatalf("got %v, want a deferral", err)
	}
	if after := h.Sim.Stats().ActivityRequests; after != before {
		t.Fatalf("Strava was called although another instance had seen the budget nearly spent (%d → %d)", before, after)
	}
}

// A flood of creates for one athlete (forged, or replayed with fresh event
// times) is coalesced again once it crowds the window: the first few
// creates skip the stored-workout check, later ones do not fetch what was
// fetched after they were received. Protection: the crowding check.
func TestCrowdedCreatesAreCoalesced(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	ctx := context.Background()
	h.Link("u1", 10, time.Hour)
	h.Activity(100, 10, "Run")
	var jobs []ingest.Job
	for i := range 8 {
		ev := h.Sim.ActivityEvent("create", 100, 10, nil)
		ev.EventTime += int64(i)
		jobs = append(jobs, ingesttest.Job(ev))
	}
	w := h.NewWorker()
	for _, j := range jobs {
		if err := w.Process(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	if got := h.Sim.Stats().ActivityRequests; got > 3 {
		t.Fatalf("%d Strava reads for 8 creates of one activity, want at most 3", got)
	}
}

// TestABulkUploadOverTicksWalksItsPagesOnce: a bulk upload whose webhooks
// fall on several gather ticks comes as several bursts; a create that an
// earlier walk listed is written from that page (ordered by its fetch
// start) without reading it again, an update is not (it asks what the
// activity is now), and what was listed longer ago than the memory keeps
// is read again. Protection: the memory of listed activities (removing it,
// the second burst reads page 1 again).
func TestABulkUploadOverTicksWalksItsPagesOnce(t *testing.T) {
	t.Parallel()
	st, written := recordWrites(t)
	l := &fakeLister{acts: history(250, 1000)}
	f := burstFetcher(t, st, &fakeStrava{}, l)
	clock := now
	f.Now = func() time.Time { return clock }
	ctx := context.Background()
	update := creates(1100)
	update[0].Event.AspectType = ingest.AspectUpdate
	bursts := []struct {
		name  string
		jobs  []ingest.Job
		after time.Duration // since the first burst
		pages string        // the pages read so far
	}{
		{"the first tick's creates", creates(span(1000, 100)...), 0, "[1]"},
		{"the next tick's, on the page read", creates(span(1100, 100)...), 10 * time.Second, "[1]"},
		{"the last tick's and an update", append(creates(span(1200, 50)...), update...), 20 * time.Second, "[1 1 2]"},
		{"creates listed long ago", creates(span(1000, 10)...), 3 * time.Minute, "[1 1 2 1]"},
	}
	for i, b := range bursts {
		clock = now.Add(b.after)
		for j, err := range f.Serve(ctx, ingest.NewBurst(b.jobs, fmt.Sprintf("b%d", i))) {
			if err != nil {
				t.Fatalf("%s: event %d: %v", b.name, j, err)
			}
		}
		if got := fmt.Sprint(l.pages); got != b.pages {
			t.Fatalf("%s: pages read %s, want %s", b.name, got, b.pages)
		}
	}
	if len(written) != 250 || written[1100] != now.Add(20*time.Second).UnixNano() || written[1199] != now.UnixNano() {
		t.Fatalf("%d written, 1100 at %d, 1199 at %d; want 250, 1100 by the update's page, 1199 by the first page",
			len(written), written[1100], written[1199])
	}
}

// TestAnEventAfterAPageIsNeverSettledByItsMemory makes the race of an
// edit: a walk lists activity 1000 as a Run; then the athlete edits it at
// Strava, and its update arrives after that page was read. The next burst
// holds the update and the activity's create again (a redelivery), the
// create last; and a create of 1001 received after the page too. Neither
// is written from the page remembered: the burst reads the page again, and
// both are written by that read. Protection: warm.Listed.Settles' rules;
// keyed by the activity's last event, or without the receipt check, the
// burst writes 1000 as the remembered Run and reads no page.
func TestAnEventAfterAPageIsNeverSettledByItsMemory(t *testing.T) {
	t.Parallel()
	st, written := recordWrites(t)
	l := &fakeLister{acts: history(250, 1000)}
	f := burstFetcher(t, st, &fakeStrava{}, l)
	clock := now
	f.Now = func() time.Time { return clock }
	ctx := context.Background()
	for j, err := range f.Serve(ctx, ingest.NewBurst(creates(span(1000, 100)...), "b0")) {
		if err != nil {
			t.Fatalf("first burst: event %d: %v", j, err)
		}
	}
	l.mu.Lock()
	l.acts[0].SportType, l.acts[0].Distance = "Ride", 40000 // edited at Strava after the page
	l.mu.Unlock()
	edit := creates(1000)
	edit[0].Event.AspectType, edit[0].ReceivedAtUtc = ingest.AspectUpdate, now.Add(time.Second)
	late := creates(1001)
	late[0].ReceivedAtUtc = now.Add(time.Second)
	clock = now.Add(10 * time.Second)
	burst := append(append(append(edit, creates(1000)...), late...), creates(span(1002, 50)...)...)
	for j, err := range f.Serve(ctx, ingest.NewBurst(burst, "b1")) {
		if err != nil {
			t.Fatalf("second burst: event %d: %v", j, err)
		}
	}
	if got := fmt.Sprint(l.pages); got != "[1 1]" {
		t.Fatalf("pages read %s, want [1 1]: the second burst reads its page", got)
	}
	for _, id := range []int64{1000, 1001} {
		if written[id] != clock.UnixNano() {
			t.Fatalf("activity %d written by the page read at %d, want the one read at %d (after its event)", id, written[id], clock.UnixNano())
		}
	}
	if written[1002] != now.UnixNano() {
		t.Fatalf("activity 1002 written at %d, want from the first page (%d)", written[1002], now.UnixNano())
	}
}
