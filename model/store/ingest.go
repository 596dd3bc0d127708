package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/commitcollect/backend/model"
)

// Typed operations of the ingestion path (webhook, worker, token refresher).
// Their consumers declare the interfaces (handlers/ingest, model/strava).

// Attribute names the ingestion path writes outside a full-item Put.
const (
	attrTokenVersion      = "tokenVersion"
	attrRefreshLeaseUntil = "refreshLeaseUntil" // epoch seconds; absent = no refresh in flight
	attrCreatedAtUtc      = "createdAtUtc"
	attrIsDeleted         = "isDeleted"
	attrDeletedAtUtc      = "deletedAtUtc"
	attrDeletedReason     = "deletedReason"
	attrFetchStartedAtNs  = "fetchStartedAtNs"
)

// ResolveAthlete returns the user a Strava athlete belongs to: the
// STRAVA#ATHLETE#{id}/OWNER item, else the connection found through GSI1.
// It returns ErrNotFound when the athlete is not linked.
func (s *Store) ResolveAthlete(ctx context.Context, athleteID int64) (string, error) {
	var o model.AthleteOwner
	err := s.Get(ctx, s.t.Main, model.AthleteOwnerKey(athleteID), &o)
	if err == nil {
		return o.UserID, nil
	}
	if !errors.Is(err, model.ErrNotFound) {
		return "", fmt.Errorf("resolve athlete %d: %w", athleteID, err)
	}
	conns, _, err := QueryEntities[model.StravaConnection](ctx, s, s.t.Main, model.AthletePK(athleteID), "",
		QueryOptions{Index: IndexGSI1, Limit: 1})
	if err != nil {
		return "", fmt.Errorf("resolve athlete %d via %s: %w", athleteID, IndexGSI1, err)
	}
	if len(conns) == 0 || conns[0].UserID == "" {
		return "", fmt.Errorf("resolve athlete %d: %w", athleteID, model.ErrNotFound)
	}
	return conns[0].UserID, nil
}

// StravaConnection reads a user's Strava connection (consistent read),
// opening its tokens under the item's key (tokens.go). It returns
// ErrNotFound when the user has none, and an error matching ErrInvalid when
// the tokens do not open there (an item copied from another user's key).
func (s *Store) StravaConnection(ctx context.Context, userID string) (*model.StravaConnection, error) {
	var c model.StravaConnection
	k := model.StravaConnectionKey(userID)
	if err := s.Get(ctx, s.t.Main, k, &c); err != nil {
		return nil, fmt.Errorf("read strava connection of %s: %w", userID, err)
	}
	if err := s.openConnection(ctx, k, &c); err != nil {
		return nil, fmt.Errorf("read strava connection of %s: %w", userID, err)
	}
	return &c, nil
}

// AcquireTokenRefreshLease marks a refresh of the user's token as in flight
// until `until`, only if the token is still at version and no other lease is
// live at now. It returns ErrConflict when another worker holds the lease or
// the token already moved on (or the connection is gone).
func (s *Store) AcquireTokenRefreshLease(ctx context.Context, userID string, version int64, now, until time.Time) error {
	lease := expression.Name(attrRefreshLeaseUntil)
	cond := expression.Name(attrTokenVersion).Equal(expression.Value(version)).And(
		expression.Or(expression.AttributeNotExists(lease), lease.LessThan(expression.Value(now.Unix()))))
	upd := expression.Set(lease, expression.Value(until.Unix()))
	if err := s.update(ctx, model.StravaConnectionKey(userID), upd, cond); err != nil {
		return fmt.Errorf("acquire token refresh lease of %s at version %d: %w", userID, version, err)
	}
	return nil
}

// ReleaseTokenRefreshLease drops a refresh lease taken at version (after a
// refresh that failed transiently) so the next worker need not wait for it
// to lapse. A lease that is gone or belongs to a newer version is left alone.
func (s *Store) ReleaseTokenRefreshLease(ctx context.Context, userID string, version int64) error {
	cond := expression.Name(attrTokenVersion).Equal(expression.Value(version))
	upd := expression.Remove(expression.Name(attrRefreshLeaseUntil))
	if err := s.update(ctx, model.StravaConnectionKey(userID), upd, cond); err != nil && !isConflict(err) {
		return fmt.Errorf("release token refresh lease of %s at version %d: %w", userID, version, err)
	}
	return nil
}

