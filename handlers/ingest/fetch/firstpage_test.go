package fetch_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model"
)

// TestForgedBurstsLeaveTheAthletesCapsToTheirUploads: ten bursts of forged
// creates naming a real athlete, in one window, each read a first page that
// lists none of them. The pages move to the athlete's unverified allowance
// (counted there past its cap: they were made), so the athlete's counter
// keeps none of them, and the athlete's own upload right after is fetched,
// not held back to the next window. With a cap of 4 the pages stay within
// the instance's own tally; with a cap of 1 each is shared with the counter
// at once and taken back from the next share. Protection:
// MoveReadToUnverified (without it the counter refuses the fifth forged
// page, or the second, and the upload waits).
func TestForgedBurstsLeaveTheAthletesCapsToTheirUploads(t *testing.T) {
	t.Parallel()
	for _, limit := range []int{4, 1} {
		t.Run(fmt.Sprintf("cap %d", limit), func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			athlete, unverified := 0, 0
			st := &fakeStore{t: t,
				UpsertWorkoutFn: func(*model.Workout) error { return nil },
				TakeDayReadsFn:  roomy,
				TakeAthleteReadFn: func(_ int64, limit, n int) error {
					mu.Lock()
					defer mu.Unlock()
					if athlete+n > limit {
						return model.ErrConflict
					}
					athlete += n
					return nil
				},
				UnverifiedFn: func(_ int64, day bool, limit, n int) error {
					mu.Lock()
					defer mu.Unlock()
					if !day && unverified+n <= limit {
						unverified += n
					}
					return nil
				},
			}
			l := &fakeLister{acts: history(30, 1000)} // a short history: one page ends it
			s := &fakeStrava{GetActivityFn: run(run5k)}
			f := burstFetcher(t, st, s, l)
			f.Reads.PerWindow, f.Reads.PerDay = limit, 100
			ctx := context.Background()
			for i := range 10 {
				outs := f.Serve(ctx, ingest.NewBurst(creates(span(int64(900000+100*i), 10)...), "forged"))
				for _, err := range outs {
					var de *ingest.DeferError
					if errors.As(err, &de) && de.AthleteCap {
						t.Fatalf("forged burst %d held back by the athlete's caps: %v", i, err)
					}
				}
			}
			err := f.Process(ctx, event(ingest.AspectCreate))
			t.Logf("pages read %d; athlete's counter %d; unverified allowance %d; the upload: %v", len(l.pages), athlete, unverified, err)
			if err != nil || s.calls != 1 {
				t.Fatalf("the athlete's upload after ten forged bursts: %v (%d fetches); want it fetched within the caps", err, s.calls)
			}
			if len(l.pages) != 10 || unverified != 10 || athlete > 1 {
				t.Fatalf("pages %v, unverified %d, athlete %d: want ten first pages on the unverified allowance and at most one read on the athlete's counter",
					l.pages, unverified, athlete)
			}
		})
	}
}
