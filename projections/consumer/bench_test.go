package consumer_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/streams"
	"github.com/commitcollect/backend/projections/consumer"
	"github.com/commitcollect/backend/test/fixture"
)

// feed reads the env's stream incrementally: each next returns only the
// records written since the last call (a persistent reader keeps its
// iterators), so a long benchmark does not re-read the whole stream.
type feed struct {
	e *env
	r *streams.Reader
}

func (e *env) feed() *feed {
	return &feed{e: e, r: streams.NewReader(e.st, e.arn, streams.Options{BatchSize: 1000, Logger: slog.New(slog.DiscardHandler)})}
}

// workouts returns the new workout records (INSERT or MODIFY), in stream
// order, as Lambda would deliver them; every other new record is dropped.
func (f *feed) workouts() []events.DynamoDBEventRecord {
	f.e.t.Helper()
	var out []events.DynamoDBEventRecord
	err := f.r.Drain(f.e.ctx, func(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		for _, r := range ev.Records {
			if strings.HasPrefix(r.Change.Keys["SK"].String(), keys.PrefixWorkoutStrava) {
				out = append(out, r)
			}
		}
		return events.DynamoDBEventResponse{}, nil
	})
	if err != nil {
		f.e.t.Fatalf("read stream: %v", err)
	}
	return out
}

// BenchmarkHandle measures consumer.Handle on one stream batch of 100
// workout INSERT records read from DynamoDB Local's stream: for one user
// (one recompute over a 100-workout log, ten awards minted in one
// transaction) and for ten users (ten recomputes, Concurrency 4, one award
// each). Every iteration uses new users, so each batch really reads, writes
// and mints, as a first sync would. Setup (writing the workouts, reading the
// stream) is not timed.
func BenchmarkHandle(b *testing.B) {
	for _, users := range []int{1, 10} {
		b.Run(fmt.Sprintf("users=%d/records=100", users), func(b *testing.B) { benchHandle(b, users, 100) })
	}
}

func benchHandle(b *testing.B, users, records int) {
	e := newEnv(b)
	e.putModel("rocket", 10)
	f := e.feed()
	f.workouts() // skip the model items
	c := consumer.New(e.stores(), consumer.Options{Metrics: io.Discard})
	perUser := records / users
	// 1.5 km each: one user's 100 workouts complete the 100 km milestone
	// (10 parts); ten users' 10 workouts earn one part each.
	const km = 1.5
	wantParts := min(10, int(float64(perUser)*km*10/100))

	var lastUser string
	iter := 0
	for b.Loop() {
		b.StopTimer()
		iter++
		var es []model.Entity
		for u := range users {
			user := fmt.Sprintf("b%d-u%d", iter, u)
			e.putMilestone(user, "m1", fixture.Definition(fixture.Parts(10)))
			for w := range perUser {
				es = append(es, fixture.Workout(user, int64(w+1), fixture.Day(w%28), fixture.Km(km), fixture.Corr(fmt.Sprintf("c-%s-%d", user, w))))
			}
			lastUser = user
		}
		if err := e.s.DB.BatchPut(e.ctx, e.s.DB.Tables().Main, es); err != nil {
			b.Fatal(err)
		}
		batch := f.workouts()
		if len(batch) != records {
			b.Fatalf("iteration %d: stream delivered %d workout records, want %d", iter, len(batch), records)
		}
		b.StartTimer()

		resp, err := c.Handle(e.ctx, events.DynamoDBEvent{Records: batch})
		if err != nil || len(resp.BatchItemFailures) != 0 {
			b.Fatalf("iteration %d: got failures %+v, error %v", iter, resp.BatchItemFailures, err)
		}
	}
	b.StopTimer()

	st := c.Stats()
	if st.UsersProjected != int64(iter*users) || st.Writes != int64(iter*users) || st.AwardsMinted != int64(iter*users*wantParts) {
		b.Fatalf("after %d batches: stats %+v, want %d users projected and written, %d awards", iter, st, iter*users, iter*users*wantParts)
	}
	m := e.milestone(lastUser, "m1")
	if m.WorkoutsCounted != perUser || m.AwardedParts != wantParts {
		b.Fatalf("milestone of %s: got %+v, want %d workouts and %d parts", lastUser, m.Projection, perUser, wantParts)
	}
	b.ReportMetric(float64(iter*records)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(iter*users)/b.Elapsed().Seconds(), "users/s")
}

// BenchmarkRecomputeUser3000 measures re-projecting one user whose log is at
// the guardrail (model.MaxWorkoutsToInspect workouts, one milestone):
// strongly consistent reads of the milestones and of 3000 workouts, the
// projection, and the version-checked write. Before every iteration one
// workout's distance changes (not timed), so each recompute writes.
func BenchmarkRecomputeUser3000(b *testing.B) {
	e := newEnv(b)
	e.putModel("rocket", 10)
	def := fixture.Definition(fixture.Parts(10))
	def.Target = 1_000_000 // 1000 km: the 3000 workouts keep it active
	e.putMilestone("u1", "m1", def)
	es := make([]model.Entity, model.MaxWorkoutsToInspect)
	for i := range es {
		es[i] = fixture.Workout("u1", int64(i+1), fixture.Day(i%28), fixture.Km(0.25), fixture.Corr(""))
	}
	if err := e.s.DB.BatchPut(e.ctx, e.s.DB.Tables().Main, es); err != nil {
		b.Fatal(err)
	}
	c := consumer.New(e.stores(), consumer.Options{Metrics: io.Discard})
	// The first recompute mints the 7 parts the log earns; the loop measures
	// the steady state (progress changes, no new award).
	if rep, err := c.RecomputeUser(e.ctx, "u1", false); err != nil || len(rep.Milestones) != 1 || len(rep.Milestones[0].Minted) != 7 {
		b.Fatalf("first recompute: got %+v, %v; want 7 parts minted", rep, err)
	}

	iter := 0
	for b.Loop() {
		b.StopTimer()
		iter++
		e.putWorkout(fixture.Workout("u1", 1, fixture.Day(0), fixture.Km(0.25+float64(iter)/1000), fixture.Corr("")))
		b.StartTimer()

		rep, err := c.RecomputeUser(e.ctx, "u1", false)
		if err != nil {
			b.Fatal(err)
		}
		if rep.Workouts != model.MaxWorkoutsToInspect || rep.Truncated || len(rep.Milestones) != 1 || !rep.Milestones[0].Written {
			b.Fatalf("iteration %d: got %d workouts (truncated %v), %+v; want %d read and the milestone written",
				iter, rep.Workouts, rep.Truncated, rep.Milestones, model.MaxWorkoutsToInspect)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(iter*model.MaxWorkoutsToInspect)/b.Elapsed().Seconds(), "workouts/s")
}
