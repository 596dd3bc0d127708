// Package store is the DynamoDB adapter: it reads and writes model entities
// with aws-sdk-go-v2 (attributevalue, the expression builder) and translates
// DynamoDB's failures into model's error vocabulary. It never scans.
//
// The workout log and its index. The projector reads a user's workouts by
// start date (WorkoutLog), not by activity id: the main table has a local
// secondary index LSI1 whose sort key LSI1SK is keys.WorkoutDateSK
// (WORKOUT#{startDateUtc, fixed width with nanoseconds}#{activityId,
// zero-padded to 19 digits}), set by Workout.Stamp on every write. It is an
// LSI, not a GSI, on purpose: an LSI can be read strongly consistent, a GSI
// cannot, and the projector is triggered by the very write it must see (a
// GSI could miss a fresh workout until the next event). The price: an LSI
// exists only from table creation (scripts/migrate-lsi), and a user's items
// and LSI entries are limited to 10 GB, far above one athlete's workouts.
// LSI1 projects only WorkoutLogFields (INCLUDE), so the log never reads the
// table. Only workouts with a start date carry LSI1SK; tombstones (a delete
// that overtook its create) stay out.
//
// WorkoutLog queries the union of the windows asked (periods, or weeks of
// them; BETWEEN per merged window, newest first) and applies the guardrail
// (model.MaxWorkoutsToInspect): all it leaves out is older than all it
// keeps; Log.ExactFrom says from when the log is complete. Changing
// WorkoutDateSK's shape is replay-sensitive: re-key every workout
// (migrate-lsi -backfill after clearing LSI1SK) and rebuild.
//
// Hot keys. No partition takes a burst's writes alone: the outbox's Pending
// index spreads over Store.OutboxShards (CC_OUTBOX_SHARDS, default 32; the 4
// legacy shards are always read), parked records over keys.ParkedShards per
// source (the legacy partition is read until its records expire), sync-page
// audit entries are routine (unindexed), and a dropped audit write is
// counted (AuditWritesDropped, alarmed). GSI1 and Pending project only what
// their readers decode. An index's projection cannot change in place:
// migrating, GSI1 and Pending are deleted and created again (Terraform plans
// it; CreateTables does it locally, see IndexSpec; apply in a quiet period:
// while Pending backfills the sweeper finds no due items, while GSI1 does an
// athlete without an OWNER item fails to resolve and its job is retried).
package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/store/capacity"
	"github.com/commitcollect/backend/model/store/pending"
)

// Item is one raw DynamoDB item.
type Item = map[string]types.AttributeValue

// DB is the one DynamoDB client and the settings every entity type of the
// store shares, with the generic item operations (db.go). It is safe for
// concurrent use.
type DB struct {
	db *dynamodb.Client
	t  Tables
	// Now is the clock; tests may replace it.
	Now func() time.Time
	// Secrets seals and opens Strava tokens (model/secrets.Sealer). Without
	// it, writing or reading sealed tokens fails with ErrNoSealer.
	Secrets Sealer
	// OutboxShards is how many partitions of the outbox's pending index
	// items are spread over (CC_OUTBOX_SHARDS; 0: keys.DefaultOutboxShards).
	// Writers (the api's claim, the worker's deferrals, the sweeper's
	// leases) and the sweeper's reads must use the same count.
	OutboxShards int
	// AuditMetrics receives one EMF line per audit entry Audits.Audit drops
	// (the Lambdas set os.Stdout; nil: counted and logged only).
	AuditMetrics io.Writer

	auditDropped atomic.Int64
}

// Store reads and writes the four CommitCollect tables: one entity type per
// aggregate, each in the file named after it, over one shared DB. Its
// method set is theirs, so each consumer declares the few methods it needs
// and any of them is served by a *Store.
type Store struct {
	*DB
	*Outbox
	*pending.Index
	*ParkedRecords
	*Audits
	*Workouts
	*Milestones
	*Users
	*Connections
	*Guard
	*Collection
}

// New returns a Store over an injected client and table names. It uses a
// copy of db with the consumed-capacity middleware installed (package capacity):
// calls made with a context carrying a Meter are accounted in it.
func New(db *dynamodb.Client, t Tables) *Store {
	d := &DB{db: capacity.Install(db), t: t, Now: func() time.Time { return time.Now().UTC() }}
	g := &Guard{DB: d}
	shards := func() int { return d.OutboxShards }
	return &Store{DB: d, Outbox: &Outbox{DB: d}, Index: pending.New(d.db, t.Idempotency, shards), ParkedRecords: &ParkedRecords{DB: d}, Audits: &Audits{DB: d},
		Workouts: &Workouts{DB: d}, Milestones: &Milestones{DB: d, Guard: g}, Users: &Users{DB: d, Guard: g},
		Connections: &Connections{DB: d, Guard: g}, Guard: g,
		Collection: &Collection{DB: d}}
}

