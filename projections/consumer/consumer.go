// Package consumer is the projector's stream consumer: it turns a batch of
// DynamoDB stream records into re-projections of the affected users'
// milestones, mints newly earned awards transactionally, writes audit
// entries and reports partial batch failures. handlers/projector wires it to
// Lambda; scripts use RecomputeUser so replays and rebuilds run the very
// same code.
//
// Every trigger is a reason to recompute the user from the log, never a
// delta: duplicates, replays and reordering are harmless. Replay
// sensitivity: see package projections.
package consumer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/projections"
)

// Audit event types the consumer writes.
const (
	EventProgressUpdated     = "MILESTONE_PROGRESS_UPDATED"
	EventAwardMinted         = "AWARD_MINTED"
	EventMilestoneCompleted  = "MILESTONE_COMPLETED"
	EventProjectionTruncated = "PROJECTION_TRUNCATED"
	EventRecordParked        = "PROJECTOR_RECORD_PARKED"
)

// Store is what the consumer needs from the DynamoDB adapter.
type Store interface {
	UserMilestones(ctx context.Context, userID string) (store.UserMilestones, error)
	WorkoutLog(ctx context.Context, userID string, windows []model.Window) (store.Log, error)
	ModelParts(ctx context.Context, modelID string) (map[int]model.ModelPart, error)
	WriteProjection(ctx context.Context, w store.ProjectionWrite) error
	AwardAudits(ctx context.Context, userID, milestoneID string, keyAt time.Time) (map[int]bool, error)
	AuditEntriesAt(ctx context.Context, userID string, at time.Time) ([]model.AuditEntry, error)
	AppendAudit(ctx context.Context, e *model.AuditEntry) error
	Park(ctx context.Context, r *model.ParkedRecord) error
}

var _ Store = (*store.Store)(nil)

// Options tune a Consumer; the zero value is usable.
type Options struct {
	// Logger receives JSON logs (default: discard).
	Logger *slog.Logger
	// Metrics receives one CloudWatch Embedded Metric Format line per batch
	// (default os.Stdout, which Lambda forwards to CloudWatch Logs).
	Metrics io.Writer
	// Now is the clock (default time.Now in UTC).
	Now func() time.Time
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
	st    Store
	o     Options
	stats struct {
		seen, ignored, failed, parked, users, conflicts, writes, awards atomic.Int64
	}
	partsMu sync.Mutex
	parts   map[string]cachedParts // by model id
}

// cachedParts is a model's parts as read at readAt.
type cachedParts struct {
	parts  map[int]model.ModelPart
	readAt time.Time
}

