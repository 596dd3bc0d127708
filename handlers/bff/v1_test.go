package bff_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/bff"
	"github.com/commitcollect/backend/handlers/bff/milestones"
	"github.com/commitcollect/backend/handlers/bff/respond"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/catalog"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/sport"
)

func TestV1NeedsAValidSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	expired := e.user("u1", 1) // a 24-hour session
	e.clock.Add(23 * time.Hour)
	valid := e.session("u1")
	e.clock.Add(2 * time.Hour) // now past the first session's expiry, before DynamoDB's TTL sweep

	routes := []struct{ method, path string }{
		{http.MethodGet, "/v1/me"}, {http.MethodDelete, "/v1/me"}, {http.MethodGet, "/v1/models"},
		{http.MethodPost, "/v1/milestones"}, {http.MethodGet, "/v1/milestones"}, {http.MethodGet, "/v1/milestones/" + model.NewID()},
	}
	cookies := []struct{ name, value string }{
		{"no cookie", ""},
		{"forged opaque id", model.NewID()},
		{"malformed", "not-a-session"},
		{"expired (TTL not yet applied)", expired},
	}
	for _, r := range routes {
		for _, c := range cookies {
			resp := e.do(r.method, r.path, c.value, map[string]any{})
			if resp.status != http.StatusUnauthorized || resp.errorCode(t) != respond.CodeUnauthorized ||
				!strings.HasPrefix(resp.header.Get("Content-Type"), "application/json") {
				t.Errorf("%s %s with %s: %d %s, want 401 JSON unauthorized", r.method, r.path, c.name, resp.status, resp.body)
			}
		}
	}
	if resp := e.do(http.MethodGet, "/v1/me", valid, nil); resp.status != http.StatusOK {
		t.Fatalf("valid session: %d %s", resp.status, resp.body)
	}
}

func TestMeModelsAndLogout(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	sid := e.user("u1", 31)
	var me bff.MeJSON
	if r := e.do(http.MethodGet, "/v1/me", sid, nil); r.status != http.StatusOK {
		t.Fatalf("me: %d %s", r.status, r.body)
	} else {
		r.json(t, &me)
	}
	if me != (bff.MeJSON{UserID: "u1", AthleteID: 31, DisplayName: "Ath u1", Connected: true, ActivityScope: "activity:read_all",
		Sync: bff.SyncJSON{State: bff.SyncNone}}) {
		t.Fatalf("me = %+v", me)
	}
	var models catalog.Catalog
	r := e.do(http.MethodGet, "/v1/models", sid, nil)
	r.json(t, &models)
	want, _ := catalog.Default()
	if r.status != http.StatusOK || len(models.Models) != len(want.Models) || models.Models[0].Parts[0].Name != want.Models[0].Parts[0].Name {
		t.Fatalf("models: %d %s", r.status, r.body)
	}

	out := e.do(http.MethodPost, "/auth/logout", sid, nil)
	cleared := false
	for _, c := range (&http.Response{Header: out.header}).Cookies() {
		cleared = cleared || (c.Name == bff.SessionCookie && c.MaxAge < 0)
	}
	if out.status != http.StatusNoContent || !cleared {
		t.Fatalf("logout: %d, cookie cleared %v", out.status, cleared)
	}
	if r := e.do(http.MethodGet, "/v1/me", sid, nil); r.status != http.StatusUnauthorized {
		t.Fatalf("after logout: %d", r.status)
	}
	if ids, _, _ := e.ss.UserSessionIDs(context.Background(), "u1"); len(ids) != 0 {
		t.Fatalf("session pointers after logout: %v", ids)
	}
	if r := e.do(http.MethodPost, "/auth/logout", "", nil); r.status != http.StatusNoContent {
		t.Fatalf("logout without a session: %d", r.status)
	}
}

