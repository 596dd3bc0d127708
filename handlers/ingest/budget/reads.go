package budget

import (
	"context"
	"io"
	"sync/atomic"
	"time"

	"github.com/commitcollect/backend/model/emf"
)

// WorkerMetricsNamespace is the CloudWatch namespace of the worker's
// metrics.
const WorkerMetricsNamespace = "CommitCollect/Worker"

type readsKey struct{}

// WithReadCounter returns ctx carrying a fresh read counter.
func WithReadCounter(ctx context.Context) (context.Context, *atomic.Int64) {
	n := new(atomic.Int64)
	return context.WithValue(ctx, readsKey{}, n), n
}

// CountRead adds one Strava read to ctx's counter, if any.
func CountRead(ctx context.Context) {
	if n, ok := ctx.Value(readsKey{}).(*atomic.Int64); ok {
		n.Add(1)
	}
}

// WriteReadsEMF writes the job's StravaReads line (nothing for a job that
// made no read: the metric is a sum, and a missing point is a zero).
func WriteReadsEMF(w io.Writer, class string, reads int64, now time.Time) error {
	if reads == 0 {
		return nil
	}
	return WriteEMF(w, now, "Class", class, []emf.Value{{Name: "StravaReads", Unit: "Count", Value: float64(reads)}})
}

// WriteWaitingEMF writes one SyncsWaiting line: a sync job of mode found
// the sync share of the budget spent (or paced) and waits wait. Summed per
// period it is how many sync jobs were turned away; SyncWaitSeconds (its
// maximum) how far ahead they wait. `make syncs` says who waits and why.
func WriteWaitingEMF(w io.Writer, mode string, wait time.Duration, now time.Time) error {
	return WriteEMF(w, now, "Mode", mode, []emf.Value{{Name: "SyncsWaiting", Unit: "Count", Value: 1},
		{Name: "SyncWaitSeconds", Unit: "Seconds", Value: float64(max(0, int64(wait.Seconds())))}})
}

// WriteEMF writes one EMF line in the worker's namespace (ingest.WriteEMF).
func WriteEMF(w io.Writer, now time.Time, dim, dimValue string, vals []emf.Value) error {
	return emf.Write(w, WorkerMetricsNamespace, now, dim, dimValue, vals)
}
