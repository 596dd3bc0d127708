package ingest

import "github.com/commitcollect/backend/model/syncstate"

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
	case job.Sync != nil && job.Sync.Mode == syncstate.SyncModeBackfill:
		return ReadClassBackfill
	case job.Sync != nil:
		return ReadClassReconcile
	case job.Event.Kind() == KindActivityDelete || !job.Event.Kind().Activity():
		return ReadClassConfirm
	default:
		return ReadClassWebhook
	}
}
