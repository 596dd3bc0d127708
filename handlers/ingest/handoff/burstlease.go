package handoff

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
)

// BurstLeases lease an athlete's burst as one, one burst an athlete a
// sweep (Plan) (model/store's Outbox; see its burstlease.go, whose lease
// can count several): one write for the athlete and one for the burst's
// release, where leasing each item moves each in the Pending
// index (3 WCU an event). The bursts' items stay due in Pending while they
// are in flight; the lease, renewed by the worker while a burst runs,
// keeps every other sweep from dispatching a burst of the athlete until
// each of its bursts has released it, or it lapses as an item's lease
// would (a burst of a lapsed lease taken again stops: runner's
// holdBurstLease).
type BurstLeases interface {
	// LeaseBurst takes the athlete's burst lease for bursts bursts until
	// now+lease and returns that end; ErrConflict while another holds.
	LeaseBurst(ctx context.Context, athleteID int64, now time.Time, lease time.Duration, bursts int) (time.Time, error)
	// OutboxItems reads the items at keys (strongly consistent); absent
	// keys are left out.
	OutboxItems(ctx context.Context, keys []string) ([]ops.IdempotencyRecord, error)
	// ReleaseBurst releases one burst of the lease that ends at until, if
	// it still holds.
	ReleaseBurst(ctx context.Context, athleteID int64, until time.Time) error
}

// ownerOf is the athlete whose events a burst turn holds.
func ownerOf(t Turn) int64 {
	k, _ := keys.ParseWebhookIdempotencyKey(t.Items[0].IdempotencyKey)
	return k.OwnerID
}

// leaseBurst takes the burst lease of the turn's athlete for its one
// burst of the sweep (Plan) and returns the jobs of the turn's items still
// received and due (read again, strongly consistent: the pending index may
// lag), with the lease's end. An athlete whose burst is in flight is
// skipped, as its leased items would be. A lost hand-off among the items
// is leased on its own (leaseLostHandOff).
func (s *Sweeper) leaseBurst(ctx context.Context, turn Turn, now time.Time, res *SweepResult) ([]ingest.Job, time.Time) {
	owner := ownerOf(turn)
	log := s.log.With("athleteId", owner, "burst", len(turn.Items))
	until, err := s.Bursts.LeaseBurst(ctx, owner, now, s.lease(), 1)
	switch {
	case errors.Is(err, model.ErrConflict):
		res.Skipped += len(turn.Items) // in flight
		return nil, time.Time{}
	case err != nil:
		log.WarnContext(ctx, "sweeper could not lease a burst", "error", err)
		res.Failed += len(turn.Items)
		return nil, time.Time{}
	}
	ks := make([]string, len(turn.Items))
	for i, d := range turn.Items {
		ks[i] = d.IdempotencyKey
	}
	recs, err := s.Bursts.OutboxItems(ctx, ks)
	if err != nil {
		log.WarnContext(ctx, "sweeper could not read a burst's outbox items", "error", err)
		res.Failed += len(turn.Items)
		s.release(ctx, owner, until)
		return nil, time.Time{}
	}
	var jobs []ingest.Job
	counted := res.Failed + res.Parked // an item failed or parked is not skipped too
	for i := range recs {
		rec := &recs[i]
		if rec.Status != ops.OutboxReceived || rec.DueAt().After(now) {
			continue // settled, claimed or deferred since it was listed
		}
		if rec.NotBefore == 0 { // a lost hand-off: a redelivery could take it
			if rec = s.leaseLostHandOff(ctx, log, rec.IdempotencyKey, now, res); rec == nil {
				continue
			}
		}
		if job, ok := s.jobOf(ctx, log.With("idempotencyKey", rec.IdempotencyKey, "correlationId", rec.CorrelationID), rec, now, true, res); ok {
			jobs = append(jobs, job)
		}
	}
	res.Skipped += len(turn.Items) - len(jobs) - (res.Failed + res.Parked - counted)
	if len(jobs) == 0 {
		s.release(ctx, owner, until)
	}
	return jobs, until
}

// leaseLostHandOff leases, as a single item's sweep would, a burst's item
// that has no not-before time: a hand-off whose lease lapsed (lost). Held
// and deferred items are the sweeper's until settled (model/store's
// reclaimCondition), so the athlete's burst lease covers them; a lost
// hand-off's item would be taken again by a Strava redelivery while its
// burst runs, and fetched twice. The write is paid only for lost
// hand-offs. It returns nil, counted in res, when the item is no longer
// due or cannot be leased.
func (s *Sweeper) leaseLostHandOff(ctx context.Context, log *slog.Logger, key string, now time.Time, res *SweepResult) *ops.IdempotencyRecord {
	rec, err := s.outbox.LeaseOutboxItem(ctx, key, now, s.lease())
	switch {
	case errors.Is(err, model.ErrConflict) || errors.Is(err, model.ErrNotFound):
		return nil // counted skipped by the caller
	case err != nil:
		log.WarnContext(ctx, "sweeper could not lease a lost hand-off of a burst", "idempotencyKey", key, "error", err)
		res.Failed++
		return nil
	}
	return rec
}

// releaseBurst releases the burst lease's share of a burst job whose
// hand-off failed, so the next sweep hands it off again.
func (s *Sweeper) releaseBurst(ctx context.Context, job ingest.Job) {
	if len(job.Burst) > 0 && !job.BurstLeaseUntil.IsZero() {
		s.release(ctx, job.Burst[0].Event.OwnerID, job.BurstLeaseUntil)
	}
}

func (s *Sweeper) release(ctx context.Context, athleteID int64, until time.Time) {
	if err := s.Bursts.ReleaseBurst(ctx, athleteID, until); err != nil {
		s.log.WarnContext(ctx, "burst lease not released; it lapses", "athleteId", athleteID, "error", err)
	}
}
