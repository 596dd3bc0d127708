package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/bff"
	"github.com/commitcollect/backend/handlers/bff/milestones"
	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/limits"
	"github.com/commitcollect/backend/model/syncstate"
	"github.com/commitcollect/backend/scripts/runkit"
	"github.com/commitcollect/backend/scripts/stravasim"
	"github.com/commitcollect/backend/test/dynamolocal"
)

// browserLogin signs athlete in through the stack's OAuth redirects (the
// simulator's authorize page) and returns the browser with its session.
func browserLogin(t *testing.T, st *runkit.Stack, athlete int64) *http.Client {
	t.Helper()
	st.Sim.SetAuthorization(stravasim.Authorization{AthleteID: athlete})
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if req.URL.Path == "/" {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	resp, err := c.Get(st.APIURL + "/auth/strava/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/" {
		t.Fatalf("login ended with %d at %s, want a redirect home", resp.StatusCode, resp.Request.URL)
	}
	return c
}

// A new athlete with 500 activities over the last 300 days connects through
// the local stack's OAuth: the connect enqueues a backfill, and a yearly
// milestone created right after reflects all 500 once the backfill's pages
// have run (budget permitting: 3 list requests here).
func TestLocalStackBackfillsANewAthletesHistoryOnConnect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := startQuietStack(t)
	const athlete = int64(8801)
	st.Sim.AddAthlete(stravasim.Athlete{ID: athlete, Firstname: "Long", Lastname: "Memory"})
	now := time.Now().UTC()
	for i := range 500 {
		st.Sim.PutActivity(stravasim.Activity{ID: 880_000 + int64(i), AthleteID: athlete, Name: fmt.Sprintf("Run %d", i),
			SportType: "Run", Distance: 5000, MovingTime: 1500, ElapsedTime: 1600,
			StartDate: now.Add(-time.Duration(i+1) * 14 * time.Hour).Truncate(time.Second)})
	}
	began := time.Now()
	browser := browserLogin(t, st, athlete)
	var m milestones.MilestoneJSON
	start := now.AddDate(0, 0, -300).Truncate(24 * time.Hour)
	if err := runkit.SendJSON(ctx, browser, http.MethodPost, st.APIURL+"/v1/milestones", map[string]any{
		"modelId": "road-bike", "title": "500 runs", "metric": "count", "target": 500, "sportTypes": []string{"Run"},
		"periodStartAtUtc": start,
	}, &m, http.StatusCreated); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if err := runkit.SendJSON(ctx, browser, http.MethodGet, st.APIURL+"/v1/milestones/"+m.MilestoneID, nil, &m, http.StatusOK); err != nil {
			t.Fatal(err)
		}
		if m.Progress.WorkoutsCounted == 500 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if m.Progress.WorkoutsCounted != 500 || m.Status != string(model.StatusCompleted) {
		t.Fatalf("milestone after the backfill: %d workouts counted, status %s; want all 500, completed", m.Progress.WorkoutsCounted, m.Status)
	}
	var me bff.MeJSON
	if err := runkit.SendJSON(ctx, browser, http.MethodGet, st.APIURL+"/v1/me", nil, &me, http.StatusOK); err != nil {
		t.Fatal(err)
	}
	stats := st.Sim.Stats()
	if sync := me.Sync; sync.State != string(syncstate.SyncIdle) || sync.ImportedCount != 500 || sync.ProgressPercent != 100 ||
		sync.LastSyncAtUtc == nil || sync.Horizon == nil || sync.Horizon.After(start) || stats.ListRequests != 3 {
		t.Fatalf("GET /v1/me sync %+v after %d list requests; want idle, 500 imported back to %s, 3 requests", sync, stats.ListRequests, start)
	}
	t.Logf("500 activities imported and counted %s after the connect: %d list requests (%.1f per 1000 activities), %d activity fetches",
		time.Since(began).Round(time.Millisecond), stats.ListRequests, float64(stats.ListRequests)*1000/500, stats.ActivityFetches)
}

// An athlete edits an activity's distance on Strava; Strava sends no
// webhook for that. The next reconciliation round of the local stack
// (CC_RECONCILE_INTERVAL) writes the edit, and the milestone follows.
func TestLocalStackReconcilesAnEditStravaNeverPushed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// No upload follows the backfill, so only the idle round-robin
	// (CC_RECONCILE_IDLE) lists the athlete again: shortened with the slot.
	st := startQuietStack(t, map[string]string{"CC_RECONCILE_INTERVAL": "1s", "CC_RECONCILE_IDLE": "2s"})
	const athlete, user = int64(8802), "u-reconcile"
	st.Sim.AddAthlete(stravasim.Athlete{ID: athlete, Firstname: "Edit"})
	tok := st.Sim.IssueTokens(athlete, time.Hour)
	now := time.Now().UTC()
	if err := st.Store.Users.CreateUser(ctx, &model.Profile{UserID: user, AthleteID: athlete, DisplayName: "Edit", CreatedAtUtc: now},
		&model.StravaConnection{UserID: user, AthleteID: athlete, AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken,
			ExpiresAtUtc: tok.ExpiresAt, Scopes: tok.Scope, TokenVersion: 1, UpdatedAtUtc: now}); err != nil {
		t.Fatal(err)
	}
	m := &model.Milestone{UserID: user, MilestoneID: "month", WrittenBy: model.WriterAPI, CreatedAtUtc: now,
		MilestoneDefinition: model.MilestoneDefinition{ModelID: "road-bike", Title: "Run 100 km", Metric: model.MetricDistance,
			Target: 100000, SportTypes: []string{"Run"}, PeriodStartAtUtc: now.AddDate(0, 0, -10), PartCount: 10},
		Projection: model.Projection{Status: model.StatusActive}}
	if err := st.Store.DB.PutIfAbsent(ctx, st.Store.DB.Tables().Main, m); err != nil {
		t.Fatal(err)
	}
	const id = 880_900
	st.Sim.PutActivity(stravasim.Activity{ID: id, AthleteID: athlete, Name: "Run", SportType: "Run", Distance: 10000,
		MovingTime: 3000, ElapsedTime: 3100, StartDate: now.AddDate(0, 0, -2).Truncate(time.Second)})
	waitProgress := func(want int64) time.Duration {
		t.Helper()
		began := time.Now()
		deadline := began.Add(time.Minute)
		for {
			var got model.Milestone
			if err := st.Store.DB.Get(ctx, st.Store.DB.Tables().Main, keys.MilestoneKey(user, "month"), &got); err != nil {
				t.Fatal(err)
			}
			if got.ProgressValue == want {
				return time.Since(began)
			}
			if time.Now().After(deadline) {
				t.Fatalf("milestone progress %d mm, want %d mm", got.ProgressValue, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// An activity no webhook announced is written by a reconciliation…
	waitProgress(10_000_000)
	// … and so is an edit Strava never pushes.
	st.Sim.UpdateActivity(id, func(a *stravasim.Activity) { a.Distance = 12345 })
	took := waitProgress(12_345_000)
	w, err := st.Store.Workouts.Workout(ctx, user, id)
	if err != nil || w.DistanceMeters != 12345 {
		t.Fatalf("workout after the reconciliation: %+v, %v", w, err)
	}
	t.Logf("edit reflected %s after it was made (reconciliation every 1s), %d list requests, %d webhooks",
		took.Round(time.Millisecond), st.Sim.Stats().ListRequests, st.Sim.Stats().WebhookDeliveries)
}

// A backfill is interrupted mid-page (the stack stops, its running job is
// cancelled) and the next stack on the same tables resumes it from its
// cursor: every activity is written exactly once, by the count of the
// backfill's own page audit entries (writtenIds).
func TestLocalStackBackfillResumesAfterAStopAndImportsEachActivityOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sim := stravasim.New(stravasim.Options{})
	t.Cleanup(sim.Close)
	env := map[string]string{
		"STRAVA_BASE_URL": sim.URL, "STRAVA_CLIENT_ID": sim.ClientID(), "STRAVA_CLIENT_SECRET": sim.ClientSecret(),
		"CC_TABLE_PREFIX": dynamolocal.UniquePrefix(), "CC_OUTBOX_LEASE": "1s", "CC_TOKEN_KEY": "a2tra2tra2tra2tra2tra2tra2tra2tra2tra2tra2s=",
	}
	const athlete, user, n = int64(8803), "u-resume", 450
	now := time.Now().UTC()
	for i := range n {
		sim.PutActivity(stravasim.Activity{ID: 881_000 + int64(i), AthleteID: athlete, Name: "Run", SportType: "Run",
			Distance: 4000, MovingTime: 1200, ElapsedTime: 1300, StartDate: now.Add(-time.Duration(i+1) * 12 * time.Hour).Truncate(time.Second)})
	}
	// Every list answer takes 1.5 s: the stop lands inside one.
	sim.AddFault(stravasim.Fault{Endpoint: stravasim.EndpointList, Delay: 1500 * time.Millisecond, Count: 100})

	first := startQuietStack(t, env)
	tok := sim.IssueTokens(athlete, time.Hour)
	if err := first.Store.Users.CreateUser(ctx, &model.Profile{UserID: user, AthleteID: athlete, CreatedAtUtc: now},
		&model.StravaConnection{UserID: user, AthleteID: athlete, AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken,
			ExpiresAtUtc: tok.ExpiresAt, Scopes: tok.Scope, TokenVersion: 1, UpdatedAtUtc: now}); err != nil {
		t.Fatal(err)
	}
	if ok, err := first.Scheduler.EnsureBackfill(ctx, user, "test"); !ok || err != nil {
		t.Fatalf("EnsureBackfill: %v, %v", ok, err)
	}
	// Stop once the first page is recorded and the second is being listed.
	deadline := time.Now().Add(time.Minute)
	for {
		s, err := limits.New(first.Store).SyncState(ctx, user)
		if err == nil && s.Pages >= 1 && sim.Stats().ListRequests >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first page was never recorded")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // inside the second list answer's 1.5 s
	stopped, cancel := context.WithCancel(ctx)
	cancel() // no grace: the running job is cancelled mid-page
	first.Close(stopped)
	mid, err := limits.New(first.Store).SyncState(ctx, user)
	if err != nil || mid.State == syncstate.SyncIdle || mid.Pages != 1 {
		t.Fatalf("after the stop: %d pages, state %s, %v; want the backfill unfinished after one page", mid.Pages, mid.State, err)
	}
	listsAtStop := sim.Stats().ListRequests

	second := startQuietStack(t, env)
	deadline = time.Now().Add(2 * time.Minute)
	var s *syncstate.SyncState
	for {
		if s, err = limits.New(second.Store).SyncState(ctx, user); err == nil && s.State == syncstate.SyncIdle {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the backfill did not finish after the restart: %+v, %v", s, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The sync state turns idle before the last page's audit entries are
	// written (page, then completed): wait for the completed one.
	var entries []model.AuditEntry
	for {
		if entries, _, err = dynamo.QueryEntities[model.AuditEntry](ctx, second.Store.DB, second.Store.DB.Tables().Audit,
			keys.UserPK(user), keys.PrefixAudit, dynamo.QueryOptions{}); err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(entries, func(e model.AuditEntry) bool { return e.EventType == ingest.AuditSyncCompleted }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no STRAVA_SYNC_COMPLETED audit entry after the backfill turned idle")
		}
		time.Sleep(50 * time.Millisecond)
	}
	writes := map[string]int{}
	pages := 0
	for _, e := range entries {
		if e.EventType != ingest.AuditSyncPage {
			continue
		}
		pages++
		// A page the stop cut short wrote some workouts without recording
		// the page; the resumed page lists them as recovered.
		for _, id := range strings.Split(e.Details["writtenIds"]+","+e.Details["recoveredIds"], ",") {
			if id != "" {
				writes[id]++
			}
		}
	}
	for id, c := range writes {
		if c != 1 {
			t.Errorf("activity %s written %d times", id, c)
		}
	}
	ws, _, err := dynamo.QueryEntities[model.Workout](ctx, second.Store.DB, second.Store.DB.Tables().Main, keys.UserPK(user),
		keys.PrefixWorkoutStrava, dynamo.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(writes) != n || len(ws) != n || s.ImportedCount != n {
		t.Fatalf("got %d activities written, %d workouts, importedCount %d; want %d each", len(writes), len(ws), s.ImportedCount, n)
	}
	t.Logf("stopped after %d list requests (cursor %s), resumed: %d pages recorded, %d list requests in all, each of %d activities written once",
		listsAtStop, mid.CursorBeforeUtc.Format(time.RFC3339), pages, sim.Stats().ListRequests, n)
}
