package rebuildkit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/scripts/rebuildkit"
	"github.com/commitcollect/backend/scripts/rebuildkit/cli"
)

// run runs one command against the harness and returns its exit code and
// output.
func (h *harness) run(t testing.TB, cmd func(context.Context, []string, cli.IO, cli.Setup) int, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cmd(context.Background(), args, cli.IO{Out: &out, Err: &errOut}, h.setup)
	return code, out.String(), errOut.String()
}

func (h *harness) verifyJSON(t testing.TB, args ...string) (int, cli.VerifyReport) {
	t.Helper()
	code, out, errOut := h.run(t, cli.VerifyMain, append([]string{"--json", "--quiet"}, args...)...)
	var rep cli.VerifyReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("verify output %q (stderr %s): %v", out, errOut, err)
	}
	return code, rep
}

func (h *harness) rebuildJSON(t testing.TB, args ...string) (int, rebuildkit.Summary) {
	t.Helper()
	code, out, errOut := h.run(t, cli.RebuildMain, append([]string{"--json", "--rps", "0"}, args...)...)
	var sum rebuildkit.Summary
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("rebuild output %q (stderr %s): %v", out, errOut, err)
	}
	return code, sum
}

func TestVerifyFindsCorruptionAndRebuildRestoresIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	users := names("c", 5)
	seedModel(t, h.st)
	seedUsers(t, h.st, users, 30)

	if code, sum := h.rebuildJSON(t, "--all"); code != cli.ExitOK || sum.Users != 5 || sum.MilestonesChanged != 10 || sum.AwardsMinted == 0 {
		t.Fatalf("initial rebuild: got exit %d %s, want 5 users and 10 milestones projected", code, sum)
	}
	if code, rep := h.verifyJSON(t, "--all"); code != cli.ExitOK || !rep.Clean || len(rep.Drift) != 0 {
		t.Fatalf("verify after rebuild: got exit %d %+v, want clean", code, rep)
	}

	// Corrupt on purpose: an edited progress value, a deleted award item and
	// a bumped version (a concurrency counter moved by someone else: not
	// drift, but a rebuild must cope with it).
	tbl := h.st.DB.Tables().Main
	edited := milestones(t, h.st, "c000")["dist"]
	if _, err := h.st.DB.UpdateVersioned(ctx, tbl, edited.Key, edited.Version, dynamo.Changes{Set: map[string]any{"progressValue": int64(12345)}}); err != nil {
		t.Fatal(err)
	}
	robbed := milestones(t, h.st, "c001")["count"]
	if robbed.AwardedParts == 0 {
		t.Fatalf("fixture: c001/count has no awards to delete: %+v", robbed.Projection)
	}
	if err := h.st.DB.Delete(ctx, tbl, keys.AwardKey("c001", "count", 0)); err != nil {
		t.Fatal(err)
	}
	bumped := milestones(t, h.st, "c002")["dist"]
	for v := bumped.Version; v < bumped.Version+5; v++ {
		if _, err := h.st.DB.UpdateVersioned(ctx, tbl, bumped.Key, v, dynamo.Changes{}); err != nil {
			t.Fatal(err)
		}
	}

	code, rep := h.verifyJSON(t, "--all")
	var got []string
	for _, d := range rep.Drift {
		got = append(got, fmt.Sprintf("%s/%s %s %s→%s", d.UserID, d.MilestoneID, d.Field, d.Stored, d.Recomputed))
	}
	want := []string{
		fmt.Sprintf("c000/dist progressValue 12345→%d", edited.ProgressValue),
		"c001/count award missing→part 0",
	}
	if code != cli.ExitDrift || rep.Clean || !slices.Equal(got, want) {
		t.Fatalf("verify after corruption: got exit %d drift\n%s\nwant exit %d drift\n%s", code, strings.Join(got, "\n"), cli.ExitDrift, strings.Join(want, "\n"))
	}
	// The plain output names the same milestones, one line each.
	code, out, _ := h.run(t, cli.VerifyMain, "--all", "--quiet")
	if code != cli.ExitDrift || strings.Count(out, "drift: ") != 2 || !strings.Contains(out, "user=c000 milestone=dist progressValue: stored=12345") {
		t.Fatalf("plain verify: got exit %d\n%s", code, out)
	}

	code, sum := h.rebuildJSON(t, "--all")
	if code != cli.ExitOK || sum.MilestonesChanged != 2 || sum.AwardsMinted != 1 || sum.Errors != 0 {
		t.Fatalf("rebuild after corruption: got exit %d %s, want the 2 corrupted milestones rewritten and 1 award minted", code, sum)
	}
	if code, rep := h.verifyJSON(t, "--all"); code != cli.ExitOK || !rep.Clean {
		t.Fatalf("verify after repair: got exit %d %+v, want clean", code, rep.Drift)
	}
	if code, sum := h.rebuildJSON(t, "--all"); code != cli.ExitOK || sum.MilestonesChanged != 0 || sum.AwardsMinted != 0 || sum.Users != 5 {
		t.Fatalf("second rebuild: got exit %d %s, want 5 users and nothing changed", code, sum)
	}
	if got := milestones(t, h.st, "c002")["dist"]; got.Version != bumped.Version+5 || got.Projection.ProgressValue != bumped.ProgressValue {
		t.Fatalf("bumped milestone: got version %d progress %d, want it left at version %d progress %d", got.Version, got.ProgressValue, bumped.Version+5, bumped.ProgressValue)
	}
	if got := milestones(t, h.st, "c000")["dist"]; got.ProgressValue != edited.ProgressValue {
		t.Fatalf("edited milestone: got progress %d, want %d restored", got.ProgressValue, edited.ProgressValue)
	}
	var a model.Award
	if err := h.st.DB.Get(ctx, tbl, keys.AwardKey("c001", "count", 0), &a); err != nil {
		t.Fatalf("deleted award not restored: %v", err)
	}

	// --user and --users-file limit verify and rebuild to those users.
	if code, rep := h.verifyJSON(t, "--user", "c003", "--user", "c004"); code != cli.ExitOK || rep.Summary.Users != 2 {
		t.Fatalf("verify --user: got exit %d %s, want 2 users verified", code, rep.Summary)
	}
}

