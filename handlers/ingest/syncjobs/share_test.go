package syncjobs

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/budget"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/syncstate"
)

// takeStore is a SyncPacing whose TakeSyncRead counts against a window's
// reads taken so far; the embedded interface is nil (pace calls nothing
// else).
type takeStore struct {
	SyncPacing
	taken int
}

func (s *takeStore) TakeSyncRead(_ context.Context, _ time.Time, _ time.Duration, allowed, _ int, _ uint64) error {
	if s.taken >= allowed {
		return model.ErrConflict
	}
	s.taken++
	return nil
}

// TestAFirstImportFindsTheSyncShareReconciliationLeaves: in a window whose
// sync reads reach half of their paced allowance, a reconciliation waits
// and a first import still reads, up to the whole allowance. Protection:
// budget.SyncShareOf in pace (without it the reconciliations of athletes
// already imported take every sync read, and a new athlete's history
// waits behind them).
func TestAFirstImportFindsTheSyncShareReconciliationLeaves(t *testing.T) {
	t.Parallel()
	window := 15 * time.Minute
	now := t0.Truncate(window).Add(10 * time.Minute)
	cfg := SyncSettings{BudgetShare: 0.5, HeadStart: 0.1}.WithDefaults()
	head := time.Duration(cfg.HeadStart * float64(window))
	st := &ops.RateLimitState{ReadShortLimit: 300}
	whole := budget.PacedAllowance(300, cfg.BudgetShare, now, window, head)
	half := budget.PacedAllowance(300, budget.SyncShareOf(cfg.BudgetShare, true), now, window, head)
	if half >= whole || half < 1 {
		t.Fatalf("paced allowances %d (reconciliation) and %d (import): want the reconciliation's smaller", half, whole)
	}
	store := &takeStore{taken: half}
	s := &Syncer{store: SyncerStores{Pacing: store}, RateWindow: window}
	job := func(mode string) ingest.Job {
		return ingest.Job{IdempotencyKey: mode, Sync: &ingest.SyncJob{UserID: "u1", AthleteID: 7, Mode: mode, FromUtc: t0}}
	}
	var de *ingest.DeferError
	if err := s.pace(context.Background(), cfg, st, now, job(syncstate.SyncModeReconcile)); !errors.As(err, &de) || !de.Until.After(now) {
		t.Fatalf("a reconciliation at %d of %d sync reads: %v; want it to wait", half, whole, err)
	}
	imported := 0
	for s.pace(context.Background(), cfg, st, now, job(syncstate.SyncModeBackfill)) == nil {
		imported++
	}
	if store.taken != whole || imported != whole-half {
		t.Fatalf("first imports read %d times, up to %d of %d; want the %d the reconciliation left", imported, store.taken, whole, whole-half)
	}
}
