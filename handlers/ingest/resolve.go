package ingest

import "context"

// AthleteResolver finds the user a Strava athlete is linked to (the
// DynamoDB adapter's users, by the athlete's OWNER item).
type AthleteResolver interface {
	// ResolveAthlete returns the athlete's user; ErrNotFound when unlinked.
	ResolveAthlete(ctx context.Context, athleteID int64) (string, error)
}
