package bff_test

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/bff/milestones"
)

// TestSeriesPeriodsArePaged: a weekly series begun 60 weeks ago answers
// with its newest 52 periods, says 60 have begun, and its periods route
// gives the other 8 from periodsNext (the Link header and next agree), in
// pages of ?limit=. The route refuses a bad limit and cursors it never
// gave (not base64, another shape, a day that begins no period), and an
// unknown or another user's milestone is 404; a milestone that is not a
// series has no periods. Protections: the first page's bound
// (ShownPeriods), pageOf's cursor check, the route's 404.
func TestSeriesPeriodsArePaged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	sid, other := e.user("u1", 1), e.user("u2", 2)
	today := e.clock.Now().UTC()
	monday := today.AddDate(0, 0, -int(today.Weekday()+6)%7-7*59)
	create := func(body map[string]any) milestones.MilestoneJSON {
		var m milestones.MilestoneJSON
		r := e.do(http.MethodPost, "/v1/milestones", sid, body)
		if r.json(t, &m); r.status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
		return m
	}
	series := create(map[string]any{"modelId": "saturn-v", "title": "weekly", "metric": "count", "target": 1,
		"recurrence": "weekly", "periodStartDate": monday.Format(time.DateOnly)})
	single := create(map[string]any{"modelId": "saturn-v", "title": "once", "metric": "count", "target": 1, "periodStartDate": monday.Format(time.DateOnly)})
	var got milestones.MilestoneJSON
	e.do(http.MethodGet, "/v1/milestones/"+series.MilestoneID, sid, nil).json(t, &got)
	if len(got.Periods) != milestones.ShownPeriods || got.PeriodCount != 60 || got.PeriodsNext == "" ||
		got.Periods[0].StartDate != monday.AddDate(0, 0, 7*59).Format(time.DateOnly) {
		t.Fatalf("series: %d periods of %d, newest %s, next %q; want 52 of 60, the newest this week's, and a next",
			len(got.Periods), got.PeriodCount, got.Periods[0].StartDate, got.PeriodsNext)
	}
	route := "/v1/milestones/" + series.MilestoneID + "/periods"
	var page milestones.PeriodsPage
	r := e.do(http.MethodGet, route+"?limit=5&cursor="+got.PeriodsNext, sid, nil)
	r.json(t, &page)
	if r.status != http.StatusOK || len(page.Periods) != 5 || page.Periods[0].StartDate != monday.AddDate(0, 0, 7*7).Format(time.DateOnly) ||
		page.Next == "" || !strings.Contains(r.header.Get("Link"), page.Next) {
		t.Fatalf("the page after the answer's: %d %s", r.status, r.body)
	}
	r = e.do(http.MethodGet, strings.TrimPrefix(page.Next, e.srv.URL), sid, nil)
	page = milestones.PeriodsPage{}
	r.json(t, &page)
	if r.status != http.StatusOK || len(page.Periods) != 3 || page.Periods[2].StartDate != monday.Format(time.DateOnly) || page.Next != "" {
		t.Fatalf("the last page: %d %s", r.status, r.body)
	}
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, bad := range []struct{ query, field string }{
		{"?limit=0", "limit"}, {"?limit=201", "limit"}, {"?cursor=!!!", "cursor"}, {"?cursor=" + enc("a1:x"), "cursor"},
		{"?cursor=" + enc("p1:"), "cursor"}, {"?cursor=" + enc("p1:"+monday.AddDate(0, 0, 1).Format(time.DateOnly)), "cursor"},
	} {
		r := e.do(http.MethodGet, route+bad.query, sid, nil)
		if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), `"field":"`+bad.field+`"`) {
			t.Errorf("GET periods%s: %d %s, want 400 naming %s", bad.query, r.status, r.body, bad.field)
		}
	}
	for _, c := range []struct{ target, sid string }{{route, other}, {"/v1/milestones/" + strings.Repeat("0", 32) + "/periods", sid}} {
		if r := e.do(http.MethodGet, c.target, c.sid, nil); r.status != http.StatusNotFound {
			t.Errorf("GET %s: %d %s, want 404", c.target, r.status, r.body)
		}
	}
	r = e.do(http.MethodGet, "/v1/milestones/"+single.MilestoneID+"/periods", sid, nil)
	page = milestones.PeriodsPage{}
	if r.json(t, &page); r.status != http.StatusOK || len(page.Periods) != 0 || page.Next != "" {
		t.Fatalf("a milestone that is not a series: %d %s, want no periods", r.status, r.body)
	}
}
