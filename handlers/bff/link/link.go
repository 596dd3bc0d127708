// Package link links a Strava athlete who signs in to their user: the one
// they have, the one a revoked grant left (a keyed-hash mapping), or a new
// one, and forgets an account deleted since (the BFF's OAuth callback).
package link

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/strava"
)

// Stores are the adapters a Linker is handed, each behind the port of
// what linking does with it.
type Stores struct {
	Athletes    AthleteStore
	Connections ConnectionStore
	Guards      GuardStore
	Revoked     RevokedAthletes
	Audits      Auditor
	Profiles    ProfileStore
}

// ConnectionStore is the user's Strava connection at sign-in: a fresh
// login's tokens, and the end of a revocation (the connections adapter).
type ConnectionStore interface {
	// SaveLoginTokens stores a fresh login's tokens on the user's
	// connection (checked against the user guard).
	SaveLoginTokens(ctx context.Context, c *model.StravaConnection) error
	// ClearStravaRevocation clears the guard's revocation recorded at
	// revokedAt (a purge still running stops).
	ClearStravaRevocation(ctx context.Context, userID string, revokedAt, now time.Time) error
}

// ProfileStore reads who the user is (the users adapter).
type ProfileStore interface {
	Profile(ctx context.Context, userID string) (model.Profile, error)
}

// AthleteStore is who owns an athlete, and a new user (the users
// adapter).
type AthleteStore interface {
	// AthleteOwner reads the athlete's owner mapping; ErrNotFound when
	// the athlete is new.
	AthleteOwner(ctx context.Context, athleteID int64) (model.AthleteOwner, error)
	// CreateUser writes a new user's profile, owner mapping and
	// connection together.
	CreateUser(ctx context.Context, p *model.Profile, c *model.StravaConnection) error
}

// GuardStore reads the user guard.
type GuardStore interface {
	// UserGuard reads the user's guard; ErrNotFound when there is none.
	UserGuard(ctx context.Context, userID string) (*model.UserGuard, error)
}

// RevokedAthletes are the mappings a revocation or a deletion left (the
// purger's).
type RevokedAthletes interface {
	// RevokedAthleteOwner finds the user of an athlete who revoked the grant
	// (a keyed-hash mapping); ErrNotFound when there is none.
	RevokedAthleteOwner(ctx context.Context, athleteID int64) (string, error)
	// ReclaimRevokedAthlete links the athlete to that user again.
	ReclaimRevokedAthlete(ctx context.Context, athleteID int64, userID, name string, now time.Time) error
	// ForgetDeletedOwner removes the owner and keyed-hash mappings that
	// still name a deleted user (each only if it names userID).
	ForgetDeletedOwner(ctx context.Context, athleteID int64, userID string) error
}

// Auditor writes an audit entry and never fails.
type Auditor interface {
	Audit(ctx context.Context, log *slog.Logger, e *model.AuditEntry)
}

// Linker links a signed-in athlete to their user. It is safe for
// concurrent use.
type Linker struct {
	st  Stores
	log *slog.Logger
	now func() time.Time
}

// New returns a Linker over the adapters st.
func New(st Stores, log *slog.Logger, now func() time.Time) *Linker {
	return &Linker{st: st, log: log, now: now}
}

// Link returns the user the athlete belongs to, updating their
// tokens (a new grant: grantedAtUtc is now), or creates the user (profile,
// connection and owner mapping in one transaction). Two first logins racing
// for one athlete end with one user: the loser's transaction fails on the
// owner mapping and it joins the winner. A deauthorized athlete's owner
// mapping is gone (it names the athlete), but a keyed-hash mapping finds
// the same user, whose Strava identity comes back (reattach).
func (h *Linker) Link(ctx context.Context, log *slog.Logger, corr string, a strava.Athlete, tok *oauth2.Token, scopes []string) (string, error) {
	now := h.now().UTC()
	conn := func(userID string) *model.StravaConnection {
		return &model.StravaConnection{
			UserID: userID, AthleteID: a.ID, AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken,
			ExpiresAtUtc: tok.Expiry.UTC(), Scopes: scopes, UpdatedAtUtc: now, GrantedAtUtc: &now,
		}
	}
	for attempt := 0; attempt < 3; attempt++ {
		owner, err := h.athleteOwner(ctx, a, now)
		if err == nil {
			if gone, err := h.forgetIfDeleted(ctx, log, a.ID, owner.UserID); err != nil || gone {
				if err != nil {
					return "", err
				}
				continue // the mapping named a deleted account: sign up anew
			}
			if err := h.reattach(ctx, log, corr, owner.UserID, a, now); err != nil {
				return "", err
			}
			if err := h.st.Connections.SaveLoginTokens(ctx, conn(owner.UserID)); err != nil {
				return "", err
			}
			return owner.UserID, nil
		}
		if !errors.Is(err, model.ErrNotFound) {
			return "", err
		}
		userID := model.NewID()
		p := &model.Profile{UserID: userID, AthleteID: a.ID, DisplayName: strings.TrimSpace(a.Firstname + " " + a.Lastname), CreatedAtUtc: now}
		c := conn(userID)
		c.TokenVersion = 1
		err = h.st.Athletes.CreateUser(ctx, p, c)
		if err == nil {
			h.st.Audits.Audit(ctx, log, model.NewAuditEntry(keys.UserPK(userID), userID, model.AuditUserCreated, corr, model.NewID(), now,
				map[string]string{"athleteId": strconv.FormatInt(a.ID, 10)}))
			return userID, nil
		}
		if !errors.Is(err, model.ErrConflict) {
			return "", err
		}
		// Another login linked the athlete first: join that user.
	}
	return "", errors.New("link athlete: owner mapping kept changing")
}

