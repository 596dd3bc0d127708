// Package deletion deletes an account: everything CommitCollect holds about
// a user, in steps that can each run again, so a deletion stopped at any
// step is finished by running it again. handlers/bff serves it as
// DELETE /v1/me.
//
// Account deletion runs these steps, each idempotent, and can be re-run with
// the same cookie after a stop at any of them: deauthorize (Strava,
// refreshing an expired token first; already revoked counts as done; if
// Strava is unreachable nothing is deleted) → guard (USER#{id} / GUARD marked
// deleted, kept 90 days: from now on what any writer in flight writes is
// removed after it lands, by the projector for a webhook's workout, by the
// writer's own check for a sync page, the sync state and milestone
// creation, so nothing written for the user outlives the deletion) →
// connection (connection, the keyed-hash mapping a revocation left, then
// the owner mapping, each only if it still points at this user) → user_data (workouts, milestones,
// awards, everything else in USER#{id}, batches of 25) → parked (the user's
// PARKED#WORKER / PARKED#PROJECTOR records, found by userId, or by athleteId
// when they name no user: a filtered Query of those small partitions) →
// audit (the trail expires within 3 days; ACCOUNT_DELETED, without a Strava
// id, keeps the 90-day TTL) → profile
// (plus a final sweep of the partition) → sessions (the caller's own last,
// pointer first).
package deletion

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"golang.org/x/oauth2"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
)

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

// Steps lists the account-deletion steps in the order they run.
var Steps = []string{StepDeauthorize, StepGuard, StepConnection, StepUserData, StepParked, StepAudit, StepProfile, StepSessions}

// Stores are the adapters a Deleter is handed, each behind the port of
// what a deletion's steps do with it.
type Stores struct {
	// Guard marks the user deleted first: every write landing afterwards
	// removes itself.
	Guard interface {
		MarkUserDeleted(ctx context.Context, userID string, now time.Time) error
	}
	Users       Users
	Connections Connections
	// Parked are the user's parked records (and the athlete's).
	Parked interface {
		// DeleteUserParked deletes them; it returns how many.
		DeleteUserParked(ctx context.Context, userID string, athleteID int64) (int, error)
	}
	Audits   Audits
	Sessions Sessions
}

// Users are the user's profile, items and athlete mappings.
type Users interface {
	Profile(ctx context.Context, userID string) (model.Profile, error)
	// DeleteUserItems deletes the user's items under prefix, but those skip
	// keeps; it returns how many it deleted.
	DeleteUserItems(ctx context.Context, userID, prefix string, skip func(keys.ParsedKey) bool) (int, error)
	// DeleteAthleteOwnerOf removes the athlete's owner mapping if it names
	// userID.
	DeleteAthleteOwnerOf(ctx context.Context, athleteID int64, userID string) error
	// DeleteRevokedAthleteOf removes the keyed-hash mapping a revocation
	// left (named by the profile's RevokedAthleteHash) if it names userID.
	DeleteRevokedAthleteOf(ctx context.Context, hash, userID string) error
}

// Connections are the user's Strava connection: read, its tokens saved
// once refreshed to revoke the grant, and removed.
type Connections interface {
	StravaConnection(ctx context.Context, userID string) (*model.StravaConnection, error)
	SaveLoginTokens(ctx context.Context, c *model.StravaConnection) error
	// DeleteStravaConnection removes the user's connection and its tokens.
	DeleteStravaConnection(ctx context.Context, userID string) error
}

// Audits are the user's audit trail.
type Audits interface {
	// ExpireUserAudit brings the user's audit entries' TTL forward to at
	// (ACCOUNT_DELETED entries keep theirs).
	ExpireUserAudit(ctx context.Context, userID string, at time.Time) (int, error)
	// Audit writes an audit entry and never fails.
	Audit(ctx context.Context, log *slog.Logger, e *model.AuditEntry)
}

// Sessions are the user's sign-ins.
type Sessions interface {
	// DeleteUserSessions deletes the user's sessions but keep.
	DeleteUserSessions(ctx context.Context, userID, keep string) error
	// DeleteSessionPointerFirst deletes the session's pointer, then the
	// session.
	DeleteSessionPointerFirst(ctx context.Context, userID, sessionID string) error
}

