package syncjobs

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/syncstate"
)

var t0 = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

func syncJob(key, mode string, from time.Time, resume bool) ingest.Job {
	return ingest.Job{IdempotencyKey: key, Sync: &ingest.SyncJob{UserID: "u1", AthleteID: 7, Mode: mode, FromUtc: from, Resume: resume}}
}

// TestDecide: how a sync job takes on (or not) the user's sync state.
// Protections: each case of decide.
func TestDecide(t *testing.T) {
	t.Parallel()
	backfill, reconcile := syncstate.SyncModeBackfill, syncstate.SyncModeReconcile
	jan, feb := t0.AddDate(0, -2, 0), t0.AddDate(0, -1, 0)
	tests := []struct {
		name    string
		cur     syncstate.SyncState
		job     ingest.Job
		wantErr error
		check   func(t *testing.T, s syncstate.SyncState)
	}{
		{"its own running job resumes without a write", syncstate.SyncState{JobKey: "k1", State: syncstate.SyncBackfilling},
			syncJob("k1", backfill, jan, false), model.ErrSkipWrite, nil},
		{"its own finished job is a repeated delivery", syncstate.SyncState{JobKey: "k1", State: syncstate.SyncIdle},
			syncJob("k1", backfill, jan, false), errSkip, nil},
		{"an operator's restart takes over the unfinished job", syncstate.SyncState{JobKey: "k0", State: syncstate.SyncFailed, Mode: reconcile, DeferredReason: "x"},
			syncJob("k2", backfill, jan, true), nil, func(t *testing.T, s syncstate.SyncState) {
				if s.JobKey != "k2" || s.State != syncstate.SyncReconciling || s.DeferredReason != "" {
					t.Fatalf("state %+v", s)
				}
			}},
		{"an earlier backfill extends the running one, keeping its cursor",
			syncstate.SyncState{JobKey: "k1", State: syncstate.SyncBackfilling, Mode: backfill, WindowFromUtc: feb, CursorBeforeUtc: t0.AddDate(0, 0, -3)},
			syncJob("k2", backfill, jan, false), nil, func(t *testing.T, s syncstate.SyncState) {
				if s.JobKey != "k2" || !s.WindowFromUtc.Equal(jan) || !s.HorizonUtc.Equal(jan) || !s.CursorBeforeUtc.Equal(t0.AddDate(0, 0, -3)) {
					t.Fatalf("state %+v", s)
				}
			}},
		{"a backfill reaching no further than the running one", syncstate.SyncState{JobKey: "k1", State: syncstate.SyncBackfilling, Mode: backfill, WindowFromUtc: jan},
			syncJob("k2", backfill, feb, false), errSkip, nil},
		{"a backfill of what is imported already", syncstate.SyncState{JobKey: "k1", State: syncstate.SyncIdle, ImportedFromUtc: jan},
			syncJob("k2", backfill, feb, false), errSkip, nil},
		{"a reconciliation while a job runs", syncstate.SyncState{JobKey: "k1", State: syncstate.SyncDeferred, Mode: backfill},
			syncJob("k2", reconcile, feb, false), errSkip, nil},
		{"a backfill past the imported history lists only what is older",
			syncstate.SyncState{JobKey: "k1", State: syncstate.SyncIdle, ImportedFromUtc: feb, Pages: 4, Listed: 90},
			syncJob("k2", backfill, jan, false), nil, func(t *testing.T, s syncstate.SyncState) {
				if s.State != syncstate.SyncBackfilling || !s.CursorBeforeUtc.Equal(feb) || !s.HorizonUtc.Equal(jan) || s.Pages != 0 || s.Listed != 0 ||
					!s.JobStartedAtUtc.Equal(t0) || s.AthleteID != 7 {
					t.Fatalf("state %+v", s)
				}
			}},
		{"a reconciliation of an idle user starts from now", syncstate.SyncState{JobKey: "k1", State: syncstate.SyncIdle, ImportedFromUtc: jan},
			syncJob("k2", reconcile, feb, false), nil, func(t *testing.T, s syncstate.SyncState) {
				if s.State != syncstate.SyncReconciling || !s.CursorBeforeUtc.IsZero() || !s.WindowFromUtc.Equal(feb) {
					t.Fatalf("state %+v", s)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cur := tt.cur
			if err := decide(&cur, tt.job, t0); !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("decide: %v, want %v", err, tt.wantErr)
			}
			if tt.check != nil {
				tt.check(t, cur)
			}
		})
	}
}

