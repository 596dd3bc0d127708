// Package consumer is the projector's stream consumer: it turns a batch of
// DynamoDB stream records into re-projections of the affected users'
// milestones, mints newly earned awards transactionally, writes audit
// entries and reports partial batch failures. handlers/projector wires it to
// Lambda; scripts use RecomputeUser so replays and rebuilds run the very
// same code.
//
// Every trigger is a reason to recompute the user from the log, never a
// delta: duplicates, replays and reordering are harmless. Replay
// sensitivity: see package projections. One file per step, each opening
// with its design notes:
//
//	trigger       classify each record once, at the boundary (triggers, the filter)
//	handle.go     group by user, fan out, settle failures, the partial batch response
//	recompute.go  read milestones then the log, project, retry on version conflicts
//	mint.go       award items and their audit in version-checked transactions (Plan, Token)
//	report.go     what a recompute found (projections.MilestoneReport) and the routine audit entries
//	metrics.go    one EMF line per batch
package consumer

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/ports"
)

// Audit event types the consumer writes.
const (
	EventProgressUpdated     = "MILESTONE_PROGRESS_UPDATED"
	EventAwardMinted         = "AWARD_MINTED"
	EventMilestoneCompleted  = "MILESTONE_COMPLETED"
	EventProjectionTruncated = "PROJECTION_TRUNCATED"
	EventRecordParked        = "PROJECTOR_RECORD_PARKED"
)

// Stores are the adapters a Consumer is handed, each behind the port of
// what the consumer does with it (the wiring hands the DynamoDB adapters;
// tests, fakes of the ports they exercise). Every field is required.
type Stores struct {
	Milestones MilestoneStore
	Series     SeriesStore
	Catalog    Catalog
	Log        LogReader
	Audits     AuditLog
	Parked     Parker
	Guard      GuardedRemover
	Collection Collector
}

// MilestoneStore reads a user's milestones, writes a projection (with its
// awards) and reads which awards were audited.
type MilestoneStore interface {
	UserMilestones(ctx context.Context, userID string) (ports.UserMilestones, error)
	WriteProjection(ctx context.Context, w ports.ProjectionWrite) error
	AwardAudits(ctx context.Context, userID, milestoneID string, keyAt time.Time) (map[int]bool, error)
}

// SeriesStore reads and starts the periods of a series.
type SeriesStore interface {
	// SeriesPeriods reads the periods starting on starts (nil: every
	// period) with their awards; periods never written are absent.
	SeriesPeriods(ctx context.Context, userID, milestoneID string, starts []string) (map[string]ports.SeriesPeriod, error)
	// StartPeriod writes a period's item at version 0 unless it exists,
	// while its series exists (ErrConflict when it is gone); an item that
	// exists lends p its createdAtUtc.
	StartPeriod(ctx context.Context, p *model.Milestone) error
}

// Catalog reads a model's parts, whose names and metadata awards carry.
type Catalog interface {
	ModelParts(ctx context.Context, modelID string) (map[int]model.ModelPart, error)
}

// LogReader reads a user's workouts in the windows asked.
type LogReader interface {
	WorkoutLog(ctx context.Context, userID string, windows []model.Window) (ports.WorkoutLog, error)
}

// AuditLog writes audit entries and reads those of one instant.
type AuditLog interface {
	AppendAudit(ctx context.Context, e *model.AuditEntry) error
	AuditEntriesAt(ctx context.Context, userID string, at time.Time) ([]model.AuditEntry, error)
}

// Parker parks a record the consumer cannot project.
type Parker interface {
	Park(ctx context.Context, r *ops.ParkedRecord) error
}

// GuardedRemover removes workouts written while the user's guard held.
type GuardedRemover interface {
	RemoveGuarded(ctx context.Context, g *model.UserGuard, ks []model.Key) (int, error)
}

// Collector files award items minted before the collection existed
// (model.Award.Collected false) in the user's collection.
type Collector interface {
	CollectAwards(ctx context.Context, awards []model.Award) error
}

// Options tune a Consumer; the zero value is usable.
type Options struct {
	// Logger receives JSON logs (default: discard).
	Logger *slog.Logger
	// Metrics receives one CloudWatch Embedded Metric Format line per batch
	// (default os.Stdout, which Lambda forwards to CloudWatch Logs).
	Metrics io.Writer
	// Now is the clock (default time.Now in UTC).
	Now func() time.Time
	// Meter counts what a batch's DynamoDB calls cost: it returns the
	// context the batch runs under and the function that reads the count
	// (the wiring hands the store's meter; nil: nothing is counted, and
	// the batch's capacity metrics are 0).
	Meter func(ctx context.Context) (context.Context, func() Cost)
	// MaxAttempts bounds how often one user is re-read and recomputed after
	// version conflicts (default 8).
	MaxAttempts int
	// BackoffBase and BackoffMax shape the full-jitter backoff between
	// attempts (default 20ms and 1s).
	BackoffBase, BackoffMax time.Duration
	// Concurrency is how many users of one batch are projected in parallel
	// (default 4).
	Concurrency int
	// BeforeWrite, when set, runs after a user's state was read and before
	// anything is written (not in dry runs). It exists for tests and fault
	// injection: it lets a test interleave concurrent projections.
	BeforeWrite func(ctx context.Context, userID string)
	// PartsTTL is how long a warm consumer keeps a model's parts (the
	// catalog) before reading them again (default DefaultPartsTTL; negative:
	// read them for every mint).
	PartsTTL time.Duration
}

// DefaultPartsTTL bounds how long a catalog change (a part's name or
// metadata) can go unseen by awards minted in a warm projector.
const DefaultPartsTTL = 5 * time.Minute

// Consumer projects milestones from stream batches and on demand. It is safe
// for concurrent use.
type Consumer struct {
	st    Stores
	o     Options
	stats struct {
		seen, ignored, failed, parked, users, conflicts, writes, awards atomic.Int64
	}
	minter   *minter
	recorder recorder
}

// New returns a Consumer over the adapters st.
func New(st Stores, o Options) *Consumer {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Metrics == nil {
		o.Metrics = os.Stdout
	}
	if o.Now == nil {
		o.Now = func() time.Time { return time.Now().UTC() }
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 8
	}
	if o.BackoffBase <= 0 {
		o.BackoffBase = 20 * time.Millisecond
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = time.Second
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.PartsTTL == 0 {
		o.PartsTTL = DefaultPartsTTL
	}
	return &Consumer{st: st, o: o, minter: &minter{st: st.Catalog, ttl: o.PartsTTL, cached: map[string]cachedParts{}},
		recorder: recorder{audits: st.Audits, parked: st.Parked, log: o.Logger, now: o.Now}}
}

// Stats are the consumer's cumulative counters since New.
type Stats struct {
	RecordsSeen, RecordsIgnored, RecordsFailed, RecordsParked int64
	UsersProjected                                            int64
	// ConflictsRetried counts re-reads after a version conflict (or a
	// transaction conflict / throttling).
	ConflictsRetried int64
	// Writes counts milestone writes (UpdateItem or TransactWriteItems).
	Writes int64
	// AwardsMinted counts award items written.
	AwardsMinted int64
}

// Stats returns the cumulative counters.
func (c *Consumer) Stats() Stats {
	s := &c.stats
	return Stats{
		RecordsSeen: s.seen.Load(), RecordsIgnored: s.ignored.Load(), RecordsFailed: s.failed.Load(),
		RecordsParked: s.parked.Load(), UsersProjected: s.users.Load(), ConflictsRetried: s.conflicts.Load(),
		Writes: s.writes.Load(), AwardsMinted: s.awards.Load(),
	}
}
