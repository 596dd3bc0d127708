package retry

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestBackoffStaysWithinItsCeiling(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		attempt   int
		base, max time.Duration
		ceiling   time.Duration
	}{
		{"first attempt", 0, 10 * time.Millisecond, time.Second, 10 * time.Millisecond},
		{"grows", 3, 10 * time.Millisecond, time.Second, 80 * time.Millisecond},
		{"capped", 10, 10 * time.Millisecond, time.Second, time.Second},
		{"shift overflow capped", 1000, time.Hour, 2 * time.Second, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for range 200 {
				if got := Backoff(tt.attempt, tt.base, tt.max); got <= 0 || got > tt.ceiling {
					t.Fatalf("Backoff(%d, %s, %s) = %s, want in (0, %s]", tt.attempt, tt.base, tt.max, got, tt.ceiling)
				}
			}
		})
	}
}

func TestSleepStopsOnCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a cancelled context = %v, want context.Canceled", err)
	}
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep = %v, want nil", err)
	}
}
