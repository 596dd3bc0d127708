package bff

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/commitcollect/backend/model"
)

// GET /v1/me/export gives athletes their data (Strava's API agreement: an
// end user may access the data collected about them through the API): the
// profile, the Strava connection without its tokens, milestones with their
// awards, and every workout (ExportWorkoutJSON; tombstones of activities
// deleted or hidden on Strava are left out). A history of any size is
// paged so every answer fits Lambda's 6 MB: each answer's body is at most
// ExportPageBytes; while more remains, the answer names the next page in
// `Link: <…>; rel="next"` (RFC 8288) and in its body's "next". The first
// page carries the profile, connection and milestones; later pages carry
// workouts only. The cursor names the last workout given (by key): keys
// never change, so a workout stored when the export began is given exactly
// once, whatever arrives meanwhile. A page is built in memory before its
// first byte is sent, so a failed read is a clean 5xx, never a partial page.

// ExportPageBytes bounds an export answer's body as Lambda sends it: the
// body travels JSON-escaped inside the invoke's answer (at most 6 MB), so a
// page counts each byte at its escaped size (envelopeSize), and the body
// itself is never larger.
const ExportPageBytes = 4_000_000

// exportReadSize is how many workouts one query of the export reads.
const exportReadSize = 1000

// ExportStore reads what the export holds beyond the profile and
// milestones.
type ExportStore interface {
	// EachWorkout calls fn with the user's stored workouts (tombstones
	// included) in key order, after the workout of activity after (0: from
	// the first), until fn answers false or none is left.
	EachWorkout(ctx context.Context, userID string, after int64, pageSize int32, fn func(model.Workout) (bool, error)) error
}

// ExportConnectionJSON is the Strava connection in an export: what was
// granted, never the tokens.
type ExportConnectionJSON struct {
	AthleteID     int64      `json:"athleteId"`
	Scopes        []string   `json:"scopes"`
	GrantedAtUtc  *time.Time `json:"grantedAtUtc,omitempty"`
	NeedsReauth   bool       `json:"needsReauth"`
	ActivityScope string     `json:"activityScope,omitempty"`
}

// ExportWorkoutJSON is one workout in an export: what Strava said of the
// activity, and when CommitCollect stored it.
type ExportWorkoutJSON struct {
	ActivityID         int64     `json:"activityId"`
	Name               string    `json:"name,omitempty"`
	SportType          string    `json:"sportType"`
	StartDateUtc       time.Time `json:"startDateUtc"`
	DistanceMeters     float64   `json:"distanceMeters"`
	MovingTimeSeconds  int64     `json:"movingTimeSeconds"`
	TotalElevationGain float64   `json:"totalElevationGain"`
	CreatedAtUtc       time.Time `json:"createdAtUtc"`
	UpdatedAtUtc       time.Time `json:"updatedAtUtc"`
}

// exportHead is the first page's object up to the workouts.
type exportHead struct {
	ExportedAtUtc time.Time             `json:"exportedAtUtc"`
	Profile       MeJSON                `json:"profile"`
	Connection    *ExportConnectionJSON `json:"connection"`
	Milestones    []MilestoneJSON       `json:"milestones"`
}

// exportLaterHead is a later page's object up to the workouts.
type exportLaterHead struct {
	ExportedAtUtc time.Time `json:"exportedAtUtc"`
}

