package e2e_test

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/cookiejar"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/bff/collection"
	"github.com/commitcollect/backend/handlers/bff/milestones"
	"github.com/commitcollect/backend/handlers/ingest/intake"
	"github.com/commitcollect/backend/model/calendar"
	"github.com/commitcollect/backend/scripts/stravasim"
)

// TestLocalCalendarCollectionAndDeletion is a Sydney athlete's month as a
// client sees it through the assembled api, the worker and the projector:
// "March" on their own clock counts the 6 am run of 1 March (February in
// UTC) and leaves out the 6 am run of 1 April (March in UTC), while a UTC
// March counts the other way round; both milestones' awards (one model)
// fill the collection, with duplicates; deleting a milestone removes it
// from every read and keeps its awards. Every answer is checked against
// openapi.yaml.
func TestLocalCalendarCollectionAndDeletion(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	ctx := context.Background()
	const athlete = 9042
	b := a.signIn(athlete)

	create := func(body map[string]any) milestones.MilestoneJSON {
		t.Helper()
		body["modelId"], body["metric"], body["target"] = "flying-scotsman", "count", 2
		var m milestones.MilestoneJSON
		if st := a.call(b, http.MethodPost, "/v1/milestones", body, &m); st != http.StatusCreated {
			t.Fatalf("POST /v1/milestones %v = %d %+v", body, st, m)
		}
		return m
	}
	local := create(map[string]any{"title": "Two runs in my March", "periodStartDate": "2026-03-01", "periodEndDate": "2026-03-31"})
	utc := create(map[string]any{"title": "Two runs in UTC March", "periodStartAtUtc": "2026-03-01T00:00:00Z",
		"periodEndAtUtc": "2026-04-01T00:00:00Z"})
	if local.Period != (milestones.PeriodJSON{Calendar: "local", StartDate: "2026-03-01", EndDate: "2026-03-31"}) ||
		utc.Period.Calendar != "utc" || !utc.Period.EndAtUtc.Equal(time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("periods: local %+v, utc %+v", local.Period, utc.Period)
	}

	// 6 am on 1 March in Sydney (summer time, UTC+11), mid-March, and 6 am
	// on 1 April (still summer time: it ends on 5 April).
	sydney, err := time.LoadLocation("Australia/Sydney")
	if err != nil {
		t.Fatal(err)
	}
	runs := []struct {
		id    int64
		local time.Time
	}{
		{81001, time.Date(2026, 3, 1, 6, 0, 0, 0, sydney)},
		{81002, time.Date(2026, 3, 15, 6, 0, 0, 0, sydney)},
		{81003, time.Date(2026, 4, 1, 6, 0, 0, 0, sydney)},
	}
	for _, r := range runs {
		a.sim.PutActivity(stravasim.Activity{ID: r.id, AthleteID: athlete, Name: "Bondi", SportType: "Run", Distance: 5000,
			MovingTime: 1500, ElapsedTime: 1600, StartDate: r.local.UTC(), Zone: "Australia/Sydney"})
		if d, err := a.sim.Deliver(ctx, a.srv.URL+intake.WebhookPath, a.sim.ActivityEvent("create", r.id, athlete, nil)); err != nil {
			t.Fatalf("deliver %d: %+v %v", r.id, d, err)
		}
	}
	a.settle(ctx)

	// Both complete with two runs each, but not the same two: the part
	// that the first counted run tipped names it.
	for _, tt := range []struct {
		m         milestones.MilestoneJSON
		firstRun  int64
		secondRun int64
	}{{local, 81001, 81002}, {utc, 81002, 81003}} {
		var got milestones.MilestoneJSON
		if st := a.call(b, http.MethodGet, "/v1/milestones/"+tt.m.MilestoneID, nil, &got); st != http.StatusOK {
			t.Fatalf("GET %s = %d", tt.m.MilestoneID, st)
		}
		if got.Status != "completed" || got.Progress.WorkoutsCounted != 2 || len(got.Awards) != 6 ||
			got.Awards[0].ActivityID != tt.firstRun || got.Awards[5].ActivityID != tt.secondRun {
			t.Fatalf("%s: %+v, want completed by runs %d then %d", got.Title, got, tt.firstRun, tt.secondRun)
		}
		for _, aw := range got.Awards {
			if aw.ModelID != "flying-scotsman" || aw.MilestoneID != got.MilestoneID || aw.Name == "" || aw.Metadata["rarity"] == "" {
				t.Fatalf("%s: award %+v lacks its model, milestone, name or the part's metadata", got.Title, aw)
			}
		}
	}

	// The collection: 12 awards of one model of 6 parts.
	wantModel := collection.ModelJSON{ModelID: "flying-scotsman", Name: "Flying Scotsman", PartCount: 6,
		Owned: []int{0, 1, 2, 3, 4, 5}, Duplicates: 6, Percent: 100}
	a.checkCollection(b, wantModel)
	a.logAnswer(b, "/v1/collection")
	a.logAnswer(b, "/v1/awards?limit=2")
	if n := a.countAwards(b, 5); n != 12 {
		t.Fatalf("GET /v1/awards pages gave %d awards, want 12", n)
	}

	// Deleting the local milestone: 204, then 404; its awards stay.
	if st := a.call(b, http.MethodDelete, "/v1/milestones/"+local.MilestoneID, nil, nil); st != http.StatusNoContent {
		t.Fatalf("DELETE = %d, want 204", st)
	}
	if st := a.call(b, http.MethodGet, "/v1/milestones/"+local.MilestoneID, nil, nil); st != http.StatusNotFound {
		t.Fatalf("GET after DELETE = %d, want 404", st)
	}
	if st := a.call(b, http.MethodDelete, "/v1/milestones/"+local.MilestoneID, nil, nil); st != http.StatusNotFound {
		t.Fatalf("second DELETE = %d, want 404", st)
	}
	var list struct{ Milestones []milestones.MilestoneJSON }
	if st := a.call(b, http.MethodGet, "/v1/milestones", nil, &list); st != http.StatusOK || len(list.Milestones) != 1 ||
		list.Milestones[0].MilestoneID != utc.MilestoneID {
		t.Fatalf("list after DELETE = %d %+v, want only the UTC milestone", st, list)
	}
	a.checkCollection(b, wantModel)
	if n := a.countAwards(b, 100); n != 12 {
		t.Fatalf("GET /v1/awards after the deletion gave %d awards, want 12 (awards are permanent)", n)
	}
}

