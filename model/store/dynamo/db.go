package dynamo

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/store/dynerr"
)

// Client returns the store's DynamoDB client (the injected one plus the
// capacity middleware: calls made with a metered context are accounted).
func (s *DB) Client() *dynamodb.Client { return s.db }

// Tables returns the table names this store uses.
func (s *DB) Tables() Tables { return s.t }

// KeyAV renders a key for table: the idempotency table has only a hash key.
func (t Tables) KeyAV(table string, k model.Key) Item {
	if table == t.Idempotency {
		return Item{"IdempotencyKey": &types.AttributeValueMemberS{Value: k.PK}}
	}
	return Item{
		"PK": &types.AttributeValueMemberS{Value: k.PK},
		"SK": &types.AttributeValueMemberS{Value: k.SK},
	}
}

func (t Tables) hashKeyName(table string) string {
	if table == t.Idempotency {
		return "IdempotencyKey"
	}
	return "PK"
}

// Get reads the item at k into e. It returns ErrNotFound when it does not
// exist and ErrUnsupportedSchema when it was written by newer code.
func (s *DB) Get(ctx context.Context, table string, k model.Key, e model.Entity) error {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(table), Key: s.t.KeyAV(table, k), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return fmt.Errorf("get %s: %w", k, dynerr.Translate(err))
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
func (s *DB) Put(ctx context.Context, table string, e model.Entity) error {
	return s.put(ctx, table, e, nil)
}

// PutIfAbsent writes e only if no item has its key; it returns ErrConflict
// when one does.
func (s *DB) PutIfAbsent(ctx context.Context, table string, e model.Entity) error {
	cond := expression.AttributeNotExists(expression.Name(s.t.hashKeyName(table)))
	return s.put(ctx, table, e, &cond)
}

// PutIf writes e only if cond holds on the stored item; ErrConflict otherwise.
func (s *DB) PutIf(ctx context.Context, table string, e model.Entity, cond expression.ConditionBuilder) error {
	return s.put(ctx, table, e, &cond)
}

func (s *DB) put(ctx context.Context, table string, e model.Entity, cond *expression.ConditionBuilder) error {
	if c, ok := e.(*model.StravaConnection); ok {
		if err := s.SealConnectionTokens(ctx, c); err != nil {
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
		return fmt.Errorf("put %s: %w", e.ItemKey(), dynerr.Translate(err))
	}
	return nil
}

// Delete removes the item at k; deleting a missing item is not an error.
func (s *DB) Delete(ctx context.Context, table string, k model.Key) error {
	return s.DeleteIf(ctx, table, k, nil)
}

// DeleteIf removes the item at k only if cond (nil: none) holds; ErrConflict
// otherwise.
func (s *DB) DeleteIf(ctx context.Context, table string, k model.Key, cond *expression.ConditionBuilder) error {
	in := &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: s.t.KeyAV(table, k)}
	if cond != nil {
		ex, err := expression.NewBuilder().WithCondition(*cond).Build()
		if err != nil {
			return fmt.Errorf("delete %s: build condition: %w", k, err)
		}
		in.ConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues = ex.Condition(), ex.Names(), ex.Values()
	}
	if _, err := s.db.DeleteItem(ctx, in); err != nil {
		return fmt.Errorf("delete %s: %w", k, dynerr.Translate(err))
	}
	return nil
}

// Take deletes the item at k and reads what it held into e, in one
// request, so only one caller ever takes it (a one-use item such as a login
// state). It returns ErrNotFound when there was none.
func (s *DB) Take(ctx context.Context, table string, k model.Key, e model.Entity) error {
	out, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(table), Key: s.t.KeyAV(table, k), ReturnValues: types.ReturnValueAllOld,
	})
	if err != nil {
		return fmt.Errorf("take %s: %w", k, dynerr.Translate(err))
	}
	if len(out.Attributes) == 0 {
		return fmt.Errorf("take %s: %w", k, model.ErrNotFound)
	}
	if err := Unmarshal(out.Attributes, e); err != nil {
		return fmt.Errorf("take %s: %w", k, err)
	}
	return nil
}

// UpdateVersioned applies changes to the item at k only if its version
// attribute equals expected, and sets version to expected+1. It returns
// ErrConflict when the version moved (or the item is gone) and the new item
// on success.
func (s *DB) UpdateVersioned(ctx context.Context, table string, k model.Key, expected int64, c Changes) (Item, error) {
	in, err := s.VersionedUpdateInput(table, k, expected, c)
	if err != nil {
		return nil, err
	}
	in.ReturnValues = types.ReturnValueAllNew
	out, err := s.db.UpdateItem(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("update %s at version %d: %w", k, expected, dynerr.Translate(err))
	}
	return out.Attributes, nil
}

