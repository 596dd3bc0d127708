package milestones

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store/dynamo"
)

// The collection's summary: per model, how many of the user's awards hold
// each part (keys.CollectionSummarySK, one item a model, a count a part),
// so GET /v1/collection reads one Query of a few items however many awards
// the user holds. It counts exactly the entries marked summarized: every
// write that marks an entry (a mint, CollectAwards, SummarizeCollection)
// adds to the summary in the same transaction, and only when the entry was
// not marked before. Entries written before the summary are counted by
// SummarizeCollection, which then writes the header
// (keys.CollectionSummaryHeaderSK); without the header the summary is
// partial and readers count the entries themselves.

// attrSummarized marks a collection entry the summary counts.
const attrSummarized = "summarized"

// summaryUpdates are the transaction items adding awards to the summary:
// one update a model (a transaction may not touch an item twice).
func summaryUpdates(t dynamo.Tables, awards []*model.Award) ([]types.TransactWriteItem, error) {
	byModel := map[string]map[int]int{}
	for _, a := range awards {
		if byModel[a.ModelID] == nil {
			byModel[a.ModelID] = map[int]int{}
		}
		byModel[a.ModelID][a.PartIndex]++
	}
	var out []types.TransactWriteItem
	for _, modelID := range slices.Sorted(maps.Keys(byModel)) {
		upd := expression.Set(expression.Name("modelId"), expression.Value(modelID))
		// In part order: the same write gives the same request, so a
		// retry under the transaction's token is recognised as itself.
		for _, part := range slices.Sorted(maps.Keys(byModel[modelID])) {
			upd = upd.Add(expression.Name(keys.CollectionSummaryPart(part)), expression.Value(byModel[modelID][part]))
		}
		ex, err := expression.NewBuilder().WithUpdate(upd).Build()
		if err != nil {
			return nil, fmt.Errorf("build summary update of model %s: %w", modelID, err)
		}
		out = append(out, types.TransactWriteItem{Update: &types.Update{TableName: aws.String(t.Main),
			Key:              t.KeyAV(t.Main, keys.CollectionSummaryKey(awards[0].UserID, modelID)),
			UpdateExpression: ex.Update(), ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values()}})
	}
	return out, nil
}

// CollectionSummary reads the user's collection summary: per model, the
// count of awards of each part held. complete is false while entries
// written before the summary are not counted yet (no header): the counts
// are then partial. One Query of the summary's items (a model each).
func (s *Collection) CollectionSummary(ctx context.Context, userID string) (sums map[string]map[int]int, complete bool, err error) {
	sums = map[string]map[int]int{}
	err = dynamo.QueryEach(ctx, s.DB, s.DB.Tables().Main, keys.UserPK(userID), keys.PrefixCollectionSummary, dynamo.QueryOptions{},
		func(items []dynamo.Item) error {
			for _, it := range items {
				k, err := dynamo.KeyOf(it)
				if err != nil {
					return err
				}
				if k.SK == keys.CollectionSummaryHeaderSK {
					complete = true
					continue
				}
				var row map[string]any
				if err := attributevalue.UnmarshalMap(it, &row); err != nil {
					return err
				}
				modelID, _ := row["modelId"].(string)
				parts := map[int]int{}
				for attr, v := range row {
					if i, ok := keys.ParseCollectionSummaryPart(attr); ok {
						if n, _ := v.(float64); n > 0 {
							parts[i] = int(n)
						}
					}
				}
				if modelID != "" && len(parts) > 0 {
					sums[modelID] = parts
				}
			}
			return nil
		})
	if err != nil {
		return nil, false, fmt.Errorf("read collection summary of user %s: %w", userID, err)
	}
	return sums, complete, nil
}

// summaryHeader is the summary's header item: written once every entry of
// the user's collection is counted.
type summaryHeader struct {
	PK, SK       string
	UpdatedAtUtc time.Time `dynamodbav:"updatedAtUtc"`
}

// SummarizeCollection counts in the summary the entries of the user's
// collection written before it (not marked summarized), at most limit of
// them (0: all), each with one transaction that marks the entry (only if
// unmarked) and adds it; once every entry is counted it writes the header,
// and from then on the summary is the whole collection. Safe beside mints
// and re-runs: an entry is counted once. It returns how many entries it
// counted and whether the header is written.
func (s *Collection) SummarizeCollection(ctx context.Context, userID string, limit int) (counted int, done bool, err error) {
	errLimit := errors.New("limit reached")
	mark, err := expression.NewBuilder().WithUpdate(expression.Set(expression.Name(attrSummarized), expression.Value(true))).
		WithCondition(expression.AttributeExists(expression.Name("PK")).And(expression.AttributeNotExists(expression.Name(attrSummarized)))).Build()
	if err != nil {
		return 0, false, fmt.Errorf("summarize collection of user %s: %w", userID, err)
	}
	err = dynamo.QueryEach(ctx, s.DB, s.DB.Tables().Main, keys.UserPK(userID), keys.PrefixCollected, dynamo.QueryOptions{},
		func(items []dynamo.Item) error {
			for _, it := range items {
				if _, marked := it[attrSummarized]; marked {
					continue
				}
				if limit > 0 && counted == limit {
					return errLimit
				}
				var a model.Award
				if err := dynamo.Unmarshal(it, &a); err != nil {
					return err
				}
				sums, err := summaryUpdates(s.DB.Tables(), []*model.Award{&a})
				if err != nil {
					return err
				}
				k, _ := dynamo.KeyOf(it)
				upd := types.TransactWriteItem{Update: &types.Update{TableName: aws.String(s.DB.Tables().Main),
					Key: s.DB.Tables().KeyAV(s.DB.Tables().Main, k), UpdateExpression: mark.Update(), ConditionExpression: mark.Condition(),
					ExpressionAttributeNames: mark.Names(), ExpressionAttributeValues: mark.Values()}}
				switch err := s.DB.Transact(ctx, append([]types.TransactWriteItem{upd}, sums...), ""); {
				case errors.Is(err, model.ErrConflict): // counted meanwhile
				case err != nil:
					return err
				default:
					counted++
				}
			}
			return nil
		})
	if errors.Is(err, errLimit) {
		return counted, false, nil
	}
	if err != nil {
		return counted, false, fmt.Errorf("summarize collection of user %s: %w", userID, err)
	}
	header, err := attributevalue.MarshalMap(summaryHeader{PK: keys.UserPK(userID), SK: keys.CollectionSummaryHeaderSK, UpdatedAtUtc: s.DB.Now().UTC()})
	if err == nil {
		err = s.DB.BatchPutItems(ctx, s.DB.Tables().Main, []dynamo.Item{header})
	}
	if err != nil {
		return counted, false, fmt.Errorf("summarize collection of user %s: write the header: %w", userID, err)
	}
	return counted, true, nil
}
