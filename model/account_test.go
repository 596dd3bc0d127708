package model

import (
	"errors"
	"testing"
	"time"

	"github.com/commitcollect/backend/model/keys"
)

func TestAccountKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		given Key
		want  keys.ParsedKey
		shape Key
	}{
		{"session pointer", keys.UserSessionKey("u1", "s9"), keys.ParsedKey{Kind: keys.KindUserSession, UserID: "u1", SessionID: "s9"}, Key{PK: "USER#u1", SK: "SESSION#s9"}},
		{"oauth state", keys.OAuthStateKey("st"), keys.ParsedKey{Kind: keys.KindOAuthState}, Key{PK: "OAUTHSTATE#st", SK: "META"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.given != tt.shape {
				t.Fatalf("key = %s, want %s", tt.given, tt.shape)
			}
			got, err := keys.ParseKey(tt.given)
			if err != nil {
				t.Fatalf("ParseKey(%s): %v", tt.given, err)
			}
			if got != tt.want {
				t.Fatalf("ParseKey(%s) = %+v, want %+v", tt.given, got, tt.want)
			}
		})
	}
}

func TestAccountKeysReject(t *testing.T) {
	t.Parallel()
	for _, k := range []Key{
		{PK: "USER#u1", SK: "SESSION#"},
		{PK: "USER#u1", SK: "SESSION#a#b"},
		{PK: "OAUTHSTATE#", SK: "META"},
		{PK: "OAUTHSTATE#x", SK: "OTHER"},
	} {
		if _, err := keys.ParseKey(k); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseKey(%s): got %v, want ErrInvalid", k, err)
		}
	}
}

func TestAccountEntitiesStampAndExpire(t *testing.T) {
	t.Parallel()
	us := &UserSession{UserID: "u1", SessionID: "s1"}
	us.Stamp()
	if us.Key != keys.UserSessionKey("u1", "s1") || us.EntityType != EntityUserSession || us.SchemaVersion != 1 {
		t.Fatalf("user session stamped as %+v", us)
	}
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	st := &OAuthState{StateHash: "abc", ExpiresAtUtc: now.Add(time.Minute).Unix()}
	st.Stamp()
	if st.Key != keys.OAuthStateKey("abc") || st.EntityType != EntityOAuthState {
		t.Fatalf("oauth state stamped as %+v", st)
	}
	if st.Expired(now) {
		t.Error("state expiring in a minute reported expired")
	}
	if !st.Expired(now.Add(time.Minute)) {
		t.Error("state at its expiry not reported expired")
	}
	newer := &OAuthState{Meta: Meta{EntityOAuthState, 2}}
	if err := newer.Normalize(); !errors.Is(err, ErrUnsupportedSchema) {
		t.Errorf("newer oauth state: got %v, want ErrUnsupportedSchema", err)
	}
}
