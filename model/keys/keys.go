// Package keys is the one place that builds and parses the keys of
// CommitCollect's tables (nobody else writes the "#" separator). It is the
// lowest package of the domain: model and everything else import it.
package keys

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Changing a prefix here is replay-sensitive: stored items keep the old
// keys, so a prefix change needs a migration and a rebuild.

const sep = "#"

// Separator is the "#" between a key's segments, for checks that an id
// cannot forge one.
const Separator = sep

// MaxPartCount bounds a model's parts (and an award's part index).
const MaxPartCount = 99

// ErrInvalid is model.ErrInvalid (defined here, the lowest domain package,
// so that parsing a key can report it).
var ErrInvalid = errors.New("invalid")

// Key prefixes and fixed sort keys of the CommitCollect table.
const (
	PrefixUser          = "USER#"
	PrefixModel         = "MODEL#"
	PrefixStravaAthlete = "STRAVA#ATHLETE#"
	PrefixWorkoutStrava = "WORKOUT#STRAVA#"
	PrefixMilestone     = "MILESTONE#"
	PrefixPart          = "PART#"
	PrefixSession       = "SESSION#"
	PrefixAudit         = "AUDIT#"
	PrefixCorrelation   = "CORR#"
	PrefixEvent         = "EVENT#"
	PrefixUserList      = "USERS#"
	PrefixParked        = "PARKED#"
	PrefixOAuthState    = "OAUTHSTATE#"
	PrefixOutboxPending = "OUTBOX#PENDING#"
	PrefixAthleteReads  = "READS#"
	// PrefixAthleteDayReads starts an athlete's daily read counter's sort
	// key; PrefixReaders a day's partitions of the readers listing (GSI2).
	PrefixAthleteDayReads = "READSDAY#"
	PrefixReaders         = "READERS#"

	SKProfile          = "PROFILE"
	SKStravaConnection = "STRAVA#CONNECTION"
	SKMeta             = "META"
	SKOwner            = "OWNER"
	SKSyncStrava       = "SYNC#STRAVA"
	SKGuard            = "GUARD"
	SKMilestoneCount   = "COUNT#MILESTONES"

	awardInfix = "#AWARD#"
)

// UserListShards is how many partitions the sparse users index spreads
// profiles over (so listing users never needs a Scan and never hits one hot
// partition).
const UserListShards = 8

// DefaultOutboxShards is how many partitions the sparse pending index of
// the outbox (idempotency table) spreads pending items over unless
// configured (CC_OUTBOX_SHARDS, store.Store.OutboxShards); the sweeper
// queries each (32 small Queries a minute). 32 partitions keep the index's
// busiest key near a thirty-second of the pending writes (under the 5 %
// the scale run allows one key; each partition takes 1,000 writes/s).
const DefaultOutboxShards = 32

// LegacyOutboxShards is the shard count before it was configurable: items
// written then sit in shards 0..3, which readers always query.
const LegacyOutboxShards = 4

// MaxOutboxShards bounds CC_OUTBOX_SHARDS (a sweep is one Query per shard).
const MaxOutboxShards = 256

// Key is the primary key of an item in a PK/SK table.
type Key struct {
	PK string `dynamodbav:"PK"`
	SK string `dynamodbav:"SK"`
}

// String renders the key for logs.
func (k Key) String() string { return k.PK + " / " + k.SK }

// UserPK is the partition of everything a user owns.
func UserPK(userID string) string { return PrefixUser + userID }

// ProfileKey addresses a user's profile.
func ProfileKey(userID string) Key { return Key{UserPK(userID), SKProfile} }

// StravaConnectionKey addresses a user's Strava tokens.
func StravaConnectionKey(userID string) Key { return Key{UserPK(userID), SKStravaConnection} }

// SyncStateKey addresses a user's Strava sync state (backfill and
// reconciliation progress).
func SyncStateKey(userID string) Key { return Key{UserPK(userID), SKSyncStrava} }

// WorkoutSK is the sort key of a Strava workout.
func WorkoutSK(activityID int64) string {
	return PrefixWorkoutStrava + strconv.FormatInt(activityID, 10)
}

// WorkoutKey addresses a user's Strava workout.
func WorkoutKey(userID string, activityID int64) Key {
	return Key{UserPK(userID), WorkoutSK(activityID)}
}