func TestCreateAndReadMilestones(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	sid := e.user("u1", 1)
	other := e.user("u2", 2)
	ctx := context.Background()

	r := e.do(http.MethodPost, "/v1/milestones", sid, map[string]any{
		"modelId": "saturn-v", "title": "100 km in March", "metric": "distance", "target": 100000,
		"sportTypes": []string{"Run"}, "periodStartAtUtc": "2026-03-01T00:00:00Z", "periodEndAtUtc": "2026-04-01T00:00:00+02:00",
	})
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	var created milestones.MilestoneJSON
	r.json(t, &created)
	// A March period is over everywhere once 1 April 00:00 has passed
	// at UTC−2 (its end instant): the test clock is the real time.
	wantStatus := "active"
	if !e.clock.Now().Before(time.Date(2026, 3, 31, 22, 0, 0, 0, time.UTC)) {
		wantStatus = "ended"
	}
	if created.ModelID != "saturn-v" || created.Status != wantStatus || created.Version != 0 || created.ProjectedAtUtc != nil ||
		!reflect.DeepEqual(created.Progress, milestones.Progress{Target: 100000, Excluded: map[string]int{}}) || len(created.Awards) != 0 || r.header.Get("Location") != "/v1/milestones/"+created.MilestoneID {
		t.Fatalf("created = %+v", created)
	}
	var stored model.Milestone
	if err := e.st.DB.Get(ctx, e.st.DB.Tables().Main, keys.MilestoneKey("u1", created.MilestoneID), &stored); err != nil {
		t.Fatal(err)
	}
	if stored.PartCount != 10 || stored.WrittenBy != model.WriterAPI || stored.Version != 0 || stored.Status != model.StatusActive ||
		!stored.PeriodEndAtUtc.Equal(time.Date(2026, 3, 31, 22, 0, 0, 0, time.UTC)) || stored.PeriodEndAtUtc.Location() != time.UTC {
		t.Fatalf("stored milestone = %+v", stored)
	}

	// The projector's work, as it would leave it: 42.195 km, three parts.
	projected := time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC)
	stored.ProgressValue, stored.WorkoutsCounted, stored.AwardedParts, stored.ProjectedAtUtc, stored.Version = 42195000, 3, 4, &projected, 3
	stored.WrittenBy = model.WriterProjector
	if err := e.st.DB.Put(ctx, e.st.DB.Tables().Main, &stored); err != nil {
		t.Fatal(err)
	}
	for i := 3; i >= 0; i-- {
		a := &model.Award{UserID: "u1", MilestoneID: stored.MilestoneID, ModelID: "saturn-v", PartIndex: i, PartName: "part " + string(rune('A'+i)),
			AwardedAtUtc: projected, ActivityID: int64(1000 + i)}
		if err := e.st.DB.Put(ctx, e.st.DB.Tables().Main, a); err != nil {
			t.Fatal(err)
		}
	}
	var got milestones.MilestoneJSON
	r = e.do(http.MethodGet, "/v1/milestones/"+created.MilestoneID, sid, nil)
	r.json(t, &got)
	if r.status != http.StatusOK || got.Version != 3 || got.ProjectedAtUtc == nil || !got.ProjectedAtUtc.Equal(projected) ||
		!reflect.DeepEqual(got.Progress, milestones.Progress{Value: 42195, Target: 100000, Percent: 42.1, WorkoutsCounted: 3, Excluded: map[string]int{}}) {
		t.Fatalf("GET milestone: %d %+v", r.status, got)
	}
	if len(got.Awards) != 4 || got.Awards[0].PartIndex != 0 || got.Awards[3].Name != "part D" || got.Awards[2].ActivityID != 1002 {
		t.Fatalf("awards = %+v, want parts 0..3 in order", got.Awards)
	}
	// The raw body has exactly the fields.
	for _, f := range []string{`"milestoneId"`, `"modelId"`, `"title"`, `"metric"`, `"target"`, `"status"`, `"version"`, `"projectedAtUtc"`,
		`"progress"`, `"value"`, `"percent"`, `"workoutsCounted"`, `"truncated"`, `"awards"`, `"partIndex"`, `"name"`, `"awardedAtUtc"`, `"activityId"`} {
		if !strings.Contains(string(r.body), f) {
			t.Errorf("milestone body lacks %s: %s", f, r.body)
		}
	}

	if bytes.Contains(r.body, []byte(`"exactFromUtc"`)) {
		t.Fatalf("an exact milestone shows exactFromUtc: %s", r.body)
	}
	// A period longer than the guardrail: the API says from when it is exact.
	exactFrom := time.Date(2026, 3, 4, 6, 30, 0, 0, time.UTC)
	stored.Truncated, stored.ExactFromUtc, stored.Version = true, &exactFrom, 4
	if err := e.st.DB.Put(ctx, e.st.DB.Tables().Main, &stored); err != nil {
		t.Fatal(err)
	}
	r = e.do(http.MethodGet, "/v1/milestones/"+created.MilestoneID, sid, nil)
	got = milestones.MilestoneJSON{}
	r.json(t, &got)
	if !got.Progress.Truncated || got.Progress.ExactFromUtc == nil || !got.Progress.ExactFromUtc.Equal(exactFrom) ||
		!bytes.Contains(r.body, []byte(`"exactFromUtc":"2026-03-04T06:30:00Z"`)) {
		t.Fatalf("truncated milestone: %s, want truncated with exactFromUtc %v", r.body, exactFrom)
	}

	var list struct {
		Milestones []milestones.MilestoneJSON `json:"milestones"`
	}
	r = e.do(http.MethodGet, "/v1/milestones", sid, nil)
	r.json(t, &list)
	if r.status != http.StatusOK || len(list.Milestones) != 1 || len(list.Milestones[0].Awards) != 4 {
		t.Fatalf("list: %d %s", r.status, r.body)
	}

	// Another user sees neither the milestone nor that it exists.
	if r := e.do(http.MethodGet, "/v1/milestones/"+created.MilestoneID, other, nil); r.status != http.StatusNotFound || r.errorCode(t) != respond.CodeNotFound {
		t.Fatalf("cross-user read: %d %s, want 404", r.status, r.body)
	}
	if r := e.do(http.MethodGet, "/v1/milestones/"+model.NewID(), other, nil); r.status != http.StatusNotFound {
		t.Fatalf("unknown id: %d, want 404", r.status)
	}
	if r := e.do(http.MethodGet, "/v1/milestones/x%23y", other, nil); r.status != http.StatusNotFound {
		t.Fatalf("id with a key separator: %d, want 404", r.status)
	}
	r = e.do(http.MethodGet, "/v1/milestones", other, nil)
	if r.status != http.StatusOK || string(r.body) != "{\"milestones\":[]}\n" {
		t.Fatalf("other user's list: %d %s", r.status, r.body)
	}
}