// changedMilestones lists user/milestone whose projection differs between
// two snapshots.
func changedMilestones(before, after map[string]map[string]model.Milestone) []string {
	var out []string
	for u, ms := range after {
		for id, m := range ms {
			b := before[u][id]
			if b.ProgressValue != m.ProgressValue || b.WorkoutsCounted != m.WorkoutsCounted || b.AwardedParts != m.AwardedParts || b.Status != m.Status {
				out = append(out, u+"/"+id)
			}
		}
	}
	slices.Sort(out)
	return out
}

func (h *harness) snapshot(t testing.TB, users []string) map[string]map[string]model.Milestone {
	t.Helper()
	out := map[string]map[string]model.Milestone{}
	for _, u := range users {
		out[u] = milestones(t, h.st, u)
	}
	return out
}

func TestReplayDryRunReportsWhatTheLiveConsumerChanges(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	users := names("r", 5)
	seedModel(t, h.st)
	seedUsers(t, h.st, users, 10)
	h.live(t) // the live consumer is up to date
	before := h.snapshot(t, users)

	// A burst of webhooks: a March run (both milestones), an April ride
	// (count only), a February run (nothing: before every period) and a
	// deletion (progress goes down, awards stay).
	tbl := h.st.DB.Tables().Main
	burst := []model.Entity{
		workouts("r000", 0, 40, 41)[0],
		&model.Workout{UserID: "r001", ActivityID: 777001, SportType: "Ride", DistanceMeters: 20000, StartDateUtc: april.AddDate(0, 0, 2), CorrelationID: "burst-1"},
		&model.Workout{UserID: "r003", ActivityID: 777003, SportType: "Run", DistanceMeters: 5000, StartDateUtc: march.AddDate(0, -1, 3), CorrelationID: "burst-3"},
	}
	w := workouts("r004", 4, 0, 1)[0].(*model.Workout) // a ride: counts, but not for distance
	w.IsDeleted = true
	burst = append(burst, w)
	for _, e := range burst {
		if err := h.st.DB.Put(ctx, tbl, e); err != nil {
			t.Fatal(err)
		}
	}

	code, out, errOut := h.run(t, cli.ReplayMain, "--dry-run", "--json")
	if code != cli.ExitOK {
		t.Fatalf("replay --dry-run: exit %d\n%s", code, errOut)
	}
	if !strings.Contains(errOut, "24 hours") || !strings.Contains(errOut, "two concurrent readers per shard") {
		t.Fatalf("replay printed no retention/throttling warnings:\n%s", errOut)
	}
	var dry struct {
		Records int
		Users   []string
		Summary rebuildkit.Summary
	}
	if err := json.Unmarshal([]byte(out), &dry); err != nil {
		t.Fatalf("replay output %q: %v", out, err)
	}
	var predicted []string
	for _, d := range dry.Summary.Drift {
		predicted = append(predicted, d.UserID+"/"+d.MilestoneID)
	}
	slices.Sort(predicted)
	predicted = slices.Compact(predicted)
	if after := h.snapshot(t, users); len(changedMilestones(before, after)) != 0 {
		t.Fatalf("a dry run wrote: %v changed", changedMilestones(before, after))
	}

	h.live(t)
	changed := changedMilestones(before, h.snapshot(t, users))
	if want := []string{"r000/count", "r000/dist", "r001/count", "r004/count"}; !slices.Equal(changed, want) {
		t.Fatalf("fixture: the live consumer changed %v, want %v", changed, want)
	}
	if !slices.Equal(predicted, changed) {
		t.Fatalf("replay --dry-run predicted %v, the live consumer changed %v", predicted, changed)
	}
}

