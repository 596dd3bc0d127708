package keys

import (
	"strconv"
	"strings"
	"time"
)

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

// UnverifiedReadsKey addresses the athlete's counter, for the window
// starting at windowStart, of the reads that only unverified events asked
// for (a list walk's deeper pages, a second look for activities a walk did
// not show): the unverified allowance, apart from the athlete's own caps.
func UnverifiedReadsKey(athleteID int64, windowStart time.Time) Key {
	return Key{AthletePK(athleteID), PrefixUnverifiedReads + windowStart.UTC().Format(athleteReadsLayout)}
}

// UnverifiedDayReadsKey addresses the daily counter of the unverified
// allowance (UnverifiedReadsKey) for the UTC day containing at.
func UnverifiedDayReadsKey(athleteID int64, at time.Time) Key {
	return Key{AthletePK(athleteID), PrefixUnverifiedDayReads + at.UTC().Format(dayLayout)}
}

// ReadsCounterKey is UnverifiedReadsKey when unverified, else
// AthleteReadsKey.
func ReadsCounterKey(athleteID int64, windowStart time.Time, unverified bool) Key {
	if unverified {
		return UnverifiedReadsKey(athleteID, windowStart)
	}
	return AthleteReadsKey(athleteID, windowStart)
}

// DayReadsCounterKey is UnverifiedDayReadsKey when unverified, else
// AthleteDayReadsKey.
func DayReadsCounterKey(athleteID int64, at time.Time, unverified bool) Key {
	if unverified {
		return UnverifiedDayReadsKey(athleteID, at)
	}
	return AthleteDayReadsKey(athleteID, at)
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
