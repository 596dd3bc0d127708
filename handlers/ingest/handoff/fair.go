package handoff

import (
	"strconv"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
)

// Planning defaults.
const (
	// MaxBurst bounds the creates of one burst job: the pages one burst
	// reads at most cover them, and its payload (about 400 bytes a create)
	// stays under Lambda's 256 KB asynchronous invoke limit. Creates past it
	// are the athlete's next burst, in a later sweep (gather).
	MaxBurst = 500
	// DefaultSweepRead bounds the due items one sweep reads: the whole due
	// backlog up to it (about 310 read units at 10,000), so one tenant's
	// thousands of due items never hide the others'.
	DefaultSweepRead = 10000
	// syncShare is the part of a sweep's limit kept for sync tenants in
	// the first round.
	syncShare = 4
)

// Turn is one dispatch of a sweep: one outbox item, or (Burst) one
// athlete's due activity events, served together.
type Turn struct {
	Items []ops.IdempotencyRecord
	Burst bool
}

type tenant struct {
	turns []Turn
	sync  bool
}

// Plan shares out a sweep: due (oldest due first, as listed) becomes at most
// limit turns (DefaultSweepLimit when < 1), round robin over tenants, in
// each round webhook tenants before sync tenants, save the first round's
// share kept for syncs. more says turns were left for the next sweep.
//
// Strava's read budget is one pool for every athlete, and anyone with a
// linked account can post unsigned events, so the sweeper never hands out a
// backlog oldest first: one athlete's thousand due items would come before
// everybody else's one. Each sweep reads the whole due backlog (up to
// DefaultSweepRead items, round after round over the index's shards), so a
// tenant behind a large backlog is seen, and plans it as deficit round robin
// over tenants (an athlete's events, a user's sync jobs), in the spirit of
// SQS fair queues: every tenant with due work gets a turn before any tenant
// gets its second, tenants ordered by their oldest due item, rounds going
// on until the sweep's limit (work conserving: a lone tenant's backlog
// drains in few sweeps, each reading it once). In each round webhook
// events go before sync jobs (the syncs' share of the budget is their own
// pacing), except that the first round keeps a quarter of the limit for
// syncs: a sweep busy with as many webhook tenants as its limit still
// gives reconciliation and backfills their turn. An athlete's due activity
// events are one turn together: a burst, served from list pages
// (fetch/burst.go), so a flood of creates, updates or deletes costs its
// athlete one turn and a share of one list page, and an athlete has one
// burst a sweep (gather).
func Plan(due []ops.IdempotencyRecord, limit int) (turns []Turn, more bool) {
	if limit < 1 {
		limit = DefaultSweepLimit
	}
	order, tenants := gather(due)
	syncTenants := 0
	for _, name := range order {
		if tenants[name].sync {
			syncTenants++
		}
	}
	// The first round's webhook tenants leave room for the syncs' share.
	webhookRoom := limit - min(syncTenants, max(1, limit/syncShare))
	var out []Turn
	next := map[string]int{} // tenant → its next turn
	left := len(order)       // tenants with turns not planned
	for round := 0; left > 0; round++ {
		for _, syncs := range []bool{false, true} {
			for _, name := range order {
				t := tenants[name]
				if t.sync != syncs || next[name] >= len(t.turns) {
					continue
				}
				if len(out) == limit {
					return out, true
				}
				if round == 0 && !syncs && len(out) >= webhookRoom {
					continue // its first turn comes after the syncs'
				}
				out = append(out, t.turns[next[name]])
				if next[name]++; next[name] == len(t.turns) {
					left--
				}
			}
		}
	}
	return out, false
}

// gather groups due items by tenant, in the order of each tenant's oldest
// item; an athlete's activity events become one burst turn of up to
// MaxBurst, its oldest due. The athlete's events past it wait for a later
// sweep, once the burst has released the athlete's burst lease: every
// burst walks the athlete's list pages from the newest, so two at once
// would read the same pages twice, and an import of old-dated activities,
// deep in the history, would spend the athlete's unverified allowance on
// walks that overlap. They do not count as work left (more): the sweep
// that follows at once would find the athlete's lease held.
func gather(due []ops.IdempotencyRecord) ([]string, map[string]*tenant) {
	var order []string
	tenants := map[string]*tenant{}
	bursts := map[string]int{} // tenant → index of its burst turn
	for _, d := range due {
		name, sync, burst := tenantOf(d.IdempotencyKey)
		t, ok := tenants[name]
		if !ok {
			t = &tenant{sync: sync}
			tenants[name] = t
			order = append(order, name)
		}
		if i, ok := bursts[name]; ok && burst {
			if len(t.turns[i].Items) < MaxBurst {
				t.turns[i].Items = append(t.turns[i].Items, d)
				t.turns[i].Burst = true
			}
			continue // past MaxBurst: left for a later sweep
		}
		if burst { // the athlete's first activity event
			bursts[name] = len(t.turns)
		}
		t.turns = append(t.turns, Turn{Items: []ops.IdempotencyRecord{d}})
	}
	return order, tenants
}

// tenantOf names whose work an outbox key is: an athlete's events share one
// tenant, a user's sync jobs another; burst says the key is an event served
// in a burst (ingest.Kind.Burstable: an activity's event).
func tenantOf(key string) (name string, sync, burst bool) {
	if k, ok := keys.ParseWebhookIdempotencyKey(key); ok {
		return "athlete " + strconv.FormatInt(k.OwnerID, 10), false, ingest.KindOf(k.ObjectType, k.AspectType, nil).Burstable()
	}
	if user, ok := keys.ParseSyncJobKey(key); ok {
		return "user " + user, true, false
	}
	return "key " + key, false, false
}