// New returns a Consumer over st.
func New(st Store, o Options) *Consumer {
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
	return &Consumer{st: st, o: o, parts: map[string]cachedParts{}}
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

// MilestoneReport compares one milestone's stored projection with the one
// recomputed from the log.
type MilestoneReport struct {
	MilestoneID string
	Stored      model.Projection
	Recomputed  model.Projection
	// Changed: the recomputed projection differs from the stored one.
	Changed bool
	// NewParts are parts the log earns that were not awarded yet.
	NewParts []int
	// MissingAwards are justified parts the stored projection counts as
	// awarded but whose award item does not exist (minted again).
	MissingAwards []int
	// Unjustified are parts the stored state claims (in awardedParts, or
	// with an award item) that neither the log nor an award item with its
	// AWARD_MINTED audit entry justifies: never minted, not counted.
	Unjustified []int
	// Justified is how many parts the log or the held awards justify (the
	// recomputed awardedParts); Earned how many the log alone earns.
	Justified, Earned int
	// Minted are the award items written (or, in a dry run, that would be).
	Minted []int
	// Written: the projection was stored (never in a dry run).
	Written bool
	// Version is the milestone's version after this run.
	Version int64
	// Skipped says why the milestone could not be projected (invalid
	// definition); empty otherwise.
	Skipped string
}

// Drift reports whether the stored state differs from the log's.
func (r MilestoneReport) Drift() bool { return len(r.Diffs()) > 0 }

// Diffs lists the differences between stored and recomputed state, one
// "field: stored X, recomputed Y" per line.
func (r MilestoneReport) Diffs() []string {
	var out []string
	diff := func(field string, a, b any) {
		if a != b {
			out = append(out, fmt.Sprintf("%s: stored %v, recomputed %v", field, a, b))
		}
	}
	s, n := r.Stored, r.Recomputed
	diff("progressValue", s.ProgressValue, n.ProgressValue)
	diff("workoutsCounted", s.WorkoutsCounted, n.WorkoutsCounted)
	diff("awardedParts", s.AwardedParts, n.AwardedParts)
	diff("status", s.Status, n.Status)
	diff("truncated", s.Truncated, n.Truncated)
	diff("exactFromUtc", fmtInstant(s.ExactFromUtc), fmtInstant(n.ExactFromUtc))
	if len(r.MissingAwards) > 0 {
		out = append(out, fmt.Sprintf("award items missing for parts %v", r.MissingAwards))
	}
	if len(r.Unjustified) > 0 {
		out = append(out, r.UnjustifiedMessage())
	}
	return out
}

// UnjustifiedMessage explains Unjustified for operators ("" when empty).
func (r MilestoneReport) UnjustifiedMessage() string {
	if len(r.Unjustified) == 0 {
		return ""
	}
	return fmt.Sprintf("awardedParts beyond what is justified: stored %d, justified %d (the log earns %d); parts %v have no award item "+
		"with its AWARD_MINTED audit entry and are neither minted nor counted", r.Stored.AwardedParts, r.Justified, r.Earned, r.Unjustified)
}

// fmtInstant renders an optional instant for drift reports ("-" when unset).
func fmtInstant(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// UserReport is the outcome of re-projecting one user.
type UserReport struct {
	UserID string
	// Workouts inspected and whether the log hit the guardrail (then
	// ExactFrom is the instant from which it is complete).
	Workouts  int
	Truncated bool
	ExactFrom time.Time
	// Milestones in milestone id order.
	Milestones []MilestoneReport
	// Unreadable lists milestone or award items left alone because they
	// could not be decoded (e.g. a newer schema).
	Unreadable []string
	// Attempts is how many read-compute-write rounds it took.
	Attempts int
}

// RecomputeUser re-projects every milestone of userID from the workout log,
// exactly as the stream path does. With dryRun it writes nothing and
// returns the per-milestone differences between stored and recomputed
// state; otherwise it writes them (version-checked, awards minted in a
// transaction, audited), retrying version conflicts. It returns an error
// wrapping model.ErrConflict when conflicts persist past MaxAttempts,
// model.ErrUnsupportedSchema when the log holds a workout written by newer
// code, and the store's errors otherwise.
func (c *Consumer) RecomputeUser(ctx context.Context, userID string, dryRun bool) (UserReport, error) {
	return c.recompute(ctx, userID, "", dryRun)
}

func (c *Consumer) recompute(ctx context.Context, userID, correlationID string, dryRun bool) (UserReport, error) {
	log := c.o.Logger.With("userId", userID)
	var lastErr error
	for attempt := 0; attempt < c.o.MaxAttempts; attempt++ {
		if attempt > 0 {
			c.stats.conflicts.Add(1)
			d := model.Backoff(attempt-1, c.o.BackoffBase, c.o.BackoffMax)
			log.InfoContext(ctx, "conflict, re-reading", "attempt", attempt, "backoff", d.String(), "error", lastErr)
			if err := model.Sleep(ctx, d); err != nil {
				return UserReport{UserID: userID, Attempts: attempt}, fmt.Errorf("project user %s: %w", userID, err)
			}
		}
		rep, err := c.once(ctx, userID, correlationID, dryRun)
		rep.Attempts = attempt + 1
		if err == nil {
			c.stats.users.Add(1)
			return rep, nil
		}
		if !errors.Is(err, model.ErrConflict) && !errors.Is(err, model.ErrRetryable) {
			return rep, fmt.Errorf("project user %s: %w", userID, err)
		}
		lastErr = err
	}
	return UserReport{UserID: userID, Attempts: c.o.MaxAttempts},
		fmt.Errorf("project user %s: gave up after %d attempts: %w", userID, c.o.MaxAttempts, lastErr)
}

// once is one read-compute-write round. Milestones are read before the log:
// a concurrent projection that wrote after our milestone read makes our
// write conflict, and one that wrote before it read a log no newer than
// ours, so the last successful write always reflects every workout written
// before it (no lost progress).
func (c *Consumer) once(ctx context.Context, userID, correlationID string, dryRun bool) (UserReport, error) {
	rep := UserReport{UserID: userID}
	um, err := c.st.UserMilestones(ctx, userID)
	if err != nil {
		return rep, err
	}
	for _, u := range um.Unreadable {
		rep.Unreadable = append(rep.Unreadable, fmt.Sprintf("%s: %v", u.Key, u.Err))
		c.o.Logger.WarnContext(ctx, "milestone item left alone: unreadable", "userId", userID, "key", u.Key.String(), "error", u.Err)
	}
	if len(um.Milestones) == 0 {
		return rep, nil // nothing to project: skip reading the log
	}
	// Only workouts inside a milestone's period can count: read just those
	// (the union of the periods, newest first, up to the guardrail). Every
	// projected milestone contributes its period, completed ones included:
	// their value still follows the log (awards never go back).
	var windows []model.Window
	for _, m := range um.Milestones {
		if projections.Validate(m.MilestoneDefinition) == nil {
			windows = append(windows, m.Window())
		}
	}
	wl, err := c.st.WorkoutLog(ctx, userID, windows)
	if err != nil {
		return rep, err
	}
	rep.Workouts, rep.Truncated, rep.ExactFrom = len(wl.Workouts), wl.Truncated, wl.ExactFrom
	if c.o.BeforeWrite != nil && !dryRun {
		c.o.BeforeWrite(ctx, userID)
	}
	now := c.o.Now()
	lg := projections.Log{Workouts: wl.Workouts, Truncated: wl.Truncated, ExactFrom: wl.ExactFrom}
	parts := map[string]map[int]model.ModelPart{}
	for i := range um.Milestones {
		mr, err := c.milestone(ctx, &um.Milestones[i], um.Awards[um.Milestones[i].MilestoneID], lg, now, correlationID, dryRun, parts)
		rep.Milestones = append(rep.Milestones, mr)
		if err != nil {
			return rep, err
		}
	}
	return rep, nil
}

func (c *Consumer) milestone(ctx context.Context, m *model.Milestone, existing map[int]model.Award, lg projections.Log,
	now time.Time, correlationID string, dryRun bool, partCache map[string]map[int]model.ModelPart) (MilestoneReport, error) {
	log := c.o.Logger.With("userId", m.UserID, "milestoneId", m.MilestoneID)
	mr := MilestoneReport{MilestoneID: m.MilestoneID, Stored: m.Projection, Recomputed: m.Projection, Version: m.Version}
	held := projections.Held{Minted: make(map[int]time.Time, len(existing))}
	for i, a := range existing {
		held.Minted[i] = a.AwardedAtUtc
	}
	res, err := projections.ProjectWith(m.MilestoneDefinition, m.Projection, held, lg, now)
	if err != nil {
		mr.Skipped = err.Error()
		log.WarnContext(ctx, "milestone not projected: invalid definition", "error", err)
		return mr, nil
	}
	// The AWARD_MINTED entries matter only for a claim the log does not
	// justify, or for a part about to be minted (its entry exists already
	// when only its award item was lost): read them then, not on every
	// recompute.
	if len(res.Unjustified) > 0 || len(unminted(res.Projection.AwardedParts, m.PartCount, existing)) > 0 {
		if held.Audited, err = c.st.AwardAudits(ctx, m.UserID, m.MilestoneID, m.CreatedAtUtc); err != nil {
			return mr, err
		}
		if res, err = projections.ProjectWith(m.MilestoneDefinition, m.Projection, held, lg, now); err != nil {
			return mr, err
		}
	}
	if found, err := c.legacyAudits(ctx, m, res.Unjustified, held); err != nil {
		return mr, err
	} else if found {
		if res, err = projections.ProjectWith(m.MilestoneDefinition, m.Projection, held, lg, now); err != nil {
			return mr, err
		}
	}
	mr.Recomputed, mr.Changed, mr.NewParts = res.Projection, res.Changed, res.NewParts
	mr.Unjustified, mr.Justified, mr.Earned = res.Unjustified, res.Projection.AwardedParts, res.Earned
	if p := res.Projection; p.Truncated {
		log.WarnContext(ctx, "milestone truncated by the guardrail: older workouts of its period were not read",
			"exactFromUtc", fmtInstant(p.ExactFromUtc), "periodStartAtUtc", m.PeriodStartAtUtc.UTC().Format(time.RFC3339),
			"workoutsInspected", len(lg.Workouts), "limit", model.MaxWorkoutsToInspect, "correlationId", correlationID)
	}
	for i := 0; i < min(m.AwardedParts, res.Projection.AwardedParts); i++ {
		if _, ok := existing[i]; !ok {
			mr.MissingAwards = append(mr.MissingAwards, i)
		}
	}
	mr.Minted = unminted(res.Projection.AwardedParts, m.PartCount, existing)
	if len(res.Unjustified) > 0 {
		log.WarnContext(ctx, "stored awards not justified by the log or an audited award: not minted, not counted",
			"storedAwardedParts", m.AwardedParts, "justified", res.Projection.AwardedParts, "earned", res.Earned,
			"unjustifiedParts", res.Unjustified, "correlationId", correlationID)
	}
	if dryRun || (!res.Changed && len(mr.Minted) == 0) {
		return mr, nil
	}

	awards := make([]*model.Award, 0, len(mr.Minted))
	audits := map[int]*model.AuditEntry{}
	if len(mr.Minted) > 0 {
		parts, ok := partCache[m.ModelID]
		if !ok {
			if parts, err = c.modelParts(ctx, m.ModelID, m.PartCount, now); err != nil {
				return mr, err
			}
			partCache[m.ModelID] = parts
		}
		for _, i := range mr.Minted {
			a := &model.Award{UserID: m.UserID, MilestoneID: m.MilestoneID, ModelID: m.ModelID, PartIndex: i,
				AwardedAtUtc: now, CorrelationID: correlationID}
			if p, ok := parts[i]; ok {
				a.PartName, a.PartMetadata = p.Name, p.Metadata
			} else {
				log.WarnContext(ctx, "model part missing: award minted without metadata", "modelId", m.ModelID, "partIndex", i)
			}
			if cr, ok := res.Tipping(i); ok {
				a.ActivityID, a.CorrelationID = cr.ActivityID, cr.CorrelationID
			}
			awards = append(awards, a)
			if held.Audited[i] {
				continue // audited when the lost item was first minted: once is enough
			}
			corr := a.CorrelationID
			if corr == "" {
				corr = correlationID
			}
			audits[i] = model.NewAwardMintedAudit(m.UserID, m.MilestoneID, m.CreatedAtUtc, i, EventAwardMinted, corr, now,
				map[string]string{"milestoneId": m.MilestoneID, "modelId": a.ModelID, "partIndex": strconv.Itoa(i),
					"partName": a.PartName, "activityId": strconv.FormatInt(a.ActivityID, 10)})
		}
	}
	for _, w := range Plan(m, res.Projection, existing, awards, audits) {
		w.Token = Token(w)
		if err := c.st.WriteProjection(ctx, w); err != nil {
			return mr, err
		}
		mr.Written, mr.Version = true, w.ExpectedVersion+1
		c.stats.writes.Add(1)
		c.stats.awards.Add(int64(len(w.Awards)))
		for _, a := range w.Awards {
			log.InfoContext(ctx, "award minted", "partIndex", a.PartIndex, "activityId", a.ActivityID, "correlationId", a.CorrelationID,
				"version", mr.Version)
		}
	}
	log.InfoContext(ctx, "milestone projected", "version", mr.Version, "progressValue", res.Projection.ProgressValue,
		"awardedParts", res.Projection.AwardedParts, "status", res.Projection.Status, "minted", mr.Minted, "correlationId", correlationID)

	details := map[string]string{
		"milestoneId": m.MilestoneID, "version": strconv.FormatInt(mr.Version, 10),
		"progressValue": strconv.FormatInt(res.Projection.ProgressValue, 10), "workoutsCounted": strconv.Itoa(res.Projection.WorkoutsCounted),
		"awardedParts": strconv.Itoa(res.Projection.AwardedParts), "status": string(res.Projection.Status),
	}
	if len(res.Unjustified) > 0 {
		details["storedAwardedParts"] = strconv.Itoa(m.AwardedParts)
		details["unjustifiedParts"] = fmt.Sprint(res.Unjustified)
	}
	if res.Changed {
		c.audit(ctx, m.UserID, EventProgressUpdated, correlationID, now, mr.Version, -1, details)
	}
	if res.Completed {
		c.audit(ctx, m.UserID, EventMilestoneCompleted, correlationID, now, mr.Version, -1, details)
	}
	if res.BecameTruncated {
		details["workoutsInspected"] = strconv.Itoa(len(lg.Workouts))
		details["exactFromUtc"] = fmtInstant(res.Projection.ExactFromUtc)
		c.audit(ctx, m.UserID, EventProjectionTruncated, correlationID, now, mr.Version, -1, details)
	}
	return mr, nil
}

// modelParts returns a model's parts: the warm consumer's copy while it is
// younger than PartsTTL, else the table's. Only a complete catalog (every
// part of partCount) is kept, so a model still being seeded is read again.
func (c *Consumer) modelParts(ctx context.Context, modelID string, partCount int, now time.Time) (map[int]model.ModelPart, error) {
	c.partsMu.Lock()
	e, ok := c.parts[modelID]
	c.partsMu.Unlock()
	if ok && c.o.PartsTTL > 0 && now.Sub(e.readAt) < c.o.PartsTTL && !now.Before(e.readAt) {
		return e.parts, nil
	}
	parts, err := c.st.ModelParts(ctx, modelID)
	if err != nil {
		return nil, err
	}
	if c.o.PartsTTL > 0 && len(parts) >= partCount {
		c.partsMu.Lock()
		c.parts[modelID] = cachedParts{parts: parts, readAt: now}
		c.partsMu.Unlock()
	}
	return parts, nil
}

// legacyAudits looks for the AWARD_MINTED entries of unjustified award
// items that were minted before audit keys were deterministic: those were
// written after the mint, keyed at the second of the award's awardedAtUtc.
// It marks the parts it finds in held.Audited and reports whether it found
// any. One Query per distinct second, and only for award items the log
// does not justify, so the common path never pays for it.
func (c *Consumer) legacyAudits(ctx context.Context, m *model.Milestone, unjustified []int, held projections.Held) (bool, error) {
	if held.Audited == nil {
		return false, nil // nothing unjustified: the entries were not even needed
	}
	bySecond := map[int64][]int{}
	for _, i := range unjustified {
		if at, ok := held.Minted[i]; ok {
			bySecond[at.Unix()] = append(bySecond[at.Unix()], i)
		}
	}
	found := false
	for sec, parts := range bySecond {
		es, err := c.st.AuditEntriesAt(ctx, m.UserID, time.Unix(sec, 0))
		if err != nil {
			return false, err
		}
		for _, e := range es {
			i, err := strconv.Atoi(e.Details["partIndex"])
			if e.EventType != EventAwardMinted || e.Details["milestoneId"] != m.MilestoneID || err != nil || !slices.Contains(parts, i) {
				continue
			}
			held.Audited[i], found = true, true
		}
	}
	return found, nil
}

// unminted lists the parts below awarded (and partCount) without an award
// item, ascending: what a write must mint.
func unminted(awarded, partCount int, existing map[int]model.Award) []int {
	var out []int
	for i := 0; i < min(awarded, partCount); i++ {
		if _, ok := existing[i]; !ok {
			out = append(out, i)
		}
	}
	return out
}

// Plan splits one milestone's write into version-checked transactions of at
// most model.TransactionLimit items each: the milestone update, then the
// awards in part order, each with its AWARD_MINTED entry (audits, by part)
// in the same transaction. Write k expects version m.Version+k. Every write
// but the last stores the consistent prefix it completes: awardedParts
// counts the leading parts whose award items exist by then, status is
// completed only if that is every part, and the last write stores final.
// (A stored counter that final still justifies is never lowered meanwhile,
// even when a lost award item below it is re-minted by a later write.) A
// crash between two writes therefore leaves awards that all have their
// audit entries under a counter that claims no new part without its award,
// and the next recompute mints the rest. Without awards it is the single
// update of final.
func Plan(m *model.Milestone, final model.Projection, existing map[int]model.Award, awards []*model.Award,
	audits map[int]*model.AuditEntry) []store.ProjectionWrite {
	base := store.ProjectionWrite{UserID: m.UserID, MilestoneID: m.MilestoneID}
	out := []store.ProjectionWrite{base}
	for _, a := range awards {
		need := 1
		if audits[a.PartIndex] != nil {
			need = 2
		}
		if w := &out[len(out)-1]; len(w.Awards) > 0 && w.Items()+need > model.TransactionLimit {
			out = append(out, base)
		}
		w := &out[len(out)-1]
		w.Awards = append(w.Awards, a)
		if e := audits[a.PartIndex]; e != nil {
			w.Audits = append(w.Audits, e)
		}
	}
	have := make(map[int]bool, len(existing)+len(awards))
	for i := range existing {
		have[i] = true
	}
	for k := range out {
		w := &out[k]
		w.ExpectedVersion, w.Projection = m.Version+int64(k), final
		if k == len(out)-1 {
			break
		}
		for _, a := range w.Awards {
			have[a.PartIndex] = true
		}
		n := 0
		for n < final.AwardedParts && have[n] {
			n++
		}
		w.Projection.AwardedParts = max(n, min(m.AwardedParts, final.AwardedParts))
		w.Projection.Status = model.StatusActive
		if w.Projection.AwardedParts >= m.PartCount {
			w.Projection.Status = model.StatusCompleted
		}
	}
	return out
}

// Token derives a transaction's ClientRequestToken from everything the
// transaction writes except timestamps (the audit entries by their
// deterministic keys): the same computation retried (by the SDK, or by a
// redelivered batch) sends the same token, so DynamoDB applies it once. A
// cancelled transaction does not use up its token (so DynamoDB Local
// shows); after a success the same token with other timestamps is
// IdempotentParameterMismatch, which WriteProjection reports as a conflict
// (re-read: the version moved). It is 32 hex characters (DynamoDB allows 36).
func Token(w store.ProjectionWrite) string {
	p := w.Projection
	parts := []string{w.UserID, w.MilestoneID, strconv.FormatInt(w.ExpectedVersion, 10),
		strconv.FormatInt(p.ProgressValue, 10), strconv.Itoa(p.WorkoutsCounted), strconv.Itoa(p.AwardedParts),
		string(p.Status), strconv.FormatBool(p.Truncated), fmtInstant(p.ExactFromUtc)}
	for _, a := range w.Awards {
		parts = append(parts, strconv.Itoa(a.PartIndex), strconv.FormatInt(a.ActivityID, 10))
	}
	for _, e := range w.Audits {
		parts = append(parts, e.ItemKey().SK)
	}
	return digest(parts...)
}

func digest(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:16])
}

