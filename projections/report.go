package projections

import (
	"fmt"
	"maps"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/calendar"
)

// What re-projecting a user found, for the rebuild and verify commands
// (scripts/rebuildkit) and the consumer's RecomputeUser.

// MilestoneReport compares one milestone's stored projection with the one
// recomputed from the log.
type MilestoneReport struct {
	MilestoneID string
	Stored      model.Projection
	Recomputed  model.Projection
	// Changed: the recomputed projection differs from the stored one.
	Changed bool
	// NewParts are parts the log earns that were not awarded yet.
	NewParts []int
	// MissingAwards are justified parts the stored projection counts as
	// awarded but whose award item does not exist (minted again).
	MissingAwards []int
	// Unjustified are parts the stored state claims (in awardedParts, or
	// with an award item) that neither the log nor an award item with its
	// AWARD_MINTED audit entry justifies: never minted, not counted.
	Unjustified []int
	// Justified is how many parts the log or the held awards justify (the
	// recomputed awardedParts); Earned how many the log alone earns.
	Justified, Earned int
	// Minted are the award items written (or, in a dry run, that would be).
	Minted []int
	// Written: the projection was stored (never in a dry run).
	Written bool
	// Version is the milestone's version after this run.
	Version int64
	// Skipped says why the milestone could not be projected (invalid
	// definition); empty otherwise.
	Skipped string
}

// Drift reports whether the stored state differs from the log's.
func (r MilestoneReport) Drift() bool { return len(r.Diffs()) > 0 }

// Diffs lists the differences between stored and recomputed state, one
// "field: stored X, recomputed Y" per line.
func (r MilestoneReport) Diffs() []string {
	var out []string
	diff := func(field string, a, b any) {
		if a != b {
			out = append(out, fmt.Sprintf("%s: stored %v, recomputed %v", field, a, b))
		}
	}
	s, n := r.Stored, r.Recomputed
	diff("progressValue", s.ProgressValue, n.ProgressValue)
	diff("workoutsCounted", s.WorkoutsCounted, n.WorkoutsCounted)
	diff("awardedParts", s.AwardedParts, n.AwardedParts)
	diff("status", s.Status, n.Status)
	diff("truncated", s.Truncated, n.Truncated)
	diff("exactFromUtc", FormatInstant(s.ExactFromUtc), FormatInstant(n.ExactFromUtc))
	if s.Weeks != nil && n.Weeks != nil && s.Weeks.Def == n.Weeks.Def && !maps.EqualFunc(s.Weeks.Sums, n.Weeks.Sums, calendar.WeekSum.Equal) {
		// Absent sums, or sums of another definition, are unused: not drift.
		out = append(out, fmt.Sprintf("week sums: stored %v, recomputed %v", s.Weeks.Sums, n.Weeks.Sums))
	}
	if len(r.MissingAwards) > 0 {
		out = append(out, fmt.Sprintf("award items missing for parts %v", r.MissingAwards))
	}
	if len(r.Unjustified) > 0 {
		out = append(out, r.UnjustifiedMessage())
	}
	return out
}

// UnjustifiedMessage explains Unjustified for operators ("" when empty).
func (r MilestoneReport) UnjustifiedMessage() string {
	if len(r.Unjustified) == 0 {
		return ""
	}
	return fmt.Sprintf("awardedParts beyond what is justified: stored %d, justified %d (the log earns %d); parts %v have no award item "+
		"with its AWARD_MINTED audit entry and are neither minted nor counted", r.Stored.AwardedParts, r.Justified, r.Earned, r.Unjustified)
}

// FormatInstant renders an optional instant for drift reports ("-" when unset).
func FormatInstant(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// UserReport is the outcome of re-projecting one user.
type UserReport struct {
	UserID string
	// Workouts inspected and whether the log hit the guardrail (then
	// ExactFrom is the instant from which it is complete).
	Workouts  int
	Truncated bool
	ExactFrom time.Time
	// Milestones in milestone id order.
	Milestones []MilestoneReport
	// Unreadable lists milestone or award items left alone because they
	// could not be decoded (e.g. a newer schema).
	Unreadable []string
	// Attempts is how many read-compute-write rounds it took.
	Attempts int
}
