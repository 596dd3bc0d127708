package bff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
)

// GET /v1/me/export gives athletes their data (Strava's API agreement: an
// end user may access the data collected about them through the API): the
// profile, the Strava connection without its tokens, milestones with their
// awards, and every workout as stored. The workouts are streamed page by
// page (exportPageSize items per query), so a history of any size costs
// bounded memory. Should a read fail once the answer has begun, the body
// is cut short (invalid JSON, never a silently partial export) and the
// failure is logged.

// exportPageSize bounds the workouts one query of the export reads.
const exportPageSize = 500

// ExportStore reads what the export holds.
type ExportStore interface {
	// EachUserItem calls fn with every item of the user's partition under
	// prefix, as stored, page by page.
	EachUserItem(ctx context.Context, userID, prefix string, pageSize int32, fn func(map[string]any) error) error
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

// exportHead is the export's object up to the workouts.
type exportHead struct {
	ExportedAtUtc time.Time             `json:"exportedAtUtc"`
	Profile       MeJSON                `json:"profile"`
	Connection    *ExportConnectionJSON `json:"connection"`
	Milestones    []MilestoneJSON       `json:"milestones"`
}

func (h *Handler) export(w http.ResponseWriter, r *http.Request, s model.Session, log *slog.Logger, _ string) {
	ctx := r.Context()
	head, err := h.exportHead(ctx, s.UserID)
	if errors.Is(err, model.ErrNotFound) {
		writeError(w, http.StatusNotFound, CodeNotFound, "account not found (deleted?)")
		return
	}
	if err != nil {
		h.fail(ctx, w, log, "export", err)
		return
	}
	raw, err := json.Marshal(head)
	if err != nil {
		h.fail(ctx, w, log, "export: encode", err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Disposition", `attachment; filename="commitcollect-export.json"`)
	w.WriteHeader(http.StatusOK)
	// The head's closing brace is replaced by the streamed workouts.
	_, _ = w.Write(raw[:len(raw)-1])
	_, _ = w.Write([]byte(`,"workouts":[`))
	n := 0
	err = h.exports.EachUserItem(ctx, s.UserID, keys.PrefixWorkoutStrava, exportPageSize, func(item map[string]any) error {
		b, err := json.Marshal(item)
		if err != nil {
			return fmt.Errorf("encode workout: %w", err)
		}
		if n > 0 {
			_, _ = w.Write([]byte{','})
		}
		n++
		_, werr := w.Write(b)
		return werr
	})
	if err != nil {
		log.ErrorContext(ctx, "export cut short", "workoutsWritten", n, "error", err)
		return // the body stays invalid JSON: the client sees the failure
	}
	_, _ = fmt.Fprintf(w, `],"workoutCount":%d}`+"\n", n)
	log.InfoContext(ctx, "export served", "workouts", n)
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
