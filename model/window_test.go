package model

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/commitcollect/backend/model/keys"
)

func TestWorkoutDateSKOrdersByDateThenNumericID(t *testing.T) {
	t.Parallel()
	d := time.Date(2026, 3, 1, 7, 0, 0, 0, time.UTC)
	if got, want := keys.WorkoutDateSK(d, 42), "WORKOUT#2026-03-01T07:00:00.000000000Z#0000000000000000042"; got != want {
		t.Fatalf("keys.WorkoutDateSK = %q, want %q", got, want)
	}
	ordered := []struct {
		at time.Time
		id int64
	}{
		{d.Add(-time.Hour), 99999999999},
		{d, 9},
		{d, 10},
		{d, 123456789012},
		{d.Add(time.Nanosecond), 1},
		{d.Add(time.Second), 5},
		{d.In(time.FixedZone("x", 3600)).Add(2 * time.Second), 2}, // zones do not matter
	}
	var ks []string
	for _, o := range ordered {
		ks = append(ks, keys.WorkoutDateSK(o.at, o.id))
	}
	if !slices.IsSorted(ks) {
		t.Fatalf("ks not in (date, id) order: %q", ks)
	}
}

func TestWorkoutDateRangeSelectsHalfOpenWindow(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	to := from.AddDate(0, 1, 0)
	far := time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		w    Window
		at   time.Time
		want bool
	}{
		{"at start", Window{From: from, To: &to}, from, true},
		{"just before start", Window{From: from, To: &to}, from.Add(-time.Nanosecond), false},
		{"just before end", Window{From: from, To: &to}, to.Add(-time.Nanosecond), true},
		{"at end", Window{From: from, To: &to}, to, false},
		{"open end", Window{From: from}, time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), true},
		{"end beyond year 9999 is open", Window{From: from, To: &far}, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{"zero start is all time", Window{}, time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			lo, hi := keys.WorkoutDateRange(tt.w.From, tt.w.To)
			for _, id := range []int64{1, 9223372036854775807} {
				k := keys.WorkoutDateSK(tt.at, id)
				if got := lo <= k && k <= hi; got != tt.want {
					t.Fatalf("%s in [%s, %s] = %v, want %v", k, lo, hi, got, tt.want)
				}
			}
		})
	}
}

func TestMergeWindows(t *testing.T) {
	t.Parallel()
	day := func(d int) time.Time { return time.Date(2026, 3, d, 0, 0, 0, 0, time.UTC) }
	p := func(t time.Time) *time.Time { return &t }
	tests := []struct {
		name  string
		given []Window
		want  []Window
	}{
		{"none", nil, nil},
		{"disjoint, newest first", []Window{{day(1), p(day(3))}, {day(5), p(day(7))}}, []Window{{day(5), p(day(7))}, {day(1), p(day(3))}}},
		{"touching merge", []Window{{day(1), p(day(3))}, {day(3), p(day(7))}}, []Window{{day(1), p(day(7))}}},
		{"contained", []Window{{day(1), p(day(9))}, {day(3), p(day(4))}}, []Window{{day(1), p(day(9))}}},
		{"open end swallows later", []Window{{day(2), nil}, {day(5), p(day(7))}, {day(1), p(day(3))}}, []Window{{day(1), nil}}},
		{"empty dropped", []Window{{day(3), p(day(3))}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := MergeWindows(tt.given)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("MergeWindows = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCutAtInstant(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	at := func(h int) Workout { return Workout{StartDateUtc: t0.Add(time.Duration(h) * time.Hour)} }
	for _, c := range []struct {
		name      string
		ws        []Workout // newest first
		left      time.Time
		kept      int
		exactFrom time.Time
	}{
		{"nothing shares the instant", []Workout{at(5), at(4), at(3)}, t0.Add(2 * time.Hour), 3, t0.Add(3 * time.Hour)},
		{"kept workouts at the instant go", []Workout{at(5), at(4), at(2), at(2)}, t0.Add(2 * time.Hour), 2, t0.Add(4 * time.Hour)},
		{"all at the instant", []Workout{at(2), at(2)}, t0.Add(2 * time.Hour), 0, t0.Add(2*time.Hour + time.Nanosecond)},
		{"none kept", nil, t0, 0, t0.Add(time.Nanosecond)},
	} {
		t.Run(c.name, func(t *testing.T) {
			kept, from := CutAtInstant(c.ws, c.left)
			if len(kept) != c.kept || !from.Equal(c.exactFrom) {
				t.Fatalf("got %d kept, exact from %v; want %d, %v", len(kept), from, c.kept, c.exactFrom)
			}
		})
	}
}
