package keys

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

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

// BurstLeaseKey is the idempotency table's key of an athlete's burst
// lease (model/store's LeaseBurst): one item per athlete, outside the
// pending index, that holds while a burst of the athlete's events is in
// flight.
func BurstLeaseKey(athleteID int64) string {
	return strings.Join([]string{"STRAVA", "BURSTLEASE", strconv.FormatInt(athleteID, 10)}, sep)
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

// OutboxDroppedPK is the pending-index partition of the events dropped
// for subscriptionID (a subscription the webhook does not accept): apart
// from the shards the sweeper reads, so nothing dispatches them until an
// operator re-admits a subscription's events.
func OutboxDroppedPK(subscriptionID int64) string {
	return "OUTBOX#DROPPED#" + strconv.FormatInt(subscriptionID, 10)
}

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