// signIn logs a new athlete in through the real redirects and returns the
// browser holding the session cookie.
func (a *api) signIn(athlete int64) *http.Client {
	a.t.Helper()
	a.sim.AddAthlete(stravasim.Athlete{ID: athlete, Firstname: "Ada", Lastname: "Lovelace"})
	jar, _ := cookiejar.New(nil)
	b := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if req.URL.Path == "/" {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	resp, err := b.Get(a.srv.URL + "/auth/strava/login")
	if err != nil {
		a.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/" || resp.Request.URL.Path != "/auth/strava/callback" {
		a.t.Fatalf("login ended at %s with %d → %q", resp.Request.URL, resp.StatusCode, resp.Header.Get("Location"))
	}
	return b
}

// settle waits for the worker's jobs, then lets the projector read the
// stream to its end.
func (a *api) settle(ctx context.Context) {
	a.t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := a.queue.Wait(wctx); err != nil {
		a.t.Fatal(err)
	}
	if err := a.stream.Drain(wctx, a.projector.Handle); err != nil {
		a.t.Fatal(err)
	}
}

// checkCollection requires GET /v1/collection to hold exactly want.
func (a *api) checkCollection(b *http.Client, want collection.ModelJSON) {
	a.t.Helper()
	var got struct{ Models []collection.ModelJSON }
	if st := a.call(b, http.MethodGet, "/v1/collection", nil, &got); st != http.StatusOK || len(got.Models) != 1 {
		a.t.Fatalf("GET /v1/collection = %d %+v, want one model", st, got)
	}
	g := got.Models[0]
	if g.ModelID != want.ModelID || g.Name != want.Name || g.PartCount != want.PartCount || g.Duplicates != want.Duplicates ||
		g.Percent != want.Percent || len(g.Owned) != len(want.Owned) {
		a.t.Fatalf("collection = %+v, want %+v", g, want)
	}
}

// countAwards walks GET /v1/awards by its Link headers, limit per page,
// checking the pages run newest first, and returns how many it saw.
func (a *api) countAwards(b *http.Client, limit int) int {
	a.t.Helper()
	next := a.srv.URL + "/v1/awards?limit=" + itoa(limit)
	n := 0
	var last time.Time
	for pages := 0; next != ""; pages++ {
		if pages > 20 {
			a.t.Fatal("GET /v1/awards does not end")
		}
		var page collection.AwardsPage
		resp := a.getWithLink(b, next, &page)
		for _, aw := range page.Awards {
			if !last.IsZero() && aw.AwardedAtUtc.After(last) {
				a.t.Fatalf("awards not newest first: %v after %v", aw.AwardedAtUtc, last)
			}
			last = aw.AwardedAtUtc
		}
		n += len(page.Awards)
		link := resp.Get("Link")
		if (link == "") != (page.Next == "") || (link != "" && !strings.Contains(link, page.Next)) {
			a.t.Fatalf("Link %q and next %q disagree", link, page.Next)
		}
		next = page.Next
	}
	return n
}

func itoa(n int) string { return strconv.Itoa(n) }

// getWithLink GETs an absolute URL with the browser's cookies, decodes the
// JSON answer into out and returns its headers.
func (a *api) getWithLink(b *http.Client, u string, out any) http.Header {
	a.t.Helper()
	resp, err := b.Get(u)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		a.t.Fatalf("GET %s = %d", u, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		a.t.Fatalf("GET %s: %v", u, err)
	}
	return resp.Header
}

// TestMonthlySeries: "4 runs every month" on the athlete's own calendar is
// one milestone with a period per month: a past month completed by its own
// runs keeps its awards; the current month (on the Sydney athlete's clock,
// whatever the day of the month) shows only its own progress at the top
// and first in periods; each award names its period; a series counts once
// towards the limit. Refusals name the field.
func TestMonthlySeries(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	ctx := context.Background()
	const athlete = 9077
	sydney, err := time.LoadLocation("Australia/Sydney")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().In(sydney)
	thisMonth := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, sydney)
	start := thisMonth.AddDate(0, -2, 0) // two months back
	// Four runs in the first month, on Strava before the athlete connects
	// (one at 6 am on its first day, the last day of the month before in
	// UTC): the connect's backfill imports them. Two runs this month
	// arrive as webhooks.
	put := func(i int, d time.Time) int64 {
		id := int64(91000 + i)
		a.sim.PutActivity(stravasim.Activity{ID: id, AthleteID: athlete, SportType: "Run", Distance: 5000, MovingTime: 1500,
			ElapsedTime: 1600, StartDate: d.UTC(), Zone: "Australia/Sydney"})
		return id
	}
	for i, d := range []time.Time{start.Add(6 * time.Hour), start.AddDate(0, 0, 3), start.AddDate(0, 0, 9), start.AddDate(0, 0, 20)} {
		put(i, d)
	}
	b := a.signIn(athlete)
	for _, bad := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"periodStartAtUtc": "2026-03-01T00:00:00Z"}, "recurrence"},
		{map[string]any{"periodStartDate": start.AddDate(0, 0, 1).Format(time.DateOnly)}, "periodStartDate"},
		{map[string]any{"periodStartDate": start.Format(time.DateOnly), "recurrence": "daily"}, "recurrence"},
	} {
		body := map[string]any{"modelId": "flying-scotsman", "title": "x", "metric": "count", "target": 4, "recurrence": "monthly"}
		maps.Copy(body, bad.body)
		var eb struct {
			Error struct {
				Fields []struct{ Field string }
			}
		}
		if st := a.call(b, http.MethodPost, "/v1/milestones", body, &eb); st != http.StatusBadRequest ||
			len(eb.Error.Fields) == 0 || eb.Error.Fields[0].Field != bad.field {
			t.Fatalf("POST %v = %d %+v, want 400 naming %s", body, st, eb, bad.field)
		}
	}
	var series milestones.MilestoneJSON
	if st := a.call(b, http.MethodPost, "/v1/milestones", map[string]any{"modelId": "flying-scotsman", "title": "4 runs every month",
		"metric": "count", "target": 4, "recurrence": "monthly", "periodStartDate": start.Format(time.DateOnly)}, &series); st != http.StatusCreated {
		t.Fatalf("POST series = %d %+v", st, series)
	}
	for i, d := range []time.Time{thisMonth.Add(7 * time.Hour), thisMonth.Add(31 * time.Hour)} {
		id := put(10+i, d)
		if dl, err := a.sim.Deliver(ctx, a.srv.URL+intake.WebhookPath, a.sim.ActivityEvent("create", id, athlete, nil)); err != nil {
			t.Fatalf("deliver %d: %+v %v", id, dl, err)
		}
	}
	a.settle(ctx)
	var got milestones.MilestoneJSON
	before := time.Now()
	if st := a.call(b, http.MethodGet, "/v1/milestones/"+series.MilestoneID, nil, &got); st != http.StatusOK {
		t.Fatalf("GET series = %d", st)
	}
	// Last month has ended once its last day is over in every zone, up to
	// a day after Sydney's new month began: the status the read saw.
	lastOfMid, _ := calendar.ParseDate(thisMonth.AddDate(0, 0, -1).Format(time.DateOnly))
	midStatus := map[string]bool{statusAt(before, calendar.DayOver(lastOfMid)): true, statusAt(time.Now(), calendar.DayOver(lastOfMid)): true}
	if got.Recurrence != "monthly" || len(got.Periods) != 3 || got.ProjectedAtUtc == nil {
		t.Fatalf("series %+v, want three monthly periods so far, the current one projected", got)
	}
	cur, mid, first := got.Periods[0], got.Periods[1], got.Periods[2]
	if cur.StartDate != thisMonth.Format(time.DateOnly) || cur.Status != "active" || cur.Progress.WorkoutsCounted != 2 ||
		got.Status != "active" || !reflect.DeepEqual(got.Progress, cur.Progress) || len(got.Awards) != len(cur.Awards) {
		t.Fatalf("current period %+v, top %s %+v; want this month active with its own two runs at the top (all: %+v)", cur, got.Status, got.Progress, got.Periods)
	}
	if mid.Progress.WorkoutsCounted != 0 || !midStatus[mid.Status] || len(mid.Awards) != 0 {
		t.Fatalf("last month %+v, want %v with nothing counted", mid, midStatus)
	}
	if first.StartDate != start.Format(time.DateOnly) || first.Status != "completed" || first.Progress.WorkoutsCounted != 4 || len(first.Awards) != 6 {
		t.Fatalf("first month %+v, want completed by its four runs", first)
	}
	for _, aw := range first.Awards {
		if aw.StartDate != first.StartDate || aw.MilestoneID != series.MilestoneID {
			t.Fatalf("award %+v does not name its period %s", aw, first.StartDate)
		}
	}
	a.logAnswer(b, "/v1/milestones/"+series.MilestoneID)
	var page collection.AwardsPage
	a.getWithLink(b, a.srv.URL+"/v1/awards", &page)
	if len(page.Awards) != 6+len(cur.Awards) {
		t.Fatalf("GET /v1/awards: %d awards, want the first month's 6 and this month's %d", len(page.Awards), len(cur.Awards))
	}
}

// statusAt is what a period with nothing counted says at now: ended once
// over (its last day over everywhere), else active.
func statusAt(now, over time.Time) string {
	if now.Before(over) {
		return "active"
	}
	return "ended"
}

// logAnswer logs the raw answer to GET path (go test -v shows a client's
// view of the routes).
func (a *api) logAnswer(b *http.Client, path string) {
	a.t.Helper()
	resp, err := b.Get(a.srv.URL + path)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a.t.Logf("GET %s → %d Link=%q\n%s", path, resp.StatusCode, resp.Header.Get("Link"), raw)
}
