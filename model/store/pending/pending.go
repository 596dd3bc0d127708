// Package pending reads the outbox's sparse pending index (the idempotency
// table's Pending index): the due items a sweep hands out, and the backlog
// operators and the sweeper's metrics read. model/store opens it (Adapters.Pending) with its
// methods; the outbox's writes (claims, leases, deferrals, settles) stay in
// model/store/outbox.
package pending

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/store/dynerr"
)

// IndexName is the idempotency table's sparse index of pending outbox
// items (PendingPK = OUTBOX#PENDING#{shard}, PendingSK = due instant and
// key).
const IndexName = "Pending"

// Key attributes of the index.
const (
	attrPK = "PendingPK"
	attrSK = "PendingSK"
)

// Index reads the pending index of one idempotency table.
type Index struct {
	db     *dynamodb.Client
	table  string
	shards func() int
}

// New returns the reader of table's pending index through db; configured
// says, at each read, how many shards writers spread items over (0: the
// default).
func New(db *dynamodb.Client, table string, configured func() int) *Index {
	return &Index{db: db, table: table, shards: configured}
}

// unmarshal decodes an index entry (fails closed like the store's
// Unmarshal on a newer schema).
func unmarshal(item map[string]types.AttributeValue, r *ops.IdempotencyRecord) error {
	if err := attributevalue.UnmarshalMap(item, r); err != nil {
		return fmt.Errorf("unmarshal pending entry: %v: %w", err, model.ErrInvalid)
	}
	if err := r.Normalize(); err != nil {
		return fmt.Errorf("normalize %s: %w", r.ItemKey(), err)
	}
	return nil
}

// pendingShards is how many shards of the pending index readers query: the
// configured count (dynamo.DB.OutboxShards, default keys.DefaultOutboxShards),
// and never fewer than keys.LegacyOutboxShards (items written before the
// count was configurable). Raising the count is safe (readers query the
// old shards too); lowering it strands the items of the dropped shards
// until their keys are leased or deferred again by a writer with the
// higher count, so lower it only with an empty backlog.
func (s *Index) pendingShards() int {
	n := s.shards()
	if n < 1 {
		n = keys.DefaultOutboxShards
	}
	return max(n, keys.LegacyOutboxShards)
}

// DueOutboxItems lists received items due at now (lease lapsed, not-before
// passed), oldest due first, at most limit of them, by querying every shard
// of the sparse pending index. The shards are read in rounds of a page of
// about limit/shards each, a shard only while it may still hold one of the
// limit oldest: a read costs about limit items plus a page a shard, however
// large the backlog. The index is eventually consistent: an item listed
// here may have been settled since, which LeaseOutboxItem detects.
func (s *Index) DueOutboxItems(ctx context.Context, now time.Time, limit int) ([]ops.IdempotencyRecord, error) {
	shards := s.pendingShards()
	page := 0 // every page DynamoDB gives
	if limit > 0 {
		page = max(1, (limit+shards-1)/shards)
	}
	type cursor struct {
		start  map[string]types.AttributeValue
		last   string
		closed bool
	}
	cursors := make([]cursor, shards)
	var out []ops.IdempotencyRecord
	for cut := ""; ; {
		read := false
		for shard := range shards {
			c := &cursors[shard]
			if c.closed || (cut != "" && c.last >= cut) {
				continue // exhausted, or past the limit oldest
			}
			kc := expression.Key(attrPK).Equal(expression.Value(keys.OutboxPendingShardPK(shard))).
				And(expression.Key(attrSK).LessThan(expression.Value(keys.OutboxDueBefore(now))))
			recs, next, err := s.queryPendingPage(ctx, kc, page, c.start)
			if err != nil {
				return nil, fmt.Errorf("list due outbox items (shard %d): %w", shard, err)
			}
			out = append(out, recs...)
			if len(recs) > 0 {
				c.last = recs[len(recs)-1].PendingSK
			}
			c.start, c.closed, read = next, len(next) == 0, true
		}
		slices.SortFunc(out, func(a, b ops.IdempotencyRecord) int { return cmp.Compare(a.PendingSK, b.PendingSK) })
		if limit > 0 && len(out) >= limit {
			out, cut = out[:limit], out[limit-1].PendingSK
		}
		if !read {
			return out, nil
		}
	}
}

