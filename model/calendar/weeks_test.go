package calendar_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/commitcollect/backend/model/calendar"
)

func TestWeekOf(t *testing.T) {
	t.Parallel()
	epoch := time.Unix(0, 0).UTC() // a Thursday
	tests := []struct {
		at   time.Time
		want int64
	}{
		{epoch, 0},
		{epoch.Add(7*24*time.Hour - time.Nanosecond), 0},
		{epoch.Add(7 * 24 * time.Hour), 1},
		{epoch.Add(-time.Nanosecond), -1},
		{epoch.Add(-7 * 24 * time.Hour), -1},
		{epoch.Add(-7*24*time.Hour - time.Second), -2},
		{time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC), 2931}, // a Thursday: a week's first day
		{time.Date(2026, 3, 4, 23, 59, 59, 0, time.UTC), 2930},
		{time.Date(2026, 3, 5, 0, 0, 0, 0, time.FixedZone("AEDT", 11*3600)), 2930}, // the instant, not the wall clock
	}
	for _, tt := range tests {
		if got := calendar.WeekOf(tt.at); got != tt.want {
			t.Errorf("WeekOf(%s) = %d, want %d", tt.at.Format(time.RFC3339Nano), got, tt.want)
		}
	}
}

func TestWeekWindows(t *testing.T) {
	t.Parallel()
	march, april := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	k := calendar.WeekOf(march)
	got := calendar.WeekWindows(calendar.Window{From: march, To: &april}, []int64{k - 1, k, k + 2, k + 10})
	end, mid, midEnd := calendar.WeekStart(k+1), calendar.WeekStart(k+2), calendar.WeekStart(k+3)
	want := []calendar.Window{{From: march, To: &end}, {From: mid, To: &midEnd}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("WeekWindows = %v, want %v (clipped to the window, weeks outside it dropped)", got, want)
	}
}