// athleteOwner is the athlete's owner mapping, or, for an athlete who
// revoked the grant (whose mapping was deleted with the Strava data), the
// user the keyed-hash mapping names, linked to the athlete again.
func (h *Linker) athleteOwner(ctx context.Context, a strava.Athlete, now time.Time) (model.AthleteOwner, error) {
	owner, err := h.st.Athletes.AthleteOwner(ctx, a.ID)
	if !errors.Is(err, model.ErrNotFound) {
		return owner, err
	}
	userID, rerr := h.st.Revoked.RevokedAthleteOwner(ctx, a.ID)
	switch {
	case errors.Is(rerr, model.ErrNotFound):
		return owner, err
	case rerr != nil:
		return owner, rerr
	}
	if gone, gerr := h.forgetIfDeleted(ctx, h.log, a.ID, userID); gerr != nil || gone {
		if gerr != nil {
			return owner, gerr
		}
		return owner, err // the revoked athlete's account was deleted since
	}
	if err := h.st.Revoked.ReclaimRevokedAthlete(ctx, a.ID, userID, strings.TrimSpace(a.Firstname+" "+a.Lastname), now); err != nil {
		return owner, err
	}
	return model.AthleteOwner{AthleteID: a.ID, UserID: userID}, nil
}

// forgetIfDeleted reports whether userID's account was deleted (its guard
// says so, for 90 days, or its profile is gone) and, if so, removes the
// mappings that still name it, so the athlete signs up as a new user and
// nothing of the deleted account comes back.
func (h *Linker) forgetIfDeleted(ctx context.Context, log *slog.Logger, athleteID int64, userID string) (bool, error) {
	g, err := h.st.Guards.UserGuard(ctx, userID)
	gone := err == nil && g.Deleted()
	if err != nil && !errors.Is(err, model.ErrNotFound) {
		return false, fmt.Errorf("check user %s: %w", userID, err)
	}
	if !gone {
		_, err := h.st.Profiles.Profile(ctx, userID)
		if err != nil && !errors.Is(err, model.ErrNotFound) {
			return false, fmt.Errorf("check user %s: %w", userID, err)
		}
		gone = err != nil
	}
	if !gone {
		return false, nil
	}
	log.InfoContext(ctx, "athlete of a deleted account signs up again", "deletedUserId", userID)
	if err := h.st.Revoked.ForgetDeletedOwner(ctx, athleteID, userID); err != nil {
		return false, fmt.Errorf("forget deleted user %s: %w", userID, err)
	}
	return true, nil
}

// reattach lifts a deauthorization when its athlete connects again: it
// clears the guard's revocation it read (Strava writes are kept again, a
// purge still running stops) and gives the athlete back (reconnected); the
// caller saves the tokens, the login's backfill imports the history again.
func (h *Linker) reattach(ctx context.Context, log *slog.Logger, corr, userID string, a strava.Athlete, now time.Time) error {
	revoked := false
	for attempt := 0; ; attempt++ {
		g, err := h.st.Guards.UserGuard(ctx, userID)
		switch {
		case errors.Is(err, model.ErrNotFound):
		case err != nil:
			return fmt.Errorf("reattach user %s: %w", userID, err)
		case g.Revoked():
			err := h.st.Connections.ClearStravaRevocation(ctx, userID, g.StravaRevokedAtUtc, now)
			if errors.Is(err, model.ErrConflict) && attempt < 2 {
				continue // cleared by another login, or replaced: read again
			}
			if err != nil && !errors.Is(err, model.ErrConflict) {
				return fmt.Errorf("reattach user %s: %w", userID, err)
			}
			revoked = true
		}
		break
	}
	if revoked {
		return reconnected(ctx, h.st.Audits, h.st.Revoked, log, corr, userID, a, now)
	}
	return nil
}

// reconnected audits a reconnect after a revocation and gives the user the
// athlete back (owner mapping, the profile's id and name).
func reconnected(ctx context.Context, audits Auditor, revoked RevokedAthletes, log *slog.Logger, corr, userID string, a strava.Athlete, now time.Time) error {
	log.InfoContext(ctx, "athlete reconnected after a revocation", "userId", userID)
	audits.Audit(ctx, log, model.NewAuditEntry(keys.UserPK(userID), userID, model.AuditStravaReconnected, corr, model.NewID(), now, nil))
	return revoked.ReclaimRevokedAthlete(ctx, a.ID, userID, strings.TrimSpace(a.Firstname+" "+a.Lastname), now)
}
