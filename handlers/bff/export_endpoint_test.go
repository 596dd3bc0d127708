package bff_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
)

// TestExportGivesTheAthleteTheirData: GET /v1/me/export answers one JSON
// document with the profile, the connection without tokens, the milestones
// and every workout of a 3,100-workout history (more than one query page,
// more than the projector's guardrail), behind a session.
// Protections: the route's session check; the paging walk (a single query
// would stop at the guardrail's 3,000); the connection view without tokens.
func TestExportGivesTheAthleteTheirData(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	sid := e.user("u1", 31)
	const n = 3100
	var batch []model.Entity
	for i := range n {
		batch = append(batch, &model.Workout{UserID: "u1", AthleteID: 31, ActivityID: int64(1000 + i), SportType: "Run",
			DistanceMeters: 5000, StartDateUtc: time.Date(2026, 3, 1, 7, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Hour),
			CreatedAtUtc: e.clock.Now()})
	}
	if err := e.st.BatchPut(ctx, e.st.Tables().Main, batch); err != nil {
		t.Fatal(err)
	}
	if r := e.do(http.MethodGet, "/v1/me/export", "", nil); r.status != http.StatusUnauthorized {
		t.Fatalf("without a session: %d, want 401", r.status)
	}
	r := e.do(http.MethodGet, "/v1/me/export", sid, nil)
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		t.Fatalf("export: %d %s", r.status, r.header)
	}
	var got struct {
		Profile    struct{ UserID, DisplayName string }
		Connection *struct {
			AthleteID int64    `json:"athleteId"`
			Scopes    []string `json:"scopes"`
		}
		Milestones   []json.RawMessage
		Workouts     []map[string]any
		WorkoutCount int
	}
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatalf("export is not one JSON document: %v", err)
	}
	if got.Profile.UserID != "u1" || got.Profile.DisplayName != "Ath u1" || got.Connection == nil || got.Connection.AthleteID != 31 {
		t.Fatalf("export profile %+v connection %+v", got.Profile, got.Connection)
	}
	if len(got.Workouts) != n || got.WorkoutCount != n || got.Workouts[0]["activityId"] == nil {
		t.Fatalf("export holds %d workouts (count %d), want %d as stored", len(got.Workouts), got.WorkoutCount, n)
	}
	for _, secret := range []string{"access-u1", "refresh-u1", "sealed"} {
		if strings.Contains(string(r.body), secret) {
			t.Fatalf("export contains %q: tokens must never leave", secret)
		}
	}
}