// PrefixWorkoutDate starts the date-ordered key of a workout (LSI1SK, the
// sort key of the main table's local secondary index LSI1).
const PrefixWorkoutDate = "WORKOUT#"

// workoutDateLayout renders a start date in fixed width (nanoseconds always
// printed, UTC), so that string order is time order.
const workoutDateLayout = "2006-01-02T15:04:05.000000000Z"

// activityIDWidth zero-pads activity ids to the width of the largest int64,
// so ids of different digit lengths sort numerically.
const activityIDWidth = 19

// WorkoutDateSK is a workout's date-ordered key (LSI1SK):
// WORKOUT#{startDateUtc, fixed-width RFC 3339 with nanoseconds}#{activityId,
// zero-padded to 19 digits}. It orders a user's workouts by (start date,
// activity id) whatever the digit lengths of the ids. Workouts without a
// start date (tombstones of deletes that overtook their create) carry no
// date key and stay out of the index: they never count.
//
// localDay, when known, is the date of the workout's local start
// (YYYY-MM-DD) and follows as a last field: LSI1 projects no more than the
// log needs, and a key's tail costs the log read nothing, while it never
// changes the order (the fields before it are fixed width and identify the
// workout). WorkoutLocalDay reads it back.
func WorkoutDateSK(startDateUtc time.Time, activityID int64, localDay string) string {
	k := workoutDateBound(startDateUtc) + sep + fmt.Sprintf("%0*d", activityIDWidth, activityID)
	if localDay != "" {
		k += sep + localDay
	}
	return k
}

// WorkoutLocalDay is the local day a WorkoutDateSK carries, and false when
// it carries none (a key written before local days were kept).
func WorkoutLocalDay(dateSK string) (string, bool) {
	fields := strings.Split(dateSK, sep)
	if len(fields) != 4 || fields[0]+sep != PrefixWorkoutDate || len(fields[3]) != len("2006-01-02") {
		return "", false
	}
	return fields[3], true
}

// workoutDateBound is the date part of WorkoutDateSK: it sorts before every
// key of a workout started at t and after every key of a workout started
// earlier.
func workoutDateBound(t time.Time) string {
	return PrefixWorkoutDate + t.UTC().Format(workoutDateLayout)
}

// WorkoutDateRange returns the inclusive LSI1SK bounds (for BETWEEN) that
// select exactly the workouts started in [from, to), or from from on when
// to is nil.
func WorkoutDateRange(from time.Time, to *time.Time) (lo, hi string) {
	w := struct {
		From time.Time
		To   *time.Time
	}{from, to}
	// Fixed width holds for years 1..9999: clamp what lies outside.
	if first := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC); w.From.Before(first) {
		w.From = first
	}
	if w.To != nil && w.To.UTC().Year() > 9999 {
		w.To = nil
	}
	lo = workoutDateBound(w.From)
	if w.To == nil {
		// "~" sorts after every digit: the upper end of all date keys.
		return lo, PrefixWorkoutDate + "~"
	}
	// A key of a workout started at To is the bound followed by "#…", so it
	// sorts after the bound itself; every earlier start sorts before it.
	return lo, workoutDateBound(*w.To)
}

// MilestoneSK is the sort key of a milestone.
func MilestoneSK(milestoneID string) string { return PrefixMilestone + milestoneID }

// MilestoneKey addresses a user's milestone.
func MilestoneKey(userID, milestoneID string) Key {
	return Key{UserPK(userID), MilestoneSK(milestoneID)}
}

// AwardSK is the sort key of a minted part; the index is zero-padded to two
// digits so awards sort in part order.
func AwardSK(milestoneID string, partIndex int) string {
	return fmt.Sprintf("%s%s%s%02d", PrefixMilestone, milestoneID, awardInfix, partIndex)
}

// AwardKey addresses one minted part of a milestone.
func AwardKey(userID, milestoneID string, partIndex int) Key {
	return Key{UserPK(userID), AwardSK(milestoneID, partIndex)}
}

// AwardSKPrefix is the prefix shared by every award of a milestone.
func AwardSKPrefix(milestoneID string) string { return PrefixMilestone + milestoneID + awardInfix }

