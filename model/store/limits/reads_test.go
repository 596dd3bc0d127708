package limits_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/store/limits"
	"github.com/commitcollect/backend/test/dynamolocal"
)

func TestIngestRecordRateLimitKeepsNewest(t *testing.T) {
	t.Parallel()
	s := limits.New(dynamolocal.NewStore(t))
	ctx := context.Background()
	w1 := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	rec := func(win time.Time, readShort int) {
		t.Helper()
		if err := s.RecordRateLimit(ctx, &ops.RateLimitState{WindowStartedUtc: win, ReadShortUsage: readShort, ReadShortLimit: 100}); err != nil {
			t.Fatal(err)
		}
	}
	get := func() *ops.RateLimitState {
		t.Helper()
		st, err := s.RateLimitState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if _, err := s.RateLimitState(ctx); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("empty: got %v, want ErrNotFound", err)
	}
	rec(w1, 10)
	rec(w1, 5) // an older reading of the same window arriving late
	if got := get().ReadShortUsage; got != 10 {
		t.Fatalf("got usage %d, want 10 (higher reading kept)", got)
	}
	rec(w1.Add(15*time.Minute), 1) // a new window resets
	if got := get(); got.ReadShortUsage != 1 || !got.WindowStartedUtc.Equal(w1.Add(15*time.Minute)) {
		t.Fatalf("got %+v, want the new window's usage 1", got)
	}
	rec(w1, 50) // a reading from the previous window is stale
	if got := get().ReadShortUsage; got != 1 {
		t.Fatalf("got usage %d, want 1 (stale window refused)", got)
	}
}

// TestTakeAthleteReadsAnswersTheSharedCount: two adds to an athlete's
// window counter (as two instances would make) answer the counter's count
// after each, and an add past the cap is refused and counts nothing.
func TestTakeAthleteReadsAnswersTheSharedCount(t *testing.T) {
	t.Parallel()
	s := limits.New(dynamolocal.NewStore(t))
	ctx := context.Background()
	now := time.Now()
	for i, want := range []int{4, 7} {
		got, err := s.TakeAthleteReads(ctx, 77, now, 15*time.Minute, 10, 4-i)
		if err != nil || got != want {
			t.Fatalf("add %d: got %d, %v; want %d counted", i, got, err, want)
		}
	}
	if got, err := s.TakeAthleteReads(ctx, 77, now, 15*time.Minute, 10, 4); !errors.Is(err, model.ErrConflict) || got != 0 {
		t.Fatalf("past the cap: got %d, %v; want refused", got, err)
	}
	if got, err := s.TakeAthleteReads(ctx, 77, now, 15*time.Minute, 10, 3); err != nil || got != 10 {
		t.Fatalf("to the cap: got %d, %v; want 10", got, err)
	}
}

// TestUnverifiedReadsCountApartFromTheAthletesCaps: the unverified
// allowance's window and day counters fill and refuse on their own, and
// spending them leaves the athlete's own counters untouched.
func TestUnverifiedReadsCountApartFromTheAthletesCaps(t *testing.T) {
	t.Parallel()
	s := limits.New(dynamolocal.NewStore(t))
	ctx := context.Background()
	now := time.Now()
	if err := s.TakeUnverifiedReads(ctx, 78, now, 15*time.Minute, 3, 3); err != nil {
		t.Fatal(err)
	}
	if err := s.TakeUnverifiedReads(ctx, 78, now, 15*time.Minute, 3, 1); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("window past its cap: %v, want refused", err)
	}
	if err := s.TakeUnverifiedDayReads(ctx, 78, now, 5, 5); err != nil {
		t.Fatal(err)
	}
	if err := s.TakeUnverifiedDayReads(ctx, 78, now, 5, 1); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("day past its cap: %v, want refused", err)
	}
	if got, err := s.TakeAthleteReads(ctx, 78, now, 15*time.Minute, 3, 3); err != nil || got != 3 {
		t.Fatalf("the athlete's window cap: got %d, %v; want all 3 reads free", got, err)
	}
	if err := s.TakeAthleteDayReads(ctx, 78, now, 5, 5); err != nil {
		t.Fatalf("the athlete's day cap: %v, want all 5 reads free", err)
	}
}
