// Package purge deletes what came from Strava when an athlete revokes the
// grant, keeping what the athlete made here, and keeps the keyed-hash
// mapping a reconnect needs (no Strava id in the clear).
package purge

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/secrets"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/dynerr"
)

// Purger removes what came from Strava when an athlete revokes the
// grant (Strava's API agreement: all personal data obtained through the API
// is deleted), keeping what the athlete made here (milestones, awards), and
// keeps the one thing a reconnect needs: a mapping from a keyed hash of the
// athlete id to the user (RevokedAthleteKey), so no Strava id stays in the
// clear. The hash key is a random 32-byte HMAC key stored in the table
// sealed like the tokens (envelope encryption under the token key or KMS).
type Purger struct {
	st      *store.Adapters
	hashMu  sync.Mutex
	hashKey []byte
	// afterChunk, when set (tests only), is called after each chunk of
	// workout deletes with the count so far.
	afterChunk func(deleted int)
}

// New returns a Purger over st (which must have a Sealer: the hash key is
// sealed).
func New(st *store.Adapters) *Purger { return &Purger{st: st} }

// revokedOwner is the mapping item a revoked athlete leaves behind.
type revokedOwner struct {
	PK           string    `dynamodbav:"PK"`
	SK           string    `dynamodbav:"SK"`
	EntityType   string    `dynamodbav:"entityType"`
	UserID       string    `dynamodbav:"userId"`
	RevokedAtUtc time.Time `dynamodbav:"revokedAtUtc"`
}

// sealedHashKey is the item holding the sealed HMAC key.
type sealedHashKey struct {
	PK     string             `dynamodbav:"PK"`
	SK     string             `dynamodbav:"SK"`
	Sealed model.SealedSecret `dynamodbav:"sealed"`
}

// athleteHashKeyItem is where the sealed HMAC key lives.
var athleteHashKeyItem = model.Key{PK: "APP#KEYS", SK: "ATHLETE_HASH"}

// athleteHash is the keyed hash (HMAC-SHA-256, hex) of an athlete id.
func (s *Purger) athleteHash(ctx context.Context, athleteID int64) (string, error) {
	key, err := s.athleteHashKey(ctx)
	if err != nil {
		return "", err
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(strconv.FormatInt(athleteID, 10)))
	return hex.EncodeToString(m.Sum(nil)), nil
}

// athleteHashKey returns the HMAC key, creating and sealing it on first
// use (a racing creator's key wins: the put is conditional, then re-read).
func (s *Purger) athleteHashKey(ctx context.Context) ([]byte, error) {
	s.hashMu.Lock()
	defer s.hashMu.Unlock()
	if s.hashKey != nil {
		return s.hashKey, nil
	}
	if s.st.DB.Secrets == nil {
		return nil, dynamo.ErrNoSealer
	}
	// Sealed like the tokens (the same purpose, so the same KMS grant), bound
	// to the application rather than a user and to this item's key.
	ec := secrets.Context{UserID: "app", Purpose: model.PurposeStravaTokens, Item: athleteHashKeyItem.String()}
	for attempt := 0; attempt < 2; attempt++ {
		var item sealedHashKey
		out, err := s.st.DB.Client().GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.st.DB.Tables().Main),
			Key: keyAV(athleteHashKeyItem), ConsistentRead: aws.Bool(true)})
		if err != nil {
			return nil, fmt.Errorf("read athlete hash key: %w", err)
		}
		if out.Item != nil {
			if err := attributevalue.UnmarshalMap(out.Item, &item); err != nil {
				return nil, fmt.Errorf("decode athlete hash key: %w", err)
			}
			key, err := s.st.DB.Secrets.Open(ctx, ec, item.Sealed)
			if err != nil {
				return nil, fmt.Errorf("open athlete hash key: %w", err)
			}
			s.hashKey = key
			return key, nil
		}
		fresh := make([]byte, 32)
		_, _ = rand.Read(fresh)
		sealed, err := s.st.DB.Secrets.Seal(ctx, ec, fresh)
		if err != nil {
			return nil, fmt.Errorf("seal athlete hash key: %w", err)
		}
		av, err := attributevalue.MarshalMap(sealedHashKey{PK: athleteHashKeyItem.PK, SK: athleteHashKeyItem.SK, Sealed: sealed})
		if err != nil {
			return nil, fmt.Errorf("encode athlete hash key: %w", err)
		}
		_, err = s.st.DB.Client().PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.st.DB.Tables().Main), Item: av,
			ConditionExpression: aws.String("attribute_not_exists(PK)")})
		var taken *types.ConditionalCheckFailedException
		if err != nil && !errors.As(err, &taken) {
			return nil, fmt.Errorf("store athlete hash key: %w", err)
		}
	}
	return nil, errors.New("athlete hash key: created but not readable")
}

