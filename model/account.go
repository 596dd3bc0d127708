package model

import (
	"time"

	"github.com/commitcollect/backend/model/keys"
)

// Entity types of the BFF's account and login items.
const (
	// EntityUserSession is the per-user pointer to a session (main table).
	EntityUserSession EntityType = "USER_SESSION"
	// EntityOAuthState is a pending Strava login (sessions table).
	EntityOAuthState EntityType = "OAUTH_STATE"
)

// Audit event types written by the BFF.
const (
	AuditUserCreated    = "USER_CREATED"
	AuditAccountDeleted = "ACCOUNT_DELETED"
	// AuditStravaReconnected: a deauthorized athlete connected again within
	// the retention window; the pending deletion of their data is cancelled.
	AuditStravaReconnected = "STRAVA_RECONNECTED"
)

// UserSession points from a user's partition to one of their sessions
// (USER#{userId} / SESSION#{sessionId} in the main table). The sessions table
// is keyed by session id only, so this pointer is how account deletion finds a
// user's sessions without a Scan. ExpiresAt (the main table's TTL attribute,
// epoch seconds) lets DynamoDB drop pointers of sessions that expired.
type UserSession struct {
	Key
	Meta
	UserID       string    `dynamodbav:"userId"`
	SessionID    string    `dynamodbav:"sessionId"`
	CreatedAtUtc time.Time `dynamodbav:"createdAtUtc"`
	ExpiresAt    int64     `dynamodbav:"expiresAt"`
}

// ItemKey implements Entity.
func (s *UserSession) ItemKey() Key { return keys.UserSessionKey(s.UserID, s.SessionID) }

// Stamp implements Entity.
func (s *UserSession) Stamp() { s.Key, s.Meta = s.ItemKey(), current(EntityUserSession) }

// Normalize implements Entity.
func (s *UserSession) Normalize() error { return normalize(&s.Meta, EntityUserSession) }

// OAuthState is a login in progress (OAUTHSTATE#{stateHash} / META in the
// sessions table): the state sent to Strava's authorize page, stored so the
// callback can check it and consume it exactly once. ExpiresAtUtc is epoch
// seconds, the sessions table's TTL attribute; TTL deletion is lazy, so
// readers check Expired.
type OAuthState struct {
	Key
	Meta
	// StateHash is the SessionHash of the state (the state itself is in the
	// browser's cookie and Strava's redirect, never in the table).
	StateHash    string    `dynamodbav:"stateHash"`
	CreatedAtUtc time.Time `dynamodbav:"createdAtUtc"`
	ExpiresAtUtc int64     `dynamodbav:"expiresAtUtc"`
}

// Expired reports whether the state is past its expiry at now.
func (s *OAuthState) Expired(now time.Time) bool { return now.Unix() >= s.ExpiresAtUtc }

// ItemKey implements Entity.
func (s *OAuthState) ItemKey() Key { return keys.OAuthStateKey(s.StateHash) }

// Stamp implements Entity.
func (s *OAuthState) Stamp() { s.Key, s.Meta = s.ItemKey(), current(EntityOAuthState) }

// Normalize implements Entity.
func (s *OAuthState) Normalize() error { return normalize(&s.Meta, EntityOAuthState) }

var (
	_ Entity = (*UserSession)(nil)
	_ Entity = (*OAuthState)(nil)
)