// Strava revokes the application's access to the athlete's account.
type Strava interface {
	// Refresh trades a refresh token for a new token; an error matching
	// model.ErrUnauthorized when Strava refuses it (access already revoked).
	Refresh(ctx context.Context, refreshToken string) (*oauth2.Token, error)
	// Deauthorize revokes the grant of accessToken; an error matching
	// model.ErrUnauthorized when the token is not valid any more.
	Deauthorize(ctx context.Context, accessToken string) error
}

// Report says how far a deletion got.
type Report struct {
	// Status is "deleted" when every step finished, "incomplete" otherwise.
	Status    string
	Completed []string
	// StoppedAt is the step that failed; running the deletion again
	// resumes safely from the start.
	StoppedAt string
}

// Deleter runs account deletions. It is safe for concurrent use.
type Deleter struct {
	st     Stores
	strava Strava
	log    *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// AfterStep, when set (tests), runs after each step; an error stops the
	// deletion there, as a crash would.
	AfterStep func(step string) error
}

// New returns a Deleter over the adapters st and Strava.
func New(st Stores, s Strava, log *slog.Logger) *Deleter {
	return &Deleter{st: st, strava: s, log: log, Now: time.Now}
}

// Delete deletes everything CommitCollect holds about userID: it revokes
// Strava access, marks the user deleted (the user guard: a write in flight
// that lands afterwards removes itself, so the deletion is final), then
// deletes the Strava connection, the athlete mapping (only if it still
// points at userID), workouts, milestones, awards and any other item of the
// user's partition, the user's parked records, writes an ACCOUNT_DELETED
// audit entry (the audit trail itself is kept for its 90-day TTL), deletes
// the profile, and finally every session (sessionID, the caller's own,
// last). It never touches another user's items. It is idempotent: running
// it again after a stop at any step finishes the job. It returns the report
// and the error of the step that stopped it (nil when done).
func (d *Deleter) Delete(ctx context.Context, userID, sessionID, correlationID string) (Report, error) {
	r := &run{d: d, log: d.log.With("userId", userID, "correlationId", correlationID),
		userID: userID, sessionID: sessionID, correlationID: correlationID}
	rep := Report{Completed: []string{}}
	if p, err := d.st.Users.Profile(ctx, userID); err == nil {
		r.athleteID, r.revokedHash = p.AthleteID, p.RevokedAthleteHash
	} else if !errors.Is(err, model.ErrNotFound) {
		return stopped(rep, StepDeauthorize, err)
	}
	for _, s := range r.steps() {
		if err := s.run(ctx); err != nil {
			r.log.WarnContext(ctx, "account deletion stopped", "step", s.name, "error", err)
			return stopped(rep, s.name, err)
		}
		if d.AfterStep != nil {
			if err := d.AfterStep(s.name); err != nil {
				return stopped(rep, s.name, err)
			}
		}
		rep.Completed = append(rep.Completed, s.name)
	}
	rep.Status = "deleted"
	r.log.InfoContext(ctx, "account deleted")
	return rep, nil
}

func stopped(rep Report, step string, err error) (Report, error) {
	rep.Status, rep.StoppedAt = "incomplete", step
	return rep, fmt.Errorf("delete account, step %s: %w", step, err)
}

// run is one run of a deletion: its steps in order, each safe to run again.
type run struct {
	d                                *Deleter
	log                              *slog.Logger
	userID, sessionID, correlationID string
	// athleteID is the Strava athlete of the profile, or of the connection
	// when the profile is gone (0: neither is left).
	athleteID int64
	// revokedHash names the keyed-hash mapping of an athlete whose grant
	// was revoked (the profile's RevokedAthleteHash; empty: none).
	revokedHash string
}

type step struct {
	name string
	run  func(context.Context) error
}

func (r *run) steps() []step {
	st := r.d.st
	return []step{
		{StepDeauthorize, r.deauthorize},
		{StepGuard, func(ctx context.Context) error { return st.Guard.MarkUserDeleted(ctx, r.userID, r.d.Now()) }},
		{StepConnection, r.connection},
		{StepUserData, func(ctx context.Context) error {
			_, err := st.Users.DeleteUserItems(ctx, r.userID, "", func(p keys.ParsedKey) bool {
				return p.Kind == keys.KindProfile || p.Kind == keys.KindUserSession
			})
			return err
		}},
		{StepParked, func(ctx context.Context) error {
			_, err := st.Parked.DeleteUserParked(ctx, r.userID, r.athleteID)
			return err
		}},
		{StepAudit, r.audit},
		{StepProfile, func(ctx context.Context) error {
			// Also sweeps anything written since the data step (a worker in flight).
			_, err := st.Users.DeleteUserItems(ctx, r.userID, "", func(p keys.ParsedKey) bool { return p.Kind == keys.KindUserSession })
			return err
		}},
		{StepSessions, r.sessions},
	}
}

