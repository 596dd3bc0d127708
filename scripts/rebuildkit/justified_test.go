package rebuildkit_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/scripts/rebuildkit"
	"github.com/commitcollect/backend/scripts/rebuildkit/cli"
	"github.com/commitcollect/backend/test/fixture"
)

// TestRebuildMintsOnlyWhatIsJustified reproduces an observed failure:
// a milestone's awardedParts raised by hand from 6 to 12. verify reports the
// counter as drift beyond what is justified; rebuild mints nothing the log
// does not earn, lowers the counter back (no award item backs the raised
// part) and does not complete the milestone. Awards the log stops earning
// (a workout deleted) stay: their award items carry AWARD_MINTED entries.
func TestRebuildMintsOnlyWhatIsJustified(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	tbl := h.st.DB.Tables().Main
	es := []model.Entity{&model.ModelMeta{ModelID: "twelve", Name: "Twelve", PartCount: 12, CatalogVersion: 1},
		&model.Profile{UserID: "o6", DisplayName: "o6", CreatedAtUtc: march},
		&model.Milestone{UserID: "o6", MilestoneID: "m", WrittenBy: model.WriterAPI, CreatedAtUtc: march.Add(-time.Hour),
			MilestoneDefinition: model.MilestoneDefinition{ModelID: "twelve", Title: "120 km", Metric: model.MetricDistance,
				Target: 120000, PeriodStartAtUtc: march, PartCount: 12},
			Projection: model.Projection{Status: model.StatusActive}}}
	for i := range 12 {
		es = append(es, &model.ModelPart{ModelID: "twelve", PartIndex: i, Name: fmt.Sprintf("p%d", i)})
	}
	run := func(id int64, km float64) *model.Workout {
		return fixture.Workout("o6", id, fixture.Km(km), fixture.Start(march.Add(time.Duration(id)*time.Hour)))
	}
	es = append(es, run(1, 30), run(2, 30)) // 60 km of 120: 6 parts
	if err := h.st.DB.BatchPut(ctx, tbl, es); err != nil {
		t.Fatal(err)
	}
	awards := func() int {
		t.Helper()
		as, _, err := dynamo.QueryEntities[model.Award](ctx, h.st.DB, tbl, keys.UserPK("o6"), keys.AwardSKPrefix("m"), dynamo.QueryOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return len(as)
	}
	if code, sum := h.rebuildJSON(t, "--user", "o6"); code != cli.ExitOK || sum.AwardsMinted != 6 {
		t.Fatalf("first rebuild: exit %d %s, want 6 awards", code, sum)
	}

	m := milestones(t, h.st, "o6")["m"]
	if _, err := h.st.DB.UpdateVersioned(ctx, tbl, m.Key, m.Version, dynamo.Changes{Set: map[string]any{"awardedParts": 12}}); err != nil {
		t.Fatal(err)
	}
	code, rep := h.verifyJSON(t, "--user", "o6")
	if code != cli.ExitDrift || len(rep.Drift) != 1 {
		t.Fatalf("verify after raising the counter: exit %d drift %+v, want exactly the awardedParts drift", code, rep.Drift)
	}
	d := rep.Drift[0]
	if d.Field != rebuildkit.FieldAwardedParts || d.Stored != "12" || d.Recomputed != "6" ||
		!strings.Contains(d.Message, "beyond what is justified") || !strings.Contains(d.Message, "[6 7 8 9 10 11]") {
		t.Fatalf("drift: %+v, want awardedParts 12→6 explained as beyond what is justified, parts 6..11", d)
	}
	if _, out, _ := h.run(t, cli.VerifyMain, "--user", "o6", "--quiet"); !strings.Contains(out, "awardedParts: stored=12 recomputed=6 (awardedParts beyond what is justified") {
		t.Fatalf("plain verify does not explain the drift:\n%s", out)
	}

	if code, sum := h.rebuildJSON(t, "--user", "o6"); code != cli.ExitOK || sum.AwardsMinted != 0 || sum.MilestonesChanged != 1 {
		t.Fatalf("rebuild after raising the counter: exit %d %s, want the counter rewritten and nothing minted", code, sum)
	}
	if got := milestones(t, h.st, "o6")["m"]; got.AwardedParts != 6 || got.Status != model.StatusActive || awards() != 6 {
		t.Fatalf("after rebuild: %+v with %d awards, want 6 parts, active, 6 awards", got.Projection, awards())
	}
	if code, rep := h.verifyJSON(t, "--user", "o6"); code != cli.ExitOK || !rep.Clean {
		t.Fatalf("verify after rebuild: exit %d %+v, want clean", code, rep.Drift)
	}

	// Awards are monotonic: deleting a workout lowers progress, not awards
	// (they are held with their audit entries)…
	gone := run(2, 30)
	gone.IsDeleted = true
	if err := h.st.DB.Put(ctx, tbl, gone); err != nil {
		t.Fatal(err)
	}
	if code, sum := h.rebuildJSON(t, "--user", "o6"); code != cli.ExitOK || sum.AwardsMinted != 0 {
		t.Fatalf("rebuild after a delete: exit %d %s", code, sum)
	}
	if got := milestones(t, h.st, "o6")["m"]; got.AwardedParts != 6 || got.ProgressValue != 30_000_000 {
		t.Fatalf("after a delete: %+v, want progress 30 km and the 6 awards kept", got.Projection)
	}
	// …and new workouts mint exactly what they earn.
	if err := h.st.DB.Put(ctx, tbl, run(3, 50)); err != nil {
		t.Fatal(err)
	}
	if code, sum := h.rebuildJSON(t, "--user", "o6"); code != cli.ExitOK || sum.AwardsMinted != 2 {
		t.Fatalf("rebuild after 50 km more: exit %d %s, want parts 6 and 7 minted", code, sum)
	}
	if got := milestones(t, h.st, "o6")["m"]; got.AwardedParts != 8 || awards() != 8 {
		t.Fatalf("after 80 km: %+v with %d awards, want 8", got.Projection, awards())
	}
}