// VersionedUpdateInput builds the conditional update UpdateVersioned sends,
// so a transaction can carry the same update (see TransactUpdate).
func (s *DB) VersionedUpdateInput(table string, k model.Key, expected int64, c Changes) (*dynamodb.UpdateItemInput, error) {
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
		TableName: aws.String(table), Key: s.t.KeyAV(table, k),
		ConditionExpression: ex.Condition(), UpdateExpression: ex.Update(),
		ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
	}, nil
}

// TransactPutIfAbsent builds a transaction item that creates e only if its
// key is free.
func (s *DB) TransactPutIfAbsent(table string, e model.Entity) (types.TransactWriteItem, error) {
	put, err := s.TransactPut(table, e)
	if err != nil {
		return put, err
	}
	ex, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(s.t.hashKeyName(table)))).Build()
	if err != nil {
		return types.TransactWriteItem{}, fmt.Errorf("put %s: build condition: %w", e.ItemKey(), err)
	}
	put.Put.ConditionExpression, put.Put.ExpressionAttributeNames = ex.Condition(), ex.Names()
	return put, nil
}

// TransactPut builds an unconditional transaction put of e.
func (s *DB) TransactPut(table string, e model.Entity) (types.TransactWriteItem, error) {
	if err := unsealedTokens(e); err != nil {
		return types.TransactWriteItem{}, err
	}
	item, err := Marshal(e)
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(table), Item: item}}, nil
}

// Transact writes items atomically. token, when not empty, is the
// ClientRequestToken that makes a retried call idempotent for ten minutes.
// A cancelled transaction returns a *dynerr.TransactionError with one reason
// per item (errors.Is ErrConflict when a condition failed).
func (s *DB) Transact(ctx context.Context, items []types.TransactWriteItem, token string) error {
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
		return fmt.Errorf("transact %d items: %w", len(items), dynerr.Translate(err))
	}
	return nil
}

// QueryPrefix reads the items of partition pk whose sort key begins with
// prefix (all of them when prefix is empty), page by page, stopping at the
// limit (never more than MaxWorkoutsToInspect) and saying so in Truncated.
func (s *DB) QueryPrefix(ctx context.Context, table, pk, prefix string, o QueryOptions) (QueryResult, error) {
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
	switch {
	case o.Through != "":
		kc = kc.And(expression.Key(rk).Between(expression.Value(prefix), expression.Value(o.Through)))
	case prefix != "":
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
	res, err := s.QueryPages(ctx, in, limit)
	if err != nil {
		return QueryResult{}, fmt.Errorf("query %s %s: %w", pk, prefix, err)
	}
	return res, nil
}

// QueryPages runs in page by page and keeps at most limit items (limit may
// be 0). Truncated says more items follow; Next is then the first of them,
// read so the caller learns where the cut fell (one item beyond the limit
// is all it ever reads past it).
func (s *DB) QueryPages(ctx context.Context, in *dynamodb.QueryInput, limit int) (QueryResult, error) {
	var res QueryResult
	for {
		// Ask for one more than we keep so we know whether the log goes on.
		in.Limit = aws.Int32(int32(min(limit-len(res.Items)+1, 1000)))
		out, err := s.db.Query(ctx, in)
		if err != nil {
			return QueryResult{}, dynerr.Translate(err)
		}
		res.Items = append(res.Items, out.Items...)
		if len(res.Items) > limit {
			res.Next = res.Items[limit]
			res.Items, res.Truncated = res.Items[:limit], true
			return res, nil
		}
		if len(out.LastEvaluatedKey) == 0 {
			return res, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// Update runs one UpdateItem on the main table with an optional condition.
func (s *DB) Update(ctx context.Context, k model.Key, upd expression.UpdateBuilder, cond ...expression.ConditionBuilder) error {
	return s.UpdateIn(ctx, s.t.Main, k, upd, cond...)
}

// UpdateIn applies upd to the item k of table under cond (if given); a
// failed condition matches model.ErrConflict.
func (s *DB) UpdateIn(ctx context.Context, table string, k model.Key, upd expression.UpdateBuilder, cond ...expression.ConditionBuilder) error {
	_, err := s.UpdateReturning(ctx, table, k, types.ReturnValueNone, upd, cond...)
	return err
}

// UpdateReturning is UpdateIn returning the attributes rv asks for.
func (s *DB) UpdateReturning(ctx context.Context, table string, k model.Key, rv types.ReturnValue, upd expression.UpdateBuilder,
	cond ...expression.ConditionBuilder) (Item, error) {
	b := expression.NewBuilder().WithUpdate(upd)
	if len(cond) > 0 {
		b = b.WithCondition(cond[0])
	}
	ex, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("update %s: build expression: %w", k, err)
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: s.t.KeyAV(table, k),
		UpdateExpression: ex.Update(), ConditionExpression: ex.Condition(),
		ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(), ReturnValues: rv,
	})
	if err != nil {
		return nil, fmt.Errorf("update %s: %w", k, dynerr.Translate(err))
	}
	return out.Attributes, nil
}
