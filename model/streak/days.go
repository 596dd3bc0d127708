package streak

import (
	"bytes"
	"maps"
	mathbits "math/bits"
	"time"
)

// Days are a streak milestone's active days as its last projection found
// them in the log, kept beside its progress: a cache that lets an event
// re-read only the days it touches, never a source. A bitmap from First
// holds a thousand days in 125 bytes, so the milestone item stays within
// a write unit or two however long the streak runs.
type Days struct {
	// Def is the fingerprint of the definition the days were found under
	// (what counts, and the period's first day): days found under
	// another are not used.
	Def string `dynamodbav:"def"`
	// Bits has bit i set (byte i/8, bit i%8) when the period's day i
	// (its first day is 0) holds a workout that counts. Trailing zero
	// bytes are dropped: equal days are equal bytes.
	Bits []byte `dynamodbav:"bits,omitempty"`
	// Left maps a reason (rules.Reason) to the bitmap of days on which
	// nothing counted and the first workout left out was left out for
	// that reason: the answer to "why was that day not active?".
	Left map[string][]byte `dynamodbav:"left,omitempty"`
}

// Equal reports whether d and o hold the same days and reasons.
func (d *Days) Equal(o *Days) bool {
	if d == nil || o == nil {
		return d == o
	}
	return d.Def == o.Def && bytes.Equal(d.Bits, o.Bits) &&
		maps.EqualFunc(d.Left, o.Left, bytes.Equal)
}

// Get reports whether bit i of bits is set.
func Get(bits []byte, i int) bool {
	return i >= 0 && i/8 < len(bits) && bits[i/8]&(1<<(i%8)) != 0
}

// Set returns bits with bit i set to on, grown or trimmed as needed.
func Set(bits []byte, i int, on bool) []byte {
	if i < 0 {
		return bits
	}
	if on {
		for len(bits) <= i/8 {
			bits = append(bits, 0)
		}
		bits[i/8] |= 1 << (i % 8)
		return bits
	}
	if i/8 < len(bits) {
		bits[i/8] &^= 1 << (i % 8)
	}
	for len(bits) > 0 && bits[len(bits)-1] == 0 {
		bits = bits[:len(bits)-1]
	}
	if len(bits) == 0 {
		return nil
	}
	return bits
}

// Count is how many bits of bits are set.
func Count(bits []byte) int {
	n := 0
	for _, b := range bits {
		n += mathbits.OnesCount8(b)
	}
	return n
}

// Index is the bit of day (a midnight UTC, calendar.ParseDate) in a period
// whose first day is first.
func Index(first, day time.Time) int { return int(dayNumber(day) - dayNumber(first)) }

// DayAt is the day of bit i in a period whose first day is first.
func DayAt(first time.Time, i int) time.Time { return dayOf(dayNumber(first) + int64(i)) }

// Clear forgets what d knows of day i: its bit and its reason.
func (d *Days) Clear(i int) {
	d.Bits = Set(d.Bits, i, false)
	for r, b := range d.Left {
		if b = Set(b, i, false); b == nil {
			delete(d.Left, r)
		} else {
			d.Left[r] = b
		}
	}
	if len(d.Left) == 0 {
		d.Left = nil
	}
}

// SetLeft records that nothing counted on day i and its first workout was
// left out for reason.
func (d *Days) SetLeft(reason string, i int) {
	if d.Left == nil {
		d.Left = map[string][]byte{}
	}
	d.Left[reason] = Set(d.Left[reason], i, true)
}

// LeftCounts is how many days each reason left inactive (nil when none).
func (d *Days) LeftCounts() map[string]int {
	var out map[string]int
	for r, b := range d.Left {
		if n := Count(b); n > 0 {
			if out == nil {
				out = map[string]int{}
			}
			out[r] = n
		}
	}
	return out
}
