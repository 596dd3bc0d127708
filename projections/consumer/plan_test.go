package consumer_test

import (
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/projections/consumer"
)

func TestPlan(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 2, 27, 8, 0, 0, 0, time.UTC)
	mint := func(parts []int, audited bool) ([]*model.Award, map[int]*model.AuditEntry) {
		var as []*model.Award
		es := map[int]*model.AuditEntry{}
		for _, i := range parts {
			as = append(as, &model.Award{UserID: "u", MilestoneID: "m", PartIndex: i})
			if audited {
				es[i] = model.NewAwardMintedAudit("u", "m", created, i, consumer.EventAwardMinted, "c", created, nil)
			}
		}
		return as, es
	}
	span := func(from, to int) []int {
		var out []int
		for i := from; i < to; i++ {
			out = append(out, i)
		}
		return out
	}
	tests := []struct {
		name      string
		stored    int // stored awardedParts
		existing  []int
		mint      []int
		audited   bool
		final     int
		wantItems []int // items per transaction
		wantParts []int // awardedParts each transaction stores
	}{
		{"no awards: one update", 3, span(0, 3), nil, true, 3, []int{1}, []int{3}},
		{"ten parts: one transaction", 0, nil, span(0, 10), true, 10, []int{32}, []int{10}},
		{"32 parts with collection entries, audits and the summary fit in one", 0, nil, span(0, 32), true, 32, []int{98}, []int{32}},
		{"33 parts take two", 0, nil, span(0, 33), true, 33, []int{98, 5}, []int{32, 33}},
		{"99 parts take four", 0, nil, span(0, 99), true, 99, []int{98, 98, 98, 11}, []int{32, 64, 96, 99}},
		{"99 re-minted items whose audits exist take three", 0, nil, span(0, 99), false, 99, []int{100, 100, 4}, []int{49, 98, 99}},
		{"the prefix counts existing awards", 60, span(0, 60), span(60, 99), true, 99, []int{98, 23}, []int{92, 99}},
		{"a justified counter is not lowered while lost items wait", 99, nil, span(0, 99), true, 99,
			[]int{98, 98, 98, 11}, []int{99, 99, 99, 99}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := &model.Milestone{UserID: "u", MilestoneID: "m", Version: 7, CreatedAtUtc: created,
				MilestoneDefinition: model.MilestoneDefinition{PartCount: 99}, Projection: model.Projection{AwardedParts: tt.stored}}
			existing := map[int]model.Award{}
			for _, i := range tt.existing {
				existing[i] = model.Award{PartIndex: i}
			}
			as, es := mint(tt.mint, tt.audited)
			final := model.Projection{AwardedParts: tt.final, Status: model.StatusActive}
			if tt.final == 99 {
				final.Status = model.StatusCompleted
			}
			ws := consumer.Plan(m, final, existing, as, es, nil)
			if len(ws) != len(tt.wantItems) {
				t.Fatalf("got %d transactions, want %d", len(ws), len(tt.wantItems))
			}
			minted := 0
			for k, w := range ws {
				if w.Items() != tt.wantItems[k] || w.Projection.AwardedParts != tt.wantParts[k] || w.ExpectedVersion != 7+int64(k) {
					t.Errorf("transaction %d: got %d items, awardedParts %d, version %d; want %d, %d, %d",
						k, w.Items(), w.Projection.AwardedParts, w.ExpectedVersion, tt.wantItems[k], tt.wantParts[k], 7+k)
				}
				if (w.Projection.Status == model.StatusCompleted) != (w.Projection.AwardedParts == 99) {
					t.Errorf("transaction %d: status %s", k, w.Projection.Status)
				}
				for j, a := range w.Awards {
					if tt.audited && (j >= len(w.Audits) || w.Audits[j].RequestID != keys.AwardMintedRequestID("m", a.PartIndex)) {
						t.Errorf("transaction %d: award %d without its entry beside it", k, a.PartIndex)
					}
				}
				minted += len(w.Awards)
			}
			if minted != len(tt.mint) {
				t.Errorf("minted %d awards, want %d", minted, len(tt.mint))
			}
		})
	}
}

// TestPlanOfAKeptPeriod: a period the series' item keeps is written there,
// each transaction carrying the item's mirror of the awards minted by
// then, and the period a moving write leaves goes with the first
// transaction only (counted in its items). Protections: the mirror (an
// event in the kept week would not know its awards, and mint them again),
// and leaves on the first write only (the kept period archived after the
// item moved on, or twice).
func TestPlanOfAKeptPeriod(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	m := &model.Milestone{UserID: "u", MilestoneID: "s", PeriodOf: "2026-11-23", Version: 4,
		MilestoneDefinition: model.MilestoneDefinition{PartCount: 40}, Current: &model.CurrentPeriod{PeriodOf: "2026-11-23", CreatedAtUtc: at}}
	existing := map[int]model.Award{0: {PartIndex: 0, AwardedAtUtc: at.Add(-time.Hour)}}
	var as []*model.Award
	es := map[int]*model.AuditEntry{}
	for i := 1; i < 40; i++ {
		as = append(as, &model.Award{UserID: "u", MilestoneID: "s", PartIndex: i, AwardedAtUtc: at})
		es[i] = model.NewAwardMintedAudit("u", "s.2026-11-23", at, i, consumer.EventAwardMinted, "c", at, nil)
	}
	leaves := &model.Milestone{UserID: "u", MilestoneID: "s", PeriodOf: "2026-11-16", Version: 4}
	ws := consumer.Plan(m, model.Projection{AwardedParts: 40, Status: model.StatusCompleted}, existing, as, es, leaves)
	if len(ws) != 2 || ws[0].Leaves != leaves || ws[1].Leaves != nil || ws[0].Items() > model.TransactionLimit {
		t.Fatalf("%d writes, leaves %v then %v, %d items first; want two, leaves with the first", len(ws), ws[0].Leaves, ws[1].Leaves, ws[0].Items())
	}
	minted := len(existing)
	for k, w := range ws {
		minted += len(w.Awards)
		if w.Current == nil || w.Current.PeriodOf != "2026-11-23" || !w.Current.CreatedAtUtc.Equal(at) || len(w.Current.Minted) != minted {
			t.Fatalf("write %d keeps %+v, want the week with %d parts mirrored", k, w.Current, minted)
		}
	}
	if ws[1].Current.Minted[0] != existing[0].AwardedAtUtc.Unix() || ws[1].Current.Minted[39] != at.Unix() {
		t.Fatalf("mirror %v: want each part's mint time", ws[1].Current.Minted)
	}
	if w := consumer.Plan(m, model.Projection{}, nil, nil, nil, nil); len(w) != 1 || w[0].Current == nil || w[0].Current.Minted != nil {
		t.Fatalf("a kept period without awards: %+v, want its record with no mirror (never an empty map)", w)
	}
}
