package ingest

import (
	"context"

	"github.com/commitcollect/backend/model/store"
)

// meterJob gives one job its own consumed-capacity meter (store.StartMeter:
// a meter the caller's context carries receives the figures too) and
// returns the function that logs the job's line: "job finished" with the
// job's correlationId, activityId, durationMs and the DynamoDB requests,
// rcu and wcu it cost (by operation under ops).
func (w *Worker) meterJob(ctx context.Context, job Job) (context.Context, func()) {
	ctx, m := store.StartMeter(ctx)
	start := w.Now()
	return ctx, func() {
		w.jobLog(job).InfoContext(ctx, "job finished", "durationMs", w.Now().Sub(start).Milliseconds(), m.Snapshot().Attr())
	}
}
