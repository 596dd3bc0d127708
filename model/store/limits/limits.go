// Package limits keeps the Strava budget's shared state in the main table:
// the read counters (per athlete and window or day, the unverified
// allowance, the sync jobs' sharded window counters), the last rate-limit
// reading, each user's sync state and the reconciliation's cursor. Every
// write is one conditional write, so instances share a count or a version
// without a lock.
package limits

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/syncstate"
)

// Store holds the counters and versioned states of the Strava budget, over
// the store's DB; a sync state written after the user's deletion is
// removed by the user guard's check.
type Store struct {
	db    *dynamo.DB
	guard *store.Guard
}

// New returns the budget's state over st's DB and user guard.
func New(st *store.Adapters) *Store { return &Store{db: st.DB, guard: st.Guard} }

// TakeAthleteReads counts n Strava reads for the athlete in the window of
// length windowLen containing now (keys.AthleteReadsKey, expiring an hour
// after it) unless more than limit would be counted there (ErrConflict),
// and returns the window's count after these: every instance's reads.
func (s *Store) TakeAthleteReads(ctx context.Context, athleteID int64, now time.Time, windowLen time.Duration, limit, n int) (int, error) {
	window := now.UTC().Truncate(windowLen)
	c := &ops.AthleteReads{AthleteID: athleteID, WindowStartUtc: window, ExpiresAt: window.Add(windowLen + time.Hour).Unix()}
	reads, err := s.countReads(ctx, c, n, limit)
	if err != nil {
		return 0, fmt.Errorf("count %d strava reads of athlete %d in the window of %s: %w", n, athleteID, window.Format(time.RFC3339), err)
	}
	return reads, nil
}

// countReads adds n to the read counter e (its other attributes set as e
// has them) unless it would pass limit: ErrConflict then, nothing counted.
// It returns the counter's reads after the add.
func (s *Store) countReads(ctx context.Context, e model.Entity, n, limit int) (int, error) {
	if n < 1 || n > limit {
		return 0, fmt.Errorf("%d reads against %d allowed: %w", n, limit, model.ErrConflict)
	}
	item, err := dynamo.Marshal(e)
	if err != nil {
		return 0, err
	}
	reads := expression.Name("reads")
	upd := expression.Add(reads, expression.Value(n))
	for name, v := range item {
		if name != "PK" && name != "SK" && name != "reads" {
			upd = upd.Set(expression.Name(name), expression.Value(v))
		}
	}
	out, err := s.db.UpdateReturning(ctx, s.db.Tables().Main, e.ItemKey(), types.ReturnValueUpdatedNew, upd,
		expression.Or(expression.AttributeNotExists(reads), reads.LessThanEqual(expression.Value(limit-n))))
	if err != nil {
		return 0, err
	}
	var after struct {
		Reads int `dynamodbav:"reads"`
	}
	if err := attributevalue.UnmarshalMap(out, &after); err != nil {
		return 0, fmt.Errorf("read counter after the add: %w", err)
	}
	return after.Reads, nil
}

// RateLimitState reads the shared Strava rate-limit counter. It returns
// ErrNotFound before the first Strava response was recorded.
func (s *Store) RateLimitState(ctx context.Context) (*ops.RateLimitState, error) {
	var r ops.RateLimitState
	if err := s.db.Get(ctx, s.db.Tables().Main, keys.RateLimitKey(), &r); err != nil {
		return nil, fmt.Errorf("read rate limit state: %w", err)
	}
	return &r, nil
}

// RecordRateLimit stores what Strava's headers said, unless the stored state
// is from a later 15-minute window or shows higher usage in the same window
// (usage only grows within a window, so the larger reading is the newer one).
// A refused write is not an error.
func (s *Store) RecordRateLimit(ctx context.Context, r *ops.RateLimitState) error {
	win := expression.Name("windowStartedUtc")
	ours := expression.Value(r.WindowStartedUtc.UTC().Format(time.RFC3339))
	cond := expression.Or(
		expression.AttributeNotExists(expression.Name("PK")),
		win.LessThan(ours),
		expression.And(win.Equal(ours), expression.Name("readShortUsage").LessThanEqual(expression.Value(r.ReadShortUsage))),
	)
	err := s.db.PutIf(ctx, s.db.Tables().Main, r, cond)
	if err != nil && !errors.Is(err, model.ErrConflict) {
		return fmt.Errorf("record rate limit: %w", err)
	}
	return nil
}

