package milestones

import (
	"context"
	"errors"
	"fmt"

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
		if err := dynamo.QueryEach(ctx, s.DB, s.Tables().Main, keys.UserPK(userID), prefix, dynamo.QueryOptions{}, func(items []dynamo.Item) error {
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
// AWARD_MINTED entries). A period already started is left as it is.
func (s *Milestones) StartPeriod(ctx context.Context, p *model.Milestone) error {
	if p.PeriodOf == "" {
		return fmt.Errorf("start period of series %s: no first day: %w", p.MilestoneID, model.ErrInvalid)
	}
	if err := s.PutIfAbsent(ctx, s.Tables().Main, p); err != nil && !errors.Is(err, model.ErrConflict) {
		return fmt.Errorf("start period %s of series %s: %w", p.PeriodOf, p.MilestoneID, err)
	}
	return nil
}
