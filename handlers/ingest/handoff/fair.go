package handoff

// Fair shares of a sweep.
//
// Strava's read budget is one pool for every athlete, and anyone with a
// linked account can post unsigned events, so the sweeper never hands out a
// backlog oldest first: one athlete's thousand due items would come before
// everybody else's one. It plans each sweep as deficit round robin over
// tenants (an athlete's events, a user's sync jobs), in the spirit of SQS
// fair queues: every tenant with due work gets a turn before any tenant
// gets its second, at most PerTenant turns a sweep, tenants ordered by their
// oldest due item. In each round webhook events go before sync jobs (the
// syncs' share of the budget is their own pacing), and a sync still gets its
// turn in the first round: a busy sweep never starves reconciliation. An athlete's due creates are one turn
// together: a burst, served from list pages (fetch/burst.go), so a flood of
// creates costs its athlete one turn and a share of one list page.

import (
	"strconv"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
)

// Planning defaults.
const (
	// DefaultPerTenant bounds the turns (dispatches) one tenant gets per
	// sweep.
	DefaultPerTenant = 5
	// MaxBurst bounds the creates of one burst job: the pages one burst
	// reads at most cover them, and its payload (about 400 bytes a create)
	// stays under Lambda's 256 KB asynchronous invoke limit. Creates past it
	// are another burst (another turn).
	MaxBurst = 500
	// dueLookahead: a sweep reads up to this many times its Limit of due
	// items, so the tenants behind a large backlog are seen too.
	dueLookahead = 5
)

// Turn is one dispatch of a sweep: one outbox item, or (Burst) one
// athlete's due creates, served together.
type Turn struct {
	Items []model.IdempotencyRecord
	Burst bool
}

type tenant struct {
	turns []Turn
	sync  bool
}

// Plan shares out a sweep: due (oldest due first, as listed) becomes at most
// limit turns, round robin over tenants, in each round webhook tenants
// before sync tenants, at most perTenant turns each (defaults when < 1).
// more says turns were left for the next sweep.
func Plan(due []model.IdempotencyRecord, limit, perTenant int) (turns []Turn, more bool) {
	if limit < 1 {
		limit = DefaultSweepLimit
	}
	if perTenant < 1 {
		perTenant = DefaultPerTenant
	}
	var order []string
	tenants := map[string]*tenant{}
	creates := map[string]int{} // tenant → index of its burst turn
	for _, d := range due {
		name, sync, create := tenantOf(d.IdempotencyKey)
		t, ok := tenants[name]
		if !ok {
			t = &tenant{sync: sync}
			tenants[name] = t
			order = append(order, name)
		}
		if i, ok := creates[name]; ok && create && len(t.turns[i].Items) < MaxBurst {
			t.turns[i].Items = append(t.turns[i].Items, d)
			t.turns[i].Burst = true
			continue
		}
		if create { // the athlete's first create, or its burst is full
			creates[name] = len(t.turns)
		}
		t.turns = append(t.turns, Turn{Items: []model.IdempotencyRecord{d}})
	}
	var out []Turn
	for round := range perTenant {
		for _, syncs := range []bool{false, true} {
			for _, name := range order {
				t := tenants[name]
				if t.sync != syncs || round >= len(t.turns) {
					continue
				}
				if len(out) == limit {
					return out, true
				}
				out = append(out, t.turns[round])
			}
		}
	}
	for _, t := range tenants {
		more = more || len(t.turns) > perTenant
	}
	return out, more
}

// tenantOf names whose work an outbox key is: an athlete's events share one
// tenant, a user's sync jobs another; create says the key is an activity's
// create event (gathered into a burst).
func tenantOf(key string) (name string, sync, create bool) {
	if k, ok := keys.ParseWebhookIdempotencyKey(key); ok {
		return "athlete " + strconv.FormatInt(k.OwnerID, 10), false, k.ObjectType == "activity" && k.AspectType == "create"
	}
	if user, ok := keys.ParseSyncJobKey(key); ok {
		return "user " + user, true, false
	}
	return "key " + key, false, false
}
