// Package export builds the pages of an athlete's data export (GET
// /v1/me/export, served by handlers/bff): its parts (the collection's
// awards, then the workouts), each in key order after a cursor, as many
// items as fit a page whose body, JSON-escaped as Lambda sends it, stays
// within PageBytes. Every page carries every part's array, empty where it
// does not reach; a client concatenates each array across pages. Tombstones (activities deleted or hidden on Strava) are
// left out: they keep no content, only the ids and the fetch order the
// pipeline needs (store.MarkWorkoutHidden). The cursor names the part and
// the last item given: keys never change, so an item stored when the
// export began is given exactly once, whatever arrives meanwhile, and a
// collection of 50,000 awards takes pages like any history.
package export

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/rules"
)

// PageBytes bounds a page's body as Lambda sends it: the body travels
// JSON-escaped inside the invoke's answer (at most 6 MB), so a page counts
// each byte at its escaped size (EnvelopeSize), and the body itself is
// never larger.
const PageBytes = 4_000_000

// readSize is how many workouts one query reads.
const readSize = 1000

// Store reads the user's workouts.
type Store interface {
	// EachWorkout calls fn with the user's stored workouts (tombstones
	// included) in key order, after the workout of activity after (0: from
	// the first), until fn answers false or none is left.
	EachWorkout(ctx context.Context, userID string, after int64, pageSize int32, fn func(model.Workout) (bool, error)) error
}

// WorkoutJSON is one workout in an export: what Strava said of the
// activity, and when CommitCollect stored it.
type WorkoutJSON struct {
	ActivityID   int64     `json:"activityId"`
	Name         string    `json:"name,omitempty"`
	SportType    string    `json:"sportType"`
	StartDateUtc time.Time `json:"startDateUtc"`
	// StartDateLocal is the wall clock where the activity was recorded
	// (no zone) and Timezone Strava's name of that zone; absent on
	// workouts stored before they were kept.
	StartDateLocal     string  `json:"startDateLocal,omitempty"`
	Timezone           string  `json:"timezone,omitempty"`
	DistanceMeters     float64 `json:"distanceMeters"`
	MovingTimeSeconds  int64   `json:"movingTimeSeconds"`
	TotalElevationGain float64 `json:"totalElevationGain"`
	// ElapsedTimeSeconds and Flags (Strava's manual, trainer and commute
	// marks) are absent on workouts stored before they were kept.
	ElapsedTimeSeconds int64        `json:"elapsedTimeSeconds,omitempty"`
	Flags              *rules.Flags `json:"flags,omitempty"`
	CreatedAtUtc       time.Time    `json:"createdAtUtc"`
	UpdatedAtUtc       time.Time    `json:"updatedAtUtc"`
}

// Workout is w as an export gives it.
func Workout(w model.Workout) WorkoutJSON {
	return WorkoutJSON{ActivityID: w.ActivityID, Name: w.Name, SportType: w.SportType, StartDateUtc: w.StartDateUtc.UTC(),
		StartDateLocal: w.StartDateLocal, Timezone: w.Timezone, DistanceMeters: w.DistanceMeters, MovingTimeSeconds: w.MovingTimeSeconds, TotalElevationGain: w.TotalElevationGain,
		ElapsedTimeSeconds: w.ElapsedTimeSeconds, Flags: w.Flags, CreatedAtUtc: w.CreatedAtUtc.UTC(), UpdatedAtUtc: w.UpdatedAtUtc.UTC()}
}

// Part is one array of the export, read in key order after a cursor.
type Part struct {
	// Name is the array's field in a page, CountName the field of how
	// many items the page holds of it.
	Name, CountName string
	// Prefix versions the cursor of a page that resumes in this part.
	Prefix string
	// Valid says whether key, not empty, is a key of this part.
	Valid func(key string) bool
	// Each calls fn with the part's items in key order after the key after
	// ("": from its first) until fn answers false or none is left: each
	// item's key, and its JSON value, or nil for an item left out whose
	// key the cursor still passes (a tombstone).
	Each func(ctx context.Context, after string, fn func(key string, item any) (bool, error)) error
}

// At is where a page begins: in part Part, after its key After ("": from
// the part's first item).
type At struct {
	Part  int
	After string
}

// Page is one built page.
type Page struct {
	Body bytes.Buffer
	// Count is how many items the page holds, of every part.
	Count int
	// Next is the next page's URL; empty on the last page.
	Next string
}

