package bff_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/bff"
	"github.com/commitcollect/backend/model"
)

// The landing page is server-rendered from the same projection as
// /v1/milestones: a sign-in link without a session, else the athlete's
// milestones with progress bars and awards, every value escaped.
func TestLandingPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.h.RegisterPage(e.mux)
	ctx := context.Background()

	for _, tc := range []struct{ name, cookie string }{
		{"no cookie", ""},
		{"unknown session", model.NewID()},
	} {
		r := e.do(http.MethodGet, "/", tc.cookie, nil)
		page := string(r.body)
		if r.status != http.StatusOK || !strings.Contains(page, `href="/auth/strava/login"`) || strings.Contains(page, `class="milestone"`) ||
			!strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
			t.Fatalf("%s: %d %s\n%s", tc.name, r.status, r.header, page)
		}
	}
	if r := e.do(http.MethodGet, "/nothing-here", "", nil); r.status != http.StatusNotFound {
		t.Fatalf("GET /nothing-here = %d, want 404 (the page is only /)", r.status)
	}

	sid := e.user("u1", 1)
	r := e.do(http.MethodGet, "/", sid, nil)
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `id="empty"`) {
		t.Fatalf("signed in without milestones: %d\n%s", r.status, r.body)
	}
	// The page says which activity scope the athlete granted.
	if !strings.Contains(string(r.body), `data-scope="activity:read_all"`) || !strings.Contains(string(r.body), "private ones included") {
		t.Fatalf("page does not say which scope was granted:\n%s", r.body)
	}

	m := &model.Milestone{UserID: "u1", MilestoneID: model.NewID(), Version: 2, WrittenBy: model.WriterProjector,
		MilestoneDefinition: model.MilestoneDefinition{ModelID: "saturn-v", Title: `<script>alert(1)</script> 100 km`,
			Metric: model.MetricDistance, Target: 100000, PartCount: 10, SportTypes: []string{"Run"},
			PeriodStartAtUtc: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)},
		Projection: model.Projection{ProgressValue: 42195000, WorkoutsCounted: 3, AwardedParts: 4, Status: model.StatusActive,
			Excluded: map[string]int{"below_minimum": 1, "manual": 2}}}
	if err := e.st.DB.Put(ctx, e.st.DB.Tables().Main, m); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		a := &model.Award{UserID: "u1", MilestoneID: m.MilestoneID, ModelID: "saturn-v", PartIndex: i, PartName: "Part " + string(rune('A'+i)),
			AwardedAtUtc: time.Date(2026, 3, 10, 9, i, 0, 0, time.UTC), ActivityID: int64(1000 + i)}
		if err := e.st.DB.Put(ctx, e.st.DB.Tables().Main, a); err != nil {
			t.Fatal(err)
		}
	}
	r = e.do(http.MethodGet, "/", sid, nil)
	page := string(r.body)
	for _, want := range []string{
		`id="m-` + m.MilestoneID + `" data-status="active"`,
		`aria-valuenow="42"`, `style="width: 42%"`, `42.2 km of 100 km`, `3 workouts`, `not counted: 2 manual, 1 below minimum`,
		`<li value="1">Part A`, `<li value="4">Part D`, `&lt;script&gt;alert(1)&lt;/script&gt; 100 km`,
		`<meta http-equiv="refresh"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "<script>") || r.header.Get("Cache-Control") != "no-store" ||
		!strings.Contains(r.header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Errorf("page is not locked down: headers %v\n%s", r.header, page)
	}
	if t.Failed() {
		t.Logf("page:\n%s", page)
	}
}

// TestAmountShowsEachMetricInItsUnit: km, metres of climb, hours and
// minutes, workouts. Protection: Amount's cases (elevation once showed km,
// moving time raw seconds).
func TestAmountShowsEachMetricInItsUnit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		metric string
		v      float64
		want   string
	}{
		{"distance", 42195, "42.2 km"},
		{"distance", 100000, "100 km"},
		{"elevation", 850.4, "850 m of climb"},
		{"moving_time", 2700, "45 min"},
		{"moving_time", 19230, "5 h 21 min"},
		{"moving_time", 36000, "10 h 00 min"},
		{"count", 12, "12 workouts"},
		{"streak", 30, "30 in a row"},
	}
	for _, tt := range tests {
		if got := bff.Amount(tt.metric, tt.v); got != tt.want {
			t.Errorf("Amount(%s, %v) = %q, want %q", tt.metric, tt.v, got, tt.want)
		}
	}
}