// audit writes an entry and never fails the projection. The request id is
// derived from what happened so a replayed write audits once.
func (c *Consumer) audit(ctx context.Context, userID, eventType, correlationID string, at time.Time, version int64, part int, details map[string]string) {
	reqID := digest(eventType, userID, details["milestoneId"], strconv.FormatInt(version, 10), strconv.Itoa(part))
	newEntry := model.NewAuditEntry
	if eventType == EventProgressUpdated {
		newEntry = model.NewRoutineAuditEntry // one per event: no index keys
	}
	e := newEntry(model.UserPK(userID), userID, eventType, correlationID, reqID, at, details)
	if err := c.st.AppendAudit(ctx, e); err != nil {
		c.o.Logger.ErrorContext(ctx, "audit write failed", "eventType", eventType, "userId", userID,
			"correlationId", correlationID, "error", err)
	}
}

// Handle processes one batch of stream records. Each user with at least one
// trigger is re-projected once (users in parallel). A user whose projection
// fails fails its records; the response names the sequence number of the
// first failed record in the batch, so Lambda resumes there (later records
// are redelivered, which is harmless). Poison records are audited and parked,
// not reported, so they cannot block the shard. The error is always nil:
// failures are reported per record.
func (c *Consumer) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	start := c.o.Now()
	ctx, meter := store.StartMeter(ctx)
	var bm batchMetrics
	bm.seen = len(ev.Records)
	c.stats.seen.Add(int64(len(ev.Records)))
	failed := make([]bool, len(ev.Records))
	type userWork struct {
		userID        string
		records       []int
		correlationID string
	}
	users := map[string]*userWork{}
	var order []string
	for i, rec := range ev.Records {
		if t := rec.Change.ApproximateCreationDateTime.Time; !t.IsZero() {
			bm.maxLag = max(bm.maxLag, start.Sub(t))
		}
		d := Classify(rec)
		log := c.o.Logger.With("eventId", rec.EventID, "sequenceNumber", rec.Change.SequenceNumber, "eventName", rec.EventName,
			"userId", d.UserID, "activityId", d.ActivityID, "milestoneId", d.MilestoneID, "correlationId", d.CorrelationID)
		switch d.Action {
		case Ignore:
			bm.ignored++
			c.stats.ignored.Add(1)
			log.DebugContext(ctx, "record ignored", "reason", d.Reason)
		case Park:
			log.WarnContext(ctx, "poison record", "error", d.Err)
			if err := c.park(ctx, rec, d, d.Err); err != nil {
				log.ErrorContext(ctx, "park failed: record reported failed", "error", err)
				failed[i] = true
			} else {
				bm.parked++
			}
		case Recompute:
			u := users[d.UserID]
			if u == nil {
				u = &userWork{userID: d.UserID}
				users[d.UserID] = u
				order = append(order, d.UserID)
			}
			u.records = append(u.records, i)
			if d.CorrelationID != "" {
				u.correlationID = d.CorrelationID
			}
			log.DebugContext(ctx, "record triggers projection", "reason", d.Reason)
		}
	}

	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		sem = make(chan struct{}, c.o.Concurrency)
	)
	for _, id := range order {
		u := users[id]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			rep, err := c.recompute(ctx, u.userID, u.correlationID, false)
			mu.Lock()
			defer mu.Unlock()
			bm.users++
			bm.conflicts += max(rep.Attempts-1, 0)
			for _, m := range rep.Milestones {
				bm.minted += len(m.Minted) * btoi(m.Written)
				bm.truncated += btoi(m.Skipped == "" && m.Recomputed.Truncated)
			}
			if err == nil {
				return
			}
			log := c.o.Logger.With("userId", u.userID, "correlationId", u.correlationID)
			if errors.Is(err, model.ErrUnsupportedSchema) || errors.Is(err, model.ErrInvalid) {
				// The log itself cannot be read by this code: retrying is
				// pointless until it is fixed or newer code is deployed, so
				// the records are set aside for redrive.
				log.WarnContext(ctx, "user cannot be projected: parking its records", "error", err)
				for _, i := range u.records {
					if perr := c.park(ctx, ev.Records[i], Classify(ev.Records[i]), err); perr != nil {
						failed[i] = true
					} else {
						bm.parked++
					}
				}
				return
			}
			log.ErrorContext(ctx, "user projection failed: records reported failed", "error", err, "records", len(u.records))
			for _, i := range u.records {
				failed[i] = true
			}
		}()
	}
	wg.Wait()

	var resp events.DynamoDBEventResponse
	for i, f := range failed {
		if !f {
			continue
		}
		bm.failed++
		if len(resp.BatchItemFailures) == 0 {
			resp.BatchItemFailures = []events.DynamoDBBatchItemFailure{{ItemIdentifier: ev.Records[i].Change.SequenceNumber}}
		}
	}
	c.stats.failed.Add(int64(bm.failed))
	c.stats.parked.Add(int64(bm.parked))
	bm.duration = c.o.Now().Sub(start)
	bm.capacity = meter.Snapshot()
	c.emit(bm)
	c.o.Logger.InfoContext(ctx, "batch processed", "records", bm.seen, "ignored", bm.ignored, "parked", bm.parked,
		"failed", bm.failed, "users", bm.users, "awardsMinted", bm.minted, "lagMs", bm.maxLag.Milliseconds(), bm.capacity.Attr())
	return resp, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Discard parks records the event source gave up on after its retries
