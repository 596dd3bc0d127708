// Package ports holds the shapes the ports of projections and handlers
// pass, whatever adapter (model/store) stands behind them: a user's
// milestones with their awards, a projection write, a page of users, a
// workout log.
package ports

import (
	"time"

	"github.com/commitcollect/backend/model"
)

// MilestoneWithAwards is a milestone and its minted awards, in part order.
type MilestoneWithAwards struct {
	Milestone model.Milestone
	Awards    []model.Award
}

// UnreadableItem is an item a reader skipped because it could not decode it
// (e.g. written by a newer schema); Err says why.
type UnreadableItem struct {
	Key model.Key
	Err error
}

// UserMilestones is a user's milestones (sorted by id) with their minted
// awards (by milestone id, then part index), read with one query of
// begins_with(SK, "MILESTONE#"), and the user's guard (nil: none).
// Unreadable items (newer schema, malformed) must be left alone, not
// guessed at. Truncated says the user has more milestone items than the
// guardrail (the milestone cap keeps it false for milestones created here).
type UserMilestones struct {
	Milestones []model.Milestone
	Awards     map[string]map[int]model.Award
	Unreadable []UnreadableItem
	Guard      *model.UserGuard
	Truncated  bool
}

// ProjectionWrite is one milestone's projected state, conditioned on
// ExpectedVersion (the version it was computed from) and setting it to
// ExpectedVersion+1, with the Awards to mint and their AWARD_MINTED Audits
// (deterministic keys) in the same transaction, each only if absent, so an
// award never exists without its audit entry. Token is the transaction's
// ClientRequestToken (≤ 36 characters), used when Awards or Audits is not
// empty.
type ProjectionWrite struct {
	UserID, MilestoneID string
	// PeriodOf names the series' period written (its item,
	// keys.SeriesPeriodKey), empty for a milestone that does not repeat.
	PeriodOf string
	// Current, for the period a series' item keeps, is the item's record
	// of it after this write: the write then goes to the series' item
	// (keys.MilestoneKey), not the period's own.
	Current *model.CurrentPeriod
	// Leaves, on a write moving the series' item onto a newer period, is
	// the period the item kept: put on its own item in the same
	// transaction.
	Leaves          *model.Milestone
	ExpectedVersion int64
	Projection      model.Projection
	Awards          []*model.Award
	Audits          []*model.AuditEntry
	Token           string
}

// Items is how many items the write puts in one transaction: the milestone
// update plus every award, its collection entry, every audit entry and the
// period it leaves, the series' check of a mint on a period's own item,
// and the collection summary's update of each model minted (at most
// model.TransactionLimit).
func (w ProjectionWrite) Items() int {
	n := 1 + ItemsPerAward*len(w.Awards) + len(w.Audits)
	models := map[string]bool{}
	for _, a := range w.Awards {
		models[a.ModelID] = true
	}
	n += len(models)
	if w.Leaves != nil {
		n++
	}
	if w.PeriodOf != "" && w.Current == nil && len(w.Awards) > 0 {
		n++
	}
	return n
}

// ItemsPerAward is how many items one award puts in a projection write:
// the award item and its entry in the collection.
const ItemsPerAward = 2

// UsersPage is one page of a users-index shard, in ascending user id order.
// Next is the cursor of the following page (the last id given; empty when
// the page is); More is false once the shard is read to its end.
type UsersPage struct {
	UserIDs []string
	Next    string
	More    bool
}

// WorkoutLog is the part of a user's workout log one recompute inspects:
// the workouts started inside the requested windows, newest first. When
// the guardrail left some out (Truncated), every one left out started
// before ExactFrom, from which the log is complete.
type WorkoutLog struct {
	Workouts  []model.Workout
	Truncated bool
	ExactFrom time.Time
}

// SeriesPeriod is one period of a series as stored: its item (nil until
// first projected; Milestone.PeriodOf names the period) and its awards by
// part.
type SeriesPeriod struct {
	Period *model.Milestone
	Awards map[int]model.Award
}
