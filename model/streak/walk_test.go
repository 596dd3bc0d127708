package streak

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func day(s string) time.Time {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		panic(err)
	}
	return t
}

// bitsOf reads a pattern of the period's days from its first: 'x' active,
// anything else inactive.
func bitsOf(pattern string) []byte {
	var b []byte
	for i, r := range pattern {
		b = Set(b, i, r == 'x')
	}
	return b
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	first := day("2026-03-01") // a Sunday
	last := day("2026-03-20")
	tests := []struct {
		name    string
		rule    Rule
		last    *time.Time
		pattern string // from first
		today   string
		want    Summary
	}{
		{name: "a run into today is alive", rule: Rule{Unit: Day}, pattern: "xxxx", today: "2026-03-04",
			want: Summary{Current: 4, Longest: 4, Since: "2026-03-01", LastActive: "2026-03-04", State: Alive}},
		{name: "today without activity yet is at risk", rule: Rule{Unit: Day}, pattern: "xxx", today: "2026-03-04",
			want: Summary{Current: 3, Longest: 3, Since: "2026-03-01", LastActive: "2026-03-03", State: AtRisk}},
		{name: "a missed day breaks it", rule: Rule{Unit: Day}, pattern: "xxx", today: "2026-03-05",
			want: Summary{Longest: 3, LastActive: "2026-03-03", State: Broken}},
		{name: "a gap ends the first run; the second is current", rule: Rule{Unit: Day}, pattern: "xxx.xx", today: "2026-03-06",
			want: Summary{Current: 2, Longest: 3, Since: "2026-03-05", LastActive: "2026-03-06", State: Alive}},
		{name: "a freeze bridges a single day and adds nothing", rule: Rule{Unit: Day, FreezesPerMonth: 1}, pattern: "xxx.xx", today: "2026-03-06",
			want: Summary{Current: 5, Longest: 5, Since: "2026-03-01", LastActive: "2026-03-06", State: Alive,
				Bridged: []string{"2026-03-04"}, FreezesUsed: []string{"2026-03-04"}}},
		{name: "a freeze never bridges two days", rule: Rule{Unit: Day, FreezesPerMonth: 4}, pattern: "xxx..xx", today: "2026-03-07",
			want: Summary{Current: 2, Longest: 3, Since: "2026-03-06", LastActive: "2026-03-07", State: Alive}},
		{name: "freezes run out in the month, the earliest first", rule: Rule{Unit: Day, FreezesPerMonth: 1}, pattern: "xx.xx.xx", today: "2026-03-08",
			want: Summary{Current: 2, Longest: 4, Since: "2026-03-07", LastActive: "2026-03-08", State: Alive,
				Bridged: []string{"2026-03-03"}}},
		{name: "yesterday bridged on the strength of today is at risk", rule: Rule{Unit: Day, FreezesPerMonth: 1}, pattern: "xxx", today: "2026-03-05",
			want: Summary{Current: 3, Longest: 3, Since: "2026-03-01", LastActive: "2026-03-03", State: AtRisk,
				Bridged: []string{"2026-03-04"}, FreezesUsed: []string{"2026-03-04"}}},
		{name: "weeks run Monday to Sunday", rule: Rule{Unit: Week}, pattern: "x.......x.....x", today: "2026-03-15",
			// Sun 1 (week of Feb 23), Mon 9 (week of Mar 9), Sun 15 (same week): week of Mar 2 is empty.
			want: Summary{Current: 1, Longest: 1, Since: "2026-03-09", LastActive: "2026-03-15", State: Alive}},
		{name: "a week's freeze bridges an empty week", rule: Rule{Unit: Week, FreezesPerMonth: 1}, pattern: "x.......x", today: "2026-03-10",
			want: Summary{Current: 2, Longest: 2, Since: "2026-03-01", LastActive: "2026-03-09", State: Alive,
				Bridged: []string{"2026-03-02"}, FreezesUsed: []string{"2026-03-02"}}},
		{name: "a Sunday and the Tuesday after are two weeks", rule: Rule{Unit: Week}, pattern: "x.x", today: "2026-03-04",
			want: Summary{Current: 2, Longest: 2, Since: "2026-03-01", LastActive: "2026-03-03", State: Alive}},
		{name: "this week without activity yet is at risk", rule: Rule{Unit: Week}, pattern: "x", today: "2026-03-04",
			want: Summary{Current: 1, Longest: 1, Since: "2026-03-01", LastActive: "2026-03-01", State: AtRisk}},
		{name: "after the period it stands as on its last day", rule: Rule{Unit: Day}, last: &last, pattern: "...................xx", today: "2026-04-30",
			want: Summary{Current: 1, Longest: 1, Since: "2026-03-20", LastActive: "2026-03-20", State: Alive}},
		{name: "before the period none runs", rule: Rule{Unit: Day}, pattern: "x", today: "2026-02-27",
			want: Summary{State: Broken}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := Calendar{Rule: tt.rule, First: first, Last: tt.last}
			got := c.Summarize(bitsOf(tt.pattern), day(tt.today))
			got.Marks = nil
			if tt.want.Bridged == nil {
				tt.want.Bridged = []string{}
			}
			if tt.want.FreezesUsed == nil {
				tt.want.FreezesUsed = []string{}
			}
			if got.Current != tt.want.Current || got.Longest != tt.want.Longest || got.Since != tt.want.Since ||
				got.LastActive != tt.want.LastActive || got.State != tt.want.State ||
				!slices.Equal(got.Bridged, tt.want.Bridged) || !slices.Equal(got.FreezesUsed, tt.want.FreezesUsed) {
				t.Errorf("Summarize(%q, %s) = %+v\nwant %+v", tt.pattern, tt.today, got, tt.want)
			}
		})
	}
}

