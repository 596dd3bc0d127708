package budget

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync/atomic"
	"time"
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
	return WriteEMF(w, now, "Class", class, []EMFValue{{"StravaReads", "Count", reads}})
}

// WriteWaitingEMF writes one SyncsWaiting line: a sync job of mode found
// the sync share of the budget spent (or paced) and waits wait. Summed per
// period it is how many sync jobs were turned away; SyncWaitSeconds (its
// maximum) how far ahead they wait. `make syncs` says who waits and why.
func WriteWaitingEMF(w io.Writer, mode string, wait time.Duration, now time.Time) error {
	return WriteEMF(w, now, "Mode", mode, []EMFValue{{"SyncsWaiting", "Count", 1},
		{"SyncWaitSeconds", "Seconds", max(0, int64(wait.Seconds()))}})
}

// EMFValue is one metric of an EMF line.
type EMFValue struct {
	name, unit string
	value      int64
}

// NewEMFValue is one metric of an EMF line: name, CloudWatch unit, value.
func NewEMFValue(name, unit string, value int64) EMFValue { return EMFValue{name, unit, value} }

// WriteEMF writes one CloudWatch Embedded Metric Format line in the
// worker's namespace with one dimension (nothing when w is nil).
func WriteEMF(w io.Writer, now time.Time, dim, dimValue string, vals []EMFValue) error {
	if w == nil {
		return nil
	}
	metrics := make([]map[string]string, len(vals))
	line := map[string]any{dim: dimValue}
	for i, v := range vals {
		metrics[i] = map[string]string{"Name": v.name, "Unit": v.unit}
		line[v.name] = v.value
	}
	line["_aws"] = map[string]any{
		"Timestamp": now.UnixMilli(),
		"CloudWatchMetrics": []map[string]any{{
			"Namespace": WorkerMetricsNamespace, "Dimensions": [][]string{{dim}}, "Metrics": metrics,
		}},
	}
	b, err := json.Marshal(line)
	if err != nil {
		return fmt.Errorf("encode %s metrics: %w", vals[0].name, err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
