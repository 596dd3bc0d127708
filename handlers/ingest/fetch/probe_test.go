package fetch_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/strava"
)

// TestAForgerCannotHoldBackAnImport: a forger naming a real athlete has
// spent the athlete's unverified allowance for the day. The athlete then
// imports 60 old-dated activities (positions 700 to 759 of a history of
// 1,200, deep below the first page), and one forged create joins their
// burst. The first page lists none of them; the deeper page waits for the
// allowance, so the walk probes: it reads a create by id on the athlete's
// caps (a forged one is not found, settled, and its read moved to the
// allowance), finds an upload, and lists before and after its start on
// the caps. Every import is written at once, none waits for the next day,
// in at most two probes and five pages. Protection: the probe (without it
// all 60 wait for the allowance's next UTC day).
func TestAForgerCannotHoldBackAnImport(t *testing.T) {
	t.Parallel()
	hist := history(1200, 1000) // ids 1000…2199, newest first, an hour apart
	byID := map[int64]strava.Activity{}
	for _, a := range hist {
		byID[a.ID] = a
	}
	var mu sync.Mutex
	written, moved := map[int64]bool{}, 0
	st := &fakeStore{t: t,
		WorkoutFn:         func(int64) (*model.Workout, error) { return nil, model.ErrNotFound },
		UpsertWorkoutFn:   func(w *model.Workout) error { mu.Lock(); defer mu.Unlock(); written[w.ActivityID] = true; return nil },
		TakeAthleteReadFn: roomy,
		TakeDayReadsFn:    roomy,
		UnverifiedFn: func(_ int64, day bool, limit, _ int) error {
			mu.Lock()
			defer mu.Unlock()
			if limit < math.MaxInt32 {
				return model.ErrConflict // spent by the forger
			}
			if !day {
				moved++
			}
			return nil
		},
	}
	l := &fakeLister{acts: hist}
	s := &fakeStrava{GetActivityFn: func(id int64) (strava.Activity, error) {
		if a, ok := byID[id]; ok {
			return a, nil
		}
		return strava.Activity{}, model.ErrNotFound
	}}
	f := burstFetcher(t, st, s, l)
	f.Reads.PerWindow, f.Reads.PerDay = 100, 1000
	imported := span(1700, 60)
	burst := append(creates(imported...), creates(900000)...)
	outs := f.Serve(context.Background(), ingest.NewBurst(burst, "import"))
	for i, err := range outs {
		var de *ingest.DeferError
		if errors.As(err, &de) && de.AthleteCap {
			t.Fatalf("create %d held back by a spent allowance: %v", burst[i].Event.ObjectID, err)
		}
		if err != nil {
			t.Fatalf("create %d: %v", burst[i].Event.ObjectID, err)
		}
	}
	for _, id := range imported {
		if !written[id] {
			t.Fatalf("imported activity %d not written; pages %v, %d read by id", id, l.pages, s.calls)
		}
	}
	t.Logf("pages %v, read by id %d, reads moved to the allowance %d", l.pages, s.calls, moved)
	if s.calls < 1 || s.calls > 2 || len(l.pages) > 5 || written[900000] {
		t.Fatalf("pages %v, %d read by id, forged written %v; want at most 5 pages and 1 or 2 probes, nothing forged written",
			l.pages, s.calls, written[900000])
	}
}

// TestStoredActivitiesAreNoEvidence: creates naming activities the athlete
// has stored already (their ids are public) are a replay or a forgery, not
// new uploads: with the allowance spent, the walk reads none of them by id,
// so they buy no list pages on the athlete's caps, and they wait for the
// allowance. Protection: probeCandidate's stored check (without it a probe
// finds such an activity and the walk lists on the athlete's caps).
func TestStoredActivitiesAreNoEvidence(t *testing.T) {
	t.Parallel()
	hist := history(1200, 1000)
	st := &fakeStore{t: t,
		WorkoutFn:         func(id int64) (*model.Workout, error) { return &model.Workout{ActivityID: id}, nil },
		UpsertWorkoutFn:   func(*model.Workout) error { return nil },
		TakeAthleteReadFn: roomy,
		TakeDayReadsFn:    roomy,
		UnverifiedFn: func(_ int64, _ bool, limit, _ int) error {
			if limit < math.MaxInt32 {
				return model.ErrConflict
			}
			return nil
		},
	}
	l := &fakeLister{acts: hist}
	s := &fakeStrava{GetActivityFn: func(id int64) (strava.Activity, error) { return hist[id-1000], nil }}
	f := burstFetcher(t, st, s, l)
	f.Reads.PerWindow, f.Reads.PerDay = 100, 1000
	outs := f.Serve(context.Background(), ingest.NewBurst(creates(span(1900, 20)...), "replayed"))
	held := 0
	for _, err := range outs {
		var de *ingest.DeferError
		if errors.As(err, &de) && de.AthleteCap {
			held++
		}
	}
	if s.calls != 0 || len(l.pages) != 1 || held != 20 {
		t.Fatalf("%d read by id, pages %v, %d held back; want no probe, the first page only, all 20 waiting", s.calls, l.pages, held)
	}
}