// TestFinish: an ended job leaves the state idle, the next sync an
// interval on, and records what it has seen. Protections: finish's
// reconciled and imported bookkeeping.
func TestFinish(t *testing.T) {
	t.Parallel()
	jan, feb := t0.AddDate(0, -2, 0), t0.AddDate(0, -1, 0)
	first := syncstate.SyncState{Mode: syncstate.SyncModeBackfill, WindowFromUtc: jan, ListedMaxActivityID: 99, ReconciledActivityID: 50}
	finish(&first, t0, time.Hour)
	if first.State != syncstate.SyncIdle || !first.NextSyncAtUtc.Equal(t0.Add(time.Hour)) || !first.ImportedFromUtc.Equal(jan) ||
		!first.HorizonUtc.Equal(jan) || !first.ReconciledAtUtc.Equal(t0) || first.ReconciledActivityID != 99 {
		t.Fatalf("first backfill: %+v", first)
	}
	later := syncstate.SyncState{Mode: syncstate.SyncModeBackfill, WindowFromUtc: feb, ImportedFromUtc: jan, ListedMaxActivityID: 120, ReconciledActivityID: 99}
	finish(&later, t0, time.Hour)
	if !later.ImportedFromUtc.Equal(jan) || !later.ReconciledAtUtc.IsZero() || later.ReconciledActivityID != 99 {
		t.Fatalf("a later, shorter backfill: %+v (it neither shrinks the import nor counts as a reconciliation)", later)
	}
	rec := syncstate.SyncState{Mode: syncstate.SyncModeReconcile, ImportedFromUtc: jan, ListedMaxActivityID: 10, ReconciledActivityID: 99}
	finish(&rec, t0, time.Hour)
	if !rec.ReconciledAtUtc.Equal(t0) || rec.ReconciledActivityID != 99 || !rec.ImportedFromUtc.Equal(jan) {
		t.Fatalf("reconciliation: %+v (the highest id seen never falls)", rec)
	}
}

// TestNextCursor: the next page lists the oldest second again, unless that
// would not move the cursor. Protection: nextCursor's rule.
func TestNextCursor(t *testing.T) {
	t.Parallel()
	oldest := t0.Add(500 * time.Millisecond)
	tests := []struct {
		name           string
		cursor, oldest time.Time
		want           time.Time
	}{
		{"first page", time.Time{}, oldest, t0.Add(time.Second)},
		{"the second after moves the cursor", t0.Add(time.Hour), oldest, t0.Add(time.Second)},
		{"a page all within one second moves before it", t0.Add(time.Second), oldest, t0},
	}
	for _, tt := range tests {
		if got := nextCursor(tt.cursor, tt.oldest); !got.Equal(tt.want) {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}

// TestPriorityAndPick: the soonest-ending milestone goes first, a job
// without one last; picks spread one job's pages. Protection: priorityOf.
func TestPriorityAndPick(t *testing.T) {
	t.Parallel()
	job := func(end time.Time) ingest.Job {
		return ingest.Job{IdempotencyKey: "k", Sync: &ingest.SyncJob{MilestoneEndUtc: end}}
	}
	if p := priorityOf(job(time.Time{}), t0); p != 1 {
		t.Errorf("no milestone: %v, want 1", p)
	}
	if p := priorityOf(job(t0.Add(-time.Hour)), t0); p != 0 {
		t.Errorf("ended: %v, want 0", p)
	}
	if p := priorityOf(job(t0.Add(7*24*time.Hour)), t0); math.Abs(p-0.5) > 1e-9 {
		t.Errorf("a week left: %v, want 0.5", p)
	}
	if soon, late := priorityOf(job(t0.Add(time.Hour)), t0), priorityOf(job(t0.Add(30*24*time.Hour)), t0); soon >= late {
		t.Errorf("an hour left %v, a month %v: the sooner must go first", soon, late)
	}
	if pickOf(job(t0), t0) == pickOf(job(t0), t0.Add(time.Nanosecond)) {
		t.Error("one job's pages at two instants picked the same shard hash")
	}
}
