package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/store/limits"
	"github.com/commitcollect/backend/model/syncstate"
	"github.com/commitcollect/backend/test/dynamolocal"
)

func TestMain(m *testing.M) { dynamolocal.Main(m) }

func TestAttention(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		given syncstate.SyncState
		want  string
	}{
		{"idle", syncstate.SyncState{State: syncstate.SyncIdle, UpdatedAtUtc: now.Add(-48 * time.Hour)}, AttentionNone},
		{"failed", syncstate.SyncState{State: syncstate.SyncFailed, UpdatedAtUtc: now}, AttentionFailed},
		{"deferred until later", syncstate.SyncState{State: syncstate.SyncDeferred, UpdatedAtUtc: now.Add(-time.Hour), NextSyncAtUtc: now.Add(time.Hour)}, AttentionDeferred},
		{"deferral long overdue", syncstate.SyncState{State: syncstate.SyncDeferred, UpdatedAtUtc: now.Add(-3 * time.Hour), NextSyncAtUtc: now.Add(-2 * time.Hour)}, AttentionStuck},
		{"backfilling, fresh", syncstate.SyncState{State: syncstate.SyncBackfilling, UpdatedAtUtc: now.Add(-time.Minute)}, AttentionNone},
		{"backfilling, silent for an hour", syncstate.SyncState{State: syncstate.SyncBackfilling, UpdatedAtUtc: now.Add(-time.Hour)}, AttentionStuck},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Attention(&tt.given, now, 30*time.Minute); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestListsSyncsNeedingAttentionAndRestartsOne(t *testing.T) {
	t.Parallel()
	st := dynamolocal.NewStore(t)
	ctx := context.Background()
	prefix := strings.TrimSuffix(st.DB.Tables().Main, "CommitCollect")
	now := time.Now().UTC()
	states := map[string]syncstate.SyncState{
		"u-failed":   {State: syncstate.SyncFailed, Mode: syncstate.SyncModeBackfill, JobKey: "old", WindowFromUtc: now.AddDate(0, 0, -100), DeferredReason: "failed: strava 500"},
		"u-deferred": {State: syncstate.SyncDeferred, Mode: syncstate.SyncModeBackfill, NextSyncAtUtc: now.Add(10 * time.Minute), DeferredReason: "sync share spent"},
		"u-stuck":    {State: syncstate.SyncBackfilling, Mode: syncstate.SyncModeBackfill},
		"u-idle":     {State: syncstate.SyncIdle, Mode: syncstate.SyncModeReconcile},
	}
	for u, s := range states {
		s.UserID, s.UpdatedAtUtc = u, now
		if u == "u-stuck" {
			s.UpdatedAtUtc = now.Add(-2 * time.Hour)
		}
		if err := st.DB.Put(ctx, st.DB.Tables().Main, &model.Profile{UserID: u, AthleteID: 1}); err != nil {
			t.Fatal(err)
		}
		if err := st.DB.Put(ctx, st.DB.Tables().Main, &s); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.DB.Put(ctx, st.DB.Tables().Main, &model.StravaConnection{UserID: "u-failed", AthleteID: 5, SealedTokens: &model.SealedSecret{}}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"DYNAMODB_ENDPOINT": dynamolocal.Endpoint(t), "CC_TABLE_PREFIX": prefix,
		"AWS_REGION": "ap-southeast-2", "AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}
	getenv := func(k string) string { return env[k] }

	var out, errOut bytes.Buffer
	// The users index is eventually consistent: wait for the four profiles.
	deadline := time.Now().Add(10 * time.Second)
	code := 0
	for {
		out.Reset()
		code = run(ctx, []string{"-all"}, &out, &errOut, getenv)
		if strings.Count(out.String(), "\nu-") == 4 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code != 1 || strings.Count(out.String(), "\nu-") != 4 {
		t.Fatalf("syncs -all: exit %d, output:\n%s%s\nwant 4 users and exit 1 (a failed and a stuck sync)", code, out.String(), errOut.String())
	}
	out.Reset()
	code = run(ctx, nil, &out, &errOut, getenv)
	got := out.String()
	for _, want := range []string{"u-failed  failed", "u-deferred  deferred", "u-stuck  stuck"} {
		if !strings.Contains(strings.Join(strings.Fields(got), "  "), want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "u-idle") || code != 1 {
		t.Fatalf("syncs: exit %d, output:\n%s\nwant the idle sync left out and exit 1", code, got)
	}

	out.Reset()
	if code := run(ctx, []string{"-restart", "u-failed"}, &out, &errOut, getenv); code != 0 {
		t.Fatalf("restart: exit %d: %s", code, errOut.String())
	}
	items, err := st.Pending.DueOutboxItems(ctx, now.Add(time.Minute), 10)
	if err != nil || len(items) != 1 {
		t.Fatalf("outbox after the restart: %d items, %v; want the restart job", len(items), err)
	}
	// The pending index lists keys (it does not project the job): read the item.
	rec, err := st.Outbox.OutboxItem(ctx, items[0].IdempotencyKey)
	if err != nil {
		t.Fatal(err)
	}
	j, err := ingest.DecodeJob([]byte(rec.Job))
	if err != nil || j.Sync == nil || !j.Sync.Resume || j.Sync.UserID != "u-failed" || j.Sync.AthleteID != 5 {
		t.Fatalf("restart job: %+v, %v; want a resume of u-failed's sync", j, err)
	}
	if code := run(ctx, []string{"-restart", "u-idle"}, &out, &errOut, getenv); code != 2 {
		t.Fatalf("restart of a user without a connection: exit %d, want 2", code)
	}
}

// TestReconcileSinceEnqueuesEveryConnectedUser: after an outage the
// operator's -reconcile-since enqueues one reconciliation per connected user
// listing from that instant; a second run enqueues nothing new; a bad
// instant is exit 2.
func TestReconcileSinceEnqueuesEveryConnectedUser(t *testing.T) {
	t.Parallel()
	st := dynamolocal.NewStore(t)
	ctx := context.Background()
	prefix := strings.TrimSuffix(st.DB.Tables().Main, "CommitCollect")
	for i, u := range []string{"u-a", "u-b", "u-gone"} {
		if err := st.DB.Put(ctx, st.DB.Tables().Main, &model.Profile{UserID: u, AthleteID: int64(10 + i)}); err != nil {
			t.Fatal(err)
		}
		if u == "u-gone" {
			continue
		}
		if err := st.DB.Put(ctx, st.DB.Tables().Main, &model.StravaConnection{UserID: u, AthleteID: int64(10 + i), SealedTokens: &model.SealedSecret{}}); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"DYNAMODB_ENDPOINT": dynamolocal.Endpoint(t), "CC_TABLE_PREFIX": prefix,
		"AWS_REGION": "ap-southeast-2", "AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}
	getenv := func(k string) string { return env[k] }
	since := time.Now().UTC().Add(-3 * time.Hour).Truncate(time.Second)
	var out, errOut bytes.Buffer
	deadline := time.Now().Add(10 * time.Second) // the users index is eventually consistent
	for !strings.Contains(out.String(), "3 users") && time.Now().Before(deadline) {
		out.Reset()
		if code := run(ctx, []string{"-reconcile-since", since.Format(time.RFC3339)}, &out, &errOut, getenv); code != 0 {
			t.Fatalf("exit %d: %s", code, errOut.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	items, err := st.Pending.DueOutboxItems(ctx, time.Now().Add(time.Minute), 10)
	if err != nil || len(items) != 2 {
		t.Fatalf("outbox: %d items, %v; want one job per connected user (2)\n%s", len(items), err, out.String())
	}
	for _, it := range items {
		rec, err := st.Outbox.OutboxItem(ctx, it.IdempotencyKey)
		if err != nil {
			t.Fatal(err)
		}
		j, err := ingest.DecodeJob([]byte(rec.Job))
		if err != nil || j.Sync == nil || j.Sync.Mode != syncstate.SyncModeReconcile || !j.Sync.FromUtc.Equal(since) {
			t.Fatalf("job %+v, %v; want a reconciliation from %s", j.Sync, err, since)
		}
	}
	// A second run finds the same keys: no new job (a key whose short
	// lease lapsed is taken over and handed off again, the same job).
	out.Reset()
	if code := run(ctx, []string{"-reconcile-since", since.Format(time.RFC3339)}, &out, &errOut, getenv); code != 0 ||
		!strings.Contains(out.String(), "1 without a usable connection") {
		t.Fatalf("second run: exit %d, %s", code, out.String())
	}
	if items, err := st.Pending.DueOutboxItems(ctx, time.Now().Add(time.Minute), 10); err != nil || len(items) != 2 {
		t.Fatalf("outbox after a second run: %d items, %v; want still 2", len(items), err)
	}
	if code := run(ctx, []string{"-reconcile-since", "yesterday"}, &out, &errOut, getenv); code != 2 {
		t.Fatalf("a bad instant: exit %d, want 2", code)
	}
}

// TestHeaviestReadersAreListed: -readers N names the athletes with the most
// Strava reads today, most first, from the daily counters' index.
func TestHeaviestReadersAreListed(t *testing.T) {
	t.Parallel()
	st := dynamolocal.NewStore(t)
	ctx := context.Background()
	now := time.Now().UTC()
	for athlete, reads := range map[int64]int{11: 5, 12: 40, 13: 17} {
		if err := limits.New(st).TakeAthleteDayReads(ctx, athlete, now, 100, reads); err != nil {
			t.Fatal(err)
		}
	}
	if err := limits.New(st).TakeAthleteDayReads(ctx, 12, now, 100, 61); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("past the allowance: got %v, want ErrConflict", err)
	}
	env := map[string]string{"DYNAMODB_ENDPOINT": dynamolocal.Endpoint(t), "CC_TABLE_PREFIX": strings.TrimSuffix(st.DB.Tables().Main, "CommitCollect"),
		"AWS_REGION": "ap-southeast-2", "AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"-readers", "2"}, &out, &errOut, func(k string) string { return env[k] }); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	got := out.String()
	i12, i13 := strings.Index(got, "athlete 12 "), strings.Index(got, "athlete 13 ")
	if i12 < 0 || i13 < i12 || strings.Contains(got, "athlete 11 ") || !strings.Contains(got, "reads   40") {
		t.Fatalf("got:\n%s\nwant athletes 12 (40 reads) then 13, not 11", got)
	}
}
