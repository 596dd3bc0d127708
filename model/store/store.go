// Package store is the DynamoDB adapter: it reads and writes model entities
// with aws-sdk-go-v2 (attributevalue, the expression builder) and translates
// DynamoDB's failures into model's error vocabulary. It never scans.
//
// The workout log and its index. The projector reads a user's workouts by
// start date (WorkoutLog), not by activity id: the main table has a local
// secondary index LSI1 whose sort key LSI1SK is keys.WorkoutDateSK
// (WORKOUT#{startDateUtc, fixed width with nanoseconds}#{activityId,
// zero-padded to 19 digits}), set by Workout.Stamp on every write. It is an
// LSI, not a GSI, on purpose: an LSI can be read strongly consistent, a GSI
// cannot, and the projector is triggered by the very write it must see (a
// GSI could miss a fresh workout until the next event). The price: an LSI
// exists only from table creation (scripts/migrate-lsi), and a user's items
// and LSI entries are limited to 10 GB, far above one athlete's workouts.
// LSI1 projects only WorkoutLogFields (INCLUDE), so the log never reads the
// table. Only workouts with a start date carry LSI1SK; tombstones (a delete
// that overtook its create) stay out.
//
// WorkoutLog queries the union of the windows asked (periods, or weeks of
// them; BETWEEN per merged window, newest first) and applies the guardrail
// (model.MaxWorkoutsToInspect): all it leaves out is older than all it
// keeps; Log.ExactFrom says from when the log is complete. Changing
// WorkoutDateSK's shape is replay-sensitive: re-key every workout
// (migrate-lsi -backfill after clearing LSI1SK) and rebuild.
//
// Hot keys. No partition takes a burst's writes alone: the outbox's Pending
// index spreads over dynamo.DB.OutboxShards (CC_OUTBOX_SHARDS, default 32; the 4
// legacy shards are always read), parked records over keys.ParkedShards per
// source (the legacy partition is read until its records expire), sync-page
// audit entries are routine (unindexed), and a dropped audit write is
// counted (AuditWritesDropped, alarmed). GSI1 and Pending project only what
// their readers decode. An index's projection cannot change in place:
// migrating, GSI1 and Pending are deleted and created again (Terraform plans
// it; CreateTables does it locally, see IndexSpec; apply in a quiet period:
// while Pending backfills the sweeper finds no due items, while GSI1 does an
// athlete without an OWNER item fails to resolve and its job is retried).
package store

import (
	"errors"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/milestones"
	"github.com/commitcollect/backend/model/store/outbox"
	"github.com/commitcollect/backend/model/store/pending"
)

// Adapters are the per-entity adapters over one shared dynamo.DB, each in
// the file (or the package beside this one: outbox, pending, milestones)
// named after it. Nothing reaches them together: the wiring
// (handlers/app) hands each use case the ones it uses, behind ports of
// the use case's own.
type Adapters struct {
	DB          *dynamo.DB
	Outbox      *outbox.Outbox
	Pending     *pending.Index
	Parked      *ParkedRecords
	Audits      *Audits
	Workouts    *Workouts
	Milestones  *milestones.Milestones
	Users       *Users
	Connections *Connections
	Guard       *Guard
	Collection  *milestones.Collection
}

// New opens the adapters over an injected client and table names
// (dynamo.New: calls made with a context carrying a capacity Meter are
// accounted in it).
func New(client *dynamodb.Client, t dynamo.Tables) *Adapters {
	d := dynamo.New(client, t)
	g := &Guard{DB: d}
	shards := func() int { return d.OutboxShards }
	return &Adapters{DB: d, Outbox: &outbox.Outbox{DB: d}, Pending: pending.New(d.Client(), t.Idempotency, shards), Parked: &ParkedRecords{DB: d},
		Audits: &Audits{DB: d}, Workouts: &Workouts{DB: d}, Milestones: &milestones.Milestones{DB: d, Guard: g}, Users: &Users{DB: d, Guard: g},
		Connections: &Connections{DB: d, Guard: g}, Guard: g, Collection: &milestones.Collection{DB: d}}
}

func isConflict(err error) bool { return errors.Is(err, model.ErrConflict) }