// OutboxBacklog is what the pending index holds at one instant.
type OutboxBacklog struct {
	// Pending counts received items (due or not).
	Pending int
	// Due counts the pending items due now (lease lapsed, not-before passed).
	Due int
	// OldestCreatedAtUtc is when the oldest pending item was accepted (zero
	// when nothing is pending).
	OldestCreatedAtUtc time.Time
}

// PendingOutbox counts the received items of the pending index (every
// shard, every page: the index only ever holds pending items, so this is
// bounded by the backlog) and finds the oldest. Operators, the sweeper's
// metrics and the chaos suite read the backlog through it.
func (s *Index) PendingOutbox(ctx context.Context, now time.Time) (OutboxBacklog, error) {
	var b OutboxBacklog
	bound := keys.OutboxDueBefore(now)
	for shard := range s.pendingShards() {
		kc := expression.Key(attrPK).Equal(expression.Value(keys.OutboxPendingShardPK(shard)))
		recs, err := s.queryPending(ctx, kc, 0)
		if err != nil {
			return OutboxBacklog{}, fmt.Errorf("count pending outbox items (shard %d): %w", shard, err)
		}
		for _, r := range recs {
			b.Pending++
			if r.PendingSK < bound {
				b.Due++
			}
			if b.OldestCreatedAtUtc.IsZero() || r.CreatedAtUtc.Before(b.OldestCreatedAtUtc) {
				b.OldestCreatedAtUtc = r.CreatedAtUtc
			}
		}
	}
	return b, nil
}

// queryPending reads the pending index with kc, all pages (limit <= 0) or
// up to limit items.
func (s *Index) queryPending(ctx context.Context, kc expression.KeyConditionBuilder, limit int) ([]ops.IdempotencyRecord, error) {
	var out []ops.IdempotencyRecord
	var start map[string]types.AttributeValue
	for {
		recs, next, err := s.queryPendingPage(ctx, kc, limit-len(out), start)
		if err != nil {
			return nil, err
		}
		out = append(out, recs...)
		if len(next) == 0 || (limit > 0 && len(out) >= limit) {
			return out, nil
		}
		start = next
	}
}

// queryPendingPage reads one page of the pending index with kc from start
// (nil: the beginning), at most limit items (limit <= 0: DynamoDB's page),
// and returns where the next page starts (nil after the last).
func (s *Index) queryPendingPage(ctx context.Context, kc expression.KeyConditionBuilder, limit int, start map[string]types.AttributeValue) ([]ops.IdempotencyRecord, map[string]types.AttributeValue, error) {
	ex, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, nil, fmt.Errorf("build pending query: %w", err)
	}
	in := &dynamodb.QueryInput{
		TableName: aws.String(s.table), IndexName: aws.String(IndexName),
		KeyConditionExpression: ex.KeyCondition(), ExpressionAttributeNames: ex.Names(),
		ExpressionAttributeValues: ex.Values(), ExclusiveStartKey: start,
	}
	if limit > 0 {
		in.Limit = aws.Int32(int32(min(limit, 1000)))
	}
	page, err := s.db.Query(ctx, in)
	if err != nil {
		return nil, nil, dynerr.Translate(err)
	}
	out := make([]ops.IdempotencyRecord, 0, len(page.Items))
	for _, it := range page.Items {
		var r ops.IdempotencyRecord
		if err := unmarshal(it, &r); err != nil {
			return nil, nil, err
		}
		if due, ok := keys.ParseOutboxPendingSK(r.PendingSK); ok && r.LeaseUntil == 0 && r.NotBefore == 0 {
			// The index projects no lease or not-before: the due
			// instant is the sort key's, so DueAt stays true.
			r.NotBefore = due.UnixMilli()
		}
		out = append(out, r)
	}
	return out, page.LastEvaluatedKey, nil
}
