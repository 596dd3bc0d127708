package rebuildkit_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/scripts/rebuildkit/cli"
)

// The guardrail at its edges, on one shared data set: users with 2999, 3000
// and 3001 workouts before a monthly period (plus a lifetime milestone, so
// the union of their periods crosses the guardrail exactly there), and a
// user with 4500 workouts with a monthly, a yearly and a lifetime milestone.
// Activity ids have 1 to 13 digits, in an order unrelated to their dates.
// The live projector (stream → Handle) projects them, then new in-period
// activities arrive; verify and rebuild must agree with it throughout.

var (
	gMonth    = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	gMonthEnd = time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	gYear     = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	gYearEnd  = time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	gLifetime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
)

// edgeID gives workout i an id of 1 to 13 digits, unique per user, whose
// numeric and string orders both differ from the date order.
func edgeID(i int) int64 {
	base := []int64{0, 100000, 1000000000, 1000000000000}
	return base[i%len(base)] + int64(i) + 1
}

// edgeUser is one user of the data set and what it holds.
type edgeUser struct {
	id         string
	workouts   []*model.Workout
	milestones []*model.Milestone
}

func edgeMilestone(user, id string, from time.Time, to *time.Time) *model.Milestone {
	return &model.Milestone{UserID: user, MilestoneID: id, WrittenBy: model.WriterAPI, CreatedAtUtc: from,
		MilestoneDefinition: model.MilestoneDefinition{ModelID: modelID, Title: id, Metric: model.MetricDistance,
			Target: 1e9, PeriodStartAtUtc: from, PeriodEndAtUtc: to, PartCount: parts},
		Projection: model.Projection{Status: model.StatusActive}}
}

// olderUser has n workouts before the monthly period, two hours apart, the
// newest at the end of February.
func olderUser(name string, n int) *edgeUser {
	u := &edgeUser{id: name}
	for i := range n {
		u.workouts = append(u.workouts, &model.Workout{UserID: name, ActivityID: edgeID(i), SportType: "Run",
			DistanceMeters: float64(1000 + i%997), StartDateUtc: gMonth.Add(-time.Duration(n-i) * 2 * time.Hour),
			CorrelationID: fmt.Sprintf("c-%s-%d", name, i)})
	}
	end := gMonthEnd
	u.milestones = []*model.Milestone{edgeMilestone(name, "monthly", gMonth, &end), edgeMilestone(name, "lifetime", gLifetime, nil)}
	return u
}

// longUser has 4500 workouts eight hours apart up to 20 March 2026.
func longUser(name string) *edgeUser {
	u := &edgeUser{id: name}
	last := time.Date(2026, 3, 20, 6, 0, 0, 0, time.UTC)
	for i := range 4500 {
		u.workouts = append(u.workouts, &model.Workout{UserID: name, ActivityID: edgeID(i), SportType: "Ride",
			DistanceMeters: float64(2000 + i%1013), StartDateUtc: last.Add(-time.Duration(4499-i) * 8 * time.Hour),
			CorrelationID: fmt.Sprintf("c-%s-%d", name, i)})
	}
	mEnd, yEnd := gMonthEnd, gYearEnd
	u.milestones = []*model.Milestone{edgeMilestone(name, "monthly", gMonth, &mEnd),
		edgeMilestone(name, "yearly", gYear, &yEnd), edgeMilestone(name, "lifetime", gLifetime, nil)}
	return u
}

// newActivities are in-period activities arriving after the first
// projection: ids shorter and longer than any before.
func (u *edgeUser) newActivities() []*model.Workout {
	var out []*model.Workout
	for i, id := range []int64{7, 99999999999999, 4242} {
		out = append(out, &model.Workout{UserID: u.id, ActivityID: id, SportType: "Run", DistanceMeters: float64(5000 + i),
			StartDateUtc: time.Date(2026, 3, 21+i, 7, 0, 0, 0, time.UTC), CorrelationID: fmt.Sprintf("new-%s-%d", u.id, i)})
	}
	return out
}

// want computes a milestone's expected projection from the user's workouts
// straight from the rules: the newest MaxWorkoutsToInspect workouts of the
// union of the user's periods are inspected (all dates are distinct here),
// and a milestone whose period starts before the oldest inspected one is
// truncated from that date.
func (u *edgeUser) want(m *model.Milestone) model.Projection {
	inUnion := func(w *model.Workout) bool {
		for _, m := range u.milestones {
			if m.Window().Contains(w.StartDateUtc) {
				return true
			}
		}
		return false
	}
	var union []*model.Workout
	for _, w := range u.workouts {
		if inUnion(w) {
			union = append(union, w)
		}
	}
	slices.SortFunc(union, func(a, b *model.Workout) int { return b.StartDateUtc.Compare(a.StartDateUtc) })
	var exactFrom *time.Time
	if len(union) > model.MaxWorkoutsToInspect {
		union = union[:model.MaxWorkoutsToInspect]
		if t := union[len(union)-1].StartDateUtc; m.PeriodStartAtUtc.Before(t) {
			exactFrom = &t
		}
	}
	p := model.Projection{Status: model.StatusActive, Truncated: exactFrom != nil, ExactFromUtc: exactFrom}
	for _, w := range union {
		if m.Window().Contains(w.StartDateUtc) {
			p.ProgressValue += int64(w.DistanceMeters) * 1000
			p.WorkoutsCounted++
		}
	}
	return p
}