// ModelPK is the partition of a collectible model.
func ModelPK(modelID string) string { return PrefixModel + modelID }

// ModelMetaKey addresses a model's metadata.
func ModelMetaKey(modelID string) Key { return Key{ModelPK(modelID), SKMeta} }

// PartSK is the sort key of a model part, zero-padded to two digits.
func PartSK(partIndex int) string { return fmt.Sprintf("%s%02d", PrefixPart, partIndex) }

// ModelPartKey addresses one part of a model.
func ModelPartKey(modelID string, partIndex int) Key { return Key{ModelPK(modelID), PartSK(partIndex)} }

// AthletePK is the partition of a Strava athlete's owner mapping; it is also
// GSI1PK on the Strava connection.
func AthletePK(athleteID int64) string { return PrefixStravaAthlete + strconv.FormatInt(athleteID, 10) }

// IsAthletePK reports whether pk is an athlete's partition (AthletePK).
func IsAthletePK(pk string) bool { return strings.HasPrefix(pk, PrefixStravaAthlete) }

// AthleteOwnerKey addresses the athlete → user mapping.
func AthleteOwnerKey(athleteID int64) Key { return Key{AthletePK(athleteID), SKOwner} }

// RevokedAthleteKey addresses the mapping a revoked athlete leaves to its
// user: hash is a keyed hash of the athlete id (no Strava id in the clear).
func RevokedAthleteKey(hash string) Key { return Key{"STRAVA#REVOKED#" + hash, SKOwner} }

// UserListPK is the sparse users-index partition a user's profile lands in.
func UserListPK(userID string) string { return UserListShardPK(shardOf(userID, UserListShards)) }

// shardOf places s in one of n shards by its FNV-1a hash: the one spread
// the users index, the outbox's Pending index and parked records share.
func shardOf(s string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return int(h.Sum32() % uint32(n))
}

// UserListShardPK is the users-index partition of one shard.
func UserListShardPK(shard int) string { return PrefixUserList + strconv.Itoa(shard) }

// SessionHash is all the tables ever hold of a bearer value the browser
// keeps (the session cookie, the OAuth login state): its SHA-256, hex. Keys,
// attributes and logs use the hash, so a table dump or a backup cannot be
// replayed as a cookie.
func SessionHash(cookieValue string) string {
	sum := sha256.Sum256([]byte(cookieValue))
	return hex.EncodeToString(sum[:])
}

// SessionKey addresses a BFF session by its id as stored: the SessionHash of
// the cookie value, never the cookie itself.
func SessionKey(sessionID string) Key { return Key{PrefixSession + sessionID, SKMeta} }

// UserSessionSK is the sort key of a session pointer in the user's partition.
func UserSessionSK(sessionID string) string { return PrefixSession + sessionID }

// UserSessionKey addresses the pointer USER#{userId} / SESSION#{sessionId} in
// the main table: the per-user index of sessions (the sessions table is keyed
// by session id only), so account deletion can find every session of a user
// with one Query.
func UserSessionKey(userID, sessionID string) Key {
	return Key{UserPK(userID), UserSessionSK(sessionID)}
}

// OAuthStateKey addresses a pending OAuth login state in the sessions table
// by the SessionHash of the state (the state itself travels in a cookie).
func OAuthStateKey(stateHash string) Key { return Key{PrefixOAuthState + stateHash, SKMeta} }

// AuditSK is an audit entry's sort key; GSI1SK and GSI2SK share it.
func AuditSK(at time.Time, requestID string) string {
	return PrefixAudit + strconv.FormatInt(at.Unix(), 10) + sep + requestID
}

// AuditKey addresses an audit entry. subjectPK is UserPK(userID) for a user's
// events, or AthletePK for events about an athlete with no user.
func AuditKey(subjectPK string, at time.Time, requestID string) Key {
	return Key{subjectPK, AuditSK(at, requestID)}
}

// awardMintedRequestPrefix starts the request id of an AWARD_MINTED audit
// entry (AwardMintedRequestID).
const awardMintedRequestPrefix = "mint-"

// AwardMintedRequestID is the request id of the AWARD_MINTED audit entry of
// part partIndex of milestoneID: mint-{milestoneId}-{partIndex, two digits}.
// It names the part, not the attempt, so every attempt at minting the part
// writes the same audit key.
func AwardMintedRequestID(milestoneID string, partIndex int) string {
	return fmt.Sprintf("%s%s-%02d", awardMintedRequestPrefix, milestoneID, partIndex)
}