func (h *Handler) export(w http.ResponseWriter, r *http.Request, s model.Session, log *slog.Logger, _ string) {
	ctx := r.Context()
	after, err := parseExportCursor(r.URL.Query())
	if err != nil {
		writeValidation(w, &model.ValidationError{Fields: []model.FieldError{{Field: "cursor", Message: err.Error()}}})
		return
	}
	var head any = exportLaterHead{ExportedAtUtc: h.now().UTC()}
	if after == 0 {
		head, err = h.exportHead(ctx, s.UserID)
	} else if _, err = h.profiles.Profile(ctx, s.UserID); err != nil {
		err = fmt.Errorf("read profile: %w", err)
	}
	if errors.Is(err, model.ErrNotFound) {
		writeError(w, http.StatusNotFound, CodeNotFound, "account not found (deleted?)")
		return
	}
	if err != nil {
		h.fail(ctx, w, log, "export", err)
		return
	}
	page, err := h.exportPage(ctx, s.UserID, head, after)
	if err != nil {
		h.fail(ctx, w, log, "export", err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Disposition", `attachment; filename="commitcollect-export.json"`)
	if page.next != "" {
		w.Header().Set("Link", "<"+page.next+`>; rel="next"`)
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(page.body.Bytes())
	log.InfoContext(ctx, "export page served", "workouts", page.count, "bytes", page.body.Len(), "more", page.next != "")
}

// exportPageOut is one built page: its body, how many workouts it holds,
// and the next page's URL (empty on the last).
type exportPageOut struct {
	body  bytes.Buffer
	count int
	next  string
}

// exportPage builds the page of the user's workouts after activity after,
// under head, as large as ExportPageBytes allows.
func (h *Handler) exportPage(ctx context.Context, userID string, head any, after int64) (*exportPageOut, error) {
	raw, err := json.Marshal(head)
	if err != nil {
		return nil, fmt.Errorf("encode export head: %w", err)
	}
	p := &exportPageOut{}
	p.body.Write(raw[:len(raw)-1]) // the head's closing brace comes after the workouts
	p.body.WriteString(`,"workouts":[`)
	size := envelopeSize(p.body.Bytes())
	// Room kept for the page's end: the count and the next page's URL.
	tail := 2 * (len(`],"workoutCount":,"next":""}`) + 20 + len(h.exportURL(1<<62)) + 1)
	last, full := int64(0), false
	err = h.exports.EachWorkout(ctx, userID, after, exportReadSize, func(wo model.Workout) (bool, error) {
		if wo.IsDeleted {
			last = wo.ActivityID // a tombstone is not a workout: skipped, but the cursor moves on
			return true, nil
		}
		b, err := json.Marshal(exportWorkout(wo))
		if err != nil {
			return false, fmt.Errorf("encode workout %d: %w", wo.ActivityID, err)
		}
		cost := 1 + envelopeSize(b)
		if size+cost+tail > h.exportPageBytes {
			full = true
			return false, nil
		}
		size += cost
		if p.count > 0 {
			p.body.WriteByte(',')
		}
		p.body.Write(b)
		p.count++
		last = wo.ActivityID
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("read workouts: %w", err)
	}
	fmt.Fprintf(&p.body, `],"workoutCount":%d`, p.count)
	if full {
		p.next = h.exportURL(last)
		nextJSON, _ := json.Marshal(p.next)
		fmt.Fprintf(&p.body, `,"next":%s`, nextJSON)
	}
	p.body.WriteString("}\n")
	return p, nil
}

// envelopeSize is how many bytes b takes once JSON-escaped again inside
// Lambda's answer (encoding/json: a quote or a backslash doubles, <, > and &
// become \u003c-style escapes).
func envelopeSize(b []byte) int {
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

func exportWorkout(w model.Workout) ExportWorkoutJSON {
	return ExportWorkoutJSON{ActivityID: w.ActivityID, Name: w.Name, SportType: w.SportType, StartDateUtc: w.StartDateUtc.UTC(),
		DistanceMeters: w.DistanceMeters, MovingTimeSeconds: w.MovingTimeSeconds, TotalElevationGain: w.TotalElevationGain,
		CreatedAtUtc: w.CreatedAtUtc.UTC(), UpdatedAtUtc: w.UpdatedAtUtc.UTC()}
}

// exportCursorPrefix versions the cursor's text.
const exportCursorPrefix = "w1:"

// exportURL is the absolute URL of the export page after activity after.
func (h *Handler) exportURL(after int64) string {
	c := base64.RawURLEncoding.EncodeToString([]byte(exportCursorPrefix + strconv.FormatInt(after, 10)))
	return strings.TrimRight(h.cfg.PublicURL, "/") + "/v1/me/export?cursor=" + c
}

// parseExportCursor reads the cursor query parameter: 0 without one, the
// activity the previous page ended at otherwise.
func parseExportCursor(q url.Values) (int64, error) {
	if len(q["cursor"]) > 1 {
		return 0, errors.New("is given more than once")
	}
	c := q.Get("cursor")
	if c == "" {
		return 0, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(c)
	id, perr := strconv.ParseInt(strings.TrimPrefix(string(raw), exportCursorPrefix), 10, 64)
	if err != nil || !strings.HasPrefix(string(raw), exportCursorPrefix) || perr != nil || id <= 0 {
		return 0, errors.New("is not a cursor this API gave (follow the Link header's next page)")
	}
	return id, nil
}

// exportHead reads the profile, the connection and the milestones.
func (h *Handler) exportHead(ctx context.Context, userID string) (exportHead, error) {
	me, c, err := h.readMe(ctx, userID)
	if err != nil {
		return exportHead{}, err
	}
	head := exportHead{ExportedAtUtc: h.now().UTC(), Profile: me, Milestones: []MilestoneJSON{}}
	if c != nil {
		head.Connection = &ExportConnectionJSON{AthleteID: c.AthleteID, Scopes: c.Scopes, GrantedAtUtc: c.GrantedAtUtc,
			NeedsReauth: c.NeedsReauth, ActivityScope: me.ActivityScope}
	}
	ms, _, err := h.milestones.MilestonesWithAwards(ctx, userID, "")
	if err != nil {
		return exportHead{}, err
	}
	for _, m := range ms {
		head.Milestones = append(head.Milestones, milestoneJSON(m))
	}
	return head, nil
}
