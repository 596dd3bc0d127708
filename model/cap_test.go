package model

import "testing"

// The milestone cap keeps a user's whole MILESTONE# range (each milestone
// and up to MaxPartCount awards) within what one recompute reads.
func TestMilestoneCapFitsTheRecomputeRead(t *testing.T) {
	t.Parallel()
	if got := MaxMilestonesPerUser * (1 + MaxPartCount); got > MaxWorkoutsToInspect {
		t.Fatalf("%d milestones × (1 + %d awards) = %d items, more than the %d one recompute reads",
			MaxMilestonesPerUser, MaxPartCount, got, MaxWorkoutsToInspect)
	}
}