func TestCreateMilestoneRejects(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	sid := e.user("u1", 1)
	valid := func() map[string]any {
		return map[string]any{"modelId": "road-bike", "title": "Ride", "metric": "count", "target": 10, "periodStartAtUtc": "2026-03-01T00:00:00Z"}
	}
	with := func(k string, v any) map[string]any { m := valid(); m[k] = v; return m }
	without := func(k string) map[string]any { m := valid(); delete(m, k); return m }
	local := func(first, last string) map[string]any {
		m := without("periodStartAtUtc")
		m["periodStartDate"] = first
		if last != "" {
			m["periodEndDate"] = last
		}
		return m
	}
	tests := []struct {
		name  string
		given any
		want  []string
	}{
		{"unknown model", with("modelId", "death-star"), []string{"modelId"}},
		{"missing model", without("modelId"), []string{"modelId"}},
		{"bad metric", with("metric", "calories"), []string{"metric"}},
		{"negative target", with("target", -1), []string{"target"}},
		{"missing target", without("target"), []string{"target"}},
		{"target is text", with("target", "ten"), []string{"target"}},
		{"bad start time", with("periodStartAtUtc", "yesterday"), []string{"periodStartAtUtc"}},
		{"end before start", with("periodEndAtUtc", "2026-02-01T00:00:00Z"), []string{"periodEndAtUtc"}},
		{"unknown field", with("colour", "red"), []string{"colour"}},
		{"sport type in the wrong case", with("sportTypes", []string{"Run", "run"}), []string{"sportTypes"}},
		{"unknown sport group", with("sportTypes", []string{"group:flying"}), []string{"sportTypes"}},
		{"not json", "{", []string{"body"}},
		{"impossible local date", local("2026-02-30", "2026-03-31"), []string{"periodStartDate"}},
		{"impossible local end", local("2026-03-01", "2026-04-31"), []string{"periodEndDate"}},
		{"local end before start", local("2026-03-31", "2026-03-01"), []string{"periodEndDate"}},
		{"local date in another shape", local("1 March 2026", ""), []string{"periodStartDate"}},
		{"both period forms", with("periodStartDate", "2026-03-01"), []string{"periodStartDate"}},
		{"a local end with a UTC start", with("periodEndDate", "2026-03-31"), []string{"periodStartDate"}},
		{"neither period form", without("periodStartAtUtc"), []string{"periodStartAtUtc"}},
		{"everything wrong", map[string]any{"modelId": "nope", "metric": "x", "target": 0},
			[]string{"title", "metric", "target", "periodStartAtUtc", "modelId"}},
	}
	for _, tt := range tests {
		r := e.do(http.MethodPost, "/v1/milestones", sid, tt.given)
		var body respond.ErrorBody
		r.json(t, &body)
		var got []string
		for _, f := range body.Error.Fields {
			got = append(got, f.Field)
		}
		if r.status != http.StatusBadRequest || body.Error.Code != respond.CodeInvalid || strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("%s: %d fields %v (%s), want 400 naming %v", tt.name, r.status, got, r.body, tt.want)
		}
	}
	// The error names the unknown value and the type it likely meant.
	r := e.do(http.MethodPost, "/v1/milestones", sid, with("sportTypes", []string{"run"}))
	if !strings.Contains(string(r.body), `\"run\"`) || !strings.Contains(string(r.body), `did you mean \"Run\"`) {
		t.Fatalf("unknown sport type: %d %s, want the value named with a hint", r.status, r.body)
	}
	r = e.do(http.MethodPost, "/v1/milestones", sid, nil, "Content-Type", "text/plain")
	if r.status != http.StatusUnsupportedMediaType {
		t.Fatalf("text/plain body: %d, want 415", r.status)
	}
	var list struct{ Milestones []milestones.MilestoneJSON }
	e.do(http.MethodGet, "/v1/milestones", sid, nil).json(t, &list)
	if len(list.Milestones) != 0 {
		t.Fatalf("rejected requests wrote milestones: %+v", list.Milestones)
	}
}

