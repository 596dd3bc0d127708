package rebuildkit_test

import (
	"context"
	"fmt"
	"github.com/commitcollect/backend/handlers/app"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/tableadmin"
	"github.com/commitcollect/backend/model/streams"
	"github.com/commitcollect/backend/projections/consumer"
	"github.com/commitcollect/backend/scripts/rebuildkit/cli"
	"github.com/commitcollect/backend/scripts/rebuildkit/wire"
	"github.com/commitcollect/backend/test/dynamolocal"
)

func TestMain(m *testing.M) { dynamolocal.Main(m) }

// harness is a fresh set of tables on DynamoDB Local with the projector
// wired the way the commands wire it.
type harness struct {
	st      *store.Adapters
	streams *dynamodbstreams.Client
	env     *cli.Env
	// liveCheckpoints are the live consumer's (see live).
	liveCheckpoints streams.MemoryCheckpoints
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	db, sc := dynamolocal.Clients(t)
	return harnessOn(t, db, sc)
}

// newPrivateHarness is newHarness on a DynamoDB Local of the test's own
// (dynamolocal.PrivateClients), for a test of thousands of items: the
// package's shared instance slows with every streamed table its other tests
// have made (dynamolocal.MustCreateUnstreamedTables says by how much).
func newPrivateHarness(t testing.TB) *harness {
	t.Helper()
	db, sc := dynamolocal.PrivateClients(t)
	return harnessOn(t, db, sc)
}

// harnessOn builds the harness over fresh tables of db.
func harnessOn(t testing.TB, db *dynamodb.Client, sc *dynamodbstreams.Client) *harness {
	t.Helper()
	st := store.New(db, dynamolocal.MustCreateTables(t, db))
	h := &harness{st: st, streams: sc}
	// The projector, wired as the commands wire it (wire.Setup).
	c := consumer.New(app.ProjectorStores(st), consumer.Options{Metrics: io.Discard})
	h.env = &cli.Env{
		Store: st, Streams: sc,
		StreamARN: func(ctx context.Context) (string, error) { return tableadmin.StreamARN(ctx, db, st.DB.Tables()) },
		Recompute: wire.Recompute(c),
		Projector: c.Handle,
		Logger:    slog.New(slog.DiscardHandler),
	}
	return h
}

func (h *harness) setup(context.Context, string) (*cli.Env, error) { return h.env, nil }

var (
	march   = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	april   = time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	modelID = "rocket"
)

const parts = 10

// seedModel writes the collectible every milestone uses.
func seedModel(t testing.TB, st *store.Adapters) {
	t.Helper()
	es := []model.Entity{&model.ModelMeta{ModelID: modelID, Name: "Rocket", PartCount: parts, CatalogVersion: 1}}
	for i := range parts {
		es = append(es, &model.ModelPart{ModelID: modelID, PartIndex: i, Name: fmt.Sprintf("stage %d", i), Metadata: map[string]string{"rarity": "common"}})
	}
	if err := st.DB.BatchPut(context.Background(), st.DB.Tables().Main, es); err != nil {
		t.Fatal(err)
	}
}

// userItems returns a user's profile, two milestones (distance and count,
// never projected yet) and n workouts. Targets vary with seed so that some
// milestones complete and some do not.
func userItems(user string, seed, n int) []model.Entity {
	end := april
	es := []model.Entity{
		&model.Profile{UserID: user, DisplayName: user, CreatedAtUtc: march},
		&model.Milestone{UserID: user, MilestoneID: "dist", WrittenBy: model.WriterAPI, CreatedAtUtc: march,
			MilestoneDefinition: model.MilestoneDefinition{ModelID: modelID, Title: "Run in March", Metric: model.MetricDistance,
				Target: float64(20000 * (1 + seed%5) * max(n, 1) / 20), SportTypes: []string{"Run"}, PeriodStartAtUtc: march, PeriodEndAtUtc: &end, PartCount: parts},
			Projection: model.Projection{Status: model.StatusActive}},
		&model.Milestone{UserID: user, MilestoneID: "count", WrittenBy: model.WriterAPI, CreatedAtUtc: march,
			MilestoneDefinition: model.MilestoneDefinition{ModelID: modelID, Title: "Move often", Metric: model.MetricCount,
				Target: float64(max(n, 1) * (1 + seed%3) / 2), PeriodStartAtUtc: march, PartCount: parts},
			Projection: model.Projection{Status: model.StatusActive}},
	}
	return append(es, workouts(user, seed, 0, n)...)
}

// workouts returns workouts from..to-1 of a user.
func workouts(user string, seed, from, to int) []model.Entity {
	var es []model.Entity
	for j := from; j < to; j++ {
		sport := "Run"
		if j%3 == 0 {
			sport = "Ride"
		}
		es = append(es, &model.Workout{
			UserID: user, AthleteID: int64(1000 + seed), ActivityID: int64(seed*100000 + j + 1), SportType: sport,
			DistanceMeters: float64(1000 + (seed*7+j*13)%5000), MovingTimeSeconds: int64(600 + j%900),
			StartDateUtc: march.Add(time.Duration(j) * 3 * time.Hour), CreatedAtUtc: march, UpdatedAtUtc: march,
			CorrelationID: fmt.Sprintf("corr-%s-%d", user, j),
		})
	}
	return es
}

// seedUsers writes users with n workouts each, with a few batch writers in
// parallel.
func seedUsers(t testing.TB, st *store.Adapters, users []string, n int) {
	t.Helper()
	const writers = 4
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var es []model.Entity
			for i := w; i < len(users); i += writers {
				es = append(es, userItems(users[i], i, n)...)
			}
			if err := st.DB.BatchPut(context.Background(), st.DB.Tables().Main, es); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%03d", prefix, i)
	}
	return out
}

// milestones reads every milestone of a user.
func milestones(t testing.TB, st *store.Adapters, user string) map[string]model.Milestone {
	t.Helper()
	res, err := st.DB.QueryPrefix(context.Background(), st.DB.Tables().Main, keys.UserPK(user), keys.PrefixMilestone, dynamo.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]model.Milestone{}
	for _, item := range res.Items {
		var m model.Milestone
		if dynamo.Unmarshal(item, &m) == nil {
			out[m.MilestoneID] = m
		}
	}
	return out
}

// live drains the stream into the projector's Handle, as the live
// consumer would, resuming from where its previous drain stopped.
func (h *harness) live(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	arn, err := h.env.StreamARN(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := streams.NewReader(h.streams, arn, streams.Options{Checkpoints: &h.liveCheckpoints, BatchSize: 100,
		OnDiscard: func(_ context.Context, recs []events.DynamoDBEventRecord, cause error) {
			t.Errorf("live consumer discarded %d records: %v", len(recs), cause)
		}})
	if err := r.Drain(ctx, h.env.Projector); err != nil {
		t.Fatal(err)
	}
}
