package handoff

import (
	"context"
	"errors"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
)

// BurstLeases lease an athlete's burst as one (model/store.Outbox; see its
// burstlease.go): one write a burst, where leasing each item moves each in
// the Pending index (3 WCU an event). The burst's items stay due in Pending
// while it is in flight; the lease keeps every other sweep from
// dispatching the athlete's burst until the worker releases it, or it
// lapses as an item's lease would.
type BurstLeases interface {
	// LeaseBurst takes the athlete's burst lease until now+lease and
	// returns that end; ErrConflict while another holds.
	LeaseBurst(ctx context.Context, athleteID int64, now time.Time, lease time.Duration) (time.Time, error)
	// OutboxItems reads the items at keys (strongly consistent); absent
	// keys are left out.
	OutboxItems(ctx context.Context, keys []string) ([]model.IdempotencyRecord, error)
	// ReleaseBurst ends the lease that ended at until, if it still holds.
	ReleaseBurst(ctx context.Context, athleteID int64, until time.Time) error
}

// leaseBurst takes the burst lease of the turn's athlete and returns the
// jobs of the turn's items still received and due (read again, strongly
// consistent: the pending index may lag), with the lease's end. An athlete
// whose burst is in flight is skipped, as its leased items would be.
func (s *Sweeper) leaseBurst(ctx context.Context, turn Turn, now time.Time, res *SweepResult) ([]ingest.Job, time.Time) {
	lease := s.Lease
	if lease <= 0 {
		lease = ingest.DefaultLease
	}
	wk, _ := keys.ParseWebhookIdempotencyKey(turn.Items[0].IdempotencyKey)
	log := s.log.With("athleteId", wk.OwnerID, "burst", len(turn.Items))
	until, err := s.Bursts.LeaseBurst(ctx, wk.OwnerID, now, lease)
	if errors.Is(err, model.ErrConflict) {
		res.Skipped += len(turn.Items) // in flight
		return nil, time.Time{}
	}
	if err != nil {
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
		s.release(ctx, wk.OwnerID, until)
		return nil, time.Time{}
	}
	var jobs []ingest.Job
	for i := range recs {
		rec := &recs[i]
		if rec.Status != model.OutboxReceived || rec.DueAt().After(now) {
			continue // settled, claimed or deferred since it was listed
		}
		if job, ok := s.jobOf(ctx, log.With("idempotencyKey", rec.IdempotencyKey, "correlationId", rec.CorrelationID), rec, now, true, res); ok {
			jobs = append(jobs, job)
		}
	}
	res.Skipped += len(turn.Items) - len(jobs)
	if len(jobs) == 0 {
		s.release(ctx, wk.OwnerID, until)
	}
	return jobs, until
}

// releaseBurst releases the burst lease of a burst job whose hand-off
// failed, so the next sweep hands it off again.
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
