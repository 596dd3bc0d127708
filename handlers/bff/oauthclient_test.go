package bff_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/bff"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/scripts/stravasim"
)

func TestAccountDeletionRevokesStravaAccess(t *testing.T) {
	t.Parallel()
	e, sim := oauthEnv(t)
	sim.AddAthlete(stravasim.Athlete{ID: 321, Firstname: "Expired"})
	// The stored access token expired an hour ago: deletion refreshes it
	// (the refresh token rotates), then revokes.
	tok := sim.IssueTokens(321, -time.Hour)
	now := e.clock.Now()
	p := &model.Profile{UserID: "u1", AthleteID: 321, DisplayName: "x", CreatedAtUtc: now}
	c := &model.StravaConnection{UserID: "u1", AthleteID: 321, AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken,
		ExpiresAtUtc: tok.ExpiresAt, Scopes: tok.Scope, TokenVersion: 1, UpdatedAtUtc: now}
	if err := e.st.Users.CreateUser(context.Background(), p, c); err != nil {
		t.Fatal(err)
	}
	sid := e.session("u1")
	var rep bff.DeletionReport
	r := e.do(http.MethodDelete, "/v1/me", sid, nil)
	r.json(t, &rep)
	if r.status != http.StatusAccepted || rep.Status != "deleted" {
		t.Fatalf("DELETE /v1/me: %d %s", r.status, r.body)
	}
	if s := sim.Stats(); s.TokenRefreshes != 1 || s.Deauthorizations != 1 {
		t.Fatalf("simulator stats %+v, want one refresh and one deauthorization", s)
	}
	if sim.RefreshTokenValid(tok.RefreshToken) {
		t.Fatal("the old refresh token still works after deletion")
	}
}
