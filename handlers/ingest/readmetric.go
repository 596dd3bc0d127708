package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/strava"
)

// The Strava budget by class: every Strava API read a worker job makes
// (GET /activities/{id}, GET /athlete/activities, GET /athlete, whatever the answer, as
// Strava counts them) is counted on the job's context, and when the job
// ends the worker writes one CloudWatch Embedded Metric Format line
// (Worker.Metrics; the worker Lambda writes to stdout) with StravaReads
// under the dimension Class: what the capacity dashboard shows next to the
// read limit. Token refreshes (POST /oauth/token) go through the refresher,
// not these calls, and are not counted (see scripts/capacitykit).

// WorkerMetricsNamespace is the CloudWatch namespace of the worker's
// metrics.
const WorkerMetricsNamespace = "CommitCollect/Worker"

// Classes of Strava reads (the StravaReads metric's Class dimension).
const (
	// ReadClassWebhook: fetches of created or updated activities.
	ReadClassWebhook = "webhook"
	// ReadClassBackfill and ReadClassReconcile: sync list pages.
	ReadClassBackfill  = "backfill"
	ReadClassReconcile = "reconcile"
	// ReadClassConfirm: reads confirming a delete or a deauthorization.
	ReadClassConfirm = "confirm"
)

// ReadClass is the class of the Strava reads job makes.
func ReadClass(job Job) string {
	switch {
	case job.Sync != nil && job.Sync.Mode == model.SyncModeBackfill:
		return ReadClassBackfill
	case job.Sync != nil:
		return ReadClassReconcile
	case job.Event.ObjectType == "athlete" || job.Event.AspectType == "delete":
		return ReadClassConfirm
	default:
		return ReadClassWebhook
	}
}

type readsKey struct{}

// withReadCounter returns ctx carrying a fresh read counter.
func withReadCounter(ctx context.Context) (context.Context, *atomic.Int64) {
	n := new(atomic.Int64)
	return context.WithValue(ctx, readsKey{}, n), n
}

// countRead adds one Strava read to ctx's counter, if any.
func countRead(ctx context.Context) {
	if n, ok := ctx.Value(readsKey{}).(*atomic.Int64); ok {
		n.Add(1)
	}
}

// countedFetcher counts every GetActivity on the caller's context.
type countedFetcher struct{ ActivityFetcher }

func (c countedFetcher) GetActivity(ctx context.Context, token string, id int64) (strava.Activity, strava.RateLimit, error) {
	countRead(ctx)
	return c.ActivityFetcher.GetActivity(ctx, token, id)
}

// GetAthlete counts the read confirming a deauthorization.
func (c countedFetcher) GetAthlete(ctx context.Context, token string) (strava.Athlete, strava.RateLimit, error) {
	countRead(ctx)
	return c.ActivityFetcher.GetAthlete(ctx, token)
}

// countedLister counts every ListActivities on the caller's context.
type countedLister struct{ ActivityLister }

func (c countedLister) ListActivities(ctx context.Context, token string, o strava.ListOptions) ([]strava.Activity, strava.RateLimit, error) {
	countRead(ctx)
	return c.ActivityLister.ListActivities(ctx, token, o)
}

// writeReadsEMF writes the job's StravaReads line (nothing for a job that
// made no read: the metric is a sum, and a missing point is a zero).
func writeReadsEMF(w io.Writer, class string, reads int64, now time.Time) error {
	if reads == 0 {
		return nil
	}
	return writeEMF(w, now, "Class", class, []emfValue{{"StravaReads", "Count", reads}})
}

// writeWaitingEMF writes one SyncsWaiting line: a sync job of mode found
// the sync share of the budget spent (or paced) and waits wait. Summed per
// period it is how many sync jobs were turned away; SyncWaitSeconds (its
// maximum) how far ahead they wait. `make syncs` says who waits and why.
func writeWaitingEMF(w io.Writer, mode string, wait time.Duration, now time.Time) error {
	return writeEMF(w, now, "Mode", mode, []emfValue{{"SyncsWaiting", "Count", 1},
		{"SyncWaitSeconds", "Seconds", max(0, int64(wait.Seconds()))}})
}

// emfValue is one metric of an EMF line.
type emfValue struct {
	name, unit string
	value      int64
}

// writeEMF writes one CloudWatch Embedded Metric Format line in the
// worker's namespace with one dimension (nothing when w is nil).
func writeEMF(w io.Writer, now time.Time, dim, dimValue string, vals []emfValue) error {
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
