// Package store is the DynamoDB adapter: it reads and writes model entities
// with aws-sdk-go-v2 (attributevalue, the expression builder) and translates
// DynamoDB's failures into model's error vocabulary. It never scans.
//
// The workout log and its index. The projector reads a user's workouts by
// start date (WorkoutLog), not by activity id: the main table has a local
// secondary index LSI1 whose sort key LSI1SK is model.WorkoutDateSK
// (WORKOUT#{startDateUtc, fixed width with nanoseconds}#{activityId,
// zero-padded to 19 digits}), set by Workout.Stamp on every write. It is an
// LSI, not a GSI, on purpose: an LSI can be read strongly consistent, a GSI
// cannot, and the projector is triggered by the very write it must see (a
// GSI could miss a fresh workout until the next event). The price: an LSI
// exists only from table creation (migration: scripts/migrate-lsi), and a
// user's partition (items plus LSI entries) is limited to 10 GB, far above
// what one athlete's workouts take. LSI1 projects only WorkoutLogFields
// (INCLUDE), so the log never reads the table. Only workouts with a start
// date carry LSI1SK; tombstones (a delete that overtook its create) stay out.
//
// WorkoutLog queries the union of the user's milestone periods with a key
// condition (BETWEEN) per merged period, newest first, and applies the
// guardrail (model.MaxWorkoutsToInspect) to what it reads: everything it
// leaves out is older than everything it keeps, and Log.ExactFrom says from
// which instant the log is complete. Changing WorkoutDateSK's shape is
// replay-sensitive: re-key every workout (migrate-lsi -backfill after
// clearing LSI1SK) and rebuild.
//
// Hot keys (issue 24). No partition takes a burst's writes alone: the
// outbox's Pending index spreads over Store.OutboxShards (CC_OUTBOX_SHARDS,
// default 32; the 4 legacy shards are always read), parked records over
// model.ParkedShards per source (the unsharded legacy partition is still
// read until its records expire), sync-page audit entries are routine
// (unindexed), and a dropped audit write is counted (AuditWritesDropped,
// alarmed). GSI1 (athlete → user) and Pending project only what their
// readers decode (AthleteIndexAttributes, PendingIndexAttributes).
// Migration of an existing deployment: an index's projection cannot change
// in place, so GSI1 on the main table and Pending on the idempotency table
// are deleted and created again (Terraform plans the replacement; apply in
// a quiet period: while Pending backfills the sweeper finds no due items,
// while GSI1 does, an athlete without an OWNER item fails to resolve and
// its job is retried).
// CreateTables does the same for a local table (see IndexSpec).
package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
)

// Item is one raw DynamoDB item.
type Item = map[string]types.AttributeValue

// Store reads and writes the four CommitCollect tables. It is safe for
// concurrent use.
type Store struct {
	db *dynamodb.Client
	t  Tables
	// Now is the clock; tests may replace it.
	Now func() time.Time
	// Secrets seals and opens Strava tokens (model/secrets.Sealer). Without
	// it, writing or reading sealed tokens fails with ErrNoSealer.
	Secrets Sealer
	// OutboxShards is how many partitions of the outbox's pending index
	// items are spread over (CC_OUTBOX_SHARDS; 0: model.DefaultOutboxShards).
	// Writers (the api's claim, the worker's deferrals, the sweeper's
	// leases) and the sweeper's reads must use the same count.
	OutboxShards int
	// AuditMetrics receives one EMF line per audit entry Store.Audit drops
	// (the Lambdas set os.Stdout; nil: counted and logged only).
	AuditMetrics io.Writer

	auditDropped atomic.Int64
}

// New returns a Store over an injected client and table names. It uses a
// copy of db with the consumed-capacity middleware installed (capacity.go):
// calls made with a context carrying a Meter are accounted in it.
func New(db *dynamodb.Client, t Tables) *Store {
	return &Store{db: withCapacity(db), t: t, Now: func() time.Time { return time.Now().UTC() }}
}

