package milestones

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store/dynamo"
)

// Collection is the user's collection: every award minted, filed a second
// time by the time it was minted (USER#{userId} / AWARD#{awardedAtUtc}#…,
// keys.CollectedAwardSK), so it pages newest first with one Query and
// outlives its milestone. The projector files each award in the mint's
// transaction (WriteProjection); awards minted before the collection are
// filed by CollectAwards.
type Collection struct {
	DB *dynamo.DB
	// Deleting, when set, is called once a deletion has read the
	// milestone, before its transaction: tests order a race there.
	Deleting func(userID, milestoneID string)
}

// collectedItem renders a's collection entry: the award itself, under its
// collection key, marked collected, and summarized: the collection's
// summary counts it (summaryUpdate, in the same transaction).
func collectedItem(a *model.Award) (dynamo.Item, error) {
	c := *a
	c.Collected = true
	item, err := dynamo.Marshal(&c)
	if err != nil {
		return nil, err
	}
	k := a.CollectedKey()
	item["PK"], item["SK"] = &types.AttributeValueMemberS{Value: k.PK}, &types.AttributeValueMemberS{Value: k.SK}
	item[attrSummarized] = &types.AttributeValueMemberBOOL{Value: true}
	return item, nil
}

// transactCollect is the Put of a's collection entry, only if absent.
func transactCollect(t dynamo.Tables, a *model.Award) (types.TransactWriteItem, error) {
	item, err := collectedItem(a)
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(t.Main), Item: item,
		ConditionExpression: aws.String("attribute_not_exists(PK)")}}, nil
}

// CollectAwards files award items minted before the collection existed
// (Collected false): for each, one transaction puts its entry, counts it
// in the collection's summary and marks the award item collected, so it
// runs once per award. An entry already filed but not summarized (written
// before the summary) is rewritten and counted; one summarized already is
// a conflict, and nothing is written twice.
func (s *Collection) CollectAwards(ctx context.Context, awards []model.Award) error {
	for i := range awards {
		a := &awards[i]
		put, err := transactCollect(s.DB.Tables(), a)
		if err != nil {
			return fmt.Errorf("collect award %d of milestone %s: %w", a.PartIndex, a.MilestoneID, err)
		}
		fresh, err := expression.NewBuilder().WithCondition(expression.Or(expression.AttributeNotExists(expression.Name("PK")),
			expression.AttributeNotExists(expression.Name(attrSummarized)))).Build()
		if err != nil {
			return fmt.Errorf("collect award %d of milestone %s: %w", a.PartIndex, a.MilestoneID, err)
		}
		put.Put.ConditionExpression, put.Put.ExpressionAttributeNames = fresh.Condition(), fresh.Names()
		upd := expression.Set(expression.Name("collected"), expression.Value(true))
		ex, err := expression.NewBuilder().WithUpdate(upd).WithCondition(expression.AttributeExists(expression.Name("PK"))).Build()
		if err != nil {
			return fmt.Errorf("collect award %d of milestone %s: %w", a.PartIndex, a.MilestoneID, err)
		}
		mark := types.TransactWriteItem{Update: &types.Update{TableName: aws.String(s.DB.Tables().Main),
			Key: s.DB.Tables().KeyAV(s.DB.Tables().Main, a.ItemKey()), UpdateExpression: ex.Update(), ConditionExpression: ex.Condition(),
			ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values()}}
		sums, err := summaryUpdates(s.DB.Tables(), []*model.Award{a})
		if err != nil {
			return fmt.Errorf("collect award %d of milestone %s: %w", a.PartIndex, a.MilestoneID, err)
		}
		if err := s.DB.Transact(ctx, append([]types.TransactWriteItem{mark, put}, sums...), ""); err != nil && !errors.Is(err, model.ErrConflict) {
			return fmt.Errorf("collect award %d of milestone %s: %w", a.PartIndex, a.MilestoneID, err)
		}
	}
	return nil
}

// CollectedAwards reads a page of the user's collection, newest first:
// after, when not empty, is the cursor a previous page returned; at most
// limit awards. next is the cursor of the following page, empty on the
// last. An entry written by newer code fails the read (fail closed).
func (s *Collection) CollectedAwards(ctx context.Context, userID, after string, limit int) (awards []model.Award, next string, err error) {
	o := dynamo.QueryOptions{Descending: true, Limit: limit + 1}
	if after != "" {
		o.Limit++ // the cursor's own entry comes first
		if _, _, _, ok := keys.ParseCollectedAwardSK(after); !ok {
			return nil, "", fmt.Errorf("awards of user %s after %q: not a cursor: %w", userID, after, model.ErrInvalid)
		}
		o.Through = after
	}
	res, err := s.DB.QueryPrefix(ctx, s.DB.Tables().Main, keys.UserPK(userID), keys.PrefixCollected, o)
	if err != nil {
		return nil, "", fmt.Errorf("awards of user %s: %w", userID, err)
	}
	items := res.Items
	if after != "" && len(items) > 0 {
		if k, err := dynamo.KeyOf(items[0]); err == nil && k.SK == after {
			items = items[1:]
		}
	}
	for _, it := range items {
		if len(awards) == limit {
			return awards, awards[len(awards)-1].SK, nil
		}
		var a model.Award
		if err := dynamo.Unmarshal(it, &a); err != nil {
			return nil, "", fmt.Errorf("awards of user %s: %w", userID, err)
		}
		awards = append(awards, a)
	}
	return awards, "", nil
}

