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
	"github.com/commitcollect/backend/model/ports"
	"github.com/commitcollect/backend/model/store/dynamo"
)

// SeriesPeriods reads periods of a user's series with their awards: those
// starting on starts (one Query each, keys.SeriesPeriodSK: the period item
// and its awards), or every period when starts is nil (the series' prefix,
// paged to its end: a weekly series of twenty years holds over 13,000
// items). Periods never written are absent from the answer. An item
// written by newer code fails the read (fail closed).
func (s *Milestones) SeriesPeriods(ctx context.Context, userID, milestoneID string, starts []string) (map[string]ports.SeriesPeriod, error) {
	prefixes := []string{keys.SeriesSKPrefix(milestoneID)}
	for i, st := range starts {
		prefixes = append(prefixes[:i], keys.SeriesPeriodSK(milestoneID, st))
	}
	out := map[string]ports.SeriesPeriod{}
	for _, prefix := range prefixes {
		if err := dynamo.QueryEach(ctx, s.DB, s.DB.Tables().Main, keys.UserPK(userID), prefix, dynamo.QueryOptions{}, func(items []dynamo.Item) error {
			return addPeriodItems(out, items)
		}); err != nil {
			return nil, fmt.Errorf("periods of series %s: %w", milestoneID, err)
		}
	}
	return out, nil
}

// addPeriodItems files period items and their awards into out.
func addPeriodItems(out map[string]ports.SeriesPeriod, items []dynamo.Item) error {
	for _, it := range items {
		if m := new(model.Milestone); dynamo.Unmarshal(it, m) == nil && m.PeriodOf != "" && m.EntityType == model.EntityMilestonePeriod {
			out[m.PeriodOf] = ports.SeriesPeriod{Period: m, Awards: out[m.PeriodOf].Awards}
			continue
		}
		var a model.Award
		if err := dynamo.Unmarshal(it, &a); err != nil {
			return err
		}
		p := out[a.PeriodOf]
		if p.Awards == nil {
			p.Awards = map[int]model.Award{}
		}
		p.Awards[a.PartIndex] = a
		out[a.PeriodOf] = p
	}
	return nil
}

// StartPeriod writes a series' period item the first time the period is
// projected: version 0, so the projection's versioned write follows as for
// any milestone, and its createdAtUtc fixed once (the key of its awards'
// AWARD_MINTED entries). It is one transaction with a check that the
// series still exists, so a projector racing the series' deletion never
// puts a period back. A period already started is left as it is, and p
// takes its createdAtUtc: two projectors starting one period file their
// award audits under the one the item keeps. ErrConflict when the series
// is gone.
func (s *Milestones) StartPeriod(ctx context.Context, p *model.Milestone) error {
	if p.PeriodOf == "" {
		return fmt.Errorf("start period of series %s: no first day: %w", p.MilestoneID, model.ErrInvalid)
	}
	put, err := s.DB.TransactPutIfAbsent(s.DB.Tables().Main, p)
	if err != nil {
		return fmt.Errorf("start period %s of series %s: %w", p.PeriodOf, p.MilestoneID, err)
	}
	exists, err := seriesExists(s.DB.Tables(), p.UserID, p.MilestoneID)
	if err != nil {
		return fmt.Errorf("start period %s of series %s: %w", p.PeriodOf, p.MilestoneID, err)
	}
	err = s.DB.Transact(ctx, []types.TransactWriteItem{put, exists}, "")
	if !errors.Is(err, model.ErrConflict) {
		if err != nil {
			return fmt.Errorf("start period %s of series %s: %w", p.PeriodOf, p.MilestoneID, err)
		}
		return nil
	}
	// The period's item sorts first under its prefix (its awards follow):
	// a Query of one item, the projector's grant (it has no GetItem).
	res, qerr := s.DB.QueryPrefix(ctx, s.DB.Tables().Main, keys.UserPK(p.UserID), keys.SeriesPeriodSK(p.MilestoneID, p.PeriodOf), dynamo.QueryOptions{Limit: 1})
	var stored model.Milestone
	if qerr != nil || len(res.Items) == 0 || dynamo.Unmarshal(res.Items[0], &stored) != nil || stored.PeriodOf != p.PeriodOf {
		// No period item: the series' check failed (deleted), or the
		// period went with it since.
		return fmt.Errorf("start period %s of series %s: the series is gone: %w", p.PeriodOf, p.MilestoneID, errors.Join(err, qerr))
	}
	p.CreatedAtUtc = stored.CreatedAtUtc
	return nil
}

// seriesExists is a transaction item that fails unless the series' item
// (any milestone's item) still exists: a period's first write, or a mint
// on a period's own item, loses to the series' deletion.
func seriesExists(t dynamo.Tables, userID, milestoneID string) (types.TransactWriteItem, error) {
	ex, err := expression.NewBuilder().WithCondition(expression.AttributeExists(expression.Name("PK"))).Build()
	if err != nil {
		return types.TransactWriteItem{}, fmt.Errorf("build series check: %w", err)
	}
	return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName: aws.String(t.Main), Key: t.KeyAV(t.Main, keys.MilestoneKey(userID, milestoneID)),
		ConditionExpression: ex.Condition(), ExpressionAttributeNames: ex.Names(),
	}}, nil
}