// Client returns the store's DynamoDB client (the injected one plus the
// capacity middleware: calls made with a metered context are accounted).
func (s *Store) Client() *dynamodb.Client { return s.db }

// Tables returns the table names this store uses.
func (s *Store) Tables() Tables { return s.t }

// keyAV renders a key for table: the idempotency table has only a hash key.
func (s *Store) keyAV(table string, k model.Key) Item {
	if table == s.t.Idempotency {
		return Item{"IdempotencyKey": &types.AttributeValueMemberS{Value: k.PK}}
	}
	return Item{
		"PK": &types.AttributeValueMemberS{Value: k.PK},
		"SK": &types.AttributeValueMemberS{Value: k.SK},
	}
}

func (s *Store) hashKeyName(table string) string {
	if table == s.t.Idempotency {
		return "IdempotencyKey"
	}
	return "PK"
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

// Get reads the item at k into e. It returns ErrNotFound when it does not
// exist and ErrUnsupportedSchema when it was written by newer code.
func (s *Store) Get(ctx context.Context, table string, k model.Key, e model.Entity) error {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(table), Key: s.keyAV(table, k), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return fmt.Errorf("get %s: %w", k, translate(err))
	}
	if out.Item == nil {
		return fmt.Errorf("get %s: %w", k, model.ErrNotFound)
	}
	if err := Unmarshal(out.Item, e); err != nil {
		return fmt.Errorf("get %s: %w", k, err)
	}
	return nil
}

// Put writes e unconditionally (after stamping it).
func (s *Store) Put(ctx context.Context, table string, e model.Entity) error {
	return s.put(ctx, table, e, nil)
}

// PutIfAbsent writes e only if no item has its key; it returns ErrConflict
// when one does.
func (s *Store) PutIfAbsent(ctx context.Context, table string, e model.Entity) error {
	cond := expression.AttributeNotExists(expression.Name(s.hashKeyName(table)))
	return s.put(ctx, table, e, &cond)
}

// PutIf writes e only if cond holds on the stored item; ErrConflict otherwise.
func (s *Store) PutIf(ctx context.Context, table string, e model.Entity, cond expression.ConditionBuilder) error {
	return s.put(ctx, table, e, &cond)
}

func (s *Store) put(ctx context.Context, table string, e model.Entity, cond *expression.ConditionBuilder) error {
	if c, ok := e.(*model.StravaConnection); ok {
		if err := s.sealConnection(ctx, c); err != nil {
			return fmt.Errorf("put %s: %w", e.ItemKey(), err)
		}
	}
	item, err := Marshal(e)
	if err != nil {
		return err
	}
	in := &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}
	if cond != nil {
		ex, err := expression.NewBuilder().WithCondition(*cond).Build()
		if err != nil {
			return fmt.Errorf("put %s: build condition: %w", e.ItemKey(), err)
		}
		in.ConditionExpression = ex.Condition()
		in.ExpressionAttributeNames = ex.Names()
		in.ExpressionAttributeValues = ex.Values()
	}
	if _, err := s.db.PutItem(ctx, in); err != nil {
		return fmt.Errorf("put %s: %w", e.ItemKey(), translate(err))
	}
	return nil
}

// Delete removes the item at k; deleting a missing item is not an error.
func (s *Store) Delete(ctx context.Context, table string, k model.Key) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: s.keyAV(table, k)})
	if err != nil {
		return fmt.Errorf("delete %s: %w", k, translate(err))
	}
	return nil
}

