package handoff

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/ops"
)

// Setting a tenant's backlog aside.
//
// A sweep reads the oldest due items up to its bound (DefaultSweepRead),
// and shares out what it read fairly (Plan). A tenant that keeps more than
// that bound due at once (a forger posting 20 events a second under one
// athlete id for a quarter of an hour, each deferred to the same rate-limit
// reset) would fill every read, and everybody due after its oldest item
// would never be read. So when a read comes back full, each tenant keeps
// its oldest AsideKeep items of the read due (its turns among them), and
// the rest that no turn serves are made due later, AsideKeep per
// step (a minute: the sweep's schedule), after the slots earlier sweeps
// gave it (Slots): one conditional write per item set aside, about what
// the tenant's own posting cost, and the next read of the drain reaches
// further. A tenant never has more than about AsideKeep items due in one
// step, which is more than one sweep serves it (one burst of MaxBurst), so
// nothing it could have been served waits for the spread.

// AsideKeep is how many of a tenant's due items a full sweep leaves due
// (one burst: what a sweep serves it at most), and how many it makes due
// in each later step.
const AsideKeep = MaxBurst

// DefaultAsideStep is the step between the instants a tenant's set-aside
// items come due: the sweeper Lambda's schedule.
const DefaultAsideStep = time.Minute

// Aside is an item a sweep sets aside: due again at Due.
type Aside struct {
	Key string
	Due time.Time
}

// Slot is the last instant a tenant's items were set aside to, and how
// many went there.
type Slot struct {
	At time.Time
	N  int
}

// Slots remember each tenant's last slot, so that the sweeps of one drain
// (and of one process) spread a tenant's backlog after one another's.
type Slots map[string]Slot

// SetAside picks the items of a sweep's read to set aside (see above):
// none unless the read was full; otherwise each tenant's items past its
// AsideKeep oldest that no turn serves, each given the
// next place in the tenant's slots, step apart from now on. slots is
// updated, and its slots that have passed are dropped.
func SetAside(due []ops.IdempotencyRecord, turns []Turn, full bool, now time.Time, step time.Duration, slots Slots) []Aside {
	for name, s := range slots {
		if !s.At.After(now) {
			delete(slots, name)
		}
	}
	if !full {
		return nil
	}
	if step <= 0 {
		step = DefaultAsideStep
	}
	served := map[string]bool{}
	for _, t := range turns {
		for _, it := range t.Items {
			served[it.IdempotencyKey] = true
		}
	}
	kept := map[string]int{}
	var out []Aside
	for _, d := range due {
		name, _, _ := tenantOf(d.IdempotencyKey)
		if kept[name] < AsideKeep {
			kept[name]++
			continue
		}
		if served[d.IdempotencyKey] {
			continue // leased by this sweep (or held by the tenant's burst lease)
		}
		s, ok := slots[name]
		if !ok {
			s = Slot{At: now}
		}
		if s.At.Equal(now) || s.N == AsideKeep {
			s = Slot{At: s.At.Add(step)}
		}
		s.N++
		slots[name] = s
		out = append(out, Aside{Key: d.IdempotencyKey, Due: s.At})
	}
	return out
}

// asideWriters is how many set-aside writes a sweep runs at once.
const asideWriters = 32

// setAside makes the items SetAside picks from a sweep's read due later,
// after the sweep's turns were dispatched, counting them in res: an item
// leased, deferred or settled since it was read is left as it is, and a
// failed write leaves the item due, read again by the next sweep.
func (s *Sweeper) setAside(ctx context.Context, due []ops.IdempotencyRecord, turns []Turn, full bool, now time.Time, res *SweepResult) {
	if s.Asides == nil {
		return
	}
	s.slotsMu.Lock()
	if s.slots == nil {
		s.slots = Slots{}
	}
	asides := SetAside(due, turns, full, now, s.AsideStep, s.slots)
	s.slotsMu.Unlock()
	work := make(chan Aside)
	var set, failed atomic.Int64
	var wg sync.WaitGroup
	for range min(asideWriters, len(asides)) {
		wg.Go(func() {
			for a := range work {
				err := s.Asides.SetAsideOutboxItem(ctx, a.Key, a.Due, now)
				switch {
				case err == nil:
					set.Add(1)
				case !errors.Is(err, model.ErrConflict) && !errors.Is(err, model.ErrNotFound):
					failed.Add(1)
					s.log.WarnContext(ctx, "sweeper could not set an outbox item aside", "idempotencyKey", a.Key, "error", err)
				}
			}
		})
	}
	for _, a := range asides {
		if ctx.Err() != nil {
			break
		}
		work <- a
	}
	close(work)
	wg.Wait()
	res.SetAside += int(set.Load())
	res.Failed += int(failed.Load())
}
