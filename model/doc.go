// Package model is CommitCollect's domain: the entities stored in DynamoDB, the
// keys that address them, their schema versions, the guardrails and the error
// vocabulary. It depends on the standard library only (imports_test.go
// checks); technology adapters live in subpackages (model/store is the
// DynamoDB adapter, model/streams the DynamoDB Streams reader, model/strava
// the Strava client).
//
// Replay sensitivity: renaming a key prefix in model/keys, or changing how an
// entity's schema version is normalized, changes what the projector reads and
// forces a rebuild (scripts/rebuild) of every projected milestone.
package model

import "github.com/commitcollect/backend/model/keys"

// Guardrails shared by every reader and writer.
const (
	// MaxWorkoutsToInspect bounds how many workout items one recompute reads:
	// the newest ones inside the user's milestone periods, read by start date
	// (WorkoutDateSK), so what it leaves out is always older than what it
	// keeps, and a milestone whose period reaches past the cut is marked
	// truncated with the instant from which it is exact.
	MaxWorkoutsToInspect = 3000
	// BatchWriteChunk is DynamoDB's BatchWriteItem limit.
	BatchWriteChunk = 25
	// TransactionLimit is DynamoDB's TransactWriteItems limit.
	TransactionLimit = 100
	// MaxPartCount bounds a model's parts so that one transaction holds the
	// milestone update plus every award; with their AWARD_MINTED entries a
	// mint of more than 33 parts (each with its collection entry) takes several transactions (consumer.Plan).
	MaxPartCount = keys.MaxPartCount
	// AuditRetentionDays is how long audit entries live (TTL).
	AuditRetentionDays = 90
	// UnlinkedAuditRetentionDays is how long an audit entry that may hold
	// a Strava id lives when no account stands behind it: entries filed
	// under an athlete (events of no user, refused events) from their
	// writing, and a deleted user's entries from the deletion. DynamoDB's
	// TTL removes an expired item within about two days, so none outlives
	// 7 days.
	UnlinkedAuditRetentionDays = 3
	// UserGuardRetentionDays is how long a deleted user's guard
	// (model.UserGuard) outlives the deletion: far longer than any job in
	// flight can take (a pending outbox item for the user resolves its
	// athlete again and finds no user), as long as the audit trail.
	UserGuardRetentionDays = 90
	// ParkedRetentionDays is how long a parked record (ops.ParkedRecord, package model/ops)
	// is kept for an operator's redrive before its TTL removes it: a month
	// of alarms to act on, and no workout image kept for good.
	ParkedRetentionDays = 30
	// MaxMilestonesPerUser caps a user's milestones (POST /v1/milestones
	// refuses more with 409 milestone_limit). A recompute reads the user's
	// whole MILESTONE# range (milestones and their awards, at most
	// MaxPartCount each) with the same guardrail as workouts
	// (MaxWorkoutsToInspect items): 25 × (1 + 99) = 2500 items always fit,
	// so the projection never misses a milestone or an award.
	MaxMilestonesPerUser = 25
)
