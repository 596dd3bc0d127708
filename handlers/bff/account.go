package bff

// Account deletion runs these steps, each idempotent, and can be re-run with
// the same cookie after a stop at any of them: deauthorize (Strava,
// refreshing an expired token first; already revoked counts as done; if
// Strava is unreachable nothing is deleted) → guard (GUARD#USER#{id} marked
// deleted, kept 90 days: from now on every writer in flight, the worker's
// workout writes, the sync state and milestone creation, checks it
// after its write and removes what it wrote, so nothing written for the user
// outlives the deletion) → connection (connection, then the owner mapping
// only if it still points at this user) → user_data (workouts, milestones,
// awards, everything else in USER#{id}, batches of 25) → parked (the user's
// PARKED#WORKER / PARKED#PROJECTOR records, found by userId, or by athleteId
// when they name no user: a filtered Query of those small partitions) →
// audit (ACCOUNT_DELETED; the audit trail keeps its 90-day TTL) → profile
// (plus a final sweep of the partition) → sessions (the caller's own last,
// pointer first).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/store"
)

// ProfileStore reads who the user is: the profile and the Strava connection.
type ProfileStore interface {
	Profile(ctx context.Context, userID string) (model.Profile, error)
	StravaConnection(ctx context.Context, userID string) (*model.StravaConnection, error)
}

