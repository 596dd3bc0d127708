// Package sessions keeps the athletes' sign-ins: the sessions table's
// sessions, with a pointer to each in the user's partition so a user's
// sessions are found without a Scan, and the one-use login states of the
// Strava OAuth dance.
package sessions

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store/dynamo"
)

// Store holds sessions (the sessions table, and their pointers in the
// user's partition) and login states, over the store's DB.
type Store struct{ db *dynamo.DB }

// New returns the sessions over db.
func New(db *dynamo.DB) *Store { return &Store{db: db} }

func (s *Store) t() dynamo.Tables { return s.db.Tables() }

// CreateSession writes a session (sessions table) and its pointer in the
// user's partition (main table) in one transaction, so every live session is
// findable by user. It returns model.ErrConflict if the id is taken.
func (s *Store) CreateSession(ctx context.Context, sess *model.Session) error {
	ptr := &model.UserSession{UserID: sess.UserID, SessionID: sess.SessionID, CreatedAtUtc: sess.CreatedAtUtc, ExpiresAt: sess.ExpiresAtUtc}
	a, err := s.db.TransactPutIfAbsent(s.t().Sessions, sess)
	if err != nil {
		return err
	}
	b, err := s.db.TransactPut(s.t().Main, ptr)
	if err != nil {
		return err
	}
	if err := s.db.Transact(ctx, []types.TransactWriteItem{a, b}, ""); err != nil {
		return fmt.Errorf("create session for user %s: %w", sess.UserID, err)
	}
	return nil
}

// Session reads a session by id (the SessionHash of the cookie); model.ErrNotFound when there is none. It
// does not check expiry (TTL deletion is lazy): callers must use
// Session.Expired.
func (s *Store) Session(ctx context.Context, sessionID string) (model.Session, error) {
	var sess model.Session
	if err := s.db.Get(ctx, s.t().Sessions, keys.SessionKey(sessionID), &sess); err != nil {
		return model.Session{}, fmt.Errorf("session: %w", err)
	}
	return sess, nil
}

// DeleteSession removes a session and then its pointer. Deleting a missing
// session is not an error.
func (s *Store) DeleteSession(ctx context.Context, userID, sessionID string) error {
	if err := s.db.Delete(ctx, s.t().Sessions, keys.SessionKey(sessionID)); err != nil {
		return fmt.Errorf("delete session of user %s: %w", userID, err)
	}
	if err := s.db.Delete(ctx, s.t().Main, keys.UserSessionKey(userID, sessionID)); err != nil {
		return fmt.Errorf("delete session pointer of user %s: %w", userID, err)
	}
	return nil
}

// UserSessionIDs lists the session ids a user's partition points to (at
// most MaxWorkoutsToInspect; truncated says there are more).
func (s *Store) UserSessionIDs(ctx context.Context, userID string) (ids []string, truncated bool, err error) {
	res, err := s.db.QueryPrefix(ctx, s.t().Main, keys.UserPK(userID), keys.PrefixSession, dynamo.QueryOptions{Projection: []string{"PK", "SK"}})
	if err != nil {
		return nil, false, fmt.Errorf("list sessions of user %s: %w", userID, err)
	}
	for _, it := range res.Items {
		k, err := dynamo.KeyOf(it)
		if err != nil {
			return nil, false, err
		}
		if p, err := keys.ParseKey(k); err == nil && p.Kind == keys.KindUserSession {
			ids = append(ids, p.SessionID)
		}
	}
	return ids, res.Truncated, nil
}

// DeleteUserSessions removes every session of a user except keep (the
// caller's own, removed last by DeleteSessionPointerFirst): the session items
// first, then their pointers, so a session never outlives its pointer. It is
// safe to re-run.
func (s *Store) DeleteUserSessions(ctx context.Context, userID, keep string) error {
	for {
		ids, truncated, err := s.UserSessionIDs(ctx, userID)
		if err != nil {
			return err
		}
		var sessions, pointers []model.Key
		for _, id := range ids {
			if id == keep {
				continue
			}
			sessions = append(sessions, keys.SessionKey(id))
			pointers = append(pointers, keys.UserSessionKey(userID, id))
		}
		if err := s.db.BatchDelete(ctx, s.t().Sessions, sessions); err != nil {
			return fmt.Errorf("delete sessions of user %s: %w", userID, err)
		}
		if err := s.db.BatchDelete(ctx, s.t().Main, pointers); err != nil {
			return fmt.Errorf("delete session pointers of user %s: %w", userID, err)
		}
		if !truncated || len(pointers) == 0 {
			return nil
		}
	}
}

// DeleteSessionPointerFirst removes a session's pointer and then the
// session: the order for the caller's own session at the end of account
// deletion, so that if it stops in between the session still works and the
// deletion can be re-run with it.
func (s *Store) DeleteSessionPointerFirst(ctx context.Context, userID, sessionID string) error {
	if err := s.db.Delete(ctx, s.t().Main, keys.UserSessionKey(userID, sessionID)); err != nil {
		return fmt.Errorf("delete session pointer of user %s: %w", userID, err)
	}
	if err := s.db.Delete(ctx, s.t().Sessions, keys.SessionKey(sessionID)); err != nil {
		return fmt.Errorf("delete session of user %s: %w", userID, err)
	}
	return nil
}

// PutOAuthState stores a pending login state; model.ErrConflict if it
// exists.
func (s *Store) PutOAuthState(ctx context.Context, st *model.OAuthState) error {
	if err := s.db.PutIfAbsent(ctx, s.t().Sessions, st); err != nil {
		return fmt.Errorf("put oauth state: %w", err)
	}
	return nil
}

// ConsumeOAuthState deletes a login state (by the SessionHash of the state)
// and returns it, atomically, so a state can be used once only. It returns model.ErrNotFound when the state
// does not exist or was already used. It does not check expiry.
func (s *Store) ConsumeOAuthState(ctx context.Context, stateHash string) (model.OAuthState, error) {
	var st model.OAuthState
	if err := s.db.Take(ctx, s.t().Sessions, keys.OAuthStateKey(stateHash), &st); err != nil {
		return model.OAuthState{}, fmt.Errorf("consume oauth state: %w", err)
	}
	return st, nil
}
