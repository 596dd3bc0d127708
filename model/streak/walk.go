package streak

import "time"

// State is where the current streak stands on the athlete's today.
type State string

// The states of a streak.
const (
	// Alive: today (or this week) already holds an activity that counts.
	Alive State = "alive"
	// AtRisk: today has none yet, and yesterday was active or bridged.
	AtRisk State = "at_risk"
	// Broken: no streak runs into today.
	Broken State = "broken"
)

// Calendar is a streak's period and rule: what a walk reads besides the
// active days. Days are midnights UTC (calendar.ParseDate).
type Calendar struct {
	Rule  Rule
	First time.Time
	// Last is the period's last day, nil when it has none.
	Last *time.Time
}

// slot is the slot (day or week) of the period that holds day; the first
// is 0.
func (c Calendar) slot(day time.Time) int {
	if c.Rule.Unit == Week {
		return int((mondayOf(dayNumber(day)) - mondayOf(dayNumber(c.First))) / 7)
	}
	return Index(c.First, day)
}

// span is slot i's days as day numbers, the week's whole Monday to Sunday.
func (c Calendar) span(i int) (from, to int64) {
	if c.Rule.Unit == Week {
		from = mondayOf(dayNumber(c.First)) + 7*int64(i)
		return from, from + 6
	}
	from = dayNumber(c.First) + int64(i)
	return from, from
}

// SlotDays is slot i's days within the period: one day, or the part of a
// week the period holds.
func (c Calendar) SlotDays(i int) (from, to time.Time) {
	f, t := c.span(i)
	f = max(f, dayNumber(c.First))
	if c.Last != nil {
		t = min(t, dayNumber(*c.Last))
	}
	return dayOf(f), dayOf(t)
}

// month is the calendar month slot i's freezes are drawn from: its day's,
// or its Monday's.
func (c Calendar) month(i int) int {
	from, _ := c.span(i)
	y, m, _ := dayOf(from).Date()
	return y*12 + int(m)
}

// firstActive is the first active day of slot i (bit index), -1 if none.
func (c Calendar) firstActive(bits []byte, i int) int {
	from, to := c.SlotDays(i)
	for d := Index(c.First, from); d <= Index(c.First, to); d++ {
		if Get(bits, d) {
			return d
		}
	}
	return -1
}

// active lists, for the first n slots, whether each holds an active day.
func (c Calendar) active(bits []byte, n int) []bool {
	out := make([]bool, max(n, 0))
	for i := range out {
		out[i] = c.firstActive(bits, i) >= 0
	}
	return out
}

// walk is the outcome of walking slots in order.
type walk struct {
	longest int
	// reached[k-1] is the slot at which a run first held k active slots.
	reached []int
	bridged []bool
	// runAt[i] is the run's length after slot i (0: none runs).
	runAt []int
	// run is how many active slots the run alive at the end holds, from
	// slot start (0 and -1: none is).
	run, start int
}

// walkSlots walks active in order. A single inactive slot between two
// active ones is bridged while its month has freezes left, the earliest
// first; any other inactive slot ends the run. With open, the last slot is
// today, not over yet: it ends no run, and the slot before it may be
// bridged on the strength of today.
func (c Calendar) walkSlots(active []bool, open bool) walk {
	n := len(active)
	w := walk{bridged: make([]bool, n), runAt: make([]int, n), start: -1}
	used := map[int]int{}
	for i, on := range active {
		w.step(c, active, i, on, open, used)
		w.runAt[i] = w.run
	}
	return w
}

// step walks slot i (walkSlots).
func (w *walk) step(c Calendar, active []bool, i int, on, open bool, used map[int]int) {
	n := len(active)
	switch {
	case on:
		if w.run == 0 {
			w.start = i
		}
		w.run++
		if w.run > w.longest {
			w.longest = w.run
			w.reached = append(w.reached, i)
		}
		return
	case w.run == 0 || (open && i == n-1):
		return
	}
	next := i+1 < n && active[i+1]
	if active[i-1] && (next || (open && i == n-2)) && used[c.month(i)] < c.Rule.FreezesPerMonth {
		used[c.month(i)]++
		w.bridged[i] = true
		return
	}
	w.run, w.start = 0, -1
}

// Longest walks bits up to their last active day (within the period) and
// returns the longest run, and for each length k = 1..longest the first
// active day (bit index) of the slot at which a run first held k slots:
// the day whose workout tipped it.
func (c Calendar) Longest(bits []byte) (longest int, tipping []int) {
	last := len(bits)*8 - 1
	for last >= 0 && !Get(bits, last) {
		last--
	}
	if last < 0 {
		return 0, nil
	}
	end := DayAt(c.First, last)
	if c.Last != nil && end.After(*c.Last) {
		end = *c.Last
	}
	w := c.walkSlots(c.active(bits, c.slot(end)+1), false)
	for _, s := range w.reached {
		tipping = append(tipping, c.firstActive(bits, s))
	}
	return w.longest, tipping
}

// Summary is a streak as the athlete sees it on their today.
type Summary struct {
	// Current is how many active days (or weeks) the streak running into
	// today holds; Longest the longest run of the period so far.
	Current, Longest int
	// Since is the first active day of the current streak, LastActive the
	// last active day of the period ("" when none).
	Since, LastActive string
	State             State
	// Bridged are the slots bridged so far, and FreezesUsed those of the
	// current streak (a week's as its first day), as dates.
	Bridged, FreezesUsed []string
	// Marks are the period's active and bridged days so far, in order,
	// each with the length of its run then.
	Marks []Mark
}

// Mark is one day of a streak's timeline: active (Bridged false) or
// bridged by a freeze, and the active days (or weeks) its run held then.
type Mark struct {
	Date    string
	Bridged bool
	Run     int
}

// Summarize walks bits up to today (the athlete's local day) and says where
// the streak stands. After the period's last day, the streak stands as it
// did on that day; before its first, none runs.
func (c Calendar) Summarize(bits []byte, today time.Time) Summary {
	s := Summary{State: Broken, Bridged: []string{}, FreezesUsed: []string{}, Marks: []Mark{}}
	end, open := today, true
	if c.Last != nil && today.After(*c.Last) {
		end, open = *c.Last, false
	}
	if end.Before(c.First) {
		return s
	}
	active := c.active(bits, c.slot(end)+1)
	w := c.walkSlots(active, open)
	s.Longest = w.longest
	for i, b := range w.bridged {
		from, to := c.SlotDays(i)
		if b {
			s.Bridged = append(s.Bridged, date(from))
			s.Marks = append(s.Marks, Mark{Date: date(from), Bridged: true, Run: w.runAt[i]})
			if w.run > 0 && i > w.start {
				s.FreezesUsed = append(s.FreezesUsed, date(from))
			}
			continue
		}
		for d := Index(c.First, from); d <= min(Index(c.First, to), Index(c.First, end)); d++ {
			if Get(bits, d) {
				s.LastActive = date(DayAt(c.First, d))
				s.Marks = append(s.Marks, Mark{Date: s.LastActive, Run: w.runAt[i]})
			}
		}
	}
	if w.run == 0 {
		return s
	}
	s.Current, s.Since, s.State = w.run, date(DayAt(c.First, c.firstActive(bits, w.start))), Alive
	if open && !active[len(active)-1] {
		s.State = AtRisk
	}
	return s
}

// date formats a midnight UTC as YYYY-MM-DD.
func date(t time.Time) string { return t.Format(time.DateOnly) }
