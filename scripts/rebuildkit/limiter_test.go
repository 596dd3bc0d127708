package rebuildkit

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestLimiterSpacesCalls: the rebuild's limiter lets calls through evenly
// at its rate and banks no burst for an idle caller; ≤ 0 is unlimited.
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
			l := NewLimiter(tt.perSecond)
			var got []time.Duration
			for _, gap := range tt.gaps {
				now = now.Add(gap)
				d := l.ReserveN(now, 1).DelayFrom(now)
				got = append(got, d.Round(time.Millisecond))
				now = now.Add(d)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("waits: got %v, want %v", got, tt.want)
			}
		})
	}
	if NewLimiter(0) != nil || wait(context.Background(), nil) != nil {
		t.Fatal("a rate ≤ 0 must be unlimited")
	}
}

// TestLimiterGivesUpWithTheContext: a caller whose turn lies past its
// context's end is refused at once, not after sleeping.
func TestLimiterGivesUpWithTheContext(t *testing.T) {
	t.Parallel()
	slow := NewLimiter(0.001) // one call per 1000 s
	if err := wait(context.Background(), slow); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := wait(ctx, slow); err == nil || time.Since(start) > time.Second {
		t.Fatalf("got %v after %s, want a refusal at once", err, time.Since(start))
	}
	cancelled, stop := context.WithCancel(context.Background())
	stop()
	if err := wait(cancelled, nil); err == nil {
		t.Fatal("an ended context must stop even an unlimited wait")
	}
}