// DeleteIf removes the item at k only if cond holds; ErrConflict otherwise.
func (s *Store) DeleteIf(ctx context.Context, table string, k model.Key, cond expression.ConditionBuilder) error {
	ex, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return fmt.Errorf("delete %s: build condition: %w", k, err)
	}
	_, err = s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(table), Key: s.keyAV(table, k),
		ConditionExpression: ex.Condition(), ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
	})
	if err != nil {
		return fmt.Errorf("delete %s: %w", k, translate(err))
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

// UpdateVersioned applies changes to the item at k only if its version
// attribute equals expected, and sets version to expected+1. It returns
// ErrConflict when the version moved (or the item is gone) and the new item
// on success.
func (s *Store) UpdateVersioned(ctx context.Context, table string, k model.Key, expected int64, c Changes) (Item, error) {
	in, err := s.VersionedUpdateInput(table, k, expected, c)
	if err != nil {
		return nil, err
	}
	in.ReturnValues = types.ReturnValueAllNew
	out, err := s.db.UpdateItem(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("update %s at version %d: %w", k, expected, translate(err))
	}
	return out.Attributes, nil
}

// VersionedUpdateInput builds the conditional update UpdateVersioned sends,
// so a transaction can carry the same update (see TransactUpdate).
func (s *Store) VersionedUpdateInput(table string, k model.Key, expected int64, c Changes) (*dynamodb.UpdateItemInput, error) {
	if _, ok := c.Set["version"]; ok {
		return nil, fmt.Errorf("update %s: version is managed by the store: %w", k, model.ErrInvalid)
	}
	cond := expression.Name("version").Equal(expression.Value(expected))
	if expected == 0 {
		// Legacy items may predate the version attribute.
		cond = expression.Or(cond, expression.AttributeNotExists(expression.Name("version")))
	}
	cond = expression.And(expression.AttributeExists(expression.Name("PK")), cond)
	update, _ := c.builder()
	update = update.Set(expression.Name("version"), expression.Value(expected+1))
	ex, err := expression.NewBuilder().WithCondition(cond).WithUpdate(update).Build()
	if err != nil {
		return nil, fmt.Errorf("update %s: build expression: %w", k, err)
	}
	return &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: s.keyAV(table, k),
		ConditionExpression: ex.Condition(), UpdateExpression: ex.Update(),
		ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
	}, nil
}

// TransactUpdate turns an UpdateItemInput into a transaction item.
func TransactUpdate(in *dynamodb.UpdateItemInput) types.TransactWriteItem {
	return types.TransactWriteItem{Update: &types.Update{
		TableName: in.TableName, Key: in.Key, UpdateExpression: in.UpdateExpression,
		ConditionExpression: in.ConditionExpression, ExpressionAttributeNames: in.ExpressionAttributeNames,
		ExpressionAttributeValues: in.ExpressionAttributeValues,
	}}
}

// TransactPutIfAbsent builds a transaction item that creates e only if its
// key is free.
func (s *Store) TransactPutIfAbsent(table string, e model.Entity) (types.TransactWriteItem, error) {
	if err := unsealedTokens(e); err != nil {
		return types.TransactWriteItem{}, err
	}
	item, err := Marshal(e)
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	ex, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(s.hashKeyName(table)))).Build()
	if err != nil {
		return types.TransactWriteItem{}, fmt.Errorf("put %s: build condition: %w", e.ItemKey(), err)
	}
	return types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(table), Item: item,
		ConditionExpression: ex.Condition(), ExpressionAttributeNames: ex.Names(),
	}}, nil
}

// TransactPut builds an unconditional transaction put of e.
func (s *Store) TransactPut(table string, e model.Entity) (types.TransactWriteItem, error) {
	if err := unsealedTokens(e); err != nil {
		return types.TransactWriteItem{}, err
	}
	item, err := Marshal(e)
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(table), Item: item}}, nil
}

// TransactDelete builds an unconditional transaction delete of k.
func (s *Store) TransactDelete(table string, k model.Key) types.TransactWriteItem {
	return types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(table), Key: s.keyAV(table, k)}}
}

// Transact writes items atomically. token, when not empty, is the
// ClientRequestToken that makes a retried call idempotent for ten minutes.
// A cancelled transaction returns a *model.TransactionError with one reason
// per item (errors.Is ErrConflict when a condition failed).
func (s *Store) Transact(ctx context.Context, items []types.TransactWriteItem, token string) error {
	if len(items) == 0 {
		return nil
	}
	if len(items) > model.TransactionLimit {
		return fmt.Errorf("transact %d items: more than %d: %w", len(items), model.TransactionLimit, model.ErrInvalid)
	}
	in := &dynamodb.TransactWriteItemsInput{TransactItems: items}
	if token != "" {
		in.ClientRequestToken = aws.String(token)
	}
	if _, err := s.db.TransactWriteItems(ctx, in); err != nil {
		return fmt.Errorf("transact %d items: %w", len(items), translate(err))
	}
	return nil
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
}

