package fetch_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model"
)

// TestABulkUploadOverTicksWalksItsPagesOnce: a bulk upload whose webhooks
// fall on several gather ticks comes as several bursts; a create that an
// earlier walk listed is written from that page (ordered by its fetch
// start) without reading it again, an update is not (it asks what the
// activity is now), and what was listed longer ago than the memory keeps
// is read again. Protection: the memory of listed activities (removing it,
// the second burst reads page 1 again).
func TestABulkUploadOverTicksWalksItsPagesOnce(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	written := map[int64]int64{}
	st := &fakeStore{t: t, UpsertWorkoutFn: func(w *model.Workout) error {
		mu.Lock()
		defer mu.Unlock()
		written[w.ActivityID] = w.FetchStartedAtNs
		return nil
	}}
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
		for j, err := range f.ProcessBurst(ctx, ingest.NewBurst(b.jobs, fmt.Sprintf("b%d", i))) {
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
