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
//
// It also counts the job's Strava reads and writes them as the StravaReads
// metric of the job's class to Metrics (readmetric.go).
func (w *Worker) meterJob(ctx context.Context, job Job) (context.Context, func()) {
	ctx, m := store.StartMeter(ctx)
	ctx, reads := withReadCounter(ctx)
	start := w.Now()
	return ctx, func() {
		n := reads.Load()
		w.jobLog(job).InfoContext(ctx, "job finished", "durationMs", w.Now().Sub(start).Milliseconds(), "stravaReads", n, m.Snapshot().Attr())
		if err := writeReadsEMF(w.Metrics, ReadClass(job), n, w.Now()); err != nil {
			w.log.WarnContext(ctx, "strava read metric not written", "error", err)
		}
	}
}
