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
	// PrefixUnverifiedReads and PrefixUnverifiedDayReads start the sort
	// keys of an athlete's counters of reads that only unverified events
	// asked for (UnverifiedReadsKey).
	PrefixUnverifiedReads    = "UNVERIFIED#READS#"
	PrefixUnverifiedDayReads = "UNVERIFIED#READSDAY#"

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
// configured (CC_OUTBOX_SHARDS, dynamo.DB.OutboxShards); the sweeper
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

// ParseWorkoutDateSK reads a WorkoutDateSK back: the start instant it
// orders by, and false for anything that is not such a key.
func ParseWorkoutDateSK(dateSK string) (time.Time, bool) {
	fields := strings.Split(dateSK, sep)
	if len(fields) < 3 || len(fields) > 4 || fields[0]+sep != PrefixWorkoutDate || len(fields[2]) != activityIDWidth {
		return time.Time{}, false
	}
	if _, err := strconv.ParseUint(fields[2], 10, 64); err != nil {
		return time.Time{}, false
	}
	t, err := time.Parse(workoutDateLayout, fields[1])
	if err != nil || WorkoutDateSK(t, 0, "")[:len(PrefixWorkoutDate)+len(fields[1])] != fields[0]+sep+fields[1] {
		return time.Time{}, false
	}
	if _, ok := WorkoutLocalDay(dateSK); len(fields) == 4 && !ok {
		return time.Time{}, false
	}
	return t, true
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
