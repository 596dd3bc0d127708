package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store/dynerr"
	"github.com/commitcollect/backend/test/dynamolocal"
)

func newUser(userID string, athleteID int64) (*model.Profile, *model.StravaConnection) {
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	return &model.Profile{UserID: userID, AthleteID: athleteID, DisplayName: "A " + userID, CreatedAtUtc: at},
		&model.StravaConnection{UserID: userID, AthleteID: athleteID, AccessToken: "a", RefreshToken: "r", TokenVersion: 1, UpdatedAtUtc: at}
}

func TestCreateUserLinksAnAthleteOnce(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	p, c := newUser("u1", 42)
	if err := s.Users.CreateUser(ctx, p, c); err != nil {
		t.Fatal(err)
	}
	p2, c2 := newUser("u2", 42)
	err := s.Users.CreateUser(ctx, p2, c2)
	var te *dynerr.TransactionError
	if !errors.Is(err, model.ErrConflict) || !errors.As(err, &te) {
		t.Fatalf("second user for athlete 42: got %v, want a TransactionError matching ErrConflict", err)
	}
	if _, err := s.Users.Profile(ctx, "u2"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("half-linked user u2: profile read got %v, want ErrNotFound", err)
	}
	o, err := s.Users.AthleteOwner(ctx, 42)
	if err != nil || o.UserID != "u1" {
		t.Fatalf("owner of 42 = %+v, %v; want u1", o, err)
	}
}

func TestSaveLoginTokensBumpsTokenVersion(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	p, c := newUser("u1", 7)
	if err := s.Users.CreateUser(ctx, p, c); err != nil {
		t.Fatal(err)
	}
	fresh := &model.StravaConnection{UserID: "u1", AthleteID: 7, AccessToken: "a2", RefreshToken: "r2", Scopes: []string{"read"}}
	if err := s.Connections.SaveLoginTokens(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	got, err := s.Connections.StravaConnection(ctx, "u1")
	if err != nil || got.TokenVersion != 2 || got.AccessToken != "a2" || got.AthleteGSI1PK != keys.AthletePK(7) {
		t.Fatalf("connection = %+v, %v; want tokenVersion 2 with the new token", got, err)
	}
	// A connection that is gone (deauthorized) is created again.
	if err := s.DB.Delete(ctx, s.DB.Tables().Main, keys.StravaConnectionKey("u1")); err != nil {
		t.Fatal(err)
	}
	if err := s.Connections.SaveLoginTokens(ctx, fresh); err != nil || fresh.TokenVersion != 1 {
		t.Fatalf("recreate: %v, tokenVersion %d", err, fresh.TokenVersion)
	}
}

// TestALoginRacingADeletionLeavesNoTokens: the tokens of a login whose
// write lands after the account's deletion began (its guard marked, its
// connection swept) are removed by the write's own check, which says so.
// Protection: SaveLoginTokens' check against the guard (without it the
// deleted account keeps a connection with live tokens).
func TestALoginRacingADeletionLeavesNoTokens(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	p, c := newUser("u9", 9)
	if err := s.Users.CreateUser(ctx, p, c); err != nil {
		t.Fatal(err)
	}
	if err := s.Guard.MarkUserDeleted(ctx, "u9", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.DB.Delete(ctx, s.DB.Tables().Main, keys.StravaConnectionKey("u9")); err != nil { // the deletion's sweep
		t.Fatal(err)
	}
	late := &model.StravaConnection{UserID: "u9", AthleteID: 9, AccessToken: "late", RefreshToken: "late-r", Scopes: []string{"read"}}
	if err := s.Connections.SaveLoginTokens(ctx, late); !errors.Is(err, model.ErrUserDeleted) {
		t.Fatalf("login after the deletion began: %v; want ErrUserDeleted", err)
	}
	if got, err := s.Connections.StravaConnection(ctx, "u9"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("connection %+v, %v after the deletion; want none", got, err)
	}
}

func TestDeleteAthleteOwnerOfOnlyOwnMapping(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	p, c := newUser("u1", 9)
	if err := s.Users.CreateUser(ctx, p, c); err != nil {
		t.Fatal(err)
	}
	if err := s.Users.DeleteAthleteOwnerOf(ctx, 9, "someone-else"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Users.AthleteOwner(ctx, 9); err != nil {
		t.Fatalf("mapping of another user was deleted: %v", err)
	}
	if err := s.Users.DeleteAthleteOwnerOf(ctx, 9, "u1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Users.DeleteAthleteOwnerOf(ctx, 9, "u1"); err != nil {
		t.Fatalf("re-run: %v", err)
	}
	if _, err := s.Users.AthleteOwner(ctx, 9); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("mapping after delete: %v", err)
	}
	n, err := s.Users.DeleteUserItems(ctx, "u1", "", func(p keys.ParsedKey) bool { return p.Kind == keys.KindProfile })
	if err != nil || n != 1 {
		t.Fatalf("DeleteUserItems deleted %d (%v), want 1 (the connection)", n, err)
	}
	if _, err := s.Users.Profile(ctx, "u1"); err != nil {
		t.Fatalf("skipped profile: %v", err)
	}
}