func TestReplayFeedsOneUserToTheProjectorAndResumesFromCheckpoint(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	users := names("f", 3)
	seedModel(t, h.st)
	seedUsers(t, h.st, users, 12)
	cp := t.TempDir() + "/checkpoint.json"

	code, out, errOut := h.run(t, cli.ReplayMain, "--user", "f001", "--checkpoint", cp)
	if code != cli.ExitOK || !strings.Contains(out, "replay: records=") {
		t.Fatalf("replay --user: exit %d\n%s\n%s", code, out, errOut)
	}
	got := h.snapshot(t, users)
	if got["f001"]["dist"].WorkoutsCounted == 0 || got["f000"]["dist"].WorkoutsCounted != 0 || got["f002"]["count"].WorkoutsCounted != 0 {
		t.Fatalf("replay --user f001 projected %+v / %+v / %+v, want only f001", got["f000"]["dist"].Projection, got["f001"]["dist"].Projection, got["f002"]["count"].Projection)
	}
	// The checkpoint file says where it stopped (the first replay also read
	// the projector's own writes, which it made while the replay ran). A
	// second replay of every user reads only what came after: a new workout
	// of f002. f000 stays unprojected, which it would not be had the replay
	// started from the trim horizon again.
	if err := h.st.DB.Put(context.Background(), h.st.DB.Tables().Main, workouts("f002", 2, 12, 13)[0]); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = h.run(t, cli.ReplayMain, "--checkpoint", cp)
	if code != cli.ExitOK {
		t.Fatalf("second replay: exit %d\n%s", code, errOut)
	}
	var records int
	if _, err := fmt.Sscanf(out, "replay: records=%d", &records); err != nil || records == 0 || records > 25 {
		t.Fatalf("second replay: got %q, want the new workout and the projector's writes for it", out)
	}
	if got := h.snapshot(t, users); got["f000"]["dist"].WorkoutsCounted != 0 || got["f002"]["count"].WorkoutsCounted != 13 {
		t.Fatalf("second replay: got f000 %+v, f002 %+v; want f000 untouched and f002 projected from its 13 workouts", got["f000"]["dist"].Projection, got["f002"]["count"].Projection)
	}
}

func TestVerifyAndRebuildFailClosedOnANewerSchema(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	seedModel(t, h.st)
	seedUsers(t, h.st, names("n", 2), 8)
	if code, _ := h.rebuildJSON(t, "--all"); code != cli.ExitOK {
		t.Fatal("initial rebuild failed")
	}
	// A milestone written by newer code: this code must leave it alone and say so.
	m := milestones(t, h.st, "n001")["count"]
	m.MilestoneID = "future"
	item, err := dynamo.Marshal(&m)
	if err != nil {
		t.Fatal(err)
	}
	item["schemaVersion"] = &types.AttributeValueMemberN{Value: "99"}
	if _, err := h.st.DB.Client().PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(h.st.DB.Tables().Main), Item: item}); err != nil {
		t.Fatal(err)
	}
	code, rep := h.verifyJSON(t, "--all")
	if code != cli.ExitError || rep.Clean || rep.Summary.Errors != 1 || rep.Summary.Users != 1 ||
		!strings.Contains(rep.Summary.Failures["n001"], "newer than supported") {
		t.Fatalf("verify: got exit %d %+v, want n001 reported unverifiable (newer schema) and n000 verified", code, rep.Summary)
	}
	code, sum := h.rebuildJSON(t, "--all")
	if code != cli.ExitError || sum.Errors != 1 || sum.MilestonesChanged != 0 {
		t.Fatalf("rebuild: got exit %d %s, want n001 failed and nothing written", code, sum)
	}
	if got := milestones(t, h.st, "n001"); got["count"].ProgressValue != m.ProgressValue {
		t.Fatalf("n001/count: got %+v, want its readable milestones left correct", got["count"].Projection)
	}
}
