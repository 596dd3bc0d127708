package bff_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/bff"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/store/purge"
	"github.com/commitcollect/backend/scripts/stravasim"
)

// TestReconnectAfterRevocationReattachesSameUser: an athlete whose
// revocation was confirmed and purged (connection, workouts, owner mapping,
// Strava name gone; only a keyed-hash mapping left) signs in again through
// Strava's OAuth: the same user comes back with a new grant, its Strava
// identity restored, the guard cleared and the keyed-hash mapping gone;
// milestones and awards are untouched (the award without its activity id).
// Protections: athleteOwner's keyed-hash lookup (without it a new user is
// created), ReclaimRevokedAthlete, reattach clearing the guard.
func TestReconnectAfterRevocationReattachesSameUser(t *testing.T) {
	t.Parallel()
	e, sim := oauthEnvWith(t, envOpts{})
	sim.AddAthlete(stravasim.Athlete{ID: 4242, Firstname: "Grace", Lastname: "Hopper"})
	ctx := context.Background()
	if cb := e.login(e.browser()); cb.status != http.StatusFound {
		t.Fatalf("first login: %d %s", cb.status, cb.body)
	}
	owner, err := e.st.Users.AthleteOwner(ctx, 4242)
	if err != nil {
		t.Fatal(err)
	}
	user := owner.UserID
	for id := int64(1); id <= 4; id++ {
		if err := e.st.Workouts.UpsertWorkout(ctx, &model.Workout{UserID: user, AthleteID: 4242, ActivityID: id, SportType: "Run",
			DistanceMeters: 5000, StartDateUtc: time.Date(2026, 3, 1, 7, 0, 0, 0, time.UTC), CreatedAtUtc: e.clock.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	m := &model.Milestone{UserID: user, MilestoneID: "m1", Version: 3}
	a := &model.Award{UserID: user, MilestoneID: "m1", ModelID: "rocket", PartIndex: 0, PartName: "Nose", AwardedAtUtc: e.clock.Now(), ActivityID: 1}
	for _, it := range []model.Entity{m, a} {
		if err := e.st.DB.Put(ctx, e.st.DB.Tables().Main, it); err != nil {
			t.Fatal(err)
		}
	}

	// The athlete revokes on strava.com; the worker confirmed it.
	sim.RevokeAthlete(4242)
	grant, err := e.st.Connections.StravaConnectionGrant(ctx, user)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if err := e.st.Connections.RevokeStravaConnection(ctx, grant, now.Truncate(time.Second), now, now); err != nil {
		t.Fatal(err)
	}
	if _, err := purge.New(e.st).PurgeStravaData(ctx, user, 4242, now.Truncate(time.Second)); err != nil {
		t.Fatal(err)
	}
	if p, err := e.st.Users.Profile(ctx, user); err != nil || p.DisplayName != "" || p.AthleteID != 0 {
		t.Fatalf("profile %+v, %v; want the Strava name and id gone", p, err)
	}

	e.clock.Add(time.Hour)
	b := e.browser()
	if cb := e.login(b); cb.status != http.StatusFound {
		t.Fatalf("reconnect: %d %s", cb.status, cb.body)
	}
	var me bff.MeJSON
	e.do(http.MethodGet, "/v1/me", sessionFrom(t, b, e.srv.URL), nil).json(t, &me)
	if me.UserID != user || !me.Connected {
		t.Fatalf("GET /v1/me = %+v, want user %s connected again", me, user)
	}
	if g, err := e.st.Guard.UserGuard(ctx, user); err != nil || g.Revoked() {
		t.Fatalf("guard %+v, %v; want the revocation cleared", g, err)
	}
	if p, err := e.st.Users.Profile(ctx, user); err != nil || p.DisplayName != "Grace Hopper" || p.AthleteID != 4242 {
		t.Fatalf("profile %+v, %v; want the Strava identity back", p, err)
	}
	if _, err := purge.New(e.st).RevokedAthleteOwner(ctx, 4242); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("keyed-hash mapping: %v; want it gone once the owner mapping is back", err)
	}
	c, err := e.st.Connections.StravaConnection(ctx, user)
	if err != nil || !c.GrantTime().Equal(e.clock.Now()) || !sim.AccessTokenValid(c.AccessToken) {
		t.Fatalf("connection %+v, %v; want the new grant at %s", c, err, e.clock.Now())
	}
	var gotM model.Milestone
	var gotA model.Award
	if err := e.st.DB.Get(ctx, e.st.DB.Tables().Main, m.ItemKey(), &gotM); err != nil || gotM.Version != 3 {
		t.Fatalf("milestone %+v, %v; want it untouched", gotM, err)
	}
	if err := e.st.DB.Get(ctx, e.st.DB.Tables().Main, a.ItemKey(), &gotA); err != nil || gotA.PartName != "Nose" || gotA.ActivityID != 0 {
		t.Fatalf("award %+v, %v; want it kept, without the Strava activity id", gotA, err)
	}
}

// TestReconnectDuringAPurgeRestoresTheIdentity: the athlete signs in again
// while the revocation's purge is half way (the profile's Strava name and id
// already gone, the owner mapping not yet): the login finds the owner
// mapping, clears the revocation and gives the profile the athlete back.
// Protection: reattach's reconnected (without it /v1/me says athlete 0).
func TestReconnectDuringAPurgeRestoresTheIdentity(t *testing.T) {
	t.Parallel()
	e, sim := oauthEnvWith(t, envOpts{})
	sim.AddAthlete(stravasim.Athlete{ID: 4343, Firstname: "Katherine", Lastname: "Johnson"})
	ctx := context.Background()
	if cb := e.login(e.browser()); cb.status != http.StatusFound {
		t.Fatalf("first login: %d %s", cb.status, cb.body)
	}
	owner, err := e.st.Users.AthleteOwner(ctx, 4343)
	if err != nil {
		t.Fatal(err)
	}
	sim.RevokeAthlete(4343)
	grant, err := e.st.Connections.StravaConnectionGrant(ctx, owner.UserID)
	if err != nil {
		t.Fatal(err)
	}
	now := e.clock.Now().Truncate(time.Second)
	if err := e.st.Connections.RevokeStravaConnection(ctx, grant, now, now, now); err != nil {
		t.Fatal(err)
	}
	p, err := e.st.Users.Profile(ctx, owner.UserID)
	if err != nil {
		t.Fatal(err)
	}
	p.AthleteID, p.DisplayName = 0, "" // what the purge's identity step leaves
	if err := e.st.DB.Put(ctx, e.st.DB.Tables().Main, &p); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(time.Minute)
	b := e.browser()
	if cb := e.login(b); cb.status != http.StatusFound {
		t.Fatalf("reconnect: %d %s", cb.status, cb.body)
	}
	var me bff.MeJSON
	e.do(http.MethodGet, "/v1/me", sessionFrom(t, b, e.srv.URL), nil).json(t, &me)
	if me.UserID != owner.UserID || !me.Connected || me.AthleteID != 4343 || me.DisplayName != "Katherine Johnson" {
		t.Fatalf("GET /v1/me = %+v, want user %s connected as athlete 4343 again", me, owner.UserID)
	}
}