// QueryResult is one bounded prefix query.
type QueryResult struct {
	Items []Item
	// Truncated is true when the guardrail stopped the query before the end.
	Truncated bool
	// next is the first item left out when Truncated.
	next Item
}

// QueryPrefix reads the items of partition pk whose sort key begins with
// prefix (all of them when prefix is empty), page by page, stopping at the
// limit (never more than MaxWorkoutsToInspect) and saying so in Truncated.
func (s *Store) QueryPrefix(ctx context.Context, table, pk, prefix string, o QueryOptions) (QueryResult, error) {
	limit := o.Limit
	if limit <= 0 || limit > model.MaxWorkoutsToInspect {
		limit = model.MaxWorkoutsToInspect
	}
	hk, rk := o.HashKey, o.RangeKey
	if hk == "" {
		hk, rk = "PK", "SK"
		if o.Index != "" {
			hk, rk = o.Index+"PK", o.Index+"SK"
		}
	}
	kc := expression.Key(hk).Equal(expression.Value(pk))
	if prefix != "" {
		kc = kc.And(expression.Key(rk).BeginsWith(prefix))
	}
	b := expression.NewBuilder().WithKeyCondition(kc)
	if len(o.Projection) > 0 {
		names := make([]expression.NameBuilder, len(o.Projection))
		for i, p := range o.Projection {
			names[i] = expression.Name(p)
		}
		b = b.WithProjection(expression.NamesList(names[0], names[1:]...))
	}
	ex, err := b.Build()
	if err != nil {
		return QueryResult{}, fmt.Errorf("query %s %s: build expression: %w", pk, prefix, err)
	}
	in := &dynamodb.QueryInput{
		TableName: aws.String(table), KeyConditionExpression: ex.KeyCondition(),
		ProjectionExpression: ex.Projection(), ExpressionAttributeNames: ex.Names(),
		ExpressionAttributeValues: ex.Values(), ScanIndexForward: aws.Bool(!o.Descending),
	}
	if o.Index != "" {
		in.IndexName = aws.String(o.Index)
	} else {
		in.ConsistentRead = aws.Bool(true)
	}
	res, err := s.queryPages(ctx, in, limit)
	if err != nil {
		return QueryResult{}, fmt.Errorf("query %s %s: %w", pk, prefix, err)
	}
	return res, nil
}

