package sessions_test

import (
	"context"
	"errors"
	"testing"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/store/sessions"
	"github.com/commitcollect/backend/test/dynamolocal"
)

// TestSessionsAndPointers: a user's sessions are found through their
// pointers and deleted all but one, that one pointer first; another user's
// session is left alone, and a session id is never taken twice.
func TestSessionsAndPointers(t *testing.T) {
	t.Parallel()
	s := sessions.New(dynamolocal.NewStore(t).DB)
	ctx := context.Background()
	for _, id := range []string{"s1", "s2", "s3"} {
		if err := s.CreateSession(ctx, &model.Session{SessionID: id, UserID: "u1", ExpiresAtUtc: 2e9}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CreateSession(ctx, &model.Session{SessionID: "other", UserID: "u2", ExpiresAtUtc: 2e9}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSession(ctx, &model.Session{SessionID: "s1", UserID: "u2"}); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("reused session id: got %v, want ErrConflict", err)
	}
	ids, _, err := s.UserSessionIDs(ctx, "u1")
	if err != nil || len(ids) != 3 {
		t.Fatalf("sessions of u1 = %v, %v", ids, err)
	}
	if err := s.DeleteUserSessions(ctx, "u1", "s2"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Session(ctx, "s1"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("s1 after DeleteUserSessions: %v", err)
	}
	if sess, err := s.Session(ctx, "s2"); err != nil || sess.UserID != "u1" {
		t.Fatalf("kept session s2 = %+v, %v", sess, err)
	}
	if err := s.DeleteSessionPointerFirst(ctx, "u1", "s2"); err != nil {
		t.Fatal(err)
	}
	if ids, _, _ := s.UserSessionIDs(ctx, "u1"); len(ids) != 0 {
		t.Fatalf("pointers left: %v", ids)
	}
	if _, err := s.Session(ctx, "other"); err != nil {
		t.Fatalf("another user's session was touched: %v", err)
	}
}

// TestConsumeOAuthStateOnce: a login state is taken once; a second take
// finds none.
func TestConsumeOAuthStateOnce(t *testing.T) {
	t.Parallel()
	s := sessions.New(dynamolocal.NewStore(t).DB)
	ctx := context.Background()
	if err := s.PutOAuthState(ctx, &model.OAuthState{StateHash: "st", ExpiresAtUtc: 2e9}); err != nil {
		t.Fatal(err)
	}
	st, err := s.ConsumeOAuthState(ctx, "st")
	if err != nil || st.StateHash != "st" || st.ExpiresAtUtc != 2e9 {
		t.Fatalf("first consume = %+v, %v", st, err)
	}
	if _, err := s.ConsumeOAuthState(ctx, "st"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("second consume: got %v, want ErrNotFound", err)
	}
}