// RememberRevokedAthlete writes the keyed-hash mapping of athleteID to
// userID (idempotent), so a reconnect finds the same user once the owner
// mapping, which names the athlete, is gone.
func (s *Purger) RememberRevokedAthlete(ctx context.Context, athleteID int64, userID string, revokedAt time.Time) error {
	h, err := s.athleteHash(ctx, athleteID)
	if err != nil {
		return fmt.Errorf("remember revoked athlete of %s: %w", userID, err)
	}
	k := keys.RevokedAthleteKey(h)
	av, err := attributevalue.MarshalMap(revokedOwner{PK: k.PK, SK: k.SK, EntityType: "REVOKED_ATHLETE", UserID: userID,
		RevokedAtUtc: revokedAt.UTC()})
	if err != nil {
		return fmt.Errorf("remember revoked athlete of %s: %w", userID, err)
	}
	if _, err := s.st.DB.Client().PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.st.DB.Tables().Main), Item: av}); err != nil {
		return fmt.Errorf("remember revoked athlete of %s: %w", userID, err)
	}
	return nil
}

// RevokedAthleteOwner returns the user a revoked athlete belonged to;
// ErrNotFound when the athlete never revoked (or was never ours).
func (s *Purger) RevokedAthleteOwner(ctx context.Context, athleteID int64) (string, error) {
	h, err := s.athleteHash(ctx, athleteID)
	if err != nil {
		return "", fmt.Errorf("revoked owner: %w", err)
	}
	out, err := s.st.DB.Client().GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.st.DB.Tables().Main),
		Key: keyAV(keys.RevokedAthleteKey(h)), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return "", fmt.Errorf("revoked owner: %w", err)
	}
	var o revokedOwner
	if out.Item == nil {
		return "", fmt.Errorf("revoked owner: %w", model.ErrNotFound)
	}
	if err := attributevalue.UnmarshalMap(out.Item, &o); err != nil || o.UserID == "" {
		return "", fmt.Errorf("revoked owner: undecodable mapping: %w", model.ErrInvalid)
	}
	return o.UserID, nil
}

// ForgetRevokedAthlete removes the keyed-hash mapping (a reconnect has
// restored the owner mapping, or the account is deleted).
func (s *Purger) ForgetRevokedAthlete(ctx context.Context, athleteID int64) error {
	h, err := s.athleteHash(ctx, athleteID)
	if err != nil {
		return fmt.Errorf("forget revoked athlete: %w", err)
	}
	return s.st.DB.Delete(ctx, s.st.DB.Tables().Main, keys.RevokedAthleteKey(h))
}

// forgetStravaIdentity removes from the user's profile what Strava said
// about the athlete (the name, the athlete id) and records the keyed hash
// of the revoked athlete's mapping instead, so an account deletion finds
// and removes it, while the revocation stands. A missing profile is not an
// error.
func (s *Purger) forgetStravaIdentity(ctx context.Context, userID string, athleteID int64, revokedAt time.Time) error {
	h, err := s.athleteHash(ctx, athleteID)
	if err != nil {
		return fmt.Errorf("forget strava identity of %s: %w", userID, err)
	}
	upd := expression.Set(expression.Name("displayName"), expression.Value("")).
		Set(expression.Name("athleteId"), expression.Value(0)).
		Set(expression.Name("revokedAthleteHash"), expression.Value(h))
	ex, err := expression.NewBuilder().WithUpdate(upd).WithCondition(expression.AttributeExists(expression.Name("PK"))).Build()
	if err != nil {
		return fmt.Errorf("forget strava identity of %s: %w", userID, err)
	}
	item := types.TransactWriteItem{Update: &types.Update{TableName: aws.String(s.st.DB.Tables().Main), Key: keyAV(keys.ProfileKey(userID)),
		UpdateExpression: ex.Update(), ConditionExpression: ex.Condition(), ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values()}}
	if err := s.whileRevoked(ctx, userID, revokedAt, item); err != nil {
		return fmt.Errorf("forget strava identity of %s: %w", userID, err)
	}
	return nil
}

