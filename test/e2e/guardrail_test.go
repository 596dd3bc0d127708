package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/scripts/stravasim"
)

// An athlete with 3200 workouts older than a monthly milestone's period (more
// than the 3000 the projector inspects) records a new in-period activity:
// through the local stack (webhook → worker → Strava simulator → workout →
// stream → projector) it counts, and the milestone stays exact.
func TestLocalStackCountsANewActivityBeyondTheGuardrail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := startQuietStack(t)

	const athlete, user = int64(7303), "u-guardrail"
	st.Sim.AddAthlete(stravasim.Athlete{ID: athlete, Firstname: "Long", Lastname: "History"})
	tok := st.Sim.IssueTokens(athlete, time.Hour)
	now := time.Now().UTC()
	if err := st.Store.Users.CreateUser(ctx, &model.Profile{UserID: user, AthleteID: athlete, DisplayName: "Long History", CreatedAtUtc: now},
		&model.StravaConnection{UserID: user, AthleteID: athlete, AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken,
			ExpiresAtUtc: tok.ExpiresAt, Scopes: tok.Scope, TokenVersion: 1, UpdatedAtUtc: now}); err != nil {
		t.Fatal(err)
	}

	// 3200 older workouts (a long-time athlete's history), with ids larger
	// and smaller than the new one's.
	periodStart := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	periodEnd := periodStart.AddDate(0, 1, 0)
	old := make([]model.Entity, 3200)
	for i := range old {
		old[i] = &model.Workout{UserID: user, AthleteID: athlete, ActivityID: int64(1 + i*3_000_000_007%99_999_999_999),
			SportType: "Run", DistanceMeters: 5000, StartDateUtc: periodStart.Add(-time.Duration(i+1) * 6 * time.Hour),
			CreatedAtUtc: now, UpdatedAtUtc: now, CorrelationID: fmt.Sprintf("history-%d", i)}
	}
	if err := st.Store.DB.BatchPut(ctx, st.Store.DB.Tables().Main, old); err != nil {
		t.Fatal(err)
	}
	m := &model.Milestone{UserID: user, MilestoneID: "march", WrittenBy: model.WriterAPI, CreatedAtUtc: now,
		MilestoneDefinition: model.MilestoneDefinition{ModelID: "saturn-v", Title: "Run 100 km in March", Metric: model.MetricDistance,
			Target: 100000, SportTypes: []string{"Run"}, PeriodStartAtUtc: periodStart, PeriodEndAtUtc: &periodEnd, PartCount: 10},
		Projection: model.Projection{Status: model.StatusActive}}
	if err := st.Store.DB.PutIfAbsent(ctx, st.Store.DB.Tables().Main, m); err != nil {
		t.Fatal(err)
	}

	// The new activity, through Strava's webhook.
	const newID = 42
	sent := time.Now()
	st.Sim.PutActivity(stravasim.Activity{ID: newID, AthleteID: athlete, Name: "Morning run", SportType: "Run", Distance: 12345,
		MovingTime: 3600, ElapsedTime: 3700, StartDate: periodStart.AddDate(0, 0, 14).Add(7 * time.Hour)})
	if _, err := st.Sim.Publish(ctx, st.Sim.ActivityEvent("create", newID, athlete, nil)); err != nil {
		t.Fatal(err)
	}
	var got model.Milestone
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if err := st.Store.DB.Get(ctx, st.Store.DB.Tables().Main, keys.MilestoneKey(user, "march"), &got); err != nil {
			t.Fatal(err)
		}
		if got.WorkoutsCounted == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got.WorkoutsCounted != 1 || got.ProgressValue != 12345000 || got.Truncated || got.ExactFromUtc != nil || got.AwardedParts != 1 {
		t.Fatalf("milestone after the new activity: %+v, want it counted (12.345 km, 1 part) and exact", got.Projection)
	}
	t.Logf("new activity counted %s after the webhook, beside %d older workouts", time.Since(sent).Round(time.Millisecond), len(old))
}
