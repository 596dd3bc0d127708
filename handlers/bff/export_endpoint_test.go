package bff_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/bff"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/ports"
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
	if err := e.st.DB.BatchPut(ctx, e.st.DB.Tables().Main, batch); err != nil {
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

// nextLink is the target of a Link header's rel="next" (RFC 8288), or "".
func nextLink(h http.Header) string {
	for _, v := range h.Values("Link") {
		for _, part := range strings.Split(v, ",") {
			target, params, ok := strings.Cut(strings.TrimSpace(part), ";")
			if ok && strings.Contains(params, `rel="next"`) {
				return strings.Trim(strings.TrimSpace(target), "<>")
			}
		}
	}
	return ""
}

// TestExportPagesAreBoundedAndStable: a history larger than a page is
// given in pages, each within the page bound (as Lambda sends it,
// JSON-escaped: names full of quotes count double), the next named by Link (and
// the body's "next") until the last; workouts stored when the export began
// come exactly once although workouts arrive and change between pages
// (ids below and above the cursor); tombstones are left out; a cursor the
// API never gave is 400. Protections: the page bound, the key cursor (an
// offset would repeat or skip), the tombstone filter, the cursor check.
func TestExportPagesAreBoundedAndStable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	sid := e.user("u1", 31)
	const pageBytes = 16 << 10
	bff.SetExportPageBytes(e.h, pageBytes)
	workout := func(id int64, deleted bool) *model.Workout {
		return &model.Workout{UserID: "u1", AthleteID: 31, ActivityID: id, SportType: "Run", Name: fmt.Sprint(`Run "`, id, `" <hill> & back \ again`),
			DistanceMeters: 5000, StartDateUtc: time.Date(2026, 3, 1, 7, 0, 0, 0, time.UTC).Add(time.Duration(id) * time.Minute),
			CreatedAtUtc: e.clock.Now(), IsDeleted: deleted}
	}
	var batch []model.Entity
	want := map[int64]bool{}
	for id := int64(5000); id < 5400; id++ {
		deleted := id%40 == 0
		batch = append(batch, workout(id, deleted))
		if !deleted {
			want[id] = true
		}
	}
	if err := e.st.DB.BatchPut(ctx, e.st.DB.Tables().Main, batch); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	target, pages := "/v1/me/export", 0
	for target != "" {
		r := e.do(http.MethodGet, strings.TrimPrefix(target, e.srv.URL), sid, nil)
		// Lambda sends the body JSON-escaped: the bound holds for that.
		esc, _ := json.Marshal(string(r.body))
		if r.status != http.StatusOK || len(esc)-2 > pageBytes {
			t.Fatalf("page %d: %d, %d bytes escaped (bound %d): %s", pages, r.status, len(esc)-2, pageBytes, r.body[:min(len(r.body), 200)])
		}
		var page struct {
			Profile  *json.RawMessage
			Workouts []struct {
				ActivityID int64 `json:"activityId"`
			}
			WorkoutCount int
			Next         string
		}
		if err := json.Unmarshal(r.body, &page); err != nil {
			t.Fatalf("page %d is not one JSON document: %v", pages, err)
		}
		if (pages == 0) != (page.Profile != nil) || page.WorkoutCount != len(page.Workouts) || page.Next != nextLink(r.header) {
			t.Fatalf("page %d: profile %v, count %d of %d, next %q vs Link %q", pages, page.Profile != nil, page.WorkoutCount, len(page.Workouts), page.Next, nextLink(r.header))
		}
		for _, w := range page.Workouts {
			seen[w.ActivityID]++
		}
		if pages == 0 {
			// Workouts arrive and change between pages: before and after the cursor.
			if err := e.st.DB.BatchPut(ctx, e.st.DB.Tables().Main, []model.Entity{workout(4000, false), workout(9000, false), workout(5390, false)}); err != nil {
				t.Fatal(err)
			}
		}
		target = nextLink(r.header)
		pages++
	}
	if pages < 3 {
		t.Fatalf("%d pages; want the history split over several", pages)
	}
	for id := range want {
		if seen[id] != 1 {
			t.Errorf("activity %d given %d times, want once", id, seen[id])
		}
	}
	for id, n := range seen {
		if !want[id] && id != 9000 && id != 4000 {
			t.Errorf("activity %d given %d times: a tombstone or an unknown id", id, n)
		}
	}
	t.Logf("%d workouts in %d pages of at most %d bytes", len(want), pages, pageBytes)
	for _, bad := range []string{"abc", "dzE6LTE", "eDE6MTIz"} {
		if r := e.do(http.MethodGet, "/v1/me/export?cursor="+bad, sid, nil); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "cursor") {
			t.Errorf("cursor %q: %d %s, want 400 naming the cursor", bad, r.status, r.body)
		}
	}
}