// A sport group expands into explicit types when the milestone is created,
// so the projection stays a plain filter on stored names.
func TestCreateMilestoneExpandsSportGroups(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	sid := e.user("u1", 31)
	r := e.do(http.MethodPost, "/v1/milestones", sid, map[string]any{"modelId": "road-bike", "title": "Rides", "metric": "count",
		"target": 10, "sportTypes": []string{"group:rides", "Run"}, "periodStartAtUtc": "2026-03-01T00:00:00Z"})
	var created milestones.MilestoneJSON
	r.json(t, &created)
	if want := append(slices.Clone(sport.Groups["group:rides"]), "Run"); r.status != http.StatusCreated || !slices.Equal(created.SportTypes, want) {
		t.Fatalf("group:rides: %d %s, want 201 with sportTypes %v", r.status, r.body, want)
	}
}

func TestCORS(t *testing.T) {
	t.Parallel()
	off := newEnv(t, envOpts{})
	sid := off.user("u1", 1)
	r := off.do(http.MethodGet, "/v1/me", sid, nil, "Origin", "https://app.example")
	if r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("CORS off by default, got %q", r.header.Get("Access-Control-Allow-Origin"))
	}
	if r := off.do(http.MethodOptions, "/v1/me", "", nil, "Origin", "https://app.example", "Access-Control-Request-Method", "GET"); r.status != http.StatusForbidden {
		t.Fatalf("preflight with CORS off: %d", r.status)
	}

	on := newEnv(t, envOpts{cors: []string{"https://app.example"}})
	sid = on.user("u1", 1)
	r = on.do(http.MethodGet, "/v1/me", sid, nil, "Origin", "https://app.example")
	if r.header.Get("Access-Control-Allow-Origin") != "https://app.example" || r.header.Get("Access-Control-Allow-Credentials") != "true" ||
		r.header.Get("Access-Control-Expose-Headers") != "Link" {
		t.Fatalf("allowed origin headers = %v (the export's Link must be readable)", r.header)
	}
	if r := on.do(http.MethodGet, "/v1/me", sid, nil, "Origin", "https://evil.example"); r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("other origin allowed: %v", r.header)
	}
	p := on.do(http.MethodOptions, "/v1/milestones/abc", "", nil, "Origin", "https://app.example", "Access-Control-Request-Method", "POST")
	if p.status != http.StatusNoContent || !strings.Contains(p.header.Get("Access-Control-Allow-Methods"), "POST") ||
		p.header.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Fatalf("preflight: %d %v", p.status, p.header)
	}
}

