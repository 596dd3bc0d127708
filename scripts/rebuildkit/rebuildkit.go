package rebuildkit

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// Recompute recomputes every milestone of userID from the user's workout
// log. With dryRun it writes nothing and reports in Outcome.Drift every
// difference between the stored projection and the recomputed one; without
// it, it writes exactly what the live stream consumer would write (progress
// with an optimistic version check, newly earned awards) and reports what it
// changed. It returns an error (wrapping the model vocabulary) when the user
// could not be recomputed; a user with no milestones is not an error.
type Recompute func(ctx context.Context, userID string, dryRun bool) (Outcome, error)

// Outcome is what one Recompute did (or, in a dry run, would do) for one user.
type Outcome struct {
	// UserID is the recomputed user.
	UserID string `json:"userId"`
	// Milestones is how many milestones were inspected.
	Milestones int `json:"milestones"`
	// MilestonesChanged is how many milestones were (or would be) written.
	MilestonesChanged int `json:"milestonesChanged"`
	// AwardsMinted is how many award items were (or would be) created.
	AwardsMinted int `json:"awardsMinted"`
	// ConflictsRetried is how many optimistic-version conflicts were retried.
	ConflictsRetried int `json:"conflictsRetried"`
	// Drift lists every stored value that differs from the recomputed one.
	Drift []Drift `json:"drift,omitempty"`
}

// Drift is one stored value of a milestone that differs from what the
// workout log says it should be.
type Drift struct {
	UserID      string `json:"userId"`
	MilestoneID string `json:"milestoneId"`
	// Field is the projected attribute: progressValue, workoutsCounted,
	// awardedParts, status, truncated, exactFromUtc, or award (a missing
	// award item, with the part index in Stored/Recomputed; or award items
	// not justified, with Message). An awardedParts beyond what the log or
	// audited awards justify carries Message too.
	Field      string `json:"field"`
	Stored     string `json:"stored"`
	Recomputed string `json:"recomputed"`
	// Message explains the drift when the values alone do not (awards
	// claimed beyond what is justified).
	Message string `json:"message,omitempty"`
}

// Drift fields the adapters use.
const (
	FieldProgress        = "progressValue"
	FieldWorkoutsCounted = "workoutsCounted"
	FieldAwardedParts    = "awardedParts"
	FieldStatus          = "status"
	FieldTruncated       = "truncated"
	FieldExactFrom       = "exactFromUtc"
	FieldAward           = "award"
)

// String renders a drift line for operators.
func (d Drift) String() string {
	s := fmt.Sprintf("user=%s milestone=%s %s: stored=%s recomputed=%s", d.UserID, d.MilestoneID, d.Field, d.Stored, d.Recomputed)
	if d.Message != "" {
		s += " (" + d.Message + ")"
	}
	return s
}

// SortDrift orders drift lines by user, milestone and field so reports are
// reproducible.
func SortDrift(ds []Drift) {
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i], ds[j]
		if a.UserID != b.UserID {
			return a.UserID < b.UserID
		}
		if a.MilestoneID != b.MilestoneID {
			return a.MilestoneID < b.MilestoneID
		}
		if a.Field != b.Field {
			return a.Field < b.Field
		}
		return a.Stored < b.Stored
	})
}

// Summary totals a run over many users.
type Summary struct {
	// Users is how many users were processed successfully in this run.
	Users int `json:"users"`
	// Skipped is how many users earlier runs completed (per the state file).
	Skipped           int `json:"skipped"`
	Milestones        int `json:"milestones"`
	MilestonesChanged int `json:"milestonesChanged"`
	AwardsMinted      int `json:"awardsMinted"`
	ConflictsRetried  int `json:"conflictsRetried"`
	// Errors is how many users failed; Failures names them.
	Errors   int               `json:"errors"`
	Failures map[string]string `json:"failures,omitempty"`
	// Drift is every drifting value found (dry runs only: a rebuild fixes
	// what it finds, and its summary counts the changes instead).
	Drift []Drift `json:"drift,omitempty"`
}

func (s *Summary) add(o Outcome, dryRun bool) {
	s.Users++
	s.Milestones += o.Milestones
	s.MilestonesChanged += o.MilestonesChanged
	s.AwardsMinted += o.AwardsMinted
	s.ConflictsRetried += o.ConflictsRetried
	if dryRun {
		s.Drift = append(s.Drift, o.Drift...)
	}
}

func (s *Summary) fail(userID string, err error) {
	s.Errors++
	if s.Failures == nil {
		s.Failures = map[string]string{}
	}
	s.Failures[userID] = err.Error()
}

// String renders the one-line summary printed at the end of a run.
func (s Summary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "users=%d skipped=%d milestones=%d milestonesChanged=%d awardsMinted=%d conflictsRetried=%d errors=%d",
		s.Users, s.Skipped, s.Milestones, s.MilestonesChanged, s.AwardsMinted, s.ConflictsRetried, s.Errors)
	if len(s.Drift) > 0 {
		fmt.Fprintf(&b, " drift=%d", len(s.Drift))
	}
	return b.String()
}
