package bff_test

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/bff"
	"github.com/commitcollect/backend/handlers/bff/openapi"
	"github.com/commitcollect/backend/model/syncstate"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestSyncJSONOf(t *testing.T) {
	t.Parallel()
	started, horizon := at("2026-11-20T12:00:00Z"), at("2025-11-20T12:00:00Z")
	tests := []struct {
		name string
		st   *syncstate.SyncState
		want bff.SyncJSON
	}{
		{"never synced", nil, bff.SyncJSON{State: bff.SyncNone}},
		{"backfill before its first page", &syncstate.SyncState{State: syncstate.SyncBackfilling, Mode: syncstate.SyncModeBackfill,
			HorizonUtc: horizon, WindowFromUtc: horizon, JobStartedAtUtc: started, NextSyncAtUtc: started},
			bff.SyncJSON{State: "backfilling", Mode: "backfill", Horizon: &horizon, NextSyncAtUtc: &started}},
		{"backfill a quarter through its year", &syncstate.SyncState{State: syncstate.SyncBackfilling, Mode: syncstate.SyncModeBackfill, ImportedCount: 120,
			HorizonUtc: horizon, WindowFromUtc: horizon, JobStartedAtUtc: started, CursorBeforeUtc: started.Add(-started.Sub(horizon) / 4)},
			bff.SyncJSON{State: "backfilling", Mode: "backfill", ImportedCount: 120, Horizon: &horizon, ProgressPercent: 25}},
		{"a backfill extending an earlier one counts from where that one reached", &syncstate.SyncState{State: syncstate.SyncBackfilling,
			Mode: syncstate.SyncModeBackfill, HorizonUtc: horizon, WindowFromUtc: horizon, JobStartedAtUtc: started,
			ImportedFromUtc: horizon.AddDate(0, 0, 180), CursorBeforeUtc: horizon.AddDate(0, 0, 90)},
			bff.SyncJSON{State: "backfilling", Mode: "backfill", Horizon: &horizon, ProgressPercent: 50}},
		{"deferred with its reason and the end of the wait", &syncstate.SyncState{State: syncstate.SyncDeferred, Mode: syncstate.SyncModeBackfill,
			HorizonUtc: horizon, WindowFromUtc: horizon, JobStartedAtUtc: started, CursorBeforeUtc: horizon, NextSyncAtUtc: started,
			DeferredReason: "sync budget share spent"},
			bff.SyncJSON{State: "deferred", Mode: "backfill", Horizon: &horizon, NextSyncAtUtc: &started, Reason: "sync budget share spent", ProgressPercent: 100}},
		{"failed shows why", &syncstate.SyncState{State: syncstate.SyncFailed, Mode: syncstate.SyncModeReconcile, DeferredReason: "strava refused the token"},
			bff.SyncJSON{State: "failed", Mode: "reconcile", Reason: "strava refused the token"}},
		{"a stale reason is not shown while running", &syncstate.SyncState{State: syncstate.SyncReconciling, Mode: syncstate.SyncModeReconcile, DeferredReason: "old"},
			bff.SyncJSON{State: "reconciling", Mode: "reconcile"}},
		{"idle is complete, with its last and next check", &syncstate.SyncState{State: syncstate.SyncIdle, Mode: syncstate.SyncModeReconcile, ImportedCount: 500,
			HorizonUtc: horizon, LastSyncAtUtc: started, NextSyncAtUtc: started.Add(6 * time.Hour)},
			bff.SyncJSON{State: "idle", Mode: "reconcile", ImportedCount: 500, Horizon: &horizon, LastSyncAtUtc: &started,
				NextSyncAtUtc: ptr(started.Add(6 * time.Hour)), ProgressPercent: 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, _ := json.Marshal(bff.SyncJSONOf(tt.st))
			want, _ := json.Marshal(tt.want)
			if string(got) != string(want) {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// GET /v1/me and the landing page show the stored sync state; a user
// without one reads as state "none".
func TestMeAndPageShowTheSyncState(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.h.RegisterPage(e.mux)
	ctx := context.Background()
	sid := e.user("u1", 31)

	var me struct {
		Sync map[string]any `json:"sync"`
	}
	r := e.do(http.MethodGet, "/v1/me", sid, nil)
	r.json(t, &me)
	if r.status != http.StatusOK || me.Sync["state"] != "none" {
		t.Fatalf("me without a sync: %d %s", r.status, r.body)
	}
	if page := string(e.do(http.MethodGet, "/", sid, nil).body); !strings.Contains(page, `data-state="none"`) ||
		!strings.Contains(page, "not been imported yet") {
		t.Errorf("page without a sync:\n%s", page)
	}

	started, horizon := time.Now().UTC().Truncate(time.Second), time.Now().UTC().AddDate(-1, 0, 0).Truncate(time.Second)
	st := &syncstate.SyncState{UserID: "u1", AthleteID: 31, State: syncstate.SyncDeferred, Mode: syncstate.SyncModeBackfill, ImportedCount: 321,
		HorizonUtc: horizon, WindowFromUtc: horizon, JobStartedAtUtc: started, CursorBeforeUtc: started.Add(-started.Sub(horizon) * 6 / 10),
		NextSyncAtUtc: started.Add(15 * time.Minute), DeferredReason: "sync <budget> share spent"}
	if err := e.st.DB.Put(ctx, e.st.DB.Tables().Main, st); err != nil {
		t.Fatal(err)
	}
	r = e.do(http.MethodGet, "/v1/me", sid, nil)
	r.json(t, &me)
	for k, want := range map[string]any{"state": "deferred", "mode": "backfill", "importedCount": 321.0, "progressPercent": 60.0,
		"horizon": horizon.Format(time.RFC3339), "nextSyncAtUtc": started.Add(15 * time.Minute).Format(time.RFC3339),
		"reason": "sync <budget> share spent"} {
		if me.Sync[k] != want {
			t.Errorf("me.sync.%s = %v, want %v (%s)", k, me.Sync[k], want, r.body)
		}
	}
	page := string(e.do(http.MethodGet, "/", sid, nil).body)
	for _, want := range []string{`id="sync" data-state="deferred"`, "Importing your Strava history back to " + horizon.Format("2 Jan 2006"),
		"321 activities imported", `aria-label="Strava sync" aria-valuenow="60"`, `style="width: 60%"`,
		"paused until " + started.Add(15*time.Minute).Format("2 Jan 2006 15:04 UTC"), "sync &lt;budget&gt; share spent"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}

	st.State, st.LastSyncAtUtc, st.NextSyncAtUtc = syncstate.SyncIdle, started, started.Add(6*time.Hour)
	if err := e.st.DB.Put(ctx, e.st.DB.Tables().Main, st); err != nil {
		t.Fatal(err)
	}
	page = string(e.do(http.MethodGet, "/", sid, nil).body)
	for _, want := range []string{`data-state="idle"`, "Strava history in sync", "last checked " + started.Format("2 Jan 2006 15:04 UTC")} {
		if !strings.Contains(page, want) {
			t.Errorf("idle page lacks %q", want)
		}
	}
	if strings.Contains(page, `aria-label="Strava sync"`) {
		t.Error("idle page still shows the sync progress bar")
	}
	if t.Failed() {
		t.Logf("page:\n%s", page)
	}
}

// The OpenAPI document describes exactly the fields GET /v1/me sends.
func TestOpenAPIDescribesMe(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		schema string
		typ    reflect.Type
	}{{"Me", reflect.TypeFor[bff.MeJSON]()}, {"SyncStatus", reflect.TypeFor[bff.SyncJSON]()}} {
		props, required, err := openapi.SchemaProperties(tc.schema)
		if err != nil {
			t.Fatal(err)
		}
		var fields, always []string
		for f := range tc.typ.Fields() {
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			fields = append(fields, name)
			if opts != "omitempty" {
				always = append(always, name)
			}
		}
		slices.Sort(props)
		slices.Sort(fields)
		slices.Sort(required)
		slices.Sort(always)
		if !slices.Equal(props, fields) || !slices.Equal(required, always) {
			t.Errorf("schema %s: properties %v required %v; %s sends %v, always %v", tc.schema, props, required, tc.typ, fields, always)
		}
	}
}
