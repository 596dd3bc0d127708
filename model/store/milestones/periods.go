package milestones

import (
	"context"
	"fmt"

	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ports"
	"github.com/commitcollect/backend/model/store/dynamo"
)

// Periods reads a series' periods by their first days: a page of a long
// series' answer reads the periods it shows, never all 1,040.
type Periods struct {
	DB *dynamo.DB
}

// NewPeriods returns the period reader of db.
func NewPeriods(db *dynamo.DB) *Periods { return &Periods{DB: db} }

// SeriesPeriodsBetween reads the periods of a user's series whose first
// days are from through through (YYYY-MM-DD, through included), with their
// awards, every page of them (periods never projected are absent).
func (s *Periods) SeriesPeriodsBetween(ctx context.Context, userID, milestoneID, from, through string) (map[string]ports.SeriesPeriod, error) {
	out := map[string]ports.SeriesPeriod{}
	last := keys.SeriesPeriodSK(milestoneID, through) + "\uffff" // the period's awards follow it
	for start := keys.SeriesPeriodSK(milestoneID, from); ; {
		res, err := s.DB.QueryPrefix(ctx, s.DB.Tables().Main, keys.UserPK(userID), start, dynamo.QueryOptions{Through: last})
		if err != nil {
			return nil, fmt.Errorf("periods %s to %s of series %s: %w", from, through, milestoneID, err)
		}
		if err := addPeriodItems(out, res.Items); err != nil {
			return nil, fmt.Errorf("periods %s to %s of series %s: %w", from, through, milestoneID, err)
		}
		if !res.Truncated {
			return out, nil
		}
		k, err := dynamo.KeyOf(res.Next)
		if err != nil {
			return nil, fmt.Errorf("periods %s to %s of series %s: %w", from, through, milestoneID, err)
		}
		start = k.SK
	}
}