// (the local stack's equivalent of the event source mapping's on-failure
// destination), audited like poison records, so `redrive` can recompute
// their users later. It returns an error joining every record it could not
// park; the caller must then keep them (log them with their sequence
// numbers) rather than lose them.
func (c *Consumer) Discard(ctx context.Context, recs []events.DynamoDBEventRecord, cause error) error {
	var errs []error
	for _, rec := range recs {
		d := Classify(rec)
		if d.Action == Ignore {
			continue // nothing to redo: the projector would ignore it anyway
		}
		if err := c.park(ctx, rec, d, fmt.Errorf("gave up after retries: %w", cause)); err != nil {
			errs = append(errs, fmt.Errorf("park discarded record %s: %w", rec.Change.SequenceNumber, err))
		}
	}
	return errors.Join(errs...)
}

// park sets a record aside (and audits it). It fails only when the record
// could not be stored, in which case the caller must report it failed so
// nothing is lost.
func (c *Consumer) park(ctx context.Context, rec events.DynamoDBEventRecord, d Decision, why error) error {
	payload, err := json.Marshal(rec)
	if err != nil {
		payload = []byte(fmt.Sprintf("%q", fmt.Sprint(rec)))
	}
	id := rec.EventID
	if id == "" {
		id = rec.Change.SequenceNumber
	}
	r := &model.ParkedRecord{Source: model.ParkSourceProjector, RecordID: id, Reason: why.Error(), Payload: string(payload),
		CorrelationID: d.CorrelationID, ParkedAtUtc: c.o.Now(), UserID: d.UserID}
	if err := c.st.Park(ctx, r); err != nil {
		return err
	}
	subject := model.ParkedPK(model.ParkSourceProjector)
	if d.UserID != "" {
		subject = model.UserPK(d.UserID)
	}
	e := model.NewAuditEntry(subject, d.UserID, EventRecordParked, d.CorrelationID, digest(EventRecordParked, id), c.o.Now(),
		map[string]string{"recordId": id, "sequenceNumber": rec.Change.SequenceNumber, "reason": why.Error()})
	if err := c.st.AppendAudit(ctx, e); err != nil {
		c.o.Logger.ErrorContext(ctx, "audit write failed", "eventType", EventRecordParked, "userId", d.UserID, "error", err)
	}
	return nil
}
