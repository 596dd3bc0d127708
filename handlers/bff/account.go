package bff

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/commitcollect/backend/handlers/bff/deletion"
	"github.com/commitcollect/backend/handlers/bff/respond"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/strava"
)

// ProfileStore reads who the user is (the users adapter).
type ProfileStore interface {
	Profile(ctx context.Context, userID string) (model.Profile, error)
}

// MeJSON is the body of GET /v1/me.
type MeJSON struct {
	UserID      string `json:"userId"`
	AthleteID   int64  `json:"athleteId"`
	DisplayName string `json:"displayName"`
	Connected   bool   `json:"connected"`
	// ActivityScope is the activity scope the athlete granted:
	// "activity:read_all" (private activities count too), "activity:read"
	// (private activities are not read and do not count), or empty.
	ActivityScope string `json:"activityScope,omitempty"`
	// Sync is where the import of the athlete's Strava history and the
	// reconciliation of recent activities stand.
	Sync SyncJSON `json:"sync"`
}

func (h *Handler) me(w http.ResponseWriter, r *http.Request, s model.Session, log *slog.Logger, _ string) {
	ctx := r.Context()
	me, _, err := h.readMe(ctx, s.UserID)
	if errors.Is(err, model.ErrNotFound) {
		respond.Error(w, http.StatusNotFound, respond.CodeNotFound, "account not found (deleted?)")
		return
	}
	if err != nil {
		respond.Fail(ctx, w, log, "read me", err)
		return
	}
	respond.JSON(w, http.StatusOK, me)
}

// readMe reads what GET /v1/me and the export say of the user: the
// profile, the Strava connection (nil without one) and the sync state.
// ErrNotFound when the profile is gone.
func (h *Handler) readMe(ctx context.Context, userID string) (MeJSON, *model.StravaConnection, error) {
	p, err := h.profiles.Profile(ctx, userID)
	if err != nil {
		return MeJSON{}, nil, fmt.Errorf("read profile: %w", err)
	}
	me := MeJSON{UserID: p.UserID, AthleteID: p.AthleteID, DisplayName: p.DisplayName}
	c, err := h.connections.StravaConnection(ctx, userID)
	switch {
	case err == nil:
		me.Connected, me.ActivityScope = !c.NeedsReauth && hasActivityRead(c.Scopes), strava.ActivityScope(c.Scopes)
	case errors.Is(err, model.ErrNotFound):
		c = nil
	default:
		return MeJSON{}, nil, fmt.Errorf("read strava connection: %w", err)
	}
	if me.Sync, err = h.syncState(ctx, userID); err != nil {
		return MeJSON{}, nil, fmt.Errorf("read sync state: %w", err)
	}
	return me, c, nil
}

func (h *Handler) models(w http.ResponseWriter, r *http.Request, _ model.Session, _ *slog.Logger, _ string) {
	respond.JSON(w, http.StatusOK, h.cat)
}

// DeletionReport says how far an account deletion got.
type DeletionReport struct {
	// Status is "deleted" when every step finished, "incomplete" otherwise.
	Status    string   `json:"status"`
	Completed []string `json:"completed"`
	// StoppedAt is the step that failed; re-running the deletion resumes
	// safely from the start.
	StoppedAt string               `json:"stoppedAt,omitempty"`
	Error     *respond.ErrorDetail `json:"error,omitempty"`
}

// DeleteAccount deletes everything CommitCollect holds about userID
// (deletion.Deleter.Delete) and reports how far it got, with the error of
// the step that stopped it (nil when done).
func (h *Handler) DeleteAccount(ctx context.Context, userID, sessionID, correlationID string) (DeletionReport, error) {
	r, err := h.deleter.Delete(ctx, userID, sessionID, correlationID)
	rep := DeletionReport{Status: r.Status, Completed: r.Completed, StoppedAt: r.StoppedAt}
	if err == nil {
		return rep, nil
	}
	code, msg := respond.CodeInternal, "the deletion stopped; send DELETE /v1/me again to finish it"
	if errors.Is(err, model.ErrRetryable) {
		code = respond.CodeUnavailable
	}
	if r.StoppedAt == deletion.StepDeauthorize {
		msg = "Strava could not be reached to revoke access; nothing was deleted yet. Send DELETE /v1/me again to retry"
	}
	rep.Error = &respond.ErrorDetail{Code: code, Message: msg}
	return rep, err
}

// deleteMe answers DELETE /v1/me with 202 and the deletion report: finished,
// or where it stopped (the same cookie can re-run it until the very last
// step).
func (h *Handler) deleteMe(w http.ResponseWriter, r *http.Request, s model.Session, log *slog.Logger, corr string) {
	rep, err := h.DeleteAccount(r.Context(), s.UserID, s.SessionID, corr)
	if err != nil {
		log.WarnContext(r.Context(), "account deletion incomplete", "stoppedAt", rep.StoppedAt, "error", err)
	} else {
		h.clearCookie(w, SessionCookie, "/")
	}
	respond.JSON(w, http.StatusAccepted, rep)
}
