package rebuildkit

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock whose sleeps advance it instantly.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestLimiterSpacesCalls(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		perSecond float64
		gaps      []time.Duration // pause before each call
		want      []time.Duration // wait of each call
	}{
		{
			name: "back to back calls wait one interval each", perSecond: 10,
			gaps: []time.Duration{0, 0, 0, 0},
			want: []time.Duration{0, 100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond},
		},
		{
			name: "an idle caller does not bank slots", perSecond: 4,
			gaps: []time.Duration{0, time.Second, 0},
			want: []time.Duration{0, 0, 250 * time.Millisecond},
		},
		{
			name: "unlimited never waits", perSecond: 0,
			gaps: []time.Duration{0, 0, 0},
			want: []time.Duration{0, 0, 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := &fakeClock{now: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
			var got []time.Duration
			l := NewLimiter(tt.perSecond)
			if l != nil {
				l.now = clock.Now
				l.sleep = func(_ context.Context, d time.Duration) error {
					got[len(got)-1] = d
					clock.Advance(d)
					return nil
				}
			}
			for _, gap := range tt.gaps {
				clock.Advance(gap)
				got = append(got, 0)
				if err := l.Wait(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("waits: got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLimiterRealClockAndCancel(t *testing.T) {
	t.Parallel()
	l := NewLimiter(1000)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.Wait(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if !l.next.After(time.Now().Add(-time.Second)) {
		t.Fatalf("got next slot %v, want it advanced by the 8 callers", l.next)
	}
	slow := NewLimiter(0.001) // one call per 1000 s
	_ = slow.Wait(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := slow.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the context's deadline error", err)
	}
}