// milestoneCount reads the user's count item, first writing it from their
// milestones when it does not exist yet: a deletion that skipped a missing
// count raced a creation that counted the milestone it deleted (n + 1
// stored, a slot lost for good); once the item exists, both condition on
// it.
func (s *Collection) milestoneCount(ctx context.Context, userID string) (model.MilestoneCount, error) {
	var cnt model.MilestoneCount
	err := s.DB.Get(ctx, s.DB.Tables().Main, keys.MilestoneCountKey(userID), &cnt)
	if !errors.Is(err, model.ErrNotFound) {
		return cnt, err
	}
	n, err := (&Milestones{DB: s.DB}).countMilestones(ctx, userID)
	if err != nil {
		return cnt, err
	}
	cnt = model.MilestoneCount{UserID: userID, Count: n, UpdatedAtUtc: s.DB.Now().UTC()}
	if err := s.DB.PutIfAbsent(ctx, s.DB.Tables().Main, &cnt); err != nil && !errors.Is(err, model.ErrConflict) {
		return cnt, err
	}
	err = s.DB.Get(ctx, s.DB.Tables().Main, keys.MilestoneCountKey(userID), &cnt) // ours, or the creation's that came first
	return cnt, err
}

// DeleteMilestone deletes a user's milestone: its awards are filed in the
// collection first (where they stay: awards are permanent), then one
// transaction deletes the milestone (only if it exists) and uncounts it
// from the user's limit, then its award items go (read after the
// transaction, see deleteLeftovers), so the projector's read of the
// milestones stays bounded by the milestones that are left. It
// returns ErrNotFound when the user has no such milestone; a crash after
// the transaction leaves award items of no milestone, which every reader
// drops.
func (s *Collection) DeleteMilestone(ctx context.Context, userID, milestoneID string) error {
	ms, _, err := (&Milestones{DB: s.DB}).MilestonesWithAwards(ctx, userID, milestoneID)
	if err != nil {
		return fmt.Errorf("delete milestone %s: %w", milestoneID, err)
	}
	if len(ms) != 1 {
		return fmt.Errorf("delete milestone %s of user %s: %w", milestoneID, userID, model.ErrNotFound)
	}
	var legacy []model.Award
	for _, a := range ms[0].Awards {
		if !a.Collected {
			legacy = append(legacy, a)
		}
	}
	if err := s.CollectAwards(ctx, legacy); err != nil {
		return fmt.Errorf("delete milestone %s: %w", milestoneID, err)
	}
	if s.Deleting != nil {
		s.Deleting(userID, milestoneID)
	}
	gone := expression.AttributeExists(expression.Name("PK"))
	del, err := expression.NewBuilder().WithCondition(gone).Build()
	if err != nil {
		return fmt.Errorf("delete milestone %s: %w", milestoneID, err)
	}
	items := []types.TransactWriteItem{{Delete: &types.Delete{TableName: aws.String(s.DB.Tables().Main),
		Key: s.DB.Tables().KeyAV(s.DB.Tables().Main, keys.MilestoneKey(userID, milestoneID)), ConditionExpression: del.Condition(),
		ExpressionAttributeNames: del.Names()}}}
	cnt, err := s.milestoneCount(ctx, userID)
	if err != nil {
		return fmt.Errorf("delete milestone %s: %w", milestoneID, err)
	}
	count := expression.Name("count")
	ex, err := expression.NewBuilder().WithCondition(count.GreaterThan(expression.Value(0))).
		WithUpdate(expression.Set(count, count.Minus(expression.Value(1))).
			Set(expression.Name("updatedAtUtc"), expression.Value(s.DB.Now().UTC()))).Build()
	if err != nil {
		return fmt.Errorf("delete milestone %s: %w", milestoneID, err)
	}
	items = append(items, types.TransactWriteItem{Update: &types.Update{TableName: aws.String(s.DB.Tables().Main),
		Key: s.DB.Tables().KeyAV(s.DB.Tables().Main, cnt.ItemKey()), UpdateExpression: ex.Update(), ConditionExpression: ex.Condition(),
		ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values()}})
	if err := s.DB.Transact(ctx, items, ""); err != nil {
		return fmt.Errorf("delete milestone %s of user %s: %w", milestoneID, userID, err)
	}
	if err := s.deleteLeftovers(ctx, userID, milestoneID); err != nil {
		return fmt.Errorf("delete award items and periods of milestone %s: %w", milestoneID, err)
	}
	return nil
}

// deleteLeftovers deletes a deleted milestone's award items, and a
// series' periods and their awards, each prefix read to its end (a long
// series holds more than one query's page). The keys are read after the
// milestone's item is gone: every mint conditions on that item (a
// period's own item through the series' check), so none lands after this
// read.
func (s *Collection) deleteLeftovers(ctx context.Context, userID, milestoneID string) error {
	var ks []model.Key
	var errs []error
	for _, prefix := range []string{keys.AwardSKPrefix(milestoneID), keys.SeriesSKPrefix(milestoneID)} {
		errs = append(errs, dynamo.QueryEach(ctx, s.DB, s.DB.Tables().Main, keys.UserPK(userID), prefix,
			dynamo.QueryOptions{Projection: []string{"PK", "SK"}}, func(items []dynamo.Item) error {
				for _, it := range items {
					if k, kerr := dynamo.KeyOf(it); kerr == nil {
						ks = append(ks, k)
					}
				}
				return nil
			}))
	}
	return errors.Join(append(errs, s.DB.BatchDelete(ctx, s.DB.Tables().Main, ks))...)
}