// errReconnected stops a purge: the athlete connected again after the
// revocation it purges (the login cleared it from the user's guard), so
// what is left belongs to the reconnect.
var errReconnected = errors.New("the athlete reconnected since the revocation")

// whileRevoked writes items (at most model.TransactionLimit-1, none: only
// the check) atomically with a check that the user's guard still holds the
// revocation recorded at revokedAt: errReconnected when it does not. An
// item's own failed condition is not an error (nothing left to do).
func (s *Purger) whileRevoked(ctx context.Context, userID string, revokedAt time.Time, items ...types.TransactWriteItem) error {
	check, err := store.StillRevoked(s.st.DB.Tables(), userID, revokedAt)
	if err != nil {
		return err
	}
	err = s.st.DB.Transact(ctx, append([]types.TransactWriteItem{check}, items...), "")
	var te *dynerr.TransactionError
	if errors.As(err, &te) && len(te.FailedIndexes()) > 0 {
		if te.FailedIndexes()[0] == 0 { // the guard's check comes first
			return errReconnected
		}
		return nil
	}
	return err
}

// RestoreStravaIdentity puts the athlete's id and name back on the profile
// (a reconnect of a revoked athlete).
func (s *Purger) RestoreStravaIdentity(ctx context.Context, userID string, athleteID int64, name string) error {
	upd := expression.Set(expression.Name("displayName"), expression.Value(name)).
		Set(expression.Name("athleteId"), expression.Value(athleteID)).
		Remove(expression.Name("revokedAthleteHash"))
	if err := s.st.DB.UpdateIn(ctx, s.st.DB.Tables().Main, keys.ProfileKey(userID), upd, expression.AttributeExists(expression.Name("PK"))); err != nil {
		return fmt.Errorf("restore strava identity of %s: %w", userID, err)
	}
	return nil
}

// StripStravaIDs removes the Strava ids from what stays of the user: the
// activity id on each award (a series' period's too) and on its collection
// entry, and athleteId, activityId and sportType from
// the details of each audit entry about the user. It returns how many items
// it changed; re-running it is harmless.
func (s *Purger) StripStravaIDs(ctx context.Context, userID string) (int, error) {
	n, err := s.stripEach(ctx, s.st.DB.Tables().Main, keys.UserPK(userID), keys.PrefixMilestone, []string{"activityId"})
	if err != nil {
		return n, fmt.Errorf("strip strava ids from awards of %s: %w", userID, err)
	}
	for _, prefix := range []string{keys.PrefixCollected, keys.PrefixSeries} { // the collection, the awards of series' periods
		c, err := s.stripEach(ctx, s.st.DB.Tables().Main, keys.UserPK(userID), prefix, []string{"activityId"})
		n += c
		if err != nil {
			return n, fmt.Errorf("strip strava ids from %s items of %s: %w", prefix, userID, err)
		}
	}
	m, err := s.stripEach(ctx, s.st.DB.Tables().Audit, keys.UserPK(userID), "", []string{"details.athleteId", "details.activityId", "details.sportType"})
	if err != nil {
		return n + m, fmt.Errorf("strip strava ids from audit entries of %s: %w", userID, err)
	}
	return n + m, nil
}

