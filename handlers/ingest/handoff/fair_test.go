package handoff_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/ingest/handoff"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func webhook(aspect string, activity, owner int64, due int) ops.IdempotencyRecord {
	k := keys.WebhookIdempotencyKey("activity", activity, aspect, owner, t0.Unix(), nil)
	return ops.IdempotencyRecord{IdempotencyKey: k, PendingSK: keys.OutboxPendingSK(t0.Add(time.Duration(due)*time.Millisecond), k)}
}

// athlete is an athlete event (a deauthorization, n makes it distinct): the
// one kind of webhook work that is not gathered into bursts.
func athlete(owner int64, n, due int) ops.IdempotencyRecord {
	k := keys.WebhookIdempotencyKey("athlete", owner, "update", owner, t0.Unix()+int64(n), map[string]string{"authorized": "false"})
	return ops.IdempotencyRecord{IdempotencyKey: k, PendingSK: keys.OutboxPendingSK(t0.Add(time.Duration(due)*time.Millisecond), k)}
}

func syncJob(user string, due int) ops.IdempotencyRecord {
	k := keys.SyncJobKey("backfill", user, t0)
	return ops.IdempotencyRecord{IdempotencyKey: k, PendingSK: keys.OutboxPendingSK(t0.Add(time.Duration(due)*time.Millisecond), k)}
}

// describe names each turn: the athlete or user, and a burst's size.
func describe(turns []handoff.Turn) []string {
	var out []string
	for _, t := range turns {
		d := t.Items[0]
		name := d.IdempotencyKey
		if k, ok := keys.ParseWebhookIdempotencyKey(d.IdempotencyKey); ok {
			name = fmt.Sprintf("a%d.%s", k.OwnerID, k.AspectType)
			if k.ObjectType == "athlete" {
				name = fmt.Sprintf("a%d.athlete", k.OwnerID)
			}
		} else if u, ok := keys.ParseSyncJobKey(d.IdempotencyKey); ok {
			name = "sync." + u
		}
		if t.Burst {
			name += fmt.Sprintf("x%d", len(t.Items))
		}
		out = append(out, name)
	}
	return out
}

