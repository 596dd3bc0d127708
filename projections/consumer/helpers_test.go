package consumer_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/test/capture"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/metering"
	"github.com/commitcollect/backend/model/streams"
	"github.com/commitcollect/backend/projections/consumer"
	"github.com/commitcollect/backend/test/dynamolocal"
)

func TestMain(m *testing.M) { dynamolocal.Main(m) }

var (
	march = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	april = time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
)

// env is one test's tables, stream and consumer.
type env struct {
	t       testing.TB
	ctx     context.Context
	s       *store.Adapters
	st      *dynamodbstreams.Client
	arn     string
	mu      sync.Mutex
	seen    map[string]bool
	metrics *capture.Buffer
}

func newEnv(t testing.TB) *env {
	t.Helper()
	x := dynamolocal.NewStreamed(t)
	return &env{t: t, ctx: context.Background(), s: x.Store, st: x.Streams, arn: x.ARN, seen: map[string]bool{}, metrics: &capture.Buffer{}}
}

func (e *env) consumer(o consumer.Options) *consumer.Consumer {
	if o.Metrics == nil {
		o.Metrics = e.metrics
	}
	o.BackoffBase, o.BackoffMax = time.Millisecond, 20*time.Millisecond
	if o.Meter == nil {
		o.Meter = storeMeter
	}
	return consumer.New(e.stores(), o)
}

// stores are the consumer's ports over e's DynamoDB adapters, as the
// projector's wiring hands them.
func (e *env) stores() consumer.Stores {
	return consumer.Stores{Milestones: e.s.Milestones, Series: e.s.Milestones, Catalog: e.s.Milestones, Log: e.s.Workouts,
		Audits: e.s.Audits, Parked: e.s.Parked, Guard: e.s.Guard, Collection: e.s.Collection}
}

// storeMeter counts a batch with the store's meter, as the wiring does.
func storeMeter(ctx context.Context) (context.Context, func() consumer.Cost) {
	ctx, m := metering.StartMeter(ctx)
	return ctx, func() consumer.Cost {
		s := m.Snapshot()
		return consumer.Cost{Requests: s.Requests, RCU: s.RCU, WCU: s.WCU, Log: s.Attr()}
	}
}

// newRecords returns the stream records not returned before, as Lambda
// would deliver them.
func (e *env) newRecords() []events.DynamoDBEventRecord {
	e.t.Helper()
	all, err := streams.ReadAll(e.ctx, e.st, e.arn)
	if err != nil {
		e.t.Fatalf("read stream: %v", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []events.DynamoDBEventRecord
	for _, r := range all {
		if !e.seen[r.EventID] {
			e.seen[r.EventID] = true
			out = append(out, r)
		}
	}
	return out
}

func (e *env) handle(c *consumer.Consumer, recs []events.DynamoDBEventRecord) events.DynamoDBEventResponse {
	e.t.Helper()
	resp, err := c.Handle(e.ctx, events.DynamoDBEvent{Records: recs})
	if err != nil {
		e.t.Fatalf("Handle returned an error: %v", err)
	}
	return resp
}

func (e *env) putModel(modelID string, parts int) {
	e.t.Helper()
	if err := e.s.DB.Put(e.ctx, e.s.DB.Tables().Main, &model.ModelMeta{ModelID: modelID, Name: "Rocket", PartCount: parts, CatalogVersion: 1}); err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i < parts; i++ {
		p := &model.ModelPart{ModelID: modelID, PartIndex: i, Name: fmt.Sprintf("part-%d", i),
			Metadata: map[string]string{"rarity": "common", "slot": fmt.Sprint(i)}}
		if err := e.s.DB.Put(e.ctx, e.s.DB.Tables().Main, p); err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *env) putMilestone(user, id string, def model.MilestoneDefinition) {
	e.t.Helper()
	m := &model.Milestone{UserID: user, MilestoneID: id, MilestoneDefinition: def,
		Projection: model.Projection{Status: model.StatusActive}, CreatedAtUtc: march, WrittenBy: model.WriterAPI}
	if err := e.s.DB.Put(e.ctx, e.s.DB.Tables().Main, m); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) putWorkout(w *model.Workout) {
	e.t.Helper()
	if err := e.s.DB.Put(e.ctx, e.s.DB.Tables().Main, w); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) milestone(user, id string) model.Milestone {
	e.t.Helper()
	var m model.Milestone
	if err := e.s.DB.Get(e.ctx, e.s.DB.Tables().Main, keys.MilestoneKey(user, id), &m); err != nil {
		e.t.Fatal(err)
	}
	return m
}

func (e *env) awards(user, milestoneID string) []model.Award {
	e.t.Helper()
	as, _, err := dynamo.QueryEntities[model.Award](e.ctx, e.s.DB, e.s.DB.Tables().Main, keys.UserPK(user), keys.AwardSKPrefix(milestoneID), dynamo.QueryOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return as
}

// audits lists the audit entries of a correlation id (audit table GSI1).
func (e *env) audits(corr string) []model.AuditEntry {
	e.t.Helper()
	as, _, err := dynamo.QueryEntities[model.AuditEntry](e.ctx, e.s.DB, e.s.DB.Tables().Audit, keys.CorrelationPK(corr), "",
		dynamo.QueryOptions{Index: dynamo.IndexGSI1})
	if err != nil {
		e.t.Fatal(err)
	}
	return as
}

// userAudits lists a user's audit entries of a correlation id from the
// user's partition: routine entries (progress updates) are in no index.
func (e *env) userAudits(user, corr string) []model.AuditEntry {
	e.t.Helper()
	as, _, err := dynamo.QueryEntities[model.AuditEntry](e.ctx, e.s.DB, e.s.DB.Tables().Audit, keys.UserPK(user), keys.PrefixAudit,
		dynamo.QueryOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []model.AuditEntry
	for _, a := range as {
		if a.CorrelationID == corr {
			out = append(out, a)
		}
	}
	return out
}

func countEvents(as []model.AuditEntry, eventType string) int {
	n := 0
	for _, a := range as {
		if a.EventType == eventType {
			n++
		}
	}
	return n
}

// paused is a consumer held at its first write (Options.BeforeWrite), to
// interleave two projections of one user deterministically.
type paused struct {
	reached, release chan struct{}
	once             sync.Once
}

func newPaused() *paused { return &paused{reached: make(chan struct{}), release: make(chan struct{})} }

// beforeWrite is the consumer's Options.BeforeWrite: the first call waits
// for finish.
func (p *paused) beforeWrite(context.Context, string) {
	p.once.Do(func() { close(p.reached); <-p.release })
}

// start hands recs to c in the background and returns once c has read
// and waits to write; finish lets it write and returns its response.
func (e *env) start(c *consumer.Consumer, p *paused, recs []events.DynamoDBEventRecord) (finish func() events.DynamoDBEventResponse) {
	var wg sync.WaitGroup
	var resp events.DynamoDBEventResponse
	wg.Add(1)
	go func() {
		defer wg.Done()
		resp, _ = c.Handle(e.ctx, events.DynamoDBEvent{Records: recs})
	}()
	<-p.reached
	return func() events.DynamoDBEventResponse {
		close(p.release)
		wg.Wait()
		return resp
	}
}