// stripEach removes the attributes at paths from every item of the
// partition pk under prefix that has any of them (page after page).
func (s *Purger) stripEach(ctx context.Context, table, pk, prefix string, paths []string) (int, error) {
	var has expression.ConditionBuilder
	var upd expression.UpdateBuilder
	for i, p := range paths {
		c := expression.AttributeExists(expression.Name(p))
		if i == 0 {
			has, upd = c, expression.Remove(expression.Name(p))
			continue
		}
		has, upd = expression.Or(has, c), upd.Remove(expression.Name(p))
	}
	kc := expression.Key("PK").Equal(expression.Value(pk))
	if prefix != "" {
		kc = kc.And(expression.Key("SK").BeginsWith(prefix))
	}
	ex, err := expression.NewBuilder().WithKeyCondition(kc).WithFilter(has).
		WithProjection(expression.NamesList(expression.Name("PK"), expression.Name("SK"))).Build()
	if err != nil {
		return 0, fmt.Errorf("build query: %w", err)
	}
	p := dynamodb.NewQueryPaginator(s.st.DB.Client(), &dynamodb.QueryInput{TableName: aws.String(table),
		KeyConditionExpression: ex.KeyCondition(), FilterExpression: ex.Filter(), ProjectionExpression: ex.Projection(),
		ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(), ConsistentRead: aws.Bool(true)})
	n := 0
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return n, err
		}
		for _, it := range page.Items {
			k, err := dynamo.KeyOf(it)
			if err != nil {
				return n, err
			}
			if err := s.st.DB.UpdateIn(ctx, table, k, upd, has); err != nil && !errors.Is(err, model.ErrConflict) {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// PurgeStravaData deletes what came from Strava for a user whose athlete
// revoked the grant at revokedAt, keeping milestones and awards: it records
// the keyed-hash mapping first (so a reconnect finds the user), deletes the
// sync state (so a reconnect from here on imports the history again), then
// removes every Strava workout (a hard delete; the stream's REMOVE records
// re-project the milestones, whose progress falls; awards stay), the Strava
// name and id on the profile, the Strava ids on awards and audit entries,
// the user's parked records, and last the owner mapping (so a retry of a
// purge stopped earlier still resolves the athlete). It returns how many
// items it deleted or changed. Each step is idempotent, so a run stopped
// anywhere is finished by running it again.
//
// A reconnect while it runs ends it: every step checks, in the same
// transaction where it writes, that the user's guard still holds this
// revocation (a login clears it), so a late purge never takes the
// reconnected athlete's workouts, identity, sync state or owner mapping
// away. Workouts deleted before the reconnect come back through the
// reconnect's backfill, which runs because no sync state is left.
func (s *Purger) PurgeStravaData(ctx context.Context, userID string, athleteID int64, revokedAt time.Time) (int, error) {
	n, err := s.purge(ctx, userID, athleteID, revokedAt)
	if errors.Is(err, errReconnected) {
		return n, nil
	}
	return n, err
}

func (s *Purger) purge(ctx context.Context, userID string, athleteID int64, revokedAt time.Time) (int, error) {
	var r struct{ Workouts, Stripped, Parked int }
	if err := s.RememberRevokedAthlete(ctx, athleteID, userID, revokedAt); err != nil {
		return r.Workouts + r.Stripped, err
	}
	// The sync state goes before any workout: once a workout is gone, no
	// sync state may still say the history was imported, or a reconnect in
	// the middle of the deletes would find it and import nothing again.
	sync := types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(s.st.DB.Tables().Main), Key: keyAV(keys.SyncStateKey(userID))}}
	if err := s.whileRevoked(ctx, userID, revokedAt, sync); err != nil {
		return 0, fmt.Errorf("purge strava data of %s: sync state: %w", userID, err)
	}
	n, err := s.purgeWorkouts(ctx, userID, revokedAt)
	r.Workouts = n
	if err != nil {
		return n, fmt.Errorf("purge strava data of %s (%d workouts deleted so far): %w", userID, n, err)
	}
	if err := s.forgetStravaIdentity(ctx, userID, athleteID, revokedAt); err != nil {
		return r.Workouts + r.Stripped, err
	}
	if err := s.whileRevoked(ctx, userID, revokedAt); err != nil {
		return r.Workouts, err
	}
	if r.Stripped, err = s.StripStravaIDs(ctx, userID); err != nil {
		return r.Workouts + r.Stripped, err
	}
	if r.Parked, err = s.st.Parked.DeleteUserParked(ctx, userID, athleteID); err != nil {
		return r.Workouts + r.Stripped, fmt.Errorf("purge strava data of %s: parked records: %w", userID, err)
	}
	// Last: a retry of a purge stopped earlier still resolves the athlete.
	mine, err := expression.NewBuilder().WithCondition(expression.Name("userId").Equal(expression.Value(userID))).Build()
	if err != nil {
		return r.Workouts + r.Stripped + r.Parked, err
	}
	owner := types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(s.st.DB.Tables().Main), Key: keyAV(keys.AthleteOwnerKey(athleteID)),
		ConditionExpression: mine.Condition(), ExpressionAttributeNames: mine.Names(), ExpressionAttributeValues: mine.Values()}}
	if err := s.whileRevoked(ctx, userID, revokedAt, owner); err != nil {
		return r.Workouts + r.Stripped + r.Parked, fmt.Errorf("purge strava data of %s: owner of athlete %d: %w", userID, athleteID, err)
	}
	return r.Workouts + r.Stripped + r.Parked, nil
}

