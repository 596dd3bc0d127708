package bff_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/bff"
	"github.com/commitcollect/backend/handlers/bff/export"
	"github.com/commitcollect/backend/handlers/bff/milestones"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/calendar"
	"github.com/commitcollect/backend/model/store/metering"
	"github.com/commitcollect/backend/test/fixture"
)

// metered serves e's routes, recording what each request cost DynamoDB.
func metered(e *env) (*httptest.Server, func() metering.Snapshot) {
	var mu sync.Mutex
	var last metering.Snapshot
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, m := metering.StartMeter(r.Context())
		e.mux.ServeHTTP(w, r.WithContext(ctx))
		mu.Lock()
		last = m.Snapshot()
		mu.Unlock()
	}))
	e.t.Cleanup(srv.Close)
	return srv, func() metering.Snapshot { mu.Lock(); defer mu.Unlock(); return last }
}

// get reads target from srv with the session sid.
func get(t *testing.T, srv *httptest.Server, target, sid string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+target, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(&http.Cookie{Name: bff.SessionCookie, Value: sid})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body, resp.Header
}

// collect files n awards in user's collection as the mint leaves them
// (entries marked summarized, the summary's counts, its header), written
// in batches: a collection of years.
func collect(t *testing.T, e *env, user string, n int) {
	t.Helper()
	items, err := fixture.Collection(user, n)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.DB.BatchPutItems(context.Background(), e.st.DB.Tables().Main, items); err != nil {
		t.Fatal(err)
	}
}

// TestALongLife: a user of years, with 50,000 awards and a weekly series of
// 1,040 completed periods (the largest catalog model, 12 parts: 13,520
// items), beside a user with 50 awards. GET /v1/collection costs both the
// same; the export gives every award once in pages of at most 4 MB as
// Lambda sends them; the series' answer shows its newest 52 periods, and
// its periods route every one, a page at a time. The figures
// are printed. Protections: the collection's summary (counting 50,000
// entries is about 1,900 read units a call), the export's paged awards
// (the first page carried the whole collection, about 15 MB here), the
// series' read to the end of its prefix.
func TestALongLife(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{tables: privateTables})
	srv, cost := metered(e)
	const big, small = 50_000, 50
	sids := map[int]string{big: e.user("u-long", 41), small: e.user("u-short", 42)}
	collect(t, e, "u-long", big)
	collect(t, e, "u-short", small)
	reads := map[int]metering.Snapshot{}
	for n, sid := range sids {
		status, body, _ := get(t, srv, "/v1/collection", sid)
		if status != http.StatusOK || !strings.Contains(string(body), `"modelId":"endeavour"`) {
			t.Fatalf("GET /v1/collection with %d awards: %d %s", n, status, body)
		}
		reads[n] = cost()
	}
	t.Logf("GET /v1/collection: %d awards %d requests %.1f RCU; %d awards %d requests %.1f RCU",
		small, reads[small].Requests, reads[small].RCU, big, reads[big].Requests, reads[big].RCU)
	if reads[small].Requests != reads[big].Requests || reads[small].RCU != reads[big].RCU {
		t.Fatalf("the collection of %d awards costs %+v, of %d %+v: want the same", big, reads[big].Units, small, reads[small].Units)
	}

	seen, pages, maxBytes, rcu := map[string]int{}, 0, 0, 0.0
	for target := "/v1/me/export"; target != ""; pages++ {
		status, body, hdr := get(t, srv, target, sids[big])
		esc, _ := json.Marshal(string(body))
		if status != http.StatusOK || len(esc)-2 > export.PageBytes {
			t.Fatalf("export page %d: %d, %d bytes escaped (bound %d)", pages, status, len(esc)-2, export.PageBytes)
		}
		maxBytes, rcu = max(maxBytes, len(esc)-2), rcu+cost().RCU
		var page struct {
			Awards []struct {
				MilestoneID  string    `json:"milestoneId"`
				PartIndex    int       `json:"partIndex"`
				AwardedAtUtc time.Time `json:"awardedAtUtc"`
			}
		}
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatalf("export page %d: %v", pages, err)
		}
		for _, a := range page.Awards {
			seen[fmt.Sprint(a.MilestoneID, a.PartIndex, a.AwardedAtUtc.UnixNano())]++
		}
		target = strings.TrimPrefix(nextLink(hdr), e.srv.URL)
	}
	if len(seen) != big {
		t.Fatalf("the export gave %d distinct awards in %d pages, want %d", len(seen), pages, big)
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("award %s given %d times", k, n)
		}
	}
	t.Logf("export of %d awards: %d pages, the largest %d bytes escaped (bound %d), %.0f RCU in all", big, pages, maxBytes, export.PageBytes, rcu)

	longSeries(t, e, srv, cost, sids[big])
}