// AwardMintedAuditKey is the deterministic key of the AWARD_MINTED audit
// entry of one part: AUDIT#{unix seconds of keyAt}#mint-{milestoneId}-{part}.
// keyAt is the milestone's createdAtUtc, which never changes, so no wall
// clock enters the key: a retried or repeated mint of the part writes (and
// finds) the same entry.
func AwardMintedAuditKey(userID, milestoneID string, keyAt time.Time, partIndex int) Key {
	return AuditKey(UserPK(userID), keyAt, AwardMintedRequestID(milestoneID, partIndex))
}

// AwardMintedAuditPrefix is the audit sort-key prefix shared by the
// AWARD_MINTED entries of every part of milestoneID (see AwardMintedAuditKey).
func AwardMintedAuditPrefix(milestoneID string, keyAt time.Time) string {
	return PrefixAudit + strconv.FormatInt(keyAt.Unix(), 10) + sep + awardMintedRequestPrefix + milestoneID + "-"
}

// ParseAwardMintedAuditSK returns the part index of an AWARD_MINTED audit
// sort key of milestoneID (keyed at keyAt), and false when sk is not one (for
// instance the entry of another milestone whose id merely starts the same).
func ParseAwardMintedAuditSK(sk, milestoneID string, keyAt time.Time) (int, bool) {
	rest, ok := strings.CutPrefix(sk, AwardMintedAuditPrefix(milestoneID, keyAt))
	if !ok || len(rest) < 2 || strings.Trim(rest, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n >= MaxPartCount {
		return 0, false
	}
	return n, true
}

// CorrelationPK is the audit table's GSI1PK.
func CorrelationPK(correlationID string) string { return PrefixCorrelation + correlationID }

// EventMonthPK is the audit table's GSI2PK: one partition per event type and month.
func EventMonthPK(eventType string, at time.Time) string {
	return PrefixEvent + eventType + sep + at.UTC().Format("200601")
}

// WebhookIdempotencyKey is the deterministic identity of a Strava webhook
// event: the same event delivered again yields the same key, whatever the HTTP
// request looked like. An event with updates (an update's new title, type or
// privacy) ends with a hash of them, sorted: two different edits of one
// activity within the same second (event_time has second resolution) are two
// events, not a duplicate whose changes would be lost.
func WebhookIdempotencyKey(objectType string, objectID int64, aspectType string, ownerID, eventTime int64, updates map[string]string) string {
	parts := []string{"STRAVA", "WEBHOOK", objectType, strconv.FormatInt(objectID, 10),
		aspectType, strconv.FormatInt(ownerID, 10), strconv.FormatInt(eventTime, 10)}
	if len(updates) > 0 {
		names := make([]string, 0, len(updates))
		for k := range updates {
			names = append(names, k)
		}
		slices.Sort(names)
		h := sha256.New()
		for _, k := range names {
			fmt.Fprintf(h, "%q=%q\n", k, updates[k])
		}
		parts = append(parts, "U"+hex.EncodeToString(h.Sum(nil)[:8]))
	}
	return strings.Join(parts, sep)
}

// WebhookKey is what an event's outbox key (WebhookIdempotencyKey) says of
// the event: enough for the sweeper to share the work out fairly and to
// gather an athlete's creates, before it reads any item.
type WebhookKey struct {
	ObjectType string
	ObjectID   int64
	AspectType string
	OwnerID    int64
}

// ParseWebhookIdempotencyKey reads a WebhookIdempotencyKey; false when key
// is not one (a sync job's key, a malformed key).
func ParseWebhookIdempotencyKey(key string) (WebhookKey, bool) {
	parts := strings.Split(key, sep)
	if len(parts) < 7 || parts[0] != "STRAVA" || parts[1] != "WEBHOOK" {
		return WebhookKey{}, false
	}
	obj, err1 := strconv.ParseInt(parts[3], 10, 64)
	owner, err2 := strconv.ParseInt(parts[5], 10, 64)
	if err1 != nil || err2 != nil || owner <= 0 || parts[2] == "" || parts[4] == "" {
		return WebhookKey{}, false
	}
	return WebhookKey{ObjectType: parts[2], ObjectID: obj, AspectType: parts[4], OwnerID: owner}, true
}

// ParseSyncJobKey returns the user of a SyncJobKey or SyncRestartKey; false
// when key is not one.
func ParseSyncJobKey(key string) (userID string, ok bool) {
	parts := strings.Split(key, sep)
	if len(parts) < 5 || parts[0] != "STRAVA" || parts[1] != "SYNC" || parts[3] == "" {
		return "", false
	}
	return parts[3], true
}

// SyncJobKey is the deterministic outbox key of a sync job: the same
// backfill (user, horizon) or the same reconciliation (user, interval slot)
// enqueued twice is claimed once. at is the horizon of a backfill or the
// start of a reconciliation's slot; mode is syncstate.SyncModeBackfill or
// SyncModeReconcile.
func SyncJobKey(mode, userID string, at time.Time) string {
	return strings.Join([]string{"STRAVA", "SYNC", mode, userID, strconv.FormatInt(at.Unix(), 10)}, sep)
}

// SyncRestartKey is the outbox key of an operator's restart of a user's
// sync (scripts/syncs): unique per restart, since the job it restarts has
// settled under its own key.
func SyncRestartKey(userID string, now time.Time) string {
	return strings.Join([]string{"STRAVA", "SYNC", "restart", userID, strconv.FormatInt(now.UnixNano(), 10)}, sep)
}

// OutboxPendingPK is the pending-index partition of an outbox item among
// shards (by a hash of its idempotency key, so pending items spread over
// the shards; shards < 1 means DefaultOutboxShards).
func OutboxPendingPK(idempotencyKey string, shards int) string {
	if shards < 1 {
		shards = DefaultOutboxShards
	}
	return OutboxPendingShardPK(shardOf(idempotencyKey, shards))
}

// OutboxPendingShardPK is the pending-index partition of one shard.
func OutboxPendingShardPK(shard int) string { return PrefixOutboxPending + strconv.Itoa(shard) }

// OutboxPendingSK is a pending item's sort key in the pending index: the
// instant it is next due (Unix ms, zero-padded so strings sort like numbers)
// and its key (unique).
func OutboxPendingSK(due time.Time, idempotencyKey string) string {
	return outboxInstant(due) + sep + idempotencyKey
}

// ParseOutboxPendingSK returns the due instant an OutboxPendingSK starts
// with; false when sk is not one.
func ParseOutboxPendingSK(sk string) (time.Time, bool) {
	ms, _, ok := strings.Cut(sk, sep)
	if !ok || len(ms) != 15 {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(n).UTC(), true
}

// OutboxDueBefore is the exclusive upper bound of the pending-index sort
// keys due at or before now.
func OutboxDueBefore(now time.Time) string { return outboxInstant(now.Add(time.Millisecond)) }

func outboxInstant(t time.Time) string { return fmt.Sprintf("%015d", max(0, t.UnixMilli())) }

// AthleteReadsWindow is Strava's short rate-limit window (15 minutes, aligned
// to :00/:15/:30/:45 UTC): the budget windows and the per-athlete read
// counters use it unless a simulator runs shorter ones (CC_STRAVA_WINDOW).
const AthleteReadsWindow = 15 * time.Minute

// athleteReadsLayout names a window by its start, to the second.
const athleteReadsLayout = "20060102150405"

// AthleteReadsKey addresses the read counter of an athlete for the window
// starting at windowStart (the caller truncates it to its window length).
func AthleteReadsKey(athleteID int64, windowStart time.Time) Key {
	return Key{AthletePK(athleteID), PrefixAthleteReads + windowStart.UTC().Format(athleteReadsLayout)}
}

// dayLayout names a UTC day.
const dayLayout = "20060102"

// AthleteDayReadsKey addresses the daily read counter of an athlete for the
// UTC day containing at.
func AthleteDayReadsKey(athleteID int64, at time.Time) Key {
	return Key{AthletePK(athleteID), PrefixAthleteDayReads + at.UTC().Format(dayLayout)}
}

// ReadersShards spreads a day's readers listing over this many GSI2
// partitions, so a flood of heavy readers never writes one partition hot.
const ReadersShards = 8

// ReadersShardPK is the GSI2 partition of one shard of the day's readers
// listing (the athletes whose daily read counter exists that day).
func ReadersShardPK(day time.Time, shard int) string {
	return PrefixReaders + day.UTC().Format(dayLayout) + sep + strconv.Itoa(shard)
}

// ReadersPK is the readers-listing partition of an athlete on the day
// containing at (ReadersShardPK of its shard).
func ReadersPK(athleteID int64, at time.Time) string {
	return ReadersShardPK(at, shardOf(strconv.FormatInt(athleteID, 10), ReadersShards))
}

// MilestoneCountKey addresses the count of a user's milestones
// (model.MilestoneCount), outside the range the recompute reads
// (GuardAndMilestones).
func MilestoneCountKey(userID string) Key { return Key{UserPK(userID), SKMilestoneCount} }

// UserGuardKey addresses a user's write guard (model.UserGuard): in the
// user's partition, just before the milestones, so the projector's one read
// of a user's milestones also reads the guard (GuardAndMilestones).
// Deleting a user's items always keeps it (store.DeleteUserItems).
func UserGuardKey(userID string) Key { return Key{UserPK(userID), SKGuard} }

// GuardAndMilestones bounds (inclusively) the sort keys of a user's guard,
// milestones and awards, and nothing else of the user's partition: GUARD
// sorts right before MILESTONE#, and every milestone or award key sorts
// before MILESTONE$ ('$' follows the separator '#').
func GuardAndMilestones() (from, through string) {
	return SKGuard, strings.TrimSuffix(PrefixMilestone, sep) + "$"
}

// RateLimitKey addresses the shared Strava rate-limit counter.
func RateLimitKey() Key { return Key{"RATELIMIT#STRAVA", "STATE"} }

// SyncReadsKey addresses shard shard of the counter of the Strava reads
// sync jobs took in the budget window of length windowLen starting at
// windowStart (the caller truncates it):
// SYNCREADS#STRAVA#W{seconds}#{start}#{shard} / COUNT. Each window has
// partitions of its own, so no partition collects the counts of every
// window; a long window (the day's) is split over SyncReadsShards of them
// (SyncReadsShardAllowance), so a day of sync reads is not one key's.
func SyncReadsKey(windowStart time.Time, windowLen time.Duration, shard int) Key {
	return Key{"SYNCREADS#STRAVA" + sep + "W" + strconv.FormatInt(int64(windowLen/time.Second), 10) + sep +
		windowStart.UTC().Format(athleteReadsLayout) + sep + strconv.Itoa(shard), "COUNT"}
}

// SyncReadsShards is the most counters a long budget window's sync reads
// are split over (a short window's counter is one item: its share is a few
// dozen reads).
const SyncReadsShards = 8

// syncReadsPerShard is how many reads of a long window's sync cap each
// counter of the split stands for (SyncReadsShardsFor).
const syncReadsPerShard = 1000

// SyncReadsShardsFor is how many counters a long window whose sync cap is
// capReads reads is split over: one per 1,000 reads, at least
// 1, at most SyncReadsShards. A small cap (Strava's default 1,000 reads a
// day leaves syncs 500) stays one counter: its writes are few, and split
// it would leave each shard a read or two early in the day. The cap is
// the same all window long unless Strava changes the limit mid-window.
func SyncReadsShardsFor(capReads int) int {
	return min(SyncReadsShards, max(1, capReads/syncReadsPerShard))
}

// SyncReadsTries is the shards a sync read tries, in order, of a window
// split over shards counters: the shard pick falls in, then one other
// chosen by pick (one shard when there is only one).
func SyncReadsTries(pick uint64, shards int) []int {
	shards = max(1, shards)
	first := int(pick % uint64(shards))
	if shards == 1 {
		return []int{first}
	}
	return []int{first, (first + 1 + int((pick/uint64(shards))%uint64(shards-1))) % shards}
}

// SyncReadsShardAllowance is shard i's part of allowed reads split over
// shards counters: allowed/shards, the remainder going to the first
// shards, so the parts sum to allowed exactly.
func SyncReadsShardAllowance(allowed, shards, i int) int {
	if shards <= 1 {
		return allowed
	}
	n := allowed / shards
	if i < allowed%shards {
		n++
	}
	return n
}

// ReconcileCursorKey addresses the reconciliation's enumeration cursor
// (syncstate.ReconcileCursor): one item, written once per page of users.
func ReconcileCursorKey() Key { return Key{"RECONCILE#STRAVA", "CURSOR"} }

// Sources of parked records: the failure paths that park instead of
// dropping, read back by redrive.
const (
	// ParkSourceProjector holds stream records the projector gave up on.
	ParkSourceProjector = "PROJECTOR"
	// ParkSourceWorker holds ingestion jobs that failed for good.
	ParkSourceWorker = "WORKER"
)

// ParkedShards is how many partitions the records of one parking source
// (ParkSourceProjector, ParkSourceWorker) spread over, by a hash of the
// record id: a burst of failures (a poison batch, a Strava outage) never
// writes one partition past its 1,000 writes/s. Readers query every shard
// (ParkedPartitions). Changing it moves where new records land; readers
// must query the old count's shards until those records expire.
const ParkedShards = 8

// ParkedPK is a source's unsharded partition: where records were parked
// before ParkedShards (still read, by ParkedPartitions, until they expire
// after ParkedRetentionDays) and the audit subject of a record parked
// without a user.
func ParkedPK(source string) string { return PrefixParked + source }

// ParkedShardPK is one shard of a source's parked records:
// PARKED#{source}#{shard}.
func ParkedShardPK(source string, shard int) string {
	return ParkedPK(source) + sep + strconv.Itoa(shard)
}

// ParkedPartitions lists every partition holding a source's parked
// records: the ParkedShards shards, then the unsharded legacy partition.
func ParkedPartitions(source string) []string {
	out := make([]string, 0, ParkedShards+1)
	for i := range ParkedShards {
		out = append(out, ParkedShardPK(source, i))
	}
	return append(out, ParkedPK(source))
}

// ParkedKey addresses one parked record, in the shard of a hash of its id
// (the local stand-in for a DLQ).
func ParkedKey(source, id string) Key {
	return Key{ParkedShardPK(source, shardOf(id, ParkedShards)), id}
}

// LegacyParkedKey addresses a record parked before ParkedShards (in the
// unsharded partition).
func LegacyParkedKey(source, id string) Key { return Key{ParkedPK(source), id} }

// ItemKind classifies a key of the CommitCollect table.
type ItemKind int

// The kinds of item ParseKey recognizes.
const (
	KindUnknown ItemKind = iota
	KindProfile
	KindStravaConnection
	KindWorkout
	KindMilestone
	KindAward
	KindModelMeta
	KindModelPart
	KindAthleteOwner
	KindSession
	KindAudit
	KindUserSession
	KindOAuthState
	KindAthleteReads
	KindSyncState
	KindUserGuard
	KindMilestoneCount
)

// ParsedKey is what ParseKey learned from a key.
type ParsedKey struct {
	Kind        ItemKind
	UserID      string
	ActivityID  int64
	MilestoneID string
	PartIndex   int
	ModelID     string
	AthleteID   int64
	SessionID   string
}

// ParseKey classifies a key and extracts its identifiers. It returns an error
// matching ErrInvalid for a key it cannot read.
func ParseKey(k Key) (ParsedKey, error) {
	var (
		p   ParsedKey
		why string
	)
	switch {
	case strings.HasPrefix(k.PK, PrefixUser):
		p, why = parseUserKey(strings.TrimPrefix(k.PK, PrefixUser), k.SK)
	case strings.HasPrefix(k.PK, PrefixModel):
		p, why = parseModelKey(strings.TrimPrefix(k.PK, PrefixModel), k.SK)
	case strings.HasPrefix(k.PK, PrefixStravaAthlete):
		p, why = parseAthleteKey(strings.TrimPrefix(k.PK, PrefixStravaAthlete), k.SK)
	case strings.HasPrefix(k.PK, PrefixSession):
		id := strings.TrimPrefix(k.PK, PrefixSession)
		if id == "" || k.SK != SKMeta {
			why = "session"
		}
		p = ParsedKey{Kind: KindSession, SessionID: id}
	case strings.HasPrefix(k.PK, PrefixOAuthState):
		if strings.TrimPrefix(k.PK, PrefixOAuthState) == "" || k.SK != SKMeta {
			why = "oauth state"
		}
		p = ParsedKey{Kind: KindOAuthState}
	default:
		return ParsedKey{Kind: KindUnknown}, nil
	}
	if why != "" {
		return ParsedKey{}, fmt.Errorf("parse key %s: %s: %w", k, why, ErrInvalid)
	}
	return p, nil
}

// parseUserKey parses the sort key of an item in USER#{user}; why says what
// is wrong when it cannot.
func parseUserKey(user, sk string) (p ParsedKey, why string) {
	if user == "" || strings.Contains(user, sep) {
		return p, "user id"
	}
	p.UserID = user
	switch {
	case sk == SKProfile:
		p.Kind = KindProfile
	case sk == SKStravaConnection:
		p.Kind = KindStravaConnection
	case sk == SKSyncStrava:
		p.Kind = KindSyncState
	case sk == SKMilestoneCount:
		p.Kind = KindMilestoneCount
	case sk == SKGuard:
		p.Kind = KindUserGuard
	case strings.HasPrefix(sk, PrefixWorkoutStrava):
		id, err := strconv.ParseInt(strings.TrimPrefix(sk, PrefixWorkoutStrava), 10, 64)
		if err != nil || id <= 0 {
			return p, "activity id"
		}
		p.Kind, p.ActivityID = KindWorkout, id
	case strings.HasPrefix(sk, PrefixMilestone):
		rest := strings.TrimPrefix(sk, PrefixMilestone)
		if i := strings.Index(rest, awardInfix); i >= 0 {
			n, err := strconv.Atoi(rest[i+len(awardInfix):])
			if err != nil || n < 0 || i == 0 {
				return p, "award"
			}
			p.Kind, p.MilestoneID, p.PartIndex = KindAward, rest[:i], n
		} else {
			if rest == "" || strings.Contains(rest, sep) {
				return p, "milestone id"
			}
			p.Kind, p.MilestoneID = KindMilestone, rest
		}
	case strings.HasPrefix(sk, PrefixAudit):
		p.Kind = KindAudit
	case strings.HasPrefix(sk, PrefixSession):
		id := strings.TrimPrefix(sk, PrefixSession)
		if id == "" || strings.Contains(id, sep) {
			return p, "session id"
		}
		p.Kind, p.SessionID = KindUserSession, id
	default:
		return p, "unknown user item"
	}
	return p, ""
}

// parseModelKey parses the sort key of an item in MODEL#{modelID}.
func parseModelKey(modelID, sk string) (p ParsedKey, why string) {
	p.ModelID = modelID
	if modelID == "" {
		return p, "model id"
	}
	switch {
	case sk == SKMeta:
		p.Kind = KindModelMeta
	case strings.HasPrefix(sk, PrefixPart):
		n, err := strconv.Atoi(strings.TrimPrefix(sk, PrefixPart))
		if err != nil || n < 0 {
			return p, "part index"
		}
		p.Kind, p.PartIndex = KindModelPart, n
	default:
		return p, "unknown model item"
	}
	return p, ""
}

// parseAthleteKey parses the sort key of an item in STRAVA#ATHLETE#{id}.
func parseAthleteKey(athlete, sk string) (p ParsedKey, why string) {
	id, err := strconv.ParseInt(athlete, 10, 64)
	if err != nil || id <= 0 {
		return p, "athlete id"
	}
	p.AthleteID = id
	switch {
	case sk == SKOwner:
		p.Kind = KindAthleteOwner
	case strings.HasPrefix(sk, PrefixAudit):
		p.Kind = KindAudit
	case strings.HasPrefix(sk, PrefixAthleteReads):
		if _, err := time.Parse(athleteReadsLayout, strings.TrimPrefix(sk, PrefixAthleteReads)); err != nil {
			return p, "athlete reads window"
		}
		p.Kind = KindAthleteReads
	case strings.HasPrefix(sk, PrefixAthleteDayReads):
		if _, err := time.Parse(dayLayout, strings.TrimPrefix(sk, PrefixAthleteDayReads)); err != nil {
			return p, "athlete reads day"
		}
		p.Kind = KindAthleteReads
	default:
		return p, "unknown athlete item"
	}
	return p, ""
}