// TestPlanSharesASweepFairly: the sweep's turns, round robin over tenants
// ordered by their oldest due item, and one burst an athlete. Protections:
// the fair plan (oldest due first would hand one athlete's backlog out
// before anyone else's item), and one burst an athlete a sweep (without it
// the flood's last 100 are a second burst, which walks the athlete's list
// pages beside the first: the chaos heavy import's overlapping walks
// spent the athlete's daily unverified allowance and left 288 of 2,000
// imported activities for the next day).
func TestPlanSharesASweepFairly(t *testing.T) {
	t.Parallel()
	noisy := func(n int, aspect string) []ops.IdempotencyRecord {
		var out []ops.IdempotencyRecord
		for i := range n {
			out = append(out, webhook(aspect, int64(1000+i), 1, i))
		}
		return out
	}
	tests := []struct {
		name  string
		due   []ops.IdempotencyRecord
		limit int
		want  string
	}{
		{"a flood of creates is one burst turn, the others follow at once, the rest of the flood waits for a later sweep",
			append(noisy(600, "create"), webhook("create", 7, 2, 700), webhook("update", 8, 3, 701)), 200,
			"[a1.createx500 a2.create a3.update]"},
		{"a flood of updates and deletes is one burst turn with the creates",
			append(noisy(3, "update"), webhook("create", 7, 1, 50), webhook("delete", 8, 1, 60), athlete(1, 0, 70)), 200,
			"[a1.updatex5 a1.athlete]"},
		{"athlete events get a turn per round, the rounds going on while the limit allows",
			[]ops.IdempotencyRecord{athlete(1, 0, 0), athlete(1, 1, 1), athlete(1, 2, 2), athlete(1, 3, 3), athlete(2, 0, 50), webhook("update", 8, 3, 60)}, 200,
			"[a1.athlete a2.athlete a3.update a1.athlete a1.athlete a1.athlete]"},
		{"in each round webhooks before sync jobs, whatever their due order",
			[]ops.IdempotencyRecord{syncJob("u1", 0), athlete(2, 0, 10), syncJob("u2", 1), athlete(2, 1, 11)}, 200,
			"[a2.athlete sync.u1 sync.u2 a2.athlete]"},
		{"a busy sweep still gives a sync its first-round turn",
			[]ops.IdempotencyRecord{athlete(1, 0, 0), athlete(1, 1, 1), syncJob("u1", 2), athlete(2, 0, 10)}, 3,
			"[a1.athlete a2.athlete sync.u1]"},
		{"as many webhook tenants as the limit leave the syncs their share of the first round",
			[]ops.IdempotencyRecord{webhook("update", 1, 1, 0), webhook("update", 2, 2, 1), webhook("update", 3, 3, 2),
				webhook("update", 4, 4, 3), syncJob("u1", 4), syncJob("u2", 5)}, 4,
			"[a1.update a2.update a3.update sync.u1]"},
		{"the limit cuts the last round",
			[]ops.IdempotencyRecord{athlete(1, 0, 0), athlete(1, 1, 1), athlete(1, 2, 2), athlete(2, 0, 10), athlete(3, 0, 20)}, 4,
			"[a1.athlete a2.athlete a3.athlete a1.athlete]"},
		{"a lone create is a turn of its own, not a burst",
			[]ops.IdempotencyRecord{webhook("create", 7, 2, 0), athlete(2, 0, 1)}, 200,
			"[a2.create a2.athlete]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			turns, _ := handoff.Plan(tc.due, tc.limit)
			if got := fmt.Sprint(describe(turns)); got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// TestPlanSaysWhenWorkIsLeft: a plan cut by the limit says so, so the
// sweeper sweeps again at once; one that planned everything does not.
func TestPlanSaysWhenWorkIsLeft(t *testing.T) {
	t.Parallel()
	due := []ops.IdempotencyRecord{athlete(1, 0, 0), athlete(1, 1, 1), athlete(2, 0, 2)}
	for _, tc := range []struct {
		limit int
		want  bool
	}{{3, false}, {2, true}, {200, false}} {
		if _, more := handoff.Plan(due, tc.limit); more != tc.want {
			t.Errorf("limit %d: more = %v, want %v", tc.limit, more, tc.want)
		}
	}
	// An athlete's events past its burst wait for its burst lease, not for
	// another sweep at once.
	var flood []ops.IdempotencyRecord
	for i := range handoff.MaxBurst + 10 {
		flood = append(flood, webhook("create", int64(1000+i), 1, i))
	}
	if turns, more := handoff.Plan(flood, 200); len(turns) != 1 || more {
		t.Errorf("a flood past one burst: %v, more = %v; want one burst and no more", describe(turns), more)
	}
}

// TestPlanAtScaleGivesEveryTenantATurn: one tenant with 5,000 due deletes
// (ten bursts; deferred to one reset instant, so older than everyone's) beside 200
// honest webhook tenants and 60 sync tenants, at the sweep limit of 200:
// in two sweeps every tenant gets a turn, the syncs get their share of the
// first, and the noisy tenant gets one turn in each sweep (one burst an
// athlete), where others wait.
// Protection: the round robin and the syncs' share (an oldest-first or
// webhooks-first plan gives the honest tenants nothing, or the syncs).
func TestPlanAtScaleGivesEveryTenantATurn(t *testing.T) {
	t.Parallel()
	var due []ops.IdempotencyRecord
	for i := range 5000 {
		due = append(due, webhook("delete", int64(100000+i), 1, 0))
	}
	for i := range 200 {
		due = append(due, webhook("create", int64(i), int64(10+i), 1+i))
	}
	for i := range 60 {
		due = append(due, syncJob(fmt.Sprintf("s%d", i), 300+i))
	}
	served := map[string]int{}
	for sweep := 1; sweep <= 2; sweep++ {
		turns, more := handoff.Plan(due, handoff.DefaultSweepLimit)
		planned := map[string]bool{}
		syncs := 0
		for _, name := range describe(turns) {
			served[name]++
			syncs += boolInt(name[:5] == "sync.")
			if sweep == 1 && name == "a1.deletex500" && served[name] > 1 {
				t.Fatalf("sweep 1: the noisy tenant got %d turns while others waited", served[name])
			}
		}
		for _, tn := range turns {
			for _, it := range tn.Items {
				planned[it.IdempotencyKey] = true
			}
		}
		t.Logf("sweep %d: %d turns, %d to syncs, more=%v", sweep, len(turns), syncs, more)
		if sweep == 1 && syncs < handoff.DefaultSweepLimit/4 {
			t.Fatalf("sweep 1 gave syncs %d turns, want their share of %d", syncs, handoff.DefaultSweepLimit/4)
		}
		var rest []ops.IdempotencyRecord
		for _, d := range due {
			if !planned[d.IdempotencyKey] {
				rest = append(rest, d)
			}
		}
		due = rest
	}
	if len(served) != 1+200+60 {
		t.Fatalf("after two sweeps %d tenants were served, want all %d", len(served), 1+200+60)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
