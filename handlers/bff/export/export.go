// Package export builds the pages of an athlete's data export (GET
// /v1/me/export, served by handlers/bff): the workouts in key order after a
// cursor, as many as fit a page whose body, JSON-escaped as Lambda sends
// it, stays within PageBytes. Tombstones (activities deleted or hidden on
// Strava) are left out: they keep no content, only the ids and the fetch
// order the pipeline needs (store.MarkWorkoutHidden). The cursor names the last workout given: keys never
// change, so a workout stored when the export began is given exactly once,
// whatever arrives meanwhile.
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

// Page is one built page.
type Page struct {
	Body bytes.Buffer
	// Count is how many workouts the page holds.
	Count int
	// Next is the next page's URL; empty on the last page.
	Next string
}

// Build builds the page of the user's workouts after activity after: head
// (a JSON object) with "workouts", "workoutCount" and, while more remains,
// "next" (nextURL of the last workout given) added, within limit bytes as
// Lambda sends them.
func Build(ctx context.Context, st Store, userID string, head any, after int64, limit int, nextURL func(after int64) string) (*Page, error) {
	raw, err := json.Marshal(head)
	if err != nil || len(raw) < 2 || raw[len(raw)-1] != '}' {
		return nil, fmt.Errorf("encode export head: %w (%d bytes)", err, len(raw))
	}
	p := &Page{}
	p.Body.Write(raw[:len(raw)-1]) // the head's closing brace comes after the workouts
	if len(raw) > 2 {
		p.Body.WriteByte(',')
	}
	p.Body.WriteString(`"workouts":[`)
	size := EnvelopeSize(p.Body.Bytes())
	// Room kept for the page's end: the count and the next page's URL.
	tail := 2 * (len(`],"workoutCount":,"next":""}`) + 20 + len(nextURL(1<<62)) + 1)
	last, full := int64(0), false
	err = st.EachWorkout(ctx, userID, after, readSize, func(wo model.Workout) (bool, error) {
		if wo.IsDeleted {
			last = wo.ActivityID // a tombstone is not a workout: skipped, but the cursor moves on
			return true, nil
		}
		b, err := json.Marshal(Workout(wo))
		if err != nil {
			return false, fmt.Errorf("encode workout %d: %w", wo.ActivityID, err)
		}
		cost := 1 + EnvelopeSize(b)
		if size+cost+tail > limit {
			full = true
			return false, nil
		}
		if p.Count > 0 {
			p.Body.WriteByte(',')
		}
		p.Body.Write(b)
		size += cost
		p.Count++
		last = wo.ActivityID
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("read workouts of %s: %w", userID, err)
	}
	fmt.Fprintf(&p.Body, `],"workoutCount":%d`, p.Count)
	if full {
		p.Next = nextURL(last)
		nextJSON, _ := json.Marshal(p.Next)
		fmt.Fprintf(&p.Body, `,"next":%s`, nextJSON)
	}
	p.Body.WriteString("}\n")
	return p, nil
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

// cursorPrefix versions the cursor's text.
const cursorPrefix = "w1:"

// Cursor is the opaque cursor of the page after activity after.
func Cursor(after int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + strconv.FormatInt(after, 10)))
}

// ParseCursor reads the cursor query parameter: 0 without one, the
// activity the previous page ended at otherwise; an error saying what is
// wrong with one this API never gave.
func ParseCursor(q url.Values) (int64, error) {
	if len(q["cursor"]) > 1 {
		return 0, errors.New("is given more than once")
	}
	c := q.Get("cursor")
	if c == "" {
		return 0, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(c)
	id, perr := strconv.ParseInt(strings.TrimPrefix(string(raw), cursorPrefix), 10, 64)
	if err != nil || !strings.HasPrefix(string(raw), cursorPrefix) || perr != nil || id <= 0 {
		return 0, errors.New("is not a cursor this API gave (follow the Link header's next page)")
	}
	return id, nil
}