// longSeries: a weekly series of 1,040 completed periods of 12 parts: its
// answer shows the newest page, and its periods route pages through all.
func longSeries(t *testing.T, e *env, srv *httptest.Server, cost func() metering.Snapshot, sid string) {
	t.Helper()
	ctx := context.Background()
	const user, weeks, parts = "u-long", 1040, 12
	series := model.NewID()
	first := calendar.FormatDate(time.Now().UTC().AddDate(0, 0, -7*(weeks-1)-int(time.Now().UTC().Weekday()+6)%7))
	if err := e.st.Milestones.CreateMilestone(ctx, &model.Milestone{UserID: user, MilestoneID: series, MilestoneDefinition: model.MilestoneDefinition{
		ModelID: "endeavour", Title: "weekly", Metric: model.MetricCount, Target: 1, PartCount: parts, Recurrence: "weekly",
		PeriodStartDate: first}, Projection: model.Projection{Status: model.StatusActive}}); err != nil {
		t.Fatal(err)
	}
	start, _ := calendar.ParseDate(first)
	var es []model.Entity
	for w := range weeks {
		day := calendar.FormatDate(start.AddDate(0, 0, 7*w))
		es = append(es, &model.Milestone{UserID: user, MilestoneID: series, PeriodOf: day,
			MilestoneDefinition: model.MilestoneDefinition{ModelID: "endeavour", PartCount: parts},
			Projection:          model.Projection{Status: model.StatusCompleted, AwardedParts: parts, ProgressValue: 1, WorkoutsCounted: 1}})
		for i := range parts {
			es = append(es, &model.Award{UserID: user, MilestoneID: series, ModelID: "endeavour", PeriodOf: day, PartIndex: i,
				AwardedAtUtc: start.AddDate(0, 0, 7*w), Collected: true})
		}
	}
	if err := e.st.DB.BatchPut(ctx, e.st.DB.Tables().Main, es); err != nil {
		t.Fatal(err)
	}
	status, body, _ := get(t, srv, "/v1/milestones/"+series, sid)
	c := cost()
	var got struct {
		Periods []struct {
			StartDate string
			Status    string
			Awards    []json.RawMessage
		}
		PeriodCount int
		PeriodsNext string
	}
	if err := json.Unmarshal(body, &got); status != http.StatusOK || err != nil || len(got.Periods) != milestones.ShownPeriods ||
		got.PeriodCount != weeks || got.PeriodsNext == "" {
		t.Fatalf("GET the series: %d, %d periods of %d, next %q (%v); want %d of %d and a next: %.300s", status, len(got.Periods),
			got.PeriodCount, got.PeriodsNext, err, milestones.ShownPeriods, weeks, body)
	}
	t.Logf("GET a weekly series of %d periods (%d items): %d periods shown, %d requests %.1f RCU, %d bytes",
		weeks, len(es), len(got.Periods), c.Requests, c.RCU, len(body))
	seen, pages, largest, reqs, rcu := map[string]bool{}, 0, 0, 0, 0.0
	for target := "/v1/milestones/" + series + "/periods?limit=200"; target != ""; pages++ {
		status, body, hdr := get(t, srv, target, sid)
		got.Periods = nil
		if err := json.Unmarshal(body, &got); status != http.StatusOK || err != nil {
			t.Fatalf("GET %s: %d (%v) %.300s", target, status, err, body)
		}
		for _, p := range got.Periods {
			if seen[p.StartDate] || p.Status != string(model.StatusCompleted) || len(p.Awards) != parts {
				t.Fatalf("period %s: seen before %v, %s with %d awards; want once, completed with %d", p.StartDate, seen[p.StartDate], p.Status, len(p.Awards), parts)
			}
			seen[p.StartDate] = true
		}
		c := cost()
		largest, reqs, rcu = max(largest, len(body)), reqs+c.Requests, rcu+c.RCU
		target = strings.TrimPrefix(nextLink(hdr), e.srv.URL)
	}
	if len(seen) != weeks {
		t.Fatalf("the periods route listed %d periods in %d pages, want %d", len(seen), pages, weeks)
	}
	t.Logf("GET its periods, 200 a page: %d pages, the largest %d bytes, %d requests %.1f RCU in all", pages, largest, reqs, rcu)
}