// Marshal stamps e (keys, entityType, schemaVersion) and renders it.
func Marshal(e model.Entity) (Item, error) {
	e.Stamp()
	av, err := attributevalue.MarshalMap(e)
	if err != nil {
		return nil, fmt.Errorf("marshal %s: %w", e.ItemKey(), err)
	}
	return av, nil
}

// Unmarshal decodes item into e and normalizes it; it fails closed on a
// schema version newer than this code (ErrUnsupportedSchema).
func Unmarshal(item Item, e model.Entity) error {
	if err := attributevalue.UnmarshalMap(item, e); err != nil {
		return fmt.Errorf("unmarshal item: %v: %w", err, model.ErrInvalid)
	}
	if err := e.Normalize(); err != nil {
		return fmt.Errorf("normalize %s: %w", e.ItemKey(), err)
	}
	return nil
}

// Changes is a set of attribute updates. Attributes are applied in sorted
// order so the same changes always render the same request (a transaction
// retried with its ClientRequestToken must be byte-for-byte identical).
type Changes struct {
	Set    map[string]any
	Remove []string
}

func (c Changes) builder() (expression.UpdateBuilder, bool) {
	var u expression.UpdateBuilder
	names := make([]string, 0, len(c.Set))
	for n := range c.Set {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		u = u.Set(expression.Name(n), expression.Value(c.Set[n]))
	}
	rm := append([]string(nil), c.Remove...)
	sort.Strings(rm)
	for _, n := range rm {
		u = u.Remove(expression.Name(n))
	}
	return u, len(names)+len(rm) > 0
}

// TransactUpdate turns an UpdateItemInput into a transaction item.
func TransactUpdate(in *dynamodb.UpdateItemInput) types.TransactWriteItem {
	return types.TransactWriteItem{Update: &types.Update{
		TableName: in.TableName, Key: in.Key, UpdateExpression: in.UpdateExpression,
		ConditionExpression: in.ConditionExpression, ExpressionAttributeNames: in.ExpressionAttributeNames, ExpressionAttributeValues: in.ExpressionAttributeValues,
	}}
}

// QueryOptions shapes a prefix query.
type QueryOptions struct {
	// Index queries a GSI instead of the table (eventually consistent).
	Index string
	// HashKey and RangeKey name the key attributes; default PK / SK, or the
	// index's own (GSI1PK / GSI1SK …) when Index is set.
	HashKey, RangeKey string
	// Projection lists the attributes to return (empty: all).
	Projection []string
	// Limit caps the items returned (default and maximum MaxWorkoutsToInspect).
	Limit int
	// Descending reads the sort key backwards.
	Descending bool
	// Through, when set, reads the sort keys from prefix through it.
	Through string
}

// QueryResult is one bounded prefix query.
type QueryResult struct {
	Items []Item
	// Truncated is true when the guardrail stopped the query before the end.
	Truncated bool
	// next is the first item left out when Truncated.
	next Item
}

// QueryEntities runs QueryPrefix and decodes every item into a fresh T,
// normalizing each; an item written by newer code fails the whole read
// (fail closed).
func QueryEntities[T any, PT interface {
	*T
	model.Entity
}](ctx context.Context, s *DB, table, pk, prefix string, o QueryOptions) ([]T, bool, error) {
	res, err := s.QueryPrefix(ctx, table, pk, prefix, o)
	if err != nil {
		return nil, false, err
	}
	out := make([]T, len(res.Items))
	for i, item := range res.Items {
		if err := Unmarshal(item, PT(&out[i])); err != nil {
			return nil, false, fmt.Errorf("query %s %s: %w", pk, prefix, err)
		}
	}
	return out, res.Truncated, nil
}

func isConflict(err error) bool { return errors.Is(err, model.ErrConflict) }

// KeyOf is the primary key (PK, SK) of a raw item; ErrInvalid when either
// is missing or not a string.
func KeyOf(it Item) (model.Key, error) {
	pk, ok1 := it["PK"].(*types.AttributeValueMemberS)
	sk, ok2 := it["SK"].(*types.AttributeValueMemberS)
	if !ok1 || !ok2 {
		return model.Key{}, fmt.Errorf("item without string PK/SK: %w", model.ErrInvalid)
	}
	return model.Key{PK: pk.Value, SK: sk.Value}, nil
}
