package fetch

import (
	"context"

	"github.com/commitcollect/backend/handlers/ingest/budget"
	"github.com/commitcollect/backend/model/strava"
)

// countedFetcher counts every GetActivity on the caller's context.
type countedFetcher struct{ ActivityFetcher }

func (c countedFetcher) GetActivity(ctx context.Context, token string, id int64) (strava.Activity, strava.RateLimit, error) {
	budget.CountRead(ctx)
	return c.ActivityFetcher.GetActivity(ctx, token, id)
}
