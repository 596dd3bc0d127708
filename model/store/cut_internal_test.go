package store

import (
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
)

// TestCutAtInstant: a log cut by the guardrail drops the kept workouts that
// share the instant of the first one left out.
func TestCutAtInstant(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	at := func(h int) model.Workout { return model.Workout{StartDateUtc: t0.Add(time.Duration(h) * time.Hour)} }
	for _, c := range []struct {
		name      string
		ws        []model.Workout // newest first
		left      time.Time
		kept      int
		exactFrom time.Time
	}{
		{"nothing shares the instant", []model.Workout{at(5), at(4), at(3)}, t0.Add(2 * time.Hour), 3, t0.Add(3 * time.Hour)},
		{"kept workouts at the instant go", []model.Workout{at(5), at(4), at(2), at(2)}, t0.Add(2 * time.Hour), 2, t0.Add(4 * time.Hour)},
		{"all at the instant", []model.Workout{at(2), at(2)}, t0.Add(2 * time.Hour), 0, t0.Add(2*time.Hour + time.Nanosecond)},
		{"none kept", nil, t0, 0, t0.Add(time.Nanosecond)},
	} {
		t.Run(c.name, func(t *testing.T) {
			kept, from := cutAtInstant(c.ws, c.left)
			if len(kept) != c.kept || !from.Equal(c.exactFrom) {
				t.Fatalf("got %d kept, exact from %v; want %d, %v", len(kept), from, c.kept, c.exactFrom)
			}
		})
	}
}