// SyncState reads a user's Strava sync state (backfill and reconciliation
// progress) with a strongly consistent GetItem. It returns ErrNotFound when
// the user never had a sync, and ErrUnsupportedSchema when the item was
// written by newer code.
func (s *Store) SyncState(ctx context.Context, userID string) (*syncstate.SyncState, error) {
	var st syncstate.SyncState
	if err := s.db.Get(ctx, s.db.Tables().Main, keys.SyncStateKey(userID), &st); err != nil {
		return nil, fmt.Errorf("read sync state of user %s: %w", userID, err)
	}
	return &st, nil
}

// UpdateSyncState is the read-modify-write of a user's sync state: it reads
// the state (strongly consistent; a fresh idle state when none exists),
// lets decide change it, and writes it conditioned on the version read
// (incrementing it), re-reading and deciding again on a conflict, a bounded
// number of times. decide returning model.ErrSkipWrite writes nothing; any other
// error is returned as is. It returns the state as written and ErrConflict
// when the version kept moving. A write that lands after the user's account
// was deleted (the user guard, read after the write) is removed again and
// returns model.ErrUserDeleted: the create condition (attribute_not_exists) alone
// would let a sync in flight re-create SYNC#STRAVA after the deletion.
func (s *Store) UpdateSyncState(ctx context.Context, userID string, decide func(*syncstate.SyncState) error) (*syncstate.SyncState, error) {
	for range syncStateRetries {
		cur, err := s.SyncState(ctx, userID)
		if errors.Is(err, model.ErrNotFound) {
			cur, err = &syncstate.SyncState{UserID: userID, State: syncstate.SyncIdle}, nil
		}
		if err != nil {
			return nil, err
		}
		read := cur.Version
		if err := decide(cur); err != nil {
			if errors.Is(err, model.ErrSkipWrite) {
				return cur, nil
			}
			return nil, err
		}
		cur.UserID, cur.Version, cur.UpdatedAtUtc = userID, read+1, s.db.Now().UTC()
		err = s.db.PutIf(ctx, s.db.Tables().Main, cur, versionCond(read))
		if err == nil {
			if err := s.guard.CheckDeleted(ctx, userID, cur.ItemKey()); err != nil {
				return nil, fmt.Errorf("write sync state of user %s: %w", userID, err)
			}
			return cur, nil
		}
		if !errors.Is(err, model.ErrConflict) {
			return nil, fmt.Errorf("write sync state of user %s: %w", userID, err)
		}
	}
	return nil, fmt.Errorf("write sync state of user %s: version kept moving: %w", userID, model.ErrConflict)
}

// TakeSyncRead counts one Strava read of a sync job in the budget window of
// length windowLen containing now (the counter expires an hour after the
// window) unless allowed reads were counted there already: then it counts
// nothing and returns ErrConflict. The check and the count are one
// conditional write, so concurrent sync jobs never take more than allowed
// between them.
//
// With shards > 1 the window's count is split over that many counters
// (keys.SyncReadsKey), each allowed its part (keys.SyncReadsShardAllowance,
// the parts sum to allowed): the read is taken from shard pick%shards, or,
// when that one is full, from one other shard chosen by pick; ErrConflict
// when both are. A refusal can thus come while other shards have room
// (erring on fewer reads, never more), and costs at most two writes.
func (s *Store) TakeSyncRead(ctx context.Context, now time.Time, windowLen time.Duration, allowed, shards int, pick uint64) error {
	window := now.UTC().Truncate(windowLen)
	var err error
	for _, shard := range keys.SyncReadsTries(pick, shards) {
		err = s.takeSyncRead(ctx, window, windowLen, shard, keys.SyncReadsShardAllowance(allowed, shards, shard))
		if !errors.Is(err, model.ErrConflict) {
			return err
		}
	}
	return err
}

func (s *Store) takeSyncRead(ctx context.Context, window time.Time, windowLen time.Duration, shard, allowed int) error {
	c := &syncstate.SyncReads{WindowStartUtc: window, WindowLen: windowLen, Shard: shard, ExpiresAt: window.Add(windowLen + time.Hour).Unix()}
	if _, err := s.countReads(ctx, c, 1, allowed); err != nil {
		return fmt.Errorf("count a sync read in the window of %s (shard %d): %w", window.Format(time.RFC3339), shard, err)
	}
	return nil
}

// ReconcileCursor reads the reconciliation's enumeration cursor (strongly
// consistent); ErrNotFound before the first cycle.
func (s *Store) ReconcileCursor(ctx context.Context) (*syncstate.ReconcileCursor, error) {
	var c syncstate.ReconcileCursor
	if err := s.db.Get(ctx, s.db.Tables().Main, keys.ReconcileCursorKey(), &c); err != nil {
		return nil, fmt.Errorf("read reconcile cursor: %w", err)
	}
	return &c, nil
}

