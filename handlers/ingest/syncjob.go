package ingest

import (
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/syncstate"
)

// ObjectSync is the object_type a sync job's Event carries (for logs only).
const ObjectSync = "sync"

// SyncJob is what a sync job does: list the user's activities started from
// FromUtc on, page by page, newest first, and write what differs. The
// cursor lives in the user's syncstate.SyncState, not in the job, so a job
// delivered again resumes where the last page ended.
type SyncJob struct {
	UserID    string `json:"userId"`
	AthleteID int64  `json:"athleteId"`
	// Mode is syncstate.SyncModeBackfill or syncstate.SyncModeReconcile.
	Mode string `json:"mode"`
	// FromUtc is the oldest start date listed: the backfill's horizon, or
	// the start of the reconciliation window.
	FromUtc time.Time `json:"fromUtc"`
	// Resume marks an operator's restart (scripts/syncs): it takes over the
	// state's unfinished job and cursor instead of starting anew.
	Resume bool `json:"resume,omitempty"`
	// MilestoneEndUtc is the end of the user's soonest-ending active
	// milestone when the job was enqueued: its priority when the sync
	// share cannot cover every job (sooner first; zero: last).
	MilestoneEndUtc time.Time `json:"milestoneEndUtc,omitzero"`
}

// Reconciles says the job re-lists an imported athlete's recent activities
// (false for a first import, or no sync job).
func (j *SyncJob) Reconciles() bool { return j != nil && j.Mode == syncstate.SyncModeReconcile }

func (j *SyncJob) validate(v *model.ValidationError) {
	if j.UserID == "" {
		v.Add("sync.userId", "is required")
	}
	if j.AthleteID <= 0 {
		v.Add("sync.athleteId", "must be positive")
	}
	if j.Mode != syncstate.SyncModeBackfill && j.Mode != syncstate.SyncModeReconcile {
		v.Add("sync.mode", "unknown mode %q", j.Mode)
	}
	if j.FromUtc.IsZero() {
		v.Add("sync.fromUtc", "is required")
	}
}