// DeletionStore is what account deletion's steps remove, and its audit.
type DeletionStore interface {
	MarkUserDeleted(ctx context.Context, userID string, now time.Time) error
	Delete(ctx context.Context, table string, k model.Key) error
	Tables() store.Tables
	DeleteAthleteOwnerOf(ctx context.Context, athleteID int64, userID string) error
	DeleteUserItems(ctx context.Context, userID, prefix string, skip func(model.ParsedKey) bool) (int, error)
	DeleteUserParked(ctx context.Context, userID string, athleteID int64) (int, error)
	DeleteUserSessions(ctx context.Context, userID, keep string) error
	DeleteSessionPointerFirst(ctx context.Context, userID, sessionID string) error
	Audit(ctx context.Context, log *slog.Logger, e *model.AuditEntry)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// MeJSON is the body of GET /v1/me.
type MeJSON struct {
	UserID      string `json:"userId"`
	AthleteID   int64  `json:"athleteId"`
	DisplayName string `json:"displayName"`
	Connected   bool   `json:"connected"`
	// Sync is where the import of the athlete's Strava history and the
	// reconciliation of recent activities stand.
	Sync SyncJSON `json:"sync"`
}

func (h *Handler) me(w http.ResponseWriter, r *http.Request, s model.Session, log *slog.Logger, _ string) {
	ctx := r.Context()
	p, err := h.profiles.Profile(ctx, s.UserID)
	if errors.Is(err, model.ErrNotFound) {
		writeError(w, http.StatusNotFound, CodeNotFound, "account not found (deleted?)")
		return
	}
	if err != nil {
		h.fail(ctx, w, log, "read profile", err)
		return
	}
	connected := false
	c, err := h.profiles.StravaConnection(ctx, s.UserID)
	switch {
	case err == nil:
		connected = !c.NeedsReauth && hasActivityRead(c.Scopes)
	case !errors.Is(err, model.ErrNotFound):
		h.fail(ctx, w, log, "read strava connection", err)
		return
	}
	sync, err := h.syncState(ctx, s.UserID)
	if err != nil {
		h.fail(ctx, w, log, "read sync state", err)
		return
	}
	writeJSON(w, http.StatusOK, MeJSON{UserID: p.UserID, AthleteID: p.AthleteID, DisplayName: p.DisplayName, Connected: connected, Sync: sync})
}

func (h *Handler) models(w http.ResponseWriter, r *http.Request, _ model.Session, _ *slog.Logger, _ string) {
	writeJSON(w, http.StatusOK, h.cat)
}

// The steps of account deletion, in order. Each is idempotent; the order
// keeps the deletion re-runnable after a stop at any point: Strava access is
// revoked while the tokens still exist, the user guard is marked deleted
// before any data goes (from then on every writer in flight removes what it
// writes: the worker's workout writes, the sync state, milestones),
// ingestion is cut off (connection, then the athlete mapping)
// before the data goes, the user's parked records go with the data, the
// profile goes after the data, and the sessions (the caller's own last,
// pointer first) go at the very end so the same cookie can re-run a deletion
// that stopped.
const (
	StepDeauthorize = "deauthorize"
	StepGuard       = "guard"
	StepConnection  = "connection"
	StepUserData    = "user_data"
	StepParked      = "parked"
	StepAudit       = "audit"
	StepProfile     = "profile"
	StepSessions    = "sessions"
)

// DeletionSteps lists the account-deletion steps in the order they run.
var DeletionSteps = []string{StepDeauthorize, StepGuard, StepConnection, StepUserData, StepParked, StepAudit, StepProfile, StepSessions}

// DeletionReport says how far an account deletion got.
type DeletionReport struct {
	// Status is "deleted" when every step finished, "incomplete" otherwise.
	Status    string   `json:"status"`
	Completed []string `json:"completed"`
	// StoppedAt is the step that failed; re-running the deletion resumes
	// safely from the start.
	StoppedAt string       `json:"stoppedAt,omitempty"`
	Error     *ErrorDetail `json:"error,omitempty"`
}

// DeleteAccount deletes everything CommitCollect holds about userID: it
// revokes Strava access, marks the user deleted (the user guard: a write in
// flight that lands afterwards removes itself, so the deletion is final),
// then deletes the Strava connection, the athlete mapping (only if it still
// points at userID), workouts, milestones, awards and any other item of the
// user's partition, the user's parked records, writes an ACCOUNT_DELETED
// audit entry (the audit trail itself is kept for its 90-day TTL), deletes
// the profile, and finally every session (sessionID, the caller's own, last).
// It never touches another user's items. It is idempotent: re-running after a
// stop at any step finishes the job. It returns the report and the error of
// the step that stopped it (nil when done).
func (h *Handler) DeleteAccount(ctx context.Context, userID, sessionID, correlationID string) (DeletionReport, error) {
	d := &deletion{h: h, log: h.log.With("userId", userID, "correlationId", correlationID),
		userID: userID, sessionID: sessionID, correlationID: correlationID}
	rep := DeletionReport{Completed: []string{}}
	if p, err := h.profiles.Profile(ctx, userID); err == nil {
		d.athleteID = p.AthleteID
	} else if !errors.Is(err, model.ErrNotFound) {
		return h.stopped(rep, StepDeauthorize, err)
	}
	for _, s := range d.steps() {
		if err := s.run(ctx); err != nil {
			d.log.WarnContext(ctx, "account deletion stopped", "step", s.name, "error", err)
			return h.stopped(rep, s.name, err)
		}
		if h.afterStep != nil {
			if err := h.afterStep(s.name); err != nil {
				return h.stopped(rep, s.name, err)
			}
		}
		rep.Completed = append(rep.Completed, s.name)
	}
	rep.Status = "deleted"
	d.log.InfoContext(ctx, "account deleted")
	return rep, nil
}

// deletion is one run of an account deletion: its steps in order, each
// safe to run again.
type deletion struct {
	h                                *Handler
	log                              *slog.Logger
	userID, sessionID, correlationID string
	// athleteID is the Strava athlete of the profile, or of the connection
	// when the profile is gone (0: neither is left).
	athleteID int64
}

type deletionStep struct {
	name string
	run  func(context.Context) error
}

func (d *deletion) steps() []deletionStep {
	return []deletionStep{
		{StepDeauthorize, d.deauthorize},
		{StepGuard, func(ctx context.Context) error { return d.h.deletions.MarkUserDeleted(ctx, d.userID, d.h.now()) }},
		{StepConnection, d.connection},
		{StepUserData, func(ctx context.Context) error {
			_, err := d.h.deletions.DeleteUserItems(ctx, d.userID, "", func(p model.ParsedKey) bool {
				return p.Kind == model.KindProfile || p.Kind == model.KindUserSession
			})
			return err
		}},
		{StepParked, func(ctx context.Context) error {
			_, err := d.h.deletions.DeleteUserParked(ctx, d.userID, d.athleteID)
			return err
		}},
		{StepAudit, func(ctx context.Context) error {
			d.h.deletions.Audit(ctx, d.log, model.NewAuditEntry(model.UserPK(d.userID), d.userID, model.AuditAccountDeleted, d.correlationID,
				model.NewID(), d.h.now().UTC(), map[string]string{"athleteId": itoa(d.athleteID)}))
			return nil
		}},
		{StepProfile, func(ctx context.Context) error {
			// Also sweeps anything written since the data step (a worker in flight).
			_, err := d.h.deletions.DeleteUserItems(ctx, d.userID, "", func(p model.ParsedKey) bool { return p.Kind == model.KindUserSession })
			return err
		}},
		{StepSessions, d.sessions},
	}
}

// deauthorize revokes the grant at Strava, if a connection is left.
func (d *deletion) deauthorize(ctx context.Context) error {
	c, err := d.h.profiles.StravaConnection(ctx, d.userID)
	if errors.Is(err, model.ErrNotFound) {
		return nil // already removed (a re-run, or Strava deauthorized us)
	}
	if err != nil {
		return err
	}
	if d.athleteID == 0 {
		d.athleteID = c.AthleteID
	}
	return d.h.deauthorize(ctx, d.log, c)
}

// connection deletes the connection and the athlete's owner mapping.
func (d *deletion) connection(ctx context.Context) error {
	if err := d.h.deletions.Delete(ctx, d.h.deletions.Tables().Main, model.StravaConnectionKey(d.userID)); err != nil {
		return err
	}
	if d.athleteID == 0 {
		return nil // no profile and no connection: the mapping went with them
	}
	return d.h.deletions.DeleteAthleteOwnerOf(ctx, d.athleteID, d.userID)
}

// sessions deletes the user's sessions, the caller's pointer last.
func (d *deletion) sessions(ctx context.Context) error {
	if err := d.h.deletions.DeleteUserSessions(ctx, d.userID, d.sessionID); err != nil {
		return err
	}
	if d.sessionID == "" {
		return nil
	}
	return d.h.deletions.DeleteSessionPointerFirst(ctx, d.userID, d.sessionID)
}

func (h *Handler) stopped(rep DeletionReport, step string, err error) (DeletionReport, error) {
	rep.Status, rep.StoppedAt = "incomplete", step
	code, msg := CodeInternal, "the deletion stopped; send DELETE /v1/me again to finish it"
	if errors.Is(err, model.ErrRetryable) {
		code = CodeUnavailable
	}
	if step == StepDeauthorize {
		msg = "Strava could not be reached to revoke access; nothing was deleted yet. Send DELETE /v1/me again to retry"
	}
	rep.Error = &ErrorDetail{Code: code, Message: msg}
	return rep, fmt.Errorf("delete account, step %s: %w", step, err)
}

// deauthorize revokes the app's Strava access with a valid access token,
// refreshing (and persisting the rotated token) when the stored one has
// expired. Access that is already revoked counts as done.
func (h *Handler) deauthorize(ctx context.Context, log *slog.Logger, c *model.StravaConnection) error {
	token := c.AccessToken
	if !c.ExpiresAtUtc.After(h.now().Add(time.Minute)) {
		tok, err := h.strava.Refresh(ctx, c.RefreshToken)
		if errors.Is(err, model.ErrUnauthorized) {
			log.InfoContext(ctx, "strava refresh refused: access already revoked", "athleteId", c.AthleteID)
			return nil
		}
		if err != nil {
			return fmt.Errorf("refresh before deauthorize: %w", err)
		}
		c.AccessToken, c.ExpiresAtUtc, c.UpdatedAtUtc = tok.AccessToken, tok.Expiry.UTC(), h.now().UTC()
		if tok.RefreshToken != "" {
			c.RefreshToken = tok.RefreshToken
		}
		if err := h.logins.SaveLoginTokens(ctx, c); err != nil {
			return fmt.Errorf("persist refreshed token: %w", err)
		}
		token = tok.AccessToken
	}
	err := h.strava.Deauthorize(ctx, token)
	if errors.Is(err, model.ErrUnauthorized) {
		log.InfoContext(ctx, "strava deauthorize: access already revoked", "athleteId", c.AthleteID)
		return nil
	}
	if err != nil {
		return fmt.Errorf("deauthorize athlete %d: %w", c.AthleteID, err)
	}
	return nil
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
	writeJSON(w, http.StatusAccepted, rep)
}
