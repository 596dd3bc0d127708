package milestones

import (
	"fmt"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
)

// TestPageOfWindowsASeriesNewestFirst: which periods of a weekly series
// begun ten weeks ago (on 2026-03-02, a Monday; today 2026-05-06) a window
// lists, where the next page begins and when a cursor begins none.
func TestPageOfWindowsASeriesNewestFirst(t *testing.T) {
	s := model.Milestone{MilestoneDefinition: model.MilestoneDefinition{Recurrence: "weekly", PeriodStartDate: "2026-03-02"}}
	at := At{Now: time.Date(2026, 5, 6, 12, 0, 0, 0, time.UTC)}
	cases := []struct {
		name string
		w    Window
		want string // first … last listed, next, count, ok
	}{
		{"the newest page", Window{Limit: 3}, "2026-05-04 … 2026-04-20 next 2026-04-13 of 10 true"},
		{"from a cursor", Window{From: "2026-04-13", Limit: 3}, "2026-04-13 … 2026-03-30 next 2026-03-23 of 10 true"},
		{"the last page ends the list", Window{From: "2026-03-09", Limit: 3}, "2026-03-09 … 2026-03-02 next  of 10 true"},
		{"a limit past the end", Window{Limit: 50}, "2026-05-04 … 2026-03-02 next  of 10 true"},
		{"a day that begins no period", Window{From: "2026-03-10", Limit: 3}, "of 10 false"},
		{"a week not begun yet", Window{From: "2026-05-11", Limit: 3}, "of 10 false"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, ok := pageOf(s, c.w, at)
			got := fmt.Sprintf("of %d %v", p.count, ok)
			if len(p.periods) > 0 {
				got = fmt.Sprintf("%s … %s next %s %s", p.periods[0].StartDate, p.periods[len(p.periods)-1].StartDate, p.next, got)
			}
			if got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}
