package strava_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/strava"
	"github.com/commitcollect/backend/scripts/stravasim"
)

func TestListActivitiesPaginatesNewestFirstWithinBounds(t *testing.T) {
	t.Parallel()
	sim := newSim(t)
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 6, 0, 0, 0, time.UTC)
	for i := range 25 {
		sim.PutActivity(stravasim.Activity{ID: int64(100 + i), AthleteID: 1, SportType: "Run", Distance: float64(1000 + i),
			MovingTime: 600, StartDate: base.Add(time.Duration(i) * 24 * time.Hour)})
	}
	sim.PutActivity(stravasim.Activity{ID: 999, AthleteID: 2, SportType: "Run", StartDate: base})
	sim.PutActivity(stravasim.Activity{ID: 998, AthleteID: 1, SportType: "Run", StartDate: base, Private: true})
	tok := sim.IssueTokens(1, time.Hour, "read", "activity:read")
	c := strava.NewClient(sim.URL, nil)

	var ids []int64
	for page := 1; ; page++ {
		got, rl, err := c.ListActivities(ctx, tok.AccessToken, strava.ListOptions{Page: page, PerPage: 10})
		if err != nil {
			t.Fatal(err)
		}
		if !rl.Valid() || rl.ReadShortUsage != page {
			t.Fatalf("page %d: got rate limit %+v, want a reading with read usage %d", page, rl, page)
		}
		for _, a := range got {
			if a.Athlete.ID != 1 {
				t.Fatalf("got activity %d of athlete %d, want only athlete 1's", a.ID, a.Athlete.ID)
			}
			ids = append(ids, a.ID)
		}
		if len(got) < 10 {
			break
		}
	}
	if len(ids) != 25 || ids[0] != 124 || ids[24] != 100 {
		t.Fatalf("got %d ids %v, want 25 from 124 down to 100 (private and other athletes' left out)", len(ids), ids)
	}

	// Bounds are exclusive epoch seconds.
	got, _, err := c.ListActivities(ctx, tok.AccessToken, strava.ListOptions{
		Before: base.Add(5 * 24 * time.Hour), After: base.Add(2 * 24 * time.Hour), PerPage: 200})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != 104 || got[1].ID != 103 {
		t.Fatalf("got %+v, want activities 104 and 103", got)
	}
	// Only after: oldest first.
	got, _, err = c.ListActivities(ctx, tok.AccessToken, strava.ListOptions{After: base.Add(22 * 24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != 123 || got[1].ID != 124 {
		t.Fatalf("got %+v, want activities 123 then 124", got)
	}
}

func TestListActivitiesErrors(t *testing.T) {
	t.Parallel()
	sim := newSim(t)
	ctx := context.Background()
	sim.PutActivity(stravasim.Activity{ID: 1, AthleteID: 1, SportType: "Run", StartDate: time.Now()})
	tok := sim.IssueTokens(1, time.Hour)
	c := strava.NewClient(sim.URL, nil)
	before := sim.Stats().ListRequests
	if _, _, err := c.ListActivities(ctx, tok.AccessToken, strava.ListOptions{PerPage: strava.MaxPerPage + 1}); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("per_page 201: got %v, want ErrInvalid", err)
	}
	if sim.Stats().ListRequests != before {
		t.Fatal("an invalid page size reached Strava")
	}
	tests := []struct {
		name  string
		setup func()
		token string
		want  error
	}{
		{"bad token", nil, "nope", model.ErrUnauthorized},
		{"scripted 429", func() { sim.FailNext(stravasim.EndpointList, 429, 1) }, tok.AccessToken, model.ErrRetryable},
		{"scripted 500", func() { sim.FailNext(stravasim.EndpointList, 500, 1) }, tok.AccessToken, model.ErrRetryable},
		{"fault 503", func() { sim.AddFault(stravasim.Fault{Endpoint: stravasim.EndpointList, Status: 503}) }, tok.AccessToken, model.ErrRetryable},
		{"spent read window", func() { sim.SpendReadWindow(time.Hour) }, tok.AccessToken, model.ErrRetryable},
	}
	for _, tt := range tests { // sequential: they share the simulator's script
		if tt.setup != nil {
			tt.setup()
		}
		_, rl, err := c.ListActivities(ctx, tt.token, strava.ListOptions{PerPage: 200})
		if !errors.Is(err, tt.want) {
			t.Fatalf("%s: got %v, want %v", tt.name, err, tt.want)
		}
		if !rl.Valid() {
			t.Fatalf("%s: rate-limit headers missing on an error answer", tt.name)
		}
	}
	// An activity fault is not a list fault.
	sim2 := newSim(t)
	sim2.PutActivity(stravasim.Activity{ID: 1, AthleteID: 1, SportType: "Run", StartDate: time.Now()})
	sim2.AddFault(stravasim.Fault{Status: 500})
	tok2 := sim2.IssueTokens(1, time.Hour)
	if got, _, err := strava.NewClient(sim2.URL, nil).ListActivities(ctx, tok2.AccessToken, strava.ListOptions{}); err != nil || len(got) != 1 {
		t.Fatalf("list with an activity fault queued: got %v, %v; want the activity", got, err)
	}
}