// TestMilestoneCap: a user has at most model.MaxMilestonesPerUser
// milestones; past it POST /v1/milestones answers 409 milestone_limit and
// writes nothing; at the cap, with every part of every milestone awarded,
// the projection's read sees every milestone and award.
// Protection: the counted, conditional create (store.CreateMilestone).
func TestMilestoneCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	sid := e.user("capped", 1)
	ctx := context.Background()
	// Milestones from before the cap (no count item yet): all but one.
	var items []model.Entity
	for i := range model.MaxMilestonesPerUser - 1 {
		items = append(items, &model.Milestone{UserID: "capped", MilestoneID: fmt.Sprintf("old%02d", i), MilestoneDefinition: model.MilestoneDefinition{
			ModelID: "road-bike", Title: "m", Metric: model.MetricCount, Target: 8, PeriodStartAtUtc: e.clock.Now(), PartCount: model.MaxPartCount}})
	}
	if err := e.st.DB.BatchPut(ctx, e.st.DB.Tables().Main, items); err != nil {
		t.Fatal(err)
	}
	body := map[string]any{"modelId": "road-bike", "title": "Ride", "metric": "count", "target": 10, "periodStartAtUtc": "2026-03-01T00:00:00Z"}
	r := e.do(http.MethodPost, "/v1/milestones", sid, body)
	if r.status != http.StatusCreated {
		t.Fatalf("the milestone at the cap: %d %s, want 201", r.status, r.body)
	}
	r = e.do(http.MethodPost, "/v1/milestones", sid, body)
	var eb respond.ErrorBody
	r.json(t, &eb)
	if r.status != http.StatusConflict || eb.Error.Code != respond.CodeMilestoneLimit || eb.Error.Message == "" {
		t.Fatalf("one past the cap: %d %s, want 409 %s with a reason", r.status, r.body, respond.CodeMilestoneLimit)
	}
	// The cap counts milestones not deleted: deleting one makes room for
	// one, and only one.
	if r := e.do(http.MethodDelete, "/v1/milestones/"+"old00", sid, nil); r.status != http.StatusNotFound {
		t.Fatalf("DELETE of an id of another shape: %d, want 404", r.status)
	}
	var created milestones.MilestoneJSON
	if r := e.do(http.MethodPost, "/v1/milestones", sid, body); r.status != http.StatusConflict {
		t.Fatalf("at the cap before any deletion: %d %s, want 409", r.status, r.body)
	}
	r = e.do(http.MethodGet, "/v1/milestones", sid, nil)
	var list struct{ Milestones []milestones.MilestoneJSON }
	r.json(t, &list)
	for _, m := range list.Milestones {
		if respondOpaque(m.MilestoneID) {
			created = m
		}
	}
	if r := e.do(http.MethodDelete, "/v1/milestones/"+created.MilestoneID, sid, nil); r.status != http.StatusNoContent {
		t.Fatalf("DELETE %s: %d %s, want 204", created.MilestoneID, r.status, r.body)
	}
	if r := e.do(http.MethodPost, "/v1/milestones", sid, body); r.status != http.StatusCreated {
		t.Fatalf("after a deletion: %d %s, want 201", r.status, r.body)
	}
	if r := e.do(http.MethodPost, "/v1/milestones", sid, body); r.status != http.StatusConflict {
		t.Fatalf("past the cap again: %d %s, want 409", r.status, r.body)
	}
	// Every part of every milestone awarded: the projection still reads all.
	um, err := e.st.Milestones.UserMilestones(ctx, "capped")
	if err != nil || len(um.Milestones) != model.MaxMilestonesPerUser {
		t.Fatalf("got %d milestones, %v; want %d", len(um.Milestones), err, model.MaxMilestonesPerUser)
	}
	items = items[:0]
	for _, m := range um.Milestones {
		for p := range model.MaxPartCount {
			items = append(items, &model.Award{UserID: "capped", MilestoneID: m.MilestoneID, ModelID: "road-bike", PartIndex: p})
		}
	}
	if err := e.st.DB.BatchPut(ctx, e.st.DB.Tables().Main, items); err != nil {
		t.Fatal(err)
	}
	um, err = e.st.Milestones.UserMilestones(ctx, "capped")
	if err != nil || um.Truncated || len(um.Milestones) != model.MaxMilestonesPerUser {
		t.Fatalf("at the cap, fully awarded: %d milestones, truncated %v, %v; want %d, not truncated", len(um.Milestones), um.Truncated, err, model.MaxMilestonesPerUser)
	}
	for _, m := range um.Milestones {
		if n := len(um.Awards[m.MilestoneID]); n != model.MaxPartCount {
			t.Fatalf("milestone %s: the projection read %d awards, want %d", m.MilestoneID, n, model.MaxPartCount)
		}
	}
}

// respondOpaque says whether id has the shape of the ids the API makes.
func respondOpaque(id string) bool { return respond.OpaqueID.MatchString(id) }