// TestExportPagesTheCollection: a collection of 2,574 awards (of 26
// milestones of 99 parts, 24 of them deleted since) and a short history, at 64 KB a page:
// every award and every workout comes exactly once, awards first, each
// page within the bound, the profile on the first page only. Protection:
// the awards as a paged part of the export (on the first page whole, the
// collection alone outgrows the bound: at 4 MB, past about 10,000 awards).
func TestExportPagesTheCollection(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	sid := e.user("u1", 31)
	const pageBytes, milestonesN, parts = 64 << 10, 26, 99
	bff.SetExportPageBytes(e.h, pageBytes)
	at := time.Date(2026, 3, 1, 7, 0, 0, 0, time.UTC)
	for m := range milestonesN {
		id := fmt.Sprintf("m%02d", m)
		if err := e.st.Milestones.CreateMilestone(ctx, &model.Milestone{UserID: "u1", MilestoneID: id,
			MilestoneDefinition: model.MilestoneDefinition{ModelID: "rocket", Title: id, Metric: model.MetricCount, Target: parts, PartCount: parts,
				PeriodStartAtUtc: at}, Projection: model.Projection{Status: model.StatusActive}}); err != nil {
			t.Fatal(err)
		}
		for v, from := int64(0), 0; from < parts; v, from = v+1, from+33 {
			w := ports.ProjectionWrite{UserID: "u1", MilestoneID: id, ExpectedVersion: v,
				Projection: model.Projection{AwardedParts: from + 33, Status: model.StatusActive}}
			for i := from; i < from+33; i++ {
				w.Awards = append(w.Awards, &model.Award{UserID: "u1", MilestoneID: id, PartIndex: i, ActivityID: 1000, AwardedAtUtc: at.Add(time.Duration(i) * time.Minute)})
			}
			if err := e.st.Milestones.WriteProjection(ctx, w); err != nil {
				t.Fatal(err)
			}
		}
		if m >= 2 { // deleted: its awards stay in the collection
			if err := e.st.Collection.DeleteMilestone(ctx, "u1", id); err != nil {
				t.Fatal(err)
			}
		}
	}
	var batch []model.Entity
	for i := range 50 {
		batch = append(batch, &model.Workout{UserID: "u1", AthleteID: 31, ActivityID: int64(1000 + i), SportType: "Run",
			DistanceMeters: 5000, StartDateUtc: at.Add(time.Duration(i) * time.Hour), CreatedAtUtc: e.clock.Now()})
	}
	if err := e.st.DB.BatchPut(ctx, e.st.DB.Tables().Main, batch); err != nil {
		t.Fatal(err)
	}
	awards, workouts := map[string]int{}, map[int64]int{}
	target, pages := "/v1/me/export", 0
	for target != "" {
		r := e.do(http.MethodGet, strings.TrimPrefix(target, e.srv.URL), sid, nil)
		esc, _ := json.Marshal(string(r.body))
		if r.status != http.StatusOK || len(esc)-2 > pageBytes {
			t.Fatalf("page %d: %d, %d bytes escaped (bound %d): %s", pages, r.status, len(esc)-2, pageBytes, r.body[:min(len(r.body), 200)])
		}
		var page struct {
			Profile *json.RawMessage
			Awards  []struct {
				MilestoneID string `json:"milestoneId"`
				PartIndex   int    `json:"partIndex"`
			}
			AwardCount int
			Workouts   []struct {
				ActivityID int64 `json:"activityId"`
			}
		}
		if err := json.Unmarshal(r.body, &page); err != nil || (pages == 0) != (page.Profile != nil) || page.AwardCount != len(page.Awards) {
			t.Fatalf("page %d: %v, profile %v, %d awards counted %d", pages, err, page.Profile != nil, len(page.Awards), page.AwardCount)
		}
		if len(page.Awards) > 0 && len(workouts) > 0 {
			t.Fatalf("page %d gives awards after workouts", pages)
		}
		for _, a := range page.Awards {
			awards[fmt.Sprintf("%s/%d", a.MilestoneID, a.PartIndex)]++
		}
		for _, w := range page.Workouts {
			workouts[w.ActivityID]++
		}
		target = nextLink(r.header)
		pages++
	}
	if len(awards) != milestonesN*parts || len(workouts) != 50 {
		t.Fatalf("%d awards and %d workouts given in %d pages, want %d and 50", len(awards), len(workouts), pages, milestonesN*parts)
	}
	for k, n := range awards {
		if n != 1 {
			t.Errorf("award %s given %d times, want once", k, n)
		}
	}
	t.Logf("%d awards and %d workouts in %d pages of at most %d bytes", len(awards), len(workouts), pages, pageBytes)
}