// SaveReconcileCursor writes c conditioned on the version it was read at
// (c.Version; 0: not stored yet) and increments it; ErrConflict when
// another run moved the cursor meanwhile.
func (s *Store) SaveReconcileCursor(ctx context.Context, c *syncstate.ReconcileCursor) error {
	read := c.Version
	c.Version, c.UpdatedAtUtc = read+1, s.db.Now().UTC()
	if err := s.db.PutIf(ctx, s.db.Tables().Main, c, versionCond(read)); err != nil {
		c.Version = read
		if errors.Is(err, model.ErrConflict) {
			return fmt.Errorf("save reconcile cursor at version %d: %w", read, model.ErrConflict)
		}
		return fmt.Errorf("save reconcile cursor: %w", err)
	}
	return nil
}

// syncStateRetries bounds the read-modify-write attempts of UpdateSyncState.
const syncStateRetries = 5

// versionCond is the condition of a versioned put: the stored item is
// still at version read (0: not stored yet).
func versionCond(read int64) expression.ConditionBuilder {
	if read > 0 {
		return expression.Name("version").Equal(expression.Value(read))
	}
	return expression.AttributeNotExists(expression.Name("PK"))
}

// TakeAthleteDayReads counts n Strava reads for the athlete in the UTC day
// containing now (ops.AthleteDayReads, listed under the day's readers)
// unless more than limit would be counted that day (ErrConflict).
func (s *Store) TakeAthleteDayReads(ctx context.Context, athleteID int64, now time.Time, limit, n int) error {
	c := ops.NewAthleteDayReads(athleteID, now)
	if _, err := s.countReads(ctx, c, n, limit); err != nil {
		return fmt.Errorf("count %d strava reads of athlete %d on %s: %w", n, athleteID, c.DayUtc, err)
	}
	return nil
}

// TakeUnverifiedReads counts n reads of the athlete's unverified allowance
// (keys.UnverifiedReadsKey: reads that only unverified events asked for)
// in the window of length windowLen containing now, unless more than limit
// would be counted there (ErrConflict).
func (s *Store) TakeUnverifiedReads(ctx context.Context, athleteID int64, now time.Time, windowLen time.Duration, limit, n int) error {
	window := now.UTC().Truncate(windowLen)
	c := &ops.AthleteReads{AthleteID: athleteID, WindowStartUtc: window, ExpiresAt: window.Add(windowLen + time.Hour).Unix(), Unverified: true}
	if _, err := s.countReads(ctx, c, n, limit); err != nil {
		return fmt.Errorf("count %d unverified reads of athlete %d in the window of %s: %w", n, athleteID, window.Format(time.RFC3339), err)
	}
	return nil
}

// TakeUnverifiedDayReads counts n reads of the athlete's unverified
// allowance in the UTC day containing now, unless more than limit would be
// counted (ErrConflict).
func (s *Store) TakeUnverifiedDayReads(ctx context.Context, athleteID int64, now time.Time, limit, n int) error {
	c := ops.NewAthleteDayReads(athleteID, now)
	c.Unverified, c.ReadersPK, c.ReadersSK = true, "", ""
	if _, err := s.countReads(ctx, c, n, limit); err != nil {
		return fmt.Errorf("count %d unverified reads of athlete %d on %s: %w", n, athleteID, c.DayUtc, err)
	}
	return nil
}

// HeaviestReaders lists the athletes with the most Strava reads counted on
// the UTC day containing day, most first, at most limit (every shard of the
// day's readers listing, GSI2; only athletes that read past an instance's
// own allowance are listed).
func (s *Store) HeaviestReaders(ctx context.Context, day time.Time, limit int) ([]ops.AthleteDayReads, error) {
	var out []ops.AthleteDayReads
	for shard := range keys.ReadersShards {
		page, _, err := dynamo.QueryEntities[ops.AthleteDayReads](ctx, s.db, s.db.Tables().Main, keys.ReadersShardPK(day, shard), "", dynamo.QueryOptions{Index: dynamo.IndexGSI2})
		if err != nil {
			return nil, fmt.Errorf("list readers of %s (shard %d): %w", day.UTC().Format(time.DateOnly), shard, err)
		}
		out = append(out, page...)
	}
	slices.SortFunc(out, func(a, b ops.AthleteDayReads) int { return cmp.Compare(b.Reads, a.Reads) })
	return out[:min(len(out), max(limit, 0))], nil
}
