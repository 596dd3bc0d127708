package handoff_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/ingest/handoff"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
)

// creates are n activity creates of owner, due one after another from due.
func creates(owner int64, n, due int) []ops.IdempotencyRecord {
	var out []ops.IdempotencyRecord
	for i := range n {
		out = append(out, webhook("create", owner*1000000+int64(i), owner, due+i))
	}
	return out
}

// TestSetAsideSpreadsOnlyATenantPastWhatASweepServes: the decision of
// which items of a full read are made due later, and when.
func TestSetAsideSpreadsOnlyATenantPastWhatASweepServes(t *testing.T) {
	t.Parallel()
	step := time.Minute
	honest := append(creates(2, 1, 5000), webhook("update", 9, 3, 5001), syncJob("u1", 5002))
	noisy := append(creates(1, 1600, 0), honest...)
	tests := []struct {
		name  string
		due   []ops.IdempotencyRecord
		full  bool
		slots handoff.Slots
		// want counts the items set aside per instant (minutes after now),
		// and names the tenants they belong to.
		want string
	}{
		{"a read that saw the whole backlog sets nothing aside", noisy, false, nil, "map[]"},
		{"a full read keeps AsideKeep of a tenant due, its burst among them, and spreads the rest AsideKeep a step",
			noisy, true, nil, "map[a1@1m:500 a1@2m:500 a1@3m:100]"},
		{"a tenant with no more than AsideKeep keeps everything due",
			append(creates(1, handoff.AsideKeep, 0), honest...), true, nil, "map[]"},
		{"honest tenants and sync users are never set aside", honest, true, nil, "map[]"},
		{"an earlier sweep's slot is filled before the next one",
			noisy, true, handoff.Slots{"athlete 1": {At: t0.Add(2 * step), N: 450}}, "map[a1@2m:50 a1@3m:500 a1@4m:500 a1@5m:50]"},
		{"a slot that has passed is forgotten",
			noisy, true, handoff.Slots{"athlete 1": {At: t0, N: 450}}, "map[a1@1m:500 a1@2m:500 a1@3m:100]"},
		{"items a turn serves are never set aside, even past AsideKeep",
			append(append(creates(1, 500, 0), athlete(1, 0, 600), athlete(1, 1, 601)), honest...), true, nil, "map[]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			turns, _ := handoff.Plan(tc.due, 200)
			slots := handoff.Slots{}
			for k, v := range tc.slots {
				slots[k] = v
			}
			asides := handoff.SetAside(tc.due, turns, tc.full, t0, step, slots)
			served := map[string]bool{}
			for _, turn := range turns {
				for _, it := range turn.Items {
					served[it.IdempotencyKey] = true
				}
			}
			got := map[string]int{}
			for _, a := range asides {
				if served[a.Key] {
					t.Fatalf("%s is served by this sweep and set aside", a.Key)
				}
				k, _ := keys.ParseWebhookIdempotencyKey(a.Key)
				got[fmt.Sprintf("a%d@%s", k.OwnerID, a.Due.Sub(t0).Round(time.Second).String()[:2])]++
			}
			if s := fmt.Sprint(got); s != tc.want {
				t.Fatalf("set aside %s, want %s", s, tc.want)
			}
			for name, s := range slots {
				if !s.At.After(t0) || s.N > handoff.AsideKeep {
					t.Fatalf("slot of %s left as %+v", name, s)
				}
			}
		})
	}
}