// SaveRefreshedToken persists a rotated token pair only if the connection is
// still at expectedVersion, bumps tokenVersion, clears the refresh lease and
// any re-authorization flag, and returns the new version. It returns
// ErrConflict when another writer got there first.
func (s *Store) SaveRefreshedToken(ctx context.Context, userID string, expectedVersion int64, access, refresh string, expiresAt, now time.Time) (int64, error) {
	cond := expression.Name(attrTokenVersion).Equal(expression.Value(expectedVersion))
	upd, err := s.sealedTokensUpdate(ctx, userID, access, refresh)
	if err != nil {
		return 0, fmt.Errorf("save refreshed token at version %d: %w", expectedVersion, err)
	}
	upd = upd.Set(expression.Name("expiresAtUtc"), expression.Value(expiresAt.UTC())).
		Set(expression.Name("updatedAtUtc"), expression.Value(now.UTC())).
		Set(expression.Name(attrTokenVersion), expression.Value(expectedVersion+1)).
		Set(expression.Name("needsReauth"), expression.Value(false)).
		Remove(expression.Name(attrRefreshLeaseUntil))
	if err := s.update(ctx, model.StravaConnectionKey(userID), upd, cond); err != nil {
		return 0, fmt.Errorf("save refreshed token of %s at version %d: %w", userID, expectedVersion, err)
	}
	return expectedVersion + 1, nil
}

// MarkNeedsReauth flags the user's connection as needing re-authorization
// (Strava refused its tokens) at now (needsReauthAtUtc) and drops any
// refresh lease. It leaves updatedAtUtc, which only logins and successful
// refreshes move (the grant time of connections written before grantedAtUtc
// existed, model.StravaConnection.GrantTime). It returns ErrNotFound when
// the connection is gone.
func (s *Store) MarkNeedsReauth(ctx context.Context, userID string, now time.Time) error {
	cond := expression.AttributeExists(expression.Name("PK"))
	upd := expression.Set(expression.Name("needsReauth"), expression.Value(true)).
		Set(expression.Name("needsReauthAtUtc"), expression.Value(now.UTC())).
		Remove(expression.Name(attrRefreshLeaseUntil))
	if err := s.update(ctx, model.StravaConnectionKey(userID), upd, cond); err != nil {
		if isConflict(err) {
			err = model.ErrNotFound
		}
		return fmt.Errorf("mark connection of %s as needing reauth: %w", userID, err)
	}
	return nil
}

// UpsertWorkout writes the full normalized workout, keeping the stored
// createdAtUtc when the item exists (w.CreatedAtUtc is used only for a new
// item) and a pending TTL (expiresAt) unless w sets one: a write never
// cancels the deletion a deauthorization scheduled (only a reconnect does,
// UnexpireStravaWorkouts), and one that lands after a deauthorization gets
// that expiry from the user guard (checkGuard).
//
// Writes are ordered by w.FetchStartedAtNs (when set): the write is refused
// with ErrConflict unless the stored item has no fetch instant or an older
// one, so an answer fetched earlier never overwrites one fetched later. The
// order alone decides, whether the stored item is a tombstone or not: a
// tombstone (MarkWorkoutHidden, or a legacy one without a fetch instant)
// is revived by a newer answer that shows the activity (isDeleted false,
// deletedAtUtc and deletedReason removed), and a tombstone confirmed by a
// newer fetch refuses an older answer. Without FetchStartedAtNs (callers
// that do not order) a workout marked deleted stays deleted (ErrConflict).
func (s *Store) UpsertWorkout(ctx context.Context, w *model.Workout) error {
	item, err := Marshal(w)
	if err != nil {
		return err
	}
	var upd expression.UpdateBuilder
	for name, v := range item {
		switch name {
		case "PK", "SK":
			continue
		case attrCreatedAtUtc:
			upd = upd.Set(expression.Name(name), expression.IfNotExists(expression.Name(name), expression.Value(v)))
		default:
			upd = upd.Set(expression.Name(name), expression.Value(v))
		}
	}
	if !w.IsDeleted {
		// Strava shows the activity: whatever hid it no longer holds.
		upd = upd.Remove(expression.Name(attrDeletedAtUtc)).Remove(expression.Name(attrDeletedReason))
	}
	var cond expression.ConditionBuilder
	if w.FetchStartedAtNs > 0 {
		fetched := expression.Name(attrFetchStartedAtNs)
		cond = expression.Or(expression.AttributeNotExists(fetched),
			fetched.LessThan(expression.Value(w.FetchStartedAtNs)))
	} else {
		cond = expression.Or(expression.AttributeNotExists(expression.Name("PK")),
			expression.AttributeNotExists(expression.Name(attrIsDeleted)),
			expression.Name(attrIsDeleted).NotEqual(expression.Value(true)))
	}
	if err := s.update(ctx, w.ItemKey(), upd, cond); err != nil {
		if isConflict(err) {
			return fmt.Errorf("upsert workout %d of %s: an answer fetched later (or, unordered, a tombstone) is stored: %w", w.ActivityID, w.UserID, err)
		}
		return fmt.Errorf("upsert workout %d of %s: %w", w.ActivityID, w.UserID, err)
	}
	if err := s.checkGuard(ctx, w.UserID, w.ItemKey()); err != nil {
		return fmt.Errorf("upsert workout %d of %s: %w", w.ActivityID, w.UserID, err)
	}
	return nil
}

