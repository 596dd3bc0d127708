package milestones_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/ports"
	"github.com/commitcollect/backend/test/dynamolocal"
)

// BenchmarkWriteProjection measures one milestone projection write on
// DynamoDB Local: awards=0 is the common case, one UpdateItem conditioned on
// the version; awards=1 and awards=10 are one TransactWriteItems holding that
// update plus a conditional Put per award (a part earned, a milestone
// completed in one go). Every iteration writes over the version the previous
// one left; the awards cases use a new milestone each iteration (its Put is
// not timed) so the award items are new.
func BenchmarkWriteProjection(b *testing.B) {
	for _, awards := range []int{0, 1, 10} {
		b.Run(fmt.Sprintf("awards=%d", awards), func(b *testing.B) { benchWriteProjection(b, awards) })
	}
}

func benchWriteProjection(b *testing.B, awards int) {
	s := dynamolocal.NewStore(b)
	ctx := context.Background()
	at := time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC)
	put := func(id string) {
		m := &model.Milestone{UserID: "u1", MilestoneID: id, WrittenBy: model.WriterAPI,
			MilestoneDefinition: model.MilestoneDefinition{ModelID: "rocket", Title: "bench", Metric: model.MetricDistance,
				Target: 100000, PeriodStartAtUtc: at, PartCount: 10}}
		if err := s.DB.Put(ctx, s.DB.Tables().Main, m); err != nil {
			b.Fatal(err)
		}
	}
	put("m0")
	run := fmt.Sprintf("%08x", rand.Uint32())
	id, version := "m0", int64(0)
	iter := 0
	for b.Loop() {
		iter++
		if awards > 0 {
			b.StopTimer()
			id, version = fmt.Sprintf("m%d", iter), 0
			put(id)
			b.StartTimer()
		}
		w := ports.ProjectionWrite{UserID: "u1", MilestoneID: id, ExpectedVersion: version,
			Projection: model.Projection{ProgressValue: int64(iter) * 1000, WorkoutsCounted: iter, AwardedParts: awards,
				Status: model.StatusActive, ProjectedAtUtc: &at}}
		for i := range awards {
			w.Awards = append(w.Awards, &model.Award{UserID: "u1", MilestoneID: id, ModelID: "rocket", PartIndex: i,
				PartName: fmt.Sprint("part-", i), ActivityID: int64(iter), CorrelationID: "c", AwardedAtUtc: at})
		}
		if awards > 0 {
			// Tokens are scoped to the endpoint (account), not the table:
			// the run id keeps runs and sub-benchmarks apart.
			w.Token = fmt.Sprintf("%s-%s-%d", run, id, version)
		}
		if err := s.Milestones.WriteProjection(ctx, w); err != nil {
			b.Fatalf("iteration %d: %v", iter, err)
		}
		version++
	}
	b.StopTimer()

	um, err := s.Milestones.UserMilestones(ctx, "u1")
	if err != nil {
		b.Fatal(err)
	}
	minted := 0
	for _, as := range um.Awards {
		minted += len(as)
	}
	if minted != iter*awards {
		b.Fatalf("after %d writes: %d award items, want %d", iter, minted, iter*awards)
	}
	if awards == 0 && (len(um.Milestones) != 1 || um.Milestones[0].Version != int64(iter)) {
		b.Fatalf("after %d writes: milestones %+v, want m0 at version %d", iter, um.Milestones, iter)
	}
}
