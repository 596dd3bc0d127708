// Package dynamo is the DynamoDB access every entity type of the store
// shares: DB (one client with the capacity meter installed, the table names
// and the settings), the generic item operations (get, put, conditional and
// versioned updates, transactions, bounded prefix queries, batches), the
// entities' marshalling, and the tables' names and index attributes.
// Entities live in model/store and the packages beside it.
package dynamo

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/records"
	"github.com/commitcollect/backend/model/secrets"
	"github.com/commitcollect/backend/model/store/metering"
)

// Item is one raw DynamoDB item.
type Item = map[string]types.AttributeValue

// DB is the one DynamoDB client and the settings every entity type of the
// store shares, with the generic item operations (db.go, batch.go). It is safe for
// concurrent use.
type DB struct {
	db *dynamodb.Client
	t  Tables
	// Now is the clock; tests may replace it.
	Now func() time.Time
	// Secrets seals and opens Strava tokens (model/secrets.Sealer). Without
	// it, writing or reading sealed tokens fails (store.ErrNoSealer).
	Secrets Sealer
	// OutboxShards is how many partitions of the outbox's pending index
	// items are spread over (CC_OUTBOX_SHARDS; 0: keys.DefaultOutboxShards).
	// Writers (the api's claim, the worker's deferrals, the sweeper's
	// leases) and the sweeper's reads must use the same count.
	OutboxShards int
	// AuditMetrics receives one EMF line per audit entry Audits.Audit drops
	// (the Lambdas set os.Stdout; nil: counted and logged only).
	AuditMetrics io.Writer
}

// Sealer seals and opens secrets bound to a context (model/secrets.Sealer).
type Sealer interface {
	Seal(ctx context.Context, ec secrets.Context, plaintext []byte) (model.SealedSecret, error)
	Open(ctx context.Context, ec secrets.Context, sealed model.SealedSecret) ([]byte, error)
}

// New returns a DB over an injected client and table names. It uses a copy
// of client with the consumed-capacity middleware installed (package
// capacity): calls made with a context carrying a Meter are accounted in it.
func New(client *dynamodb.Client, t Tables) *DB {
	return &DB{db: metering.Install(client), t: t, Now: func() time.Time { return time.Now().UTC() }}
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
func Unmarshal(item Item, e model.Entity) error { return records.Unmarshal(item, e) }

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
	// Next is the first item left out when Truncated.
	Next Item
}

// QueryEach reads every item of partition pk whose sort key begins with
// prefix, in key order, however many there are: chunks of at most o.Limit
// (MaxWorkoutsToInspect by default), each handed to each before the next
// is read, so the caller bounds what it keeps. A read that must see all
// of a prefix uses it, never one QueryPrefix (which stops at its limit).
// o.Through and o.Descending are not supported (the chunks resume after
// the last key read).
func QueryEach(ctx context.Context, s *DB, table, pk, prefix string, o QueryOptions, each func([]Item) error) error {
	if o.Through != "" || o.Descending {
		return fmt.Errorf("query each %s %s: Through and Descending are not supported: %w", pk, prefix, model.ErrInvalid)
	}
	from := prefix
	for {
		res, err := s.QueryPrefix(ctx, table, pk, from, o)
		if err != nil {
			return err
		}
		if err := each(res.Items); err != nil {
			return err
		}
		if !res.Truncated {
			return nil
		}
		k, err := KeyOf(res.Next)
		if err != nil {
			return fmt.Errorf("query each %s %s: %w", pk, prefix, err)
		}
		// From the first item left out to the last key the prefix can hold.
		from, o.Through = k.SK, prefix+"\uffff"
	}
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
