package consumer_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/projections/consumer"
	"github.com/commitcollect/backend/test/fixture"
)

// countingStore counts the catalog reads of the real store.
type countingStore struct {
	consumer.Catalog
	partReads atomic.Int64
}

func (c *countingStore) ModelParts(ctx context.Context, modelID string) (map[int]model.ModelPart, error) {
	c.partReads.Add(1)
	return c.Catalog.ModelParts(ctx, modelID)
}

// TestWarmConsumerReadsTheCatalogOnce: a warm projector
// mints awards of one model for three users in three batches and reads the
// model's parts once; after PartsTTL it reads them again, and a model whose
// parts are not all there yet is never kept. Protection: the consumer's
// parts cache (modelParts).
func TestWarmConsumerReadsTheCatalogOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.putModel("rocket", 4)
	st := e.stores()
	cs := &countingStore{Catalog: st.Catalog}
	st.Catalog = cs
	now := march.AddDate(0, 0, 20)
	c := consumer.New(st, consumer.Options{Metrics: e.metrics, Now: func() time.Time { return now }})
	mint := func(user string, def model.MilestoneDefinition) {
		t.Helper()
		e.putMilestone(user, "m1", def)
		e.putWorkout(fixture.Workout(user, 1, fixture.Day(1), fixture.Km(30), fixture.Corr("corr-"+user)))
		if resp := e.handle(c, e.newRecords()); len(resp.BatchItemFailures) != 0 {
			t.Fatalf("failures: %+v", resp.BatchItemFailures)
		}
		if as := e.awards(user, "m1"); len(as) == 0 || as[0].PartName == "" {
			t.Fatalf("%s: awards %+v, want minted with the part's name", user, as)
		}
	}
	mint("u-cat-1", fixture.Definition(fixture.Parts(4)))
	mint("u-cat-2", fixture.Definition(fixture.Parts(4)))
	if got := cs.partReads.Load(); got != 1 {
		t.Fatalf("two mints of one model in a warm consumer: %d catalog reads, want 1", got)
	}
	now = now.Add(consumer.DefaultPartsTTL)
	mint("u-cat-3", fixture.Definition(fixture.Parts(4)))
	if got := cs.partReads.Load(); got != 2 {
		t.Fatalf("a mint after PartsTTL: %d catalog reads in all, want 2", got)
	}

	// A model with a part missing (being seeded) is read for every mint.
	e.putModel("half", 2)
	def := fixture.Definition(fixture.Parts(4))
	def.ModelID = "half"
	mint("u-cat-4", def)
	mint("u-cat-5", def)
	if got := cs.partReads.Load(); got != 4 {
		t.Fatalf("two mints of an incomplete model: %d catalog reads in all, want 4", got)
	}
}