// purgeWorkouts deletes the user's Strava workouts, model.TransactionLimit-1
// to a transaction with the guard's check: once a login has cleared the
// revocation, the next chunk fails whole (errReconnected), so the
// reconnect's backfill is never deleted. A transactional delete costs two
// write units, a batch one; a purge is rare and bounded by the log.
func (s *Purger) purgeWorkouts(ctx context.Context, userID string, revokedAt time.Time) (int, error) {
	main, deleted := s.st.DB.Tables().Main, 0
	for {
		res, err := s.st.DB.QueryPrefix(ctx, main, keys.UserPK(userID), keys.PrefixWorkoutStrava, dynamo.QueryOptions{Projection: []string{"PK", "SK"}})
		if err != nil {
			return deleted, err
		}
		for chunk := range slices.Chunk(res.Items, model.TransactionLimit-1) {
			dels := make([]types.TransactWriteItem, len(chunk))
			for i, it := range chunk {
				dels[i] = types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(main),
					Key: map[string]types.AttributeValue{"PK": it["PK"], "SK": it["SK"]}}}
			}
			if err := s.whileRevoked(ctx, userID, revokedAt, dels...); err != nil {
				return deleted, err
			}
			deleted += len(chunk)
			if s.afterChunk != nil {
				s.afterChunk(deleted)
			}
		}
		if !res.Truncated || len(res.Items) == 0 {
			return deleted, nil
		}
	}
}

// ReclaimRevokedAthlete reattaches a revoked athlete who connects again to
// its user: the owner mapping is written again (unless one exists), the
// profile gets the athlete's id and name back, and the keyed-hash mapping
// goes.
func (s *Purger) ReclaimRevokedAthlete(ctx context.Context, athleteID int64, userID, name string, now time.Time) error {
	o := &model.AthleteOwner{AthleteID: athleteID, UserID: userID, CreatedAtUtc: now.UTC()}
	if err := s.st.DB.PutIfAbsent(ctx, s.st.DB.Tables().Main, o); err != nil && !errors.Is(err, model.ErrConflict) {
		return fmt.Errorf("reclaim athlete for %s: %w", userID, err)
	}
	if err := s.RestoreStravaIdentity(ctx, userID, athleteID, name); err != nil {
		return err
	}
	return s.ForgetRevokedAthlete(ctx, athleteID)
}

// ForgetDeletedOwner removes what still links athleteID to userID, an
// account that was deleted: the owner mapping and the keyed-hash mapping,
// each only if it names userID, so the athlete signs up as a new user.
func (s *Purger) ForgetDeletedOwner(ctx context.Context, athleteID int64, userID string) error {
	if err := s.st.Users.DeleteAthleteOwnerOf(ctx, athleteID, userID); err != nil {
		return err
	}
	h, err := s.athleteHash(ctx, athleteID)
	if err != nil {
		return fmt.Errorf("forget deleted owner %s: %w", userID, err)
	}
	return s.st.Users.DeleteRevokedAthleteOf(ctx, h, userID)
}

// keyAV is the primary key of k as attribute values (the main table's
// PK and SK).
func keyAV(k model.Key) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: k.PK}, "SK": &types.AttributeValueMemberS{Value: k.SK}}
}
