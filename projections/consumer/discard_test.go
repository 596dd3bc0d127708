package consumer_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/projections/consumer"
	"github.com/commitcollect/backend/test/fixture"
)

// Records the event source gave up on are parked for redrive, except those
// the projector would ignore anyway.
func TestDiscardParksWhatTheProjectorActsOn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.consumer(consumer.Options{})
	e.putModel("rocket", 2)
	models := e.newRecords() // model items: ignored by the projector
	e.putMilestone("u1", "m1", fixture.Definition(fixture.Parts(2)))
	e.putWorkout(fixture.Workout("u1", 1, fixture.Day(1), fixture.Km(5), fixture.Corr("corr-1")))
	recs := e.newRecords()
	if len(recs) != 2 {
		t.Fatalf("got %d stream records, want the milestone and the workout", len(recs))
	}
	ctx := context.Background()
	recs = append(recs, models...)
	if err := c.Discard(ctx, recs, errors.New("still failing")); err != nil {
		t.Fatal(err)
	}
	parked, err := e.s.Parked.Parked(ctx, keys.ParkSourceProjector)
	if err != nil {
		t.Fatal(err)
	}
	if len(parked) != 2 {
		t.Fatalf("parked %d records, want 2 (milestone and workout): %+v", len(parked), parked)
	}
	for _, p := range parked {
		if !strings.Contains(p.Reason, "still failing") || p.Payload == "" {
			t.Errorf("parked record %s: reason %q, payload %d bytes", p.RecordID, p.Reason, len(p.Payload))
		}
	}
	var w model.Milestone
	if err := e.s.DB.Get(ctx, e.s.DB.Tables().Main, keys.MilestoneKey("u1", "m1"), &w); err != nil || w.Version != 0 {
		t.Fatalf("discard must not project: milestone version %d (%v)", w.Version, err)
	}
}