// Build builds the page of parts that begins at at: head (a JSON object)
// with every part's array and its count (empty before at's part and past
// where the page fills), and while more remains "next" (nextURL of where
// the following page begins), within limit bytes as Lambda sends them.
func Build(ctx context.Context, parts []Part, head any, at At, limit int, nextURL func(At) string) (*Page, error) {
	raw, err := json.Marshal(head)
	if err != nil || len(raw) < 2 || raw[len(raw)-1] != '}' {
		return nil, fmt.Errorf("encode export head: %w (%d bytes)", err, len(raw))
	}
	p := &Page{}
	p.Body.Write(raw[:len(raw)-1]) // the head's closing brace comes after the parts
	// Room kept for the page's end: each part's brackets and count, and
	// the next page's URL.
	tail := 2 * (len(`,"next":""}`) + len(nextURL(At{After: strings.Repeat("x", 256)})))
	for _, part := range parts {
		tail += 2 * (len(`,"":[],"":`) + len(part.Name) + len(part.CountName) + 20)
	}
	size, sep := EnvelopeSize(p.Body.Bytes()), len(raw) > 2
	next := At{}
	for i, part := range parts {
		if sep {
			p.Body.WriteByte(',')
		}
		sep = true
		open := p.Body.Len()
		fmt.Fprintf(&p.Body, `%q:[`, part.Name)
		size += EnvelopeSize(p.Body.Bytes()[open:])
		n, last, full := 0, "", false
		if i >= at.Part && p.Next == "" { // every page has every array; those it does not reach are empty
			after := ""
			if i == at.Part {
				after = at.After
			}
			if n, last, full, err = fill(ctx, p, part, after, &size, limit-tail); err != nil {
				return nil, fmt.Errorf("read the export's %s: %w", part.Name, err)
			}
		}
		fmt.Fprintf(&p.Body, `],%q:%d`, part.CountName, n)
		if full {
			if p.Count == 0 {
				return nil, fmt.Errorf("read the export's %s: the page's head and the item after %q outgrow %d bytes", part.Name, last, limit)
			}
			next = At{Part: i, After: last}
			p.Next = nextURL(next)
		}
	}
	if p.Next != "" {
		nextJSON, _ := json.Marshal(p.Next)
		fmt.Fprintf(&p.Body, `,"next":%s`, nextJSON)
	}
	p.Body.WriteString("}\n")
	return p, nil
}

// fill adds part's items after after to p while they fit within limit
// (size counts what p holds, escaped): how many it added, the key the
// page's cursor stops at, and whether the page is full.
func fill(ctx context.Context, p *Page, part Part, after string, size *int, limit int) (n int, last string, full bool, err error) {
	last = after
	err = part.Each(ctx, after, func(key string, item any) (bool, error) {
		if item == nil {
			last = key // left out, but the cursor moves on
			return true, nil
		}
		b, err := json.Marshal(item)
		if err != nil {
			return false, fmt.Errorf("encode %s %s: %w", part.Name, key, err)
		}
		cost := 1 + EnvelopeSize(b)
		if *size+cost > limit {
			full = true
			return false, nil
		}
		if n > 0 {
			p.Body.WriteByte(',')
		}
		p.Body.Write(b)
		*size += cost
		n, last = n+1, key
		p.Count++
		return true, nil
	})
	return n, last, full, err
}

// Workouts is the export's part of the user's workouts (st), by activity
// id; its cursor is w1:{activity id}.
func Workouts(st Store, userID string) Part {
	return Part{Name: "workouts", CountName: "workoutCount", Prefix: "w1:",
		Valid: func(key string) bool {
			id, err := strconv.ParseInt(key, 10, 64)
			return err == nil && id > 0
		},
		Each: func(ctx context.Context, after string, fn func(string, any) (bool, error)) error {
			from, _ := strconv.ParseInt(after, 10, 64) // "": from the first
			return st.EachWorkout(ctx, userID, from, readSize, func(wo model.Workout) (bool, error) {
				key := strconv.FormatInt(wo.ActivityID, 10)
				if wo.IsDeleted {
					return fn(key, nil)
				}
				return fn(key, Workout(wo))
			})
		}}
}

// EnvelopeSize is how many bytes b takes once JSON-escaped again inside
// Lambda's answer (encoding/json: a quote or a backslash doubles; <, > and
// & become six-byte \u escapes).
func EnvelopeSize(b []byte) int {
	n := len(b)
	for _, c := range b {
		switch c {
		case '"', '\\':
			n++
		case '<', '>', '&':
			n += 5
		}
	}
	return n
}

// Cursor is the opaque cursor of the page that begins at at.
func Cursor(parts []Part, at At) string {
	return base64.RawURLEncoding.EncodeToString([]byte(parts[at.Part].Prefix + at.After))
}

// ParseCursor reads the cursor query parameter: the first page without
// one, where the previous page ended otherwise; an error saying what is
// wrong with one this API never gave.
func ParseCursor(q url.Values, parts []Part) (At, error) {
	if len(q["cursor"]) > 1 {
		return At{}, errors.New("is given more than once")
	}
	c := q.Get("cursor")
	if c == "" {
		return At{}, nil
	}
	bad := errors.New("is not a cursor this API gave (follow the Link header's next page)")
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return At{}, bad
	}
	for i, part := range parts {
		if key, ok := strings.CutPrefix(string(raw), part.Prefix); ok {
			// A part is begun from its start only after the parts before it.
			if (key == "" && i == 0) || (key != "" && !part.Valid(key)) {
				return At{}, bad
			}
			return At{Part: i, After: key}, nil
		}
	}
	return At{}, bad
}