// queryPages runs in page by page and keeps at most limit items (limit may
// be 0). Truncated says more items follow; next is then the first of them,
// read so the caller learns where the cut fell (one item beyond the limit
// is all it ever reads past it).
func (s *Store) queryPages(ctx context.Context, in *dynamodb.QueryInput, limit int) (QueryResult, error) {
	var res QueryResult
	for {
		// Ask for one more than we keep so we know whether the log goes on.
		in.Limit = aws.Int32(int32(min(limit-len(res.Items)+1, 1000)))
		out, err := s.db.Query(ctx, in)
		if err != nil {
			return QueryResult{}, translate(err)
		}
		res.Items = append(res.Items, out.Items...)
		if len(res.Items) > limit {
			res.next = res.Items[limit]
			res.Items, res.Truncated = res.Items[:limit], true
			return res, nil
		}
		if len(out.LastEvaluatedKey) == 0 {
			return res, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// QueryEntities runs QueryPrefix and decodes every item into a fresh T,
// normalizing each; an item written by newer code fails the whole read
// (fail closed).
func QueryEntities[T any, PT interface {
	*T
	model.Entity
}](ctx context.Context, s *Store, table, pk, prefix string, o QueryOptions) ([]T, bool, error) {
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

// BatchWriteRetries bounds how many times unprocessed items are resent.
const BatchWriteRetries = 8

// BatchPut writes entities in chunks of 25, resending UnprocessedItems with
// jittered exponential backoff.
func (s *Store) BatchPut(ctx context.Context, table string, es []model.Entity) error {
	reqs := make([]types.WriteRequest, 0, len(es))
	for _, e := range es {
		item, err := Marshal(e)
		if err != nil {
			return err
		}
		reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
	}
	return s.batchWrite(ctx, table, reqs)
}

// BatchPutItems writes raw items (already rendered, e.g. copied from
// another table by a migration) in chunks of 25, like BatchPut.
func (s *Store) BatchPutItems(ctx context.Context, table string, items []Item) error {
	reqs := make([]types.WriteRequest, len(items))
	for i, it := range items {
		reqs[i] = types.WriteRequest{PutRequest: &types.PutRequest{Item: it}}
	}
	return s.batchWrite(ctx, table, reqs)
}

// BatchDelete deletes keys in chunks of 25, resending UnprocessedItems with
// jittered exponential backoff. Missing items are not an error.
func (s *Store) BatchDelete(ctx context.Context, table string, keys []model.Key) error {
	reqs := make([]types.WriteRequest, 0, len(keys))
	for _, k := range keys {
		reqs = append(reqs, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: s.keyAV(table, k)}})
	}
	return s.batchWrite(ctx, table, reqs)
}

func (s *Store) batchWrite(ctx context.Context, table string, reqs []types.WriteRequest) error {
	for start := 0; start < len(reqs); start += model.BatchWriteChunk {
		pending := map[string][]types.WriteRequest{table: reqs[start:min(start+model.BatchWriteChunk, len(reqs))]}
		for attempt := 0; len(pending[table]) > 0; attempt++ {
			if attempt > BatchWriteRetries {
				return fmt.Errorf("batch write %s: %d items still unprocessed after %d retries: %w",
					table, len(pending[table]), BatchWriteRetries, model.ErrRetryable)
			}
			if attempt > 0 {
				if err := model.Sleep(ctx, model.Backoff(attempt, 50*time.Millisecond, 5*time.Second)); err != nil {
					return fmt.Errorf("batch write %s: %w", table, err)
				}
			}
			out, err := s.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: pending})
			if err != nil {
				return fmt.Errorf("batch write %s: %w", table, translate(err))
			}
			pending = out.UnprocessedItems
		}
	}
	return nil
}

// translate maps DynamoDB's errors onto model's vocabulary, keeping the
// original in the chain.
func translate(err error) error {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("%w: %w", model.ErrConflict, err)
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		te := &model.TransactionError{}
		for _, r := range tce.CancellationReasons {
			te.Reasons = append(te.Reasons, aws.ToString(r.Code))
		}
		return te
	}
	var (
		tip  *types.TransactionInProgressException
		pte  *types.ProvisionedThroughputExceededException
		rle  *types.RequestLimitExceeded
		tce2 *types.TransactionConflictException
	)
	if errors.As(err, &tip) || errors.As(err, &pte) || errors.As(err, &rle) || errors.As(err, &tce2) {
		return fmt.Errorf("%w: %w", model.ErrRetryable, err)
	}
	var ae interface{ ErrorCode() string }
	if errors.As(err, &ae) && ae.ErrorCode() == "ThrottlingException" {
		return fmt.Errorf("%w: %w", model.ErrRetryable, err)
	}
	var rnf *types.ResourceNotFoundException
	if errors.As(err, &rnf) {
		return fmt.Errorf("%w: %w", model.ErrNotFound, err)
	}
	return err
}

func isConflict(err error) bool { return errors.Is(err, model.ErrConflict) }

// itemKey reads an item's PK and SK; ErrInvalid when either is missing
// or not a string.
func itemKey(it Item) (model.Key, error) {
	pk, ok1 := it["PK"].(*types.AttributeValueMemberS)
	sk, ok2 := it["SK"].(*types.AttributeValueMemberS)
	if !ok1 || !ok2 {
		return model.Key{}, fmt.Errorf("item without string PK/SK: %w", model.ErrInvalid)
	}
	return model.Key{PK: pk.Value, SK: sk.Value}, nil
}