func TestGuardrailEdgesProjectorVerifyAndRebuildAgree(t *testing.T) {
	t.Parallel()
	h := newPrivateHarness(t)
	ctx := context.Background()
	seedModel(t, h.st)

	users := []*edgeUser{olderUser("edge2999", 2999), olderUser("edge3000", 3000), olderUser("edge3001", 3001), longUser("edgeLong")}

	// Workouts first, in parallel batches (8 writers over all users' items),
	// then milestones.
	var all []model.Entity
	for _, u := range users {
		for _, w := range u.workouts {
			all = append(all, w)
		}
	}
	const writers = 8
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		lo, hi := i*len(all)/writers, (i+1)*len(all)/writers
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- h.st.DB.BatchPut(ctx, h.st.DB.Tables().Main, all[lo:hi])
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// The workouts' records reach the projector before any milestone
	// exists: one milestone query per user and batch.
	h.live(t)
	var ms []model.Entity
	for _, u := range users {
		ms = append(ms, &model.Profile{UserID: u.id, DisplayName: u.id, CreatedAtUtc: gMonth})
		for _, m := range u.milestones {
			ms = append(ms, m)
		}
	}
	if err := h.st.DB.BatchPut(ctx, h.st.DB.Tables().Main, ms); err != nil {
		t.Fatal(err)
	}

	check := func(t *testing.T, stage string) {
		t.Helper()
		for _, u := range users {
			stored := milestones(t, h.st, u.id)
			for _, m := range u.milestones {
				want, got := u.want(m), stored[m.MilestoneID].Projection
				if got.ProgressValue != want.ProgressValue || got.WorkoutsCounted != want.WorkoutsCounted || got.Truncated != want.Truncated ||
					!sameTime(got.ExactFromUtc, want.ExactFromUtc) {
					t.Errorf("%s: %s/%s: got value %d counted %d truncated %v exactFrom %v; want %d, %d, %v, %v", stage, u.id, m.MilestoneID,
						got.ProgressValue, got.WorkoutsCounted, got.Truncated, got.ExactFromUtc, want.ProgressValue, want.WorkoutsCounted, want.Truncated, want.ExactFromUtc)
				}
			}
		}
		if code, rep := h.verifyJSON(t, "--all"); code != cli.ExitOK || !rep.Clean {
			t.Errorf("%s: verify --all: exit %d drift %+v, want clean (verify agrees with the projector)", stage, code, rep.Drift)
		}
	}

	h.live(t)
	t.Run("first projection", func(t *testing.T) {
		check(t, "first projection")
		got := milestones(t, h.st, "edge2999")["lifetime"].Truncated || milestones(t, h.st, "edge3000")["lifetime"].Truncated
		if got || !milestones(t, h.st, "edge3001")["lifetime"].Truncated {
			t.Errorf("lifetime truncation must start at 3001 workouts")
		}
	})

	var fresh []model.Entity
	for _, u := range users {
		for _, w := range u.newActivities() {
			u.workouts = append(u.workouts, w)
			fresh = append(fresh, w)
		}
	}
	if err := h.st.DB.BatchPut(ctx, h.st.DB.Tables().Main, fresh); err != nil {
		t.Fatal(err)
	}
	h.live(t)
	t.Run("new in-period activities count", func(t *testing.T) {
		check(t, "after new activities")
		for _, u := range users {
			m := milestones(t, h.st, u.id)["monthly"]
			if m.Truncated || m.WorkoutsCounted < 3 {
				t.Errorf("%s monthly: counted %d truncated %v, want the 3 new activities counted, exact", u.id, m.WorkoutsCounted, m.Truncated)
			}
		}
		long := milestones(t, h.st, "edgeLong")
		if long["yearly"].Truncated || long["monthly"].Truncated || !long["lifetime"].Truncated || long["lifetime"].WorkoutsCounted != model.MaxWorkoutsToInspect {
			t.Errorf("edgeLong: monthly/yearly must be exact and lifetime truncated at the guardrail: %+v", long)
		}
	})

	t.Run("rebuild restores what the projector wrote", func(t *testing.T) {
		before := milestones(t, h.st, "edgeLong")
		for _, id := range []string{"lifetime", "yearly"} {
			m := before[id]
			c := dynamo.Changes{Set: map[string]any{"progressValue": int64(1), "workoutsCounted": 1, "truncated": false}, Remove: []string{"exactFromUtc"}}
			if _, err := h.st.DB.UpdateVersioned(ctx, h.st.DB.Tables().Main, m.Key, m.Version, c); err != nil {
				t.Fatal(err)
			}
		}
		code, rep := h.verifyJSON(t, "--user", "edgeLong")
		fields := map[string]bool{}
		for _, d := range rep.Drift {
			fields[d.MilestoneID+"/"+d.Field] = true
		}
		if code != cli.ExitDrift || !fields["lifetime/exactFromUtc"] || !fields["lifetime/truncated"] || !fields["yearly/progressValue"] {
			t.Fatalf("verify after corruption: exit %d drift %v, want lifetime truncation and yearly value reported", code, rep.Drift)
		}
		if code, sum := h.rebuildJSON(t, "--all"); code != cli.ExitOK || sum.MilestonesChanged != 2 {
			t.Fatalf("rebuild: exit %d %s, want the 2 corrupted milestones rewritten", code, sum)
		}
		after := milestones(t, h.st, "edgeLong")
		for id, b := range before {
			a := after[id]
			if a.ProgressValue != b.ProgressValue || a.WorkoutsCounted != b.WorkoutsCounted || a.Truncated != b.Truncated || !sameTime(a.ExactFromUtc, b.ExactFromUtc) {
				t.Errorf("edgeLong/%s: rebuild wrote %+v, the projector had %+v", id, a.Projection, b.Projection)
			}
		}
		check(t, "after rebuild")
		if code, sum := h.rebuildJSON(t, "--all"); code != cli.ExitOK || sum.MilestonesChanged != 0 {
			t.Fatalf("second rebuild: exit %d %s, want nothing changed", code, sum)
		}
	})
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}
