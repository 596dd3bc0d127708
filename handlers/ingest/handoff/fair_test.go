package handoff_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/ingest/handoff"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func webhook(aspect string, activity, owner int64, due int) model.IdempotencyRecord {
	k := keys.WebhookIdempotencyKey("activity", activity, aspect, owner, t0.Unix(), nil)
	return model.IdempotencyRecord{IdempotencyKey: k, PendingSK: keys.OutboxPendingSK(t0.Add(time.Duration(due)*time.Millisecond), k)}
}

func syncJob(user string, due int) model.IdempotencyRecord {
	k := keys.SyncJobKey("backfill", user, t0)
	return model.IdempotencyRecord{IdempotencyKey: k, PendingSK: keys.OutboxPendingSK(t0.Add(time.Duration(due)*time.Millisecond), k)}
}

// describe names each turn: the athlete or user, and a burst's size.
func describe(turns []handoff.Turn) []string {
	var out []string
	for _, t := range turns {
		d := t.Items[0]
		name := d.IdempotencyKey
		if k, ok := keys.ParseWebhookIdempotencyKey(d.IdempotencyKey); ok {
			name = fmt.Sprintf("a%d.%s", k.OwnerID, k.AspectType)
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
// ordered by their oldest due item. Protection: the fair plan (oldest due
// first would hand one athlete's backlog out before anyone else's item).
func TestPlanSharesASweepFairly(t *testing.T) {
	t.Parallel()
	noisy := func(n int, aspect string) []model.IdempotencyRecord {
		var out []model.IdempotencyRecord
		for i := range n {
			out = append(out, webhook(aspect, int64(1000+i), 1, i))
		}
		return out
	}
	tests := []struct {
		name       string
		due        []model.IdempotencyRecord
		limit, per int
		want       string
	}{
		{"a flood of creates is one burst turn, the others follow at once",
			append(noisy(600, "create"), webhook("create", 7, 2, 700), webhook("update", 8, 3, 701)), 200, 5,
			"[a1.createx500 a2.create a3.update a1.createx100]"},
		{"a flood of updates gets a turn per round, at most per-tenant",
			append(noisy(12, "update"), webhook("update", 7, 2, 50), webhook("update", 8, 3, 60)), 200, 3,
			"[a1.update a2.update a3.update a1.update a1.update]"},
		{"in each round webhooks before sync jobs, whatever their due order",
			[]model.IdempotencyRecord{syncJob("u1", 0), webhook("update", 7, 2, 10), syncJob("u2", 1), webhook("update", 8, 2, 11)}, 200, 5,
			"[a2.update sync.u1 sync.u2 a2.update]"},
		{"a busy sweep still gives a sync its first-round turn",
			append(noisy(3, "update"), syncJob("u1", 0), webhook("update", 7, 2, 10)), 3, 5,
			"[a1.update a2.update sync.u1]"},
		{"the limit cuts the last round",
			append(noisy(3, "update"), webhook("update", 7, 2, 10), webhook("update", 8, 3, 20)), 4, 5,
			"[a1.update a2.update a3.update a1.update]"},
		{"a lone create is a turn of its own, not a burst",
			[]model.IdempotencyRecord{webhook("create", 7, 2, 0), webhook("delete", 8, 2, 1)}, 200, 5,
			"[a2.create a2.delete]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			turns, _ := handoff.Plan(tc.due, tc.limit, tc.per)
			if got := fmt.Sprint(describe(turns)); got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// TestPlanSaysWhenWorkIsLeft: a plan cut by the limit, or by the per-tenant
// bound, says so, so the sweeper sweeps again at once.
func TestPlanSaysWhenWorkIsLeft(t *testing.T) {
	t.Parallel()
	due := []model.IdempotencyRecord{webhook("update", 1, 1, 0), webhook("update", 2, 1, 1), webhook("update", 3, 2, 2)}
	for _, tc := range []struct {
		limit, per int
		want       bool
	}{{3, 5, false}, {2, 5, true}, {3, 1, true}} {
		if _, more := handoff.Plan(due, tc.limit, tc.per); more != tc.want {
			t.Errorf("limit %d, %d per tenant: more = %v, want %v", tc.limit, tc.per, more, tc.want)
		}
	}
}