// deauthorize revokes the grant at Strava, if a connection is left.
func (r *run) deauthorize(ctx context.Context) error {
	c, err := r.d.st.Connections.StravaConnection(ctx, r.userID)
	if errors.Is(err, model.ErrNotFound) {
		return nil // already removed (a re-run, or Strava deauthorized us)
	}
	if err != nil {
		return err
	}
	if r.athleteID == 0 {
		r.athleteID = c.AthleteID
	}
	return r.d.revoke(ctx, r.log, c)
}

// connection deletes the connection and what maps the athlete to the
// user: the owner mapping, and the keyed-hash mapping a revocation left,
// so the athlete signs up again as a new user.
func (r *run) connection(ctx context.Context) error {
	st := r.d.st
	if err := st.Connections.DeleteStravaConnection(ctx, r.userID); err != nil {
		return err
	}
	if r.revokedHash != "" {
		if err := st.Users.DeleteRevokedAthleteOf(ctx, r.revokedHash, r.userID); err != nil {
			return err
		}
	}
	if r.athleteID == 0 {
		return nil // no profile and no connection: the mapping went with them
	}
	return st.Users.DeleteAthleteOwnerOf(ctx, r.athleteID, r.userID)
}

// audit brings the user's audit trail to expire within
// model.UnlinkedAuditRetentionDays (its entries may name Strava ids), then
// writes ACCOUNT_DELETED, which names none and keeps the 90-day TTL.
func (r *run) audit(ctx context.Context) error {
	now := r.d.Now().UTC()
	if _, err := r.d.st.Audits.ExpireUserAudit(ctx, r.userID, now.Add(model.UnlinkedAuditRetentionDays*24*time.Hour)); err != nil {
		return err
	}
	r.d.st.Audits.Audit(ctx, r.log, model.NewAuditEntry(keys.UserPK(r.userID), r.userID, model.AuditAccountDeleted, r.correlationID,
		model.NewID(), now, nil))
	return nil
}

// sessions deletes the user's sessions, the caller's pointer last.
func (r *run) sessions(ctx context.Context) error {
	if err := r.d.st.Sessions.DeleteUserSessions(ctx, r.userID, r.sessionID); err != nil {
		return err
	}
	if r.sessionID == "" {
		return nil
	}
	return r.d.st.Sessions.DeleteSessionPointerFirst(ctx, r.userID, r.sessionID)
}

// revoke revokes the app's Strava access with a valid access token,
// refreshing (and persisting the rotated token) when the stored one has
// expired. Access that is already revoked counts as done.
func (d *Deleter) revoke(ctx context.Context, log *slog.Logger, c *model.StravaConnection) error {
	token := c.AccessToken
	if !c.ExpiresAtUtc.After(d.Now().Add(time.Minute)) {
		tok, err := d.strava.Refresh(ctx, c.RefreshToken)
		if errors.Is(err, model.ErrUnauthorized) {
			log.InfoContext(ctx, "strava refresh refused: access already revoked", "athleteId", c.AthleteID)
			return nil
		}
		if err != nil {
			return fmt.Errorf("refresh before deauthorize: %w", err)
		}
		c.AccessToken, c.ExpiresAtUtc, c.UpdatedAtUtc = tok.AccessToken, tok.Expiry.UTC(), d.Now().UTC()
		if tok.RefreshToken != "" {
			c.RefreshToken = tok.RefreshToken
		}
		if err := d.st.Connections.SaveLoginTokens(ctx, c); err != nil {
			return fmt.Errorf("persist refreshed token: %w", err)
		}
		token = tok.AccessToken
	}
	err := d.strava.Deauthorize(ctx, token)
	if errors.Is(err, model.ErrUnauthorized) {
		log.InfoContext(ctx, "strava deauthorize: access already revoked", "athleteId", c.AthleteID)
		return nil
	}
	if err != nil {
		return fmt.Errorf("deauthorize athlete %d: %w", c.AthleteID, err)
	}
	return nil
}