// The marks are the timeline of a streak: each active and bridged day in
// order, with its run's length then.
func TestMarks(t *testing.T) {
	t.Parallel()
	c := Calendar{Rule: Rule{Unit: Day, FreezesPerMonth: 1}, First: day("2026-03-01")}
	got := c.Summarize(bitsOf("xx.x..x"), day("2026-03-07")).Marks
	want := []Mark{{"2026-03-01", false, 1}, {"2026-03-02", false, 2}, {"2026-03-03", true, 2}, {"2026-03-04", false, 3}, {"2026-03-07", false, 1}}
	if !slices.Equal(got, want) {
		t.Errorf("marks %v, want %v", got, want)
	}
}

// A late upload that fills a gap heals the streak and gives its freeze
// back: freezes are recomputed from the days, never stored.
func TestALateUploadHealsAndGivesTheFreezeBack(t *testing.T) {
	t.Parallel()
	c := Calendar{Rule: Rule{Unit: Day, FreezesPerMonth: 1}, First: day("2026-03-01")}
	before := c.Summarize(bitsOf("xx.xx.xx"), day("2026-03-08"))
	after := c.Summarize(bitsOf("xxxxx.xx"), day("2026-03-08"))
	if before.Current != 2 || after.Current != 7 || !slices.Equal(after.Bridged, []string{"2026-03-06"}) {
		t.Errorf("before %+v\nafter %+v: want the upload on the 3rd to free the freeze for the 6th", before, after)
	}
}

func TestLongestNamesTheDayEachLengthWasReached(t *testing.T) {
	t.Parallel()
	tests := []struct {
		rule        Rule
		pattern     string
		wantLongest int
		wantTipping []int
	}{
		{Rule{Unit: Day}, "xx.xxx", 3, []int{0, 1, 5}},
		{Rule{Unit: Day, FreezesPerMonth: 1}, "xx.xxx", 5, []int{0, 1, 3, 4, 5}},
		{Rule{Unit: Day}, "", 0, nil},
		{Rule{Unit: Week}, "..x....x.x", 2, []int{2, 9}}, // Tue 3 and Sun 8 share a week; Tue 10 is the next
	}
	for _, tt := range tests {
		c := Calendar{Rule: tt.rule, First: day("2026-03-01")}
		l, tip := c.Longest(bitsOf(tt.pattern))
		if l != tt.wantLongest || !slices.Equal(tip, tt.wantTipping) {
			t.Errorf("Longest(%q, %s) = %d %v, want %d %v", tt.pattern, tt.rule.Unit, l, tip, tt.wantLongest, tt.wantTipping)
		}
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    Definition
		want string // fields, comma separated
	}{
		{Definition{Streak: true, Rule: &Rule{Unit: Day}, LocalDays: true, StartDate: "2026-03-01"}, ""},
		{Definition{Streak: true, Rule: &Rule{Unit: Week, FreezesPerMonth: 4}, LocalDays: true, StartDate: "2026-03-01"}, ""},
		{Definition{Streak: true, LocalDays: true, StartDate: "2026-03-01"}, "streakUnit"},
		{Definition{Streak: true, Rule: &Rule{Unit: "month"}, LocalDays: true, StartDate: "2026-03-01"}, "streakUnit"},
		{Definition{Streak: true, Rule: &Rule{Unit: Day, FreezesPerMonth: 5}, LocalDays: true, StartDate: "2026-03-01"}, "freezesPerMonth"},
		{Definition{Streak: true, Rule: &Rule{Unit: Day, FreezesPerMonth: -1}, LocalDays: true, StartDate: "2026-03-01"}, "freezesPerMonth"},
		{Definition{Streak: true, Rule: &Rule{Unit: Day}, LocalDays: true, StartDate: "2026-03-02", Recurrence: "weekly"}, "recurrence"},
		{Definition{Streak: true, Rule: &Rule{Unit: Day}}, "periodStartDate"},
		{Definition{Streak: true, Rule: &Rule{Unit: Day}, LocalDays: true, StartDate: "1999-12-31"}, "periodStartDate"},
		{Definition{Streak: true, Rule: &Rule{Unit: Day}, LocalDays: true, StartDate: "2000-01-01"}, ""},
		{Definition{Rule: &Rule{Unit: Day}}, "streakUnit"},
		{Definition{}, ""},
	}
	for _, tt := range tests {
		var fields []string
		for _, p := range Check(tt.d) {
			fields = append(fields, p.Field)
		}
		if got := strings.Join(fields, ","); got != tt.want {
			t.Errorf("Check(%+v) names %q, want %q", tt.d, got, tt.want)
		}
	}
}

func TestBits(t *testing.T) {
	t.Parallel()
	b := Set(nil, 17, true)
	if !Get(b, 17) || Get(b, 16) || Count(b) != 1 || len(b) != 3 {
		t.Fatalf("Set(nil, 17) = %v", b)
	}
	if b = Set(b, 17, false); b != nil {
		t.Errorf("clearing the only bit left %v, want nil (equal days are equal bytes)", b)
	}
	if i := Index(day("2026-03-01"), day("2026-04-01")); i != 31 || !DayAt(day("2026-03-01"), i).Equal(day("2026-04-01")) {
		t.Errorf("Index = %d", i)
	}
}
