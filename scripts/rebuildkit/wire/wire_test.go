package wire

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/projections"
	"github.com/commitcollect/backend/scripts/rebuildkit"
)

func TestOutcome(t *testing.T) {
	t.Parallel()
	stored := model.Projection{ProgressValue: 12345, WorkoutsCounted: 3, AwardedParts: 2, Status: model.StatusActive}
	fixed := model.Projection{ProgressValue: 56000, WorkoutsCounted: 4, AwardedParts: 2, Status: model.StatusActive}
	tests := []struct {
		name        string
		given       projections.UserReport
		dryRun      bool
		wantChanged int
		wantMinted  int
		wantRetried int
		wantDrift   []string
	}{
		{
			name: "dry run: edited progress and a missing award", dryRun: true,
			given: projections.UserReport{UserID: "u1", Attempts: 1, Milestones: []projections.MilestoneReport{
				{MilestoneID: "a", Stored: stored, Recomputed: fixed, Changed: true},
				{MilestoneID: "b", Stored: fixed, Recomputed: fixed, MissingAwards: []int{0}, Minted: []int{0}},
				{MilestoneID: "c", Stored: fixed, Recomputed: fixed},
			}},
			wantChanged: 2, wantMinted: 1,
			wantDrift: []string{"a progressValue 12345 56000", "a workoutsCounted 3 4", "b award missing part 0"},
		},
		{
			name: "written: only what was written counts, drift still described",
			given: projections.UserReport{UserID: "u1", Attempts: 3, Milestones: []projections.MilestoneReport{
				{MilestoneID: "a", Stored: stored, Recomputed: fixed, Changed: true, Written: true, Minted: []int{2, 3}},
				{MilestoneID: "c", Stored: fixed, Recomputed: fixed},
			}},
			wantChanged: 1, wantMinted: 2, wantRetried: 2,
			wantDrift: []string{"a progressValue 12345 56000", "a workoutsCounted 3 4"},
		},
		{
			name: "never projected: empty status reads as active", dryRun: true,
			given: projections.UserReport{UserID: "u1", Attempts: 1, Milestones: []projections.MilestoneReport{
				{MilestoneID: "new", Stored: model.Projection{}, Recomputed: model.Projection{Status: model.StatusActive}},
			}},
		},
		{
			name: "completed and truncated", dryRun: true,
			given: projections.UserReport{UserID: "u1", Attempts: 1, Milestones: []projections.MilestoneReport{
				{MilestoneID: "z", Stored: fixed, Changed: true, Recomputed: model.Projection{ProgressValue: 56000, WorkoutsCounted: 4,
					AwardedParts: 10, Status: model.StatusCompleted, Truncated: true}, NewParts: []int{2, 3, 4, 5, 6, 7, 8, 9}, Minted: []int{2, 3, 4, 5, 6, 7, 8, 9}},
			}},
			wantChanged: 1, wantMinted: 8,
			wantDrift: []string{"z awardedParts 2 10", "z status active completed", "z truncated false true"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Outcome(tt.given, tt.dryRun)
			var drift []string
			for _, d := range got.Drift {
				if d.UserID != "u1" {
					t.Fatalf("drift %v: got user %q, want u1", d, d.UserID)
				}
				drift = append(drift, d.MilestoneID+" "+d.Field+" "+d.Stored+" "+d.Recomputed)
			}
			if got.MilestonesChanged != tt.wantChanged || got.AwardsMinted != tt.wantMinted || got.ConflictsRetried != tt.wantRetried ||
				got.Milestones != len(tt.given.Milestones) || !slices.Equal(drift, tt.wantDrift) {
				t.Fatalf("got changed=%d minted=%d retried=%d milestones=%d drift=%q\nwant changed=%d minted=%d retried=%d milestones=%d drift=%q",
					got.MilestonesChanged, got.AwardsMinted, got.ConflictsRetried, got.Milestones, drift,
					tt.wantChanged, tt.wantMinted, tt.wantRetried, len(tt.given.Milestones), tt.wantDrift)
			}
		})
	}
}

type fakeProjector struct {
	rep projections.UserReport
	err error
}

func (f fakeProjector) RecomputeUser(context.Context, string, bool) (projections.UserReport, error) {
	return f.rep, f.err
}

func TestRecomputeFailsUsersNeedingAHuman(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		given fakeProjector
		want  error
	}{
		{"clean", fakeProjector{rep: projections.UserReport{UserID: "u", Milestones: []projections.MilestoneReport{{MilestoneID: "a"}}}}, nil},
		{"unreadable item", fakeProjector{rep: projections.UserReport{UserID: "u", Unreadable: []string{"USER#u / MILESTONE#x: newer"}}}, model.ErrUnsupportedSchema},
		{"invalid definition", fakeProjector{rep: projections.UserReport{UserID: "u", Milestones: []projections.MilestoneReport{{MilestoneID: "a", Skipped: "target: must be positive"}}}}, model.ErrInvalid},
		{"projector error", fakeProjector{err: model.ErrConflict}, model.ErrConflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Recompute(tt.given)(context.Background(), "u", true)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

var _ rebuildkit.Recompute = Recompute(fakeProjector{})