// TakeAthleteRead counts one Strava read for the athlete in the window of
// length windowLen containing now (model.AthleteReadsKey; the counter expires
// an hour after its window) unless limit reads were already counted there:
// then it returns ErrConflict and counts nothing.
func (s *Store) TakeAthleteRead(ctx context.Context, athleteID int64, now time.Time, windowLen time.Duration, limit int) error {
	window := now.UTC().Truncate(windowLen)
	meta := &model.AthleteReads{AthleteID: athleteID, WindowStartUtc: window}
	meta.Stamp()
	reads := expression.Name("reads")
	upd := expression.Set(expression.Name("entityType"), expression.Value(meta.EntityType)).
		Set(expression.Name("schemaVersion"), expression.Value(meta.SchemaVersion)).
		Set(expression.Name("athleteId"), expression.Value(athleteID)).
		Set(expression.Name("windowStartUtc"), expression.Value(window)).
		Set(expression.Name("expiresAt"), expression.Value(window.Add(windowLen+time.Hour).Unix())).
		Add(reads, expression.Value(1))
	cond := expression.Or(expression.AttributeNotExists(reads), reads.LessThan(expression.Value(limit)))
	if err := s.update(ctx, meta.ItemKey(), upd, cond); err != nil {
		return fmt.Errorf("count a strava read of athlete %d in the window of %s: %w", athleteID, window.Format(time.RFC3339), err)
	}
	return nil
}

