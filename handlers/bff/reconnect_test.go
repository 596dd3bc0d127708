package bff_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/bff"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/test/stravasim"
)

// failingUnexpire is an HTTP transport in front of DynamoDB Local that,
// while armed, lets `allow` updates removing a workout's expiresAt through
// and fails every later one.
type failingUnexpire struct {
	armed atomic.Bool
	allow atomic.Int64
}

func (f *failingUnexpire) RoundTrip(r *http.Request) (*http.Response, error) {
	if f.armed.Load() && r.Header.Get("X-Amz-Target") == "DynamoDB_20120810.UpdateItem" && r.Body != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte("REMOVE")) && bytes.Contains(body, []byte(model.PrefixWorkoutStrava)) && f.allow.Add(-1) < 0 {
			return nil, errors.New("injected failure midway through the reconnect")
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestReconnectWithinRetentionReattachesSameUser: an athlete whose
// deauthorization was confirmed (connection gone, guard revoked, workouts
// expiring) signs in again through Strava's OAuth: the same user comes back
// with a new grant, the guard is cleared and no workout expires any more;
// milestones and awards are untouched. A login failing midway answers an
// error, and the athlete's retry finishes the job.
// Protections: reattach clearing the guard, removing the expiry, and
// removing it again while the connection is missing.
func TestReconnectWithinRetentionReattachesSameUser(t *testing.T) {
	t.Parallel()
	ft := &failingUnexpire{}
	e, sim := oauthEnvWith(t, envOpts{dynamoHTTP: &http.Client{Transport: ft}})
	sim.AddAthlete(stravasim.Athlete{ID: 4242, Firstname: "Grace", Lastname: "Hopper"})
	ctx := context.Background()
	if cb := e.login(e.browser()); cb.status != http.StatusFound {
		t.Fatalf("first login: %d %s", cb.status, cb.body)
	}
	owner, err := e.st.AthleteOwner(ctx, 4242)
	if err != nil {
		t.Fatal(err)
	}
	user := owner.UserID
	for id := int64(1); id <= 4; id++ {
		if err := e.st.UpsertWorkout(ctx, &model.Workout{UserID: user, AthleteID: 4242, ActivityID: id, SportType: "Run",
			DistanceMeters: 5000, StartDateUtc: time.Date(2026, 3, 1, 7, 0, 0, 0, time.UTC), CreatedAtUtc: e.clock.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	m := &model.Milestone{UserID: user, MilestoneID: "m1", Version: 3}
	a := &model.Award{UserID: user, MilestoneID: "m1", ModelID: "rocket", PartIndex: 0, PartName: "Nose", AwardedAtUtc: e.clock.Now(), ActivityID: 1}
	for _, it := range []model.Entity{m, a} {
		if err := e.st.Put(ctx, e.st.Tables().Main, it); err != nil {
			t.Fatal(err)
		}
	}

	// The athlete revokes on strava.com; the worker confirmed it.
	sim.RevokeAthlete(4242)
	grant, err := e.st.StravaConnectionGrant(ctx, user)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	exp := now.Add(model.StravaDataRetentionDays * 24 * time.Hour)
	if err := e.st.RevokeStravaConnection(ctx, grant, now.Truncate(time.Second), exp, now); err != nil {
		t.Fatal(err)
	}
	if n, err := e.st.ExpireStravaWorkouts(ctx, user, exp); err != nil || n != 4 {
		t.Fatalf("expire: %d, %v", n, err)
	}

	// A reconnect that fails midway (one workout restored) answers an error.
	e.clock.Add(time.Hour)
	ft.allow.Store(1)
	ft.armed.Store(true)
	if cb := e.login(e.browser()); cb.status != http.StatusServiceUnavailable {
		t.Fatalf("reconnect failing midway: %d %s, want 503", cb.status, cb.body)
	}
	ft.armed.Store(false)
	if _, err := e.st.StravaConnection(ctx, user); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("connection: got %v, want none before the reconnect finished", err)
	}

	// The athlete's retry finishes it.
	b := e.browser()
	if cb := e.login(b); cb.status != http.StatusFound {
		t.Fatalf("reconnect: %d %s", cb.status, cb.body)
	}
	var me bff.MeJSON
	e.do(http.MethodGet, "/v1/me", sessionFrom(t, b, e.srv.URL), nil).json(t, &me)
	if me.UserID != user || !me.Connected {
		t.Fatalf("GET /v1/me = %+v, want user %s connected again", me, user)
	}
	if g, err := e.st.UserGuard(ctx, user); err != nil || g.Revoked() {
		t.Fatalf("guard %+v, %v; want the revocation cleared", g, err)
	}
	ws, _, err := store.QueryEntities[model.Workout](ctx, e.st.DB, e.st.Tables().Main, model.UserPK(user), model.PrefixWorkoutStrava, store.QueryOptions{})
	if err != nil || len(ws) != 4 {
		t.Fatalf("workouts %d, %v; want 4", len(ws), err)
	}
	for _, w := range ws {
		if w.ExpiresAt != 0 {
			t.Fatalf("workout %d still expires at %d", w.ActivityID, w.ExpiresAt)
		}
	}
	c, err := e.st.StravaConnection(ctx, user)
	if err != nil || !c.GrantTime().Equal(e.clock.Now()) || !sim.AccessTokenValid(c.AccessToken) {
		t.Fatalf("connection %+v, %v; want the new grant at %s", c, err, e.clock.Now())
	}
	var gotM model.Milestone
	var gotA model.Award
	if err := e.st.Get(ctx, e.st.Tables().Main, m.ItemKey(), &gotM); err != nil || gotM.Version != 3 {
		t.Fatalf("milestone %+v, %v; want it untouched", gotM, err)
	}
	if err := e.st.Get(ctx, e.st.Tables().Main, a.ItemKey(), &gotA); err != nil || gotA.PartName != "Nose" {
		t.Fatalf("award %+v, %v; want it untouched", gotA, err)
	}
}
