package demokit

import (
	"context"
	"fmt"
	"github.com/commitcollect/backend/scripts/stravasim/webhook"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/commitcollect/backend/scripts/stravasim"
)

// month sends a month of activities: the first few uploaded one by one,
// each counted with its own lag; the rest as one device sync (a burst of
// creates, which the pipeline serves with list pages); then a duplicate,
// two corrections and a delete.
func (d *demo) month(ctx context.Context) error {
	acts := d.monthAtStrava()
	singles := min(DemoSingles, len(acts))
	var created []int64
	for _, a := range acts[:singles] {
		if err := d.putActivity(ctx, a); err != nil {
			return err
		}
		what := fmt.Sprintf("upload: %s %s on %s", a.SportType, km(a.Distance), a.StartDate.In(d.zone).Format("2 Jan 15:04"))
		if a.StartDate.In(d.zone).Day() != a.StartDate.UTC().Day() {
			what += fmt.Sprintf(" (%s in UTC)", a.StartDate.UTC().Format("2 Jan"))
		}
		if err := d.event(ctx, "create", a.ID, what); err != nil {
			return err
		}
		created = append(created, a.ID)
	}
	if err := d.deviceSync(ctx, acts[singles:]); err != nil {
		return err
	}
	for _, a := range acts[singles:] {
		created = append(created, a.ID)
	}
	for _, n := range []int{4, 8, 12, 15} {
		if err := d.twist(ctx, created[:min(n, len(created))]); err != nil {
			return err
		}
	}
	return nil
}

// DemoSingles is how many of the month's activities the demo uploads one
// by one before the device sync sends the rest at once.
const DemoSingles = 3

// monthAtStrava plans a month of activities in the demo's zone, 6 am to
// 4 pm local: runs that count, rides and walks that do not, rest days.
func (d *demo) monthAtStrava() []stravasim.Activity {
	rng := rand.New(rand.NewPCG(d.o.Seed, uint64(d.o.AthleteID)))
	id := d.o.AthleteID * 1000
	var out []stravasim.Activity
	for day := 0; day < 30; day++ {
		var sport string
		var dist float64
		switch r := rng.IntN(10); {
		case day == 0: // 6 am on the first day, below: the day before in UTC
			sport, dist = "Run", 6000
		case r < 5:
			sport, dist = "Run", 5000+float64(rng.IntN(7000))
		case r < 6:
			sport, dist = "TrailRun", 8000+float64(rng.IntN(8000))
		case r < 8:
			sport, dist = "Ride", 20000+float64(rng.IntN(30000))
		case r < 9:
			sport, dist = "Walk", 2000+float64(rng.IntN(3000))
		default:
			continue // a rest day
		}
		id++
		local := d.start.AddDate(0, 0, day).Add(6*time.Hour + time.Duration(rng.IntN(600))*time.Minute)
		if day == 0 {
			local = d.start.Add(6 * time.Hour)
		}
		out = append(out, stravasim.Activity{ID: id, AthleteID: d.o.AthleteID, Name: fmt.Sprintf("Day %d %s", day+1, sport), SportType: sport,
			Distance: dist + float64(rng.IntN(10))/10, MovingTime: int64(dist / 3), ElapsedTime: int64(dist/3) + 60,
			TotalElevationGain: float64(rng.IntN(200)), StartDate: local.UTC(), Zone: d.zone.String()})
	}
	return out
}

// deviceSync sends acts as a watch's sync does: every create at once. It
// waits until the milestone counts them all and says how Strava was read.
func (d *demo) deviceSync(ctx context.Context, acts []stravasim.Activity) error {
	before, err := d.simStats(ctx)
	if err != nil {
		return err
	}
	var first time.Time
	for _, a := range acts {
		if err := d.putActivity(ctx, a); err != nil {
			return err
		}
		var del webhook.ControlDelivery
		if err := d.send(ctx, http.MethodPost, d.o.SimURL+stravasim.ControlPrefix+"events",
			webhook.ControlEvent{Aspect: "create", ActivityID: a.ID, OwnerID: d.o.AthleteID}, &del, http.StatusOK); err != nil {
			return fmt.Errorf("send create webhook for activity %d: %w", a.ID, err)
		}
		d.last = &del.Event
		if first.IsZero() {
			first = del.SentAtUtc
		}
	}
	d.say("%-44s (the pipeline gathers a burst and reads Strava's list pages)", fmt.Sprintf("device sync: %d activities at once", len(acts)))
	if err := d.await(ctx, first, 0, fmt.Sprintf("device sync: %d activities counted", len(acts))); err != nil {
		return err
	}
	after, err := d.simStats(ctx)
	if err != nil {
		return err
	}
	d.res.Sync = DemoSync{Activities: len(acts), Lag: d.res.Steps[len(d.res.Steps)-1].Lag,
		ListPages: after.ListRequests - before.ListRequests, Fetches: after.ActivityRequests - before.ActivityRequests}
	d.say("  Strava read with %d list page(s) and %d single fetches for %d activities, not one fetch each",
		d.res.Sync.ListPages, d.res.Sync.Fetches, len(acts))
	return nil
}

// simStats reads the simulator's counters.
func (d *demo) simStats(ctx context.Context) (stravasim.Stats, error) {
	var st stravasim.Stats
	if err := d.send(ctx, http.MethodGet, d.o.SimURL+stravasim.ControlPrefix+"stats", nil, &st, http.StatusOK); err != nil {
		return st, fmt.Errorf("read the simulator's stats: %w", err)
	}
	return st, nil
}

// twist is what happens once created holds n creates: a duplicate
// delivery (4), a corrected run (8), a deleted one (12), a ride
// recategorised as a run (15).
func (d *demo) twist(ctx context.Context, created []int64) error {
	switch len(created) {
	case 4: // Strava delivers one event twice: the second is a duplicate.
		if err := d.duplicate(ctx); err != nil {
			return err
		}
	case 8: // The athlete fixes a GPS glitch on an earlier run.
		fix := d.firstCounted(created)
		a := d.acts[fix].Activity
		a.Distance += 1200
		if err := d.putActivity(ctx, a); err != nil {
			return err
		}
		if err := d.event(ctx, "update", fix, fmt.Sprintf("corrected activity %d: +1.2 km", fix)); err != nil {
			return err
		}
	case 12: // A run recorded twice by two devices gets deleted.
		del := d.firstCounted(created[4:])
		d.acts[del].deleted = true
		if err := d.send(ctx, http.MethodDelete, fmt.Sprintf("%s%sactivities/%d", d.o.SimURL, stravasim.ControlPrefix, del), nil, nil, http.StatusNoContent); err != nil {
			return fmt.Errorf("delete activity %d at the simulator: %w", del, err)
		}
		if err := d.event(ctx, "delete", del, fmt.Sprintf("deleted activity %d (awards stay)", del)); err != nil {
			return err
		}
	case 15: // A ride recategorised as a run now counts.
		for _, c := range created {
			if a := d.acts[c]; a.SportType == "Ride" && !a.deleted {
				a.SportType, a.Distance = "Run", 9000
				if err := d.putActivity(ctx, a.Activity); err != nil {
					return err
				}
				if err := d.event(ctx, "update", c, fmt.Sprintf("activity %d was a run, not a ride (9 km)", c)); err != nil {
					return err
				}
				break
			}
		}
	}
	return nil
}