// MarkWorkoutHidden records that Strava answered 404 for the activity in a
// fetch that started at fetchStartedAtNs (Unix ns, > 0): it sets isDeleted,
// deletedReason = reason (model.WorkoutHiddenOrDeleted) and the fetch
// instant (never a physical delete), creating a tombstone when the workout
// was never written (a 404 whose write overtook the create's). Like
// UpsertWorkout it is ordered by the fetch: it is refused with ErrConflict
// when the stored item holds an answer fetched later, so the newest fetch
// wins both ways (a later fetch that shows the activity revives it; a 404
// confirmed later wins over older answers). createdAtUtc and deletedAtUtc
// keep their first values.
func (s *Store) MarkWorkoutHidden(ctx context.Context, userID string, athleteID, activityID int64, correlationID, reason string, fetchStartedAtNs int64, now time.Time) error {
	if fetchStartedAtNs <= 0 {
		return fmt.Errorf("mark workout %d of %s hidden: no fetch instant: %w", activityID, userID, model.ErrInvalid)
	}
	w := &model.Workout{UserID: userID, AthleteID: athleteID, ActivityID: activityID}
	w.Stamp()
	now = now.UTC()
	fetched := expression.Name(attrFetchStartedAtNs)
	upd := expression.Set(expression.Name("entityType"), expression.Value(w.EntityType)).
		Set(expression.Name("schemaVersion"), expression.Value(w.SchemaVersion)).
		Set(expression.Name("userId"), expression.Value(userID)).
		Set(expression.Name("athleteId"), expression.Value(athleteID)).
		Set(expression.Name("activityId"), expression.Value(activityID)).
		Set(expression.Name(attrIsDeleted), expression.Value(true)).
		Set(expression.Name(attrDeletedReason), expression.Value(reason)).
		Set(expression.Name(attrDeletedAtUtc), expression.IfNotExists(expression.Name(attrDeletedAtUtc), expression.Value(now))).
		Set(expression.Name(attrCreatedAtUtc), expression.IfNotExists(expression.Name(attrCreatedAtUtc), expression.Value(now))).
		Set(expression.Name("updatedAtUtc"), expression.Value(now)).
		Set(expression.Name("correlationId"), expression.Value(correlationID)).
		Set(fetched, expression.Value(fetchStartedAtNs))
	cond := expression.Or(expression.AttributeNotExists(fetched), fetched.LessThan(expression.Value(fetchStartedAtNs)))
	if err := s.update(ctx, w.ItemKey(), upd, cond); err != nil {
		if isConflict(err) {
			return fmt.Errorf("mark workout %d of %s hidden: an answer fetched later is stored: %w", activityID, userID, err)
		}
		return fmt.Errorf("mark workout %d of %s hidden: %w", activityID, userID, err)
	}
	if err := s.checkGuard(ctx, userID, w.ItemKey()); err != nil {
		return fmt.Errorf("mark workout %d of %s hidden: %w", activityID, userID, err)
	}
	return nil
}

// Workout reads one workout. It returns ErrNotFound when it does not exist.
func (s *Store) Workout(ctx context.Context, userID string, activityID int64) (*model.Workout, error) {
	var w model.Workout
	if err := s.Get(ctx, s.t.Main, model.WorkoutKey(userID, activityID), &w); err != nil {
		return nil, fmt.Errorf("read workout %d of %s: %w", activityID, userID, err)
	}
	return &w, nil
}

// RateLimitState reads the shared Strava rate-limit counter. It returns
// ErrNotFound before the first Strava response was recorded.
func (s *Store) RateLimitState(ctx context.Context) (*model.RateLimitState, error) {
	var r model.RateLimitState
	if err := s.Get(ctx, s.t.Main, model.RateLimitKey(), &r); err != nil {
		return nil, fmt.Errorf("read rate limit state: %w", err)
	}
	return &r, nil
}

// RecordRateLimit stores what Strava's headers said, unless the stored state
// is from a later 15-minute window or shows higher usage in the same window
// (usage only grows within a window, so the larger reading is the newer one).
// A refused write is not an error.
func (s *Store) RecordRateLimit(ctx context.Context, r *model.RateLimitState) error {
	win := expression.Name("windowStartedUtc")
	ours := expression.Value(r.WindowStartedUtc.UTC().Format(time.RFC3339))
	cond := expression.Or(
		expression.AttributeNotExists(expression.Name("PK")),
		win.LessThan(ours),
		expression.And(win.Equal(ours), expression.Name("readShortUsage").LessThanEqual(expression.Value(r.ReadShortUsage))),
	)
	err := s.PutIf(ctx, s.t.Main, r, cond)
	if err != nil && !isConflict(err) {
		return fmt.Errorf("record rate limit: %w", err)
	}
	return nil
}

// update runs one UpdateItem on the main table with an optional condition.
func (s *Store) update(ctx context.Context, k model.Key, upd expression.UpdateBuilder, cond ...expression.ConditionBuilder) error {
	b := expression.NewBuilder().WithUpdate(upd)
	if len(cond) > 0 {
		b = b.WithCondition(cond[0])
	}
	ex, err := b.Build()
	if err != nil {
		return fmt.Errorf("update %s: build expression: %w", k, err)
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.t.Main), Key: s.keyAV(s.t.Main, k),
		UpdateExpression: ex.Update(), ConditionExpression: ex.Condition(),
		ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
	})
	if err != nil {
		return fmt.Errorf("update %s: %w", k, translate(err))
	}
	return nil
}
