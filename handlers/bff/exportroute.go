package bff

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/commitcollect/backend/handlers/bff/export"
	"github.com/commitcollect/backend/handlers/bff/milestones"
	"github.com/commitcollect/backend/handlers/bff/respond"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
)

// GET /v1/me/export gives athletes their data (Strava's API agreement: an
// end user may access the data collected about them through the API), in
// pages built by package export: the first carries the profile, the Strava
// connection without its tokens and the milestones; the pages carry the
// collection's awards, newest first (deleted milestones' too: awards are
// permanent), then the workouts; while more remains, the answer names the next page in
// `Link: <…>; rel="next"` (RFC 8288) and in its body's "next". A page is
// built in memory before its first byte is sent, so a failed read is a
// clean 5xx, never a partial page.

// ExportStore reads the workouts the export holds.
type ExportStore = export.Store

// ExportConnectionJSON is the Strava connection in an export: what was
// granted, never the tokens.
type ExportConnectionJSON struct {
	AthleteID     int64      `json:"athleteId"`
	Scopes        []string   `json:"scopes"`
	GrantedAtUtc  *time.Time `json:"grantedAtUtc,omitempty"`
	NeedsReauth   bool       `json:"needsReauth"`
	ActivityScope string     `json:"activityScope,omitempty"`
}

// exportHead is the first page's object up to the workouts.
type exportHead struct {
	ExportedAtUtc time.Time                  `json:"exportedAtUtc"`
	Profile       MeJSON                     `json:"profile"`
	Connection    *ExportConnectionJSON      `json:"connection"`
	Milestones    []milestones.MilestoneJSON `json:"milestones"`
}

// exportLaterHead is a later page's object up to the workouts.
type exportLaterHead struct {
	ExportedAtUtc time.Time `json:"exportedAtUtc"`
}

func (h *Handler) export(w http.ResponseWriter, r *http.Request, s model.Session, log *slog.Logger, _ string) {
	ctx := r.Context()
	parts := h.exportParts(s.UserID)
	at, err := export.ParseCursor(r.URL.Query(), parts)
	if err != nil {
		respond.Validation(w, &model.ValidationError{Fields: []model.FieldError{{Field: "cursor", Message: err.Error()}}})
		return
	}
	var head any = exportLaterHead{ExportedAtUtc: h.now().UTC()}
	if at == (export.At{}) {
		head, err = h.exportHead(ctx, s.UserID)
	} else if _, err = h.profiles.Profile(ctx, s.UserID); err != nil {
		err = fmt.Errorf("read profile: %w", err)
	}
	if errors.Is(err, model.ErrNotFound) {
		respond.Error(w, http.StatusNotFound, respond.CodeNotFound, "account not found (deleted?)")
		return
	}
	if err != nil {
		respond.Fail(ctx, w, log, "export", err)
		return
	}
	next := func(at export.At) string {
		return strings.TrimRight(h.cfg.PublicURL, "/") + "/v1/me/export?cursor=" + export.Cursor(parts, at)
	}
	page, err := export.Build(ctx, parts, head, at, h.exportPageBytes, next)
	if err != nil {
		respond.Fail(ctx, w, log, "export", err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Disposition", `attachment; filename="commitcollect-export.json"`)
	if page.Next != "" {
		w.Header().Set("Link", "<"+page.Next+`>; rel="next"`)
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(page.Body.Bytes())
	log.InfoContext(ctx, "export page served", "items", page.Count, "bytes", page.Body.Len(), "more", page.Next != "")
}

// exportHead reads the profile, the connection and the milestones.
func (h *Handler) exportHead(ctx context.Context, userID string) (exportHead, error) {
	me, c, err := h.readMe(ctx, userID)
	if err != nil {
		return exportHead{}, err
	}
	head := exportHead{ExportedAtUtc: h.now().UTC(), Profile: me, Milestones: []milestones.MilestoneJSON{}}
	if c != nil {
		head.Connection = &ExportConnectionJSON{AthleteID: c.AthleteID, Scopes: c.Scopes, GrantedAtUtc: c.GrantedAtUtc,
			NeedsReauth: c.NeedsReauth, ActivityScope: me.ActivityScope}
	}
	ms, _, err := h.readMilestones.MilestonesWithAwards(ctx, userID, "")
	if err != nil {
		return exportHead{}, err
	}
	at, err := milestones.AtFor(ctx, h.zones, userID, h.now())
	if err != nil {
		return exportHead{}, err
	}
	for _, m := range ms {
		j, err := milestones.Show(ctx, h.periods, userID, m, at)
		if err != nil {
			return exportHead{}, err
		}
		head.Milestones = append(head.Milestones, j)
	}
	return head, nil
}

// exportParts are the parts of the user's export: the collection's awards
// (newest first, cursor a1:{collection key}), then the workouts.
func (h *Handler) exportParts(userID string) []export.Part {
	awards := export.Part{Name: "awards", CountName: "awardCount", Prefix: "a1:",
		Valid: func(key string) bool {
			_, _, _, ok := keys.ParseCollectedAwardSK(key)
			return ok
		},
		Each: func(ctx context.Context, after string, fn func(string, any) (bool, error)) error {
			for {
				page, next, err := h.readAwards.CollectedAwards(ctx, userID, after, exportAwardsRead)
				if err != nil {
					return err
				}
				for _, a := range page {
					if more, err := fn(a.SK, milestones.Award(a)); err != nil || !more {
						return err
					}
				}
				if after = next; next == "" {
					return nil
				}
			}
		}}
	return []export.Part{awards, export.Workouts(h.exports, userID)}
}

// exportAwardsRead is how many collection entries one read of the
// export's awards takes.
const exportAwardsRead = 1000
