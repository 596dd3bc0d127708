package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/syncstate"
)

// Recovering from an outage. Strava gives up on a webhook event after three
// attempts without a 200; an activity whose event we never answered would
// then be caught only by the idle round-robin reconciliation (weeks). After
// an outage an operator runs `make syncs ARGS="-reconcile-since <RFC3339>"`
// (ReconcileSince): every connected user gets a reconciliation whose list
// starts at that instant, under a key of its own per instant (a second run
// with the same instant enqueues nothing new). The jobs are ordinary sync
// jobs: paced within the sync share, resumable from their cursor, shown by
// `make syncs`, and worked off by the running stack (in AWS, the worker).

// RecoverKeyMode is the mode segment of an outage reconciliation's outbox
// key (keys.SyncJobKey(RecoverKeyMode, userID, since)); the job itself is a
// reconciliation.
const RecoverKeyMode = "recover"

// ReconcileSince enqueues, for every user with a usable Strava connection,
// a reconciliation listing the activities started since since (the start
// of an outage). Users without a usable connection are skipped (counted);
// a failure on one user is logged and the round goes on, returning the
// first error.
func (s *Scheduler) ReconcileSince(ctx context.Context, since time.Time) (ReconcileResult, error) {
	now := s.Now()
	if since.IsZero() || !since.Before(now) {
		return ReconcileResult{}, fmt.Errorf("reconcile since %s: must be in the past: %w", since.Format(time.RFC3339), model.ErrInvalid)
	}
	var (
		res   ReconcileResult
		first error
	)
	err := s.eachUsersPage(ctx, func(users []string) {
		for _, userID := range users {
			o, err := s.recoverUser(ctx, userID, since.UTC(), now)
			if err != nil {
				s.log.WarnContext(ctx, "outage reconciliation not enqueued", "userId", userID, "error", err)
				if first == nil {
					first = fmt.Errorf("reconcile since: user %s: %w", userID, err)
				}
				res.Users++
				continue
			}
			res.add(o)
		}
	})
	if err != nil {
		return res, fmt.Errorf("reconcile since: %w", err)
	}
	return res, first
}

// recoverUser enqueues one user's outage reconciliation.
func (s *Scheduler) recoverUser(ctx context.Context, userID string, since, now time.Time) (reconcileOutcome, error) {
	athleteID, needsReauth, err := s.store.Connections.ConnectionStatus(ctx, userID)
	if errors.Is(err, model.ErrNotFound) || (err == nil && needsReauth) {
		return outcomeNoConnection, nil
	}
	if err != nil {
		return 0, err
	}
	ms, err := s.store.Milestones.UserMilestones(ctx, userID)
	if err != nil {
		return 0, err
	}
	_, end := syncstate.ActiveMilestoneEnd(ms.Milestones, since, now)
	job := ingest.SyncJob{UserID: userID, AthleteID: athleteID, Mode: syncstate.SyncModeReconcile, FromUtc: since, MilestoneEndUtc: end}
	ok, err := s.enqueue(ctx, keys.SyncJobKey(RecoverKeyMode, userID, since), job, now)
	switch {
	case err != nil:
		return 0, err
	case ok:
		return outcomeEnqueued, nil
	}
	return outcomeAlready, nil
}

// Bringing back what a burst settled unseen. A burst settles an event
// whose activity two complete list walks, minutes apart, did not show
// (package fetch, burst.go). Strava's list could still have been wrong
// both times (an incident's lag, pages shifting under edits), so the burst
// first books RecheckUnseen: a reconciliation of the athlete's whole listed
// history, which writes whatever it lists that is not stored, so a real
// activity settled unseen comes back by itself. Bookings are gathered per
// athlete into six-hour slots (UnseenSlot), and a slot's recheck runs
// UnseenRecheckAfter after the slot ends: between one and seven hours
// after the burst, at most four a day, and however many bursts book a slot
// they never push its walk later. It is an ordinary sync job: on the sync
// share, never the athlete's read caps, so forged events naming a real
// athlete cost that athlete nothing and the application at most four walks
// a day. A walk settles unseen only when it reached the end of the
// history, at most a few pages, so the recheck is as short.

// UnseenKeyMode is the mode segment of the recheck's outbox key
// (keys.SyncJobKey(UnseenKeyMode, userID, slot start)); the job is a
// reconciliation.
const UnseenKeyMode = "unseen"

const (
	// UnseenSlot gathers an athlete's bookings of a recheck.
	UnseenSlot = 6 * time.Hour
	// UnseenRecheckAfter is how long after its slot ends a recheck lists.
	UnseenRecheckAfter = time.Hour
)

// wholeHistory is the FromUtc of a reconciliation of the whole history
// (its list asks after= a second earlier: 0, every activity).
var wholeHistory = time.Unix(1, 0).UTC()

// RecheckUnseen books the user's recheck of unseen activities at now in
// now's slot; false when the slot's recheck was booked already. The job's
// first lease holds it until the slot's end plus UnseenRecheckAfter, the
// same instant for every booking of the slot.
func (s *Scheduler) RecheckUnseen(ctx context.Context, userID string, athleteID int64, now time.Time) (bool, error) {
	slot := now.UTC().Truncate(UnseenSlot)
	job := ingest.SyncJob{UserID: userID, AthleteID: athleteID, Mode: syncstate.SyncModeReconcile, FromUtc: wholeHistory}
	ok, err := s.enqueueAfter(ctx, keys.SyncJobKey(UnseenKeyMode, userID, slot), job, now, slot.Add(UnseenSlot+UnseenRecheckAfter).Sub(now))
	if err != nil {
		return false, fmt.Errorf("book the recheck of unseen activities of %s: %w", userID, err)
	}
	return ok, nil
}
