package consumer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ports"
	"github.com/commitcollect/backend/projections"
)

// minter mints a milestone's new awards, each with its part's name and
// metadata from the model's catalog, kept warm for ttl (Options.PartsTTL).
type minter struct {
	st     Catalog
	ttl    time.Duration
	mu     sync.Mutex
	cached map[string]cachedParts // by model id
}

// cachedParts is a model's parts as read at readAt.
type cachedParts struct {
	parts  map[int]model.ModelPart
	readAt time.Time
}

// modelParts returns a model's parts: the warm consumer's copy while it is
// younger than ttl, else the table's. Only a complete catalog (every part
// of partCount) is kept, so a model still being seeded is read again.
func (c *minter) modelParts(ctx context.Context, modelID string, partCount int, now time.Time) (map[int]model.ModelPart, error) {
	c.mu.Lock()
	e, ok := c.cached[modelID]
	c.mu.Unlock()
	if ok && c.ttl > 0 && now.Sub(e.readAt) < c.ttl && !now.Before(e.readAt) {
		return e.parts, nil
	}
	parts, err := c.st.ModelParts(ctx, modelID)
	if err != nil {
		return nil, err
	}
	if c.ttl > 0 && len(parts) >= partCount {
		c.mu.Lock()
		c.cached[modelID] = cachedParts{parts: parts, readAt: now}
		c.mu.Unlock()
	}
	return parts, nil
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
// update of final. A series' period kept on the series' item (m.Current)
// is written there, each write with the mirror of the awards it leaves
// minted; leaves, the period a moving write leaves, goes with the first.
func Plan(m *model.Milestone, final model.Projection, existing map[int]model.Award, awards []*model.Award,
	audits map[int]*model.AuditEntry, leaves *model.Milestone) []ports.ProjectionWrite {
	base := ports.ProjectionWrite{UserID: m.UserID, MilestoneID: m.MilestoneID, PeriodOf: m.PeriodOf, Leaves: leaves}
	out := []ports.ProjectionWrite{base}
	for _, a := range awards {
		need := ports.ItemsPerAward
		if audits[a.PartIndex] != nil {
			need++
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
	for k := 1; k < len(out); k++ {
		out[k].Leaves = nil // the first write moves the item and archives what it leaves
	}
	mirror(m, out, existing)
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

// mirror sets, on the writes of a period kept on the series' item, the
// item's record of it after each write.
func mirror(m *model.Milestone, out []ports.ProjectionWrite, existing map[int]model.Award) {
	if m.Current == nil {
		return
	}
	minted := make(map[int]int64, len(existing))
	for i, a := range existing {
		minted[i] = a.AwardedAtUtc.Unix()
	}
	for k := range out {
		for _, a := range out[k].Awards {
			minted[a.PartIndex] = a.AwardedAtUtc.Unix()
		}
		cur := &model.CurrentPeriod{PeriodOf: m.Current.PeriodOf, CreatedAtUtc: m.Current.CreatedAtUtc}
		if len(minted) > 0 { // never an empty map: DynamoDB Local's stream images garble one nested in a map
			cur.Minted = maps.Clone(minted)
		}
		out[k].Current = cur
	}
}

// Token derives a transaction's ClientRequestToken from everything the
// transaction writes except timestamps (the audit entries by their
// deterministic keys): the same computation retried (by the SDK, or by a
// redelivered batch) sends the same token, so DynamoDB applies it once. A
// cancelled transaction does not use up its token (so DynamoDB Local
// shows); after a success the same token with other timestamps is
// IdempotentParameterMismatch, which WriteProjection reports as a conflict
// (re-read: the version moved). It is 32 hex characters (DynamoDB allows 36).
func Token(w ports.ProjectionWrite) string {
	p := w.Projection
	parts := []string{w.UserID, w.MilestoneID + w.PeriodOf, strconv.FormatBool(w.Current != nil), strconv.FormatInt(w.ExpectedVersion, 10),
		strconv.FormatInt(p.ProgressValue, 10), strconv.Itoa(p.WorkoutsCounted), strconv.Itoa(p.AwardedParts),
		string(p.Status), strconv.FormatBool(p.Truncated), projections.FormatInstant(p.ExactFromUtc)}
	for _, r := range slices.Sorted(maps.Keys(p.Excluded)) {
		parts = append(parts, r, strconv.Itoa(p.Excluded[r]))
	}
	for _, a := range w.Awards {
		parts = append(parts, strconv.Itoa(a.PartIndex), strconv.FormatInt(a.ActivityID, 10))
	}
	for _, e := range w.Audits {
		parts = append(parts, e.ItemKey().SK)
	}
	if w.Leaves != nil {
		parts = append(parts, "leaves", w.Leaves.PeriodOf, strconv.FormatInt(w.Leaves.Version, 10))
	}
	return digest(parts...)
}

func digest(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:16])
}

// mint builds the award items of the parts to mint, with the model part's
// name and metadata (the warm consumer's catalog cache, partCache per
// recompute) and the activity that tipped each, and the AWARD_MINTED audit
// entry of every part not audited before (a lost award item re-minted keeps
// its first entry).
//
// # Awards in one transaction
//
// A write that mints parts is a single TransactWriteItems: the
// version-checked milestone update plus one attribute_not_exists Put per award
// item MILESTONE#{id}#AWARD#{i} and per AWARD_MINTED audit entry. Each award
// copies the part's name and metadata from MODEL#{modelId}/PART#{i} and
// records the activity and correlation id of the workout that tipped it
// (walking the counted workouts in (startDateUtc, activityId) order). Either
// progress and awards land together or nothing does; an award that already
// exists cancels the transaction as a conflict (re-read).
//
//   - Never unaudited. The AWARD_MINTED entry's key is deterministic,
//     AUDIT#{milestone createdAtUtc}#mint-{milestoneId}-{part}
//     (keys.AwardMintedAuditKey), so a retry writes the same key and never
//     audits twice; a lost award item is minted again without a second entry.
//     Other audit entries stay best effort.
//   - Over 100 items (≥ 33 parts at once, each with its collection entry and audit, and the summary): the mint is split into
//     version-checked transactions; each stores the prefix it completes
//     (Plan), so a crash between them leaves every award audited and counted,
//     and the next recompute mints the rest.
//   - Only what is justified. A part counts when the log earns it, or its
//     award item exists with its AWARD_MINTED entry (or is older than the
//     90-day audit TTL). A shrinking log never takes such an award back; an
//     awardedParts raised with nothing behind it is lowered (never minted up
//     to), status is completed only when every part is justified, and verify
//     reports it as drift. Parts counted and justified whose award item is
//     missing are minted again, so a lost award repairs itself.
//   - Limits: entries written before this scheme (keyed at the mint's second)
//     are still found; an older award whose entry was lost counts only while
//     the log earns it. Hand-edited award and audit items are trusted.
//
// The transaction's ClientRequestToken is Token: 32 hex characters of a
// SHA-256 over user, milestone, expected version, the new projection and each
// award's part and activity, and no timestamp. The same computation retried
// (by the SDK, or by a redelivered batch within DynamoDB's 10-minute
// idempotency window) sends the same token and is applied once; the same
// token with a different request (IdempotentParameterMismatch) is treated as
// a conflict and re-read. Tokens are not scoped to a table (a transaction can
// span tables): one DynamoDB Local shares them across all its tables, which
// matters to tests that reuse ids.
func (c *minter) mint(ctx context.Context, log *slog.Logger, m *model.Milestone, res projections.Result, held projections.Held,
	minted []int, now time.Time, correlationID string, partCache map[string]map[int]model.ModelPart) ([]*model.Award, map[int]*model.AuditEntry, error) {
	awards := make([]*model.Award, 0, len(minted))
	audits := map[int]*model.AuditEntry{}
	if len(minted) == 0 {
		return awards, audits, nil
	}
	parts, ok := partCache[m.ModelID]
	if !ok {
		var err error
		if parts, err = c.modelParts(ctx, m.ModelID, m.PartCount, now); err != nil {
			return nil, nil, err
		}
		partCache[m.ModelID] = parts
	}
	for _, i := range minted {
		a := &model.Award{UserID: m.UserID, MilestoneID: m.MilestoneID, ModelID: m.ModelID, PartIndex: i,
			AwardedAtUtc: now, CorrelationID: correlationID, PeriodOf: m.PeriodOf}
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
		details := map[string]string{"milestoneId": m.MilestoneID, "modelId": a.ModelID, "partIndex": strconv.Itoa(i),
			"partName": a.PartName, "activityId": strconv.FormatInt(a.ActivityID, 10)}
		if m.PeriodOf != "" {
			details["periodOf"] = m.PeriodOf
		}
		audits[i] = model.NewAwardMintedAudit(m.UserID, keys.AwardOwnerID(m.MilestoneID, m.PeriodOf), m.CreatedAtUtc, i,
			EventAwardMinted, corr, now, details)
	}
	return awards, audits, nil
}

// write stores the projection and the awards in the version-checked
// transactions Plan splits them into, recording the new version in mr.
func (c *Consumer) write(ctx context.Context, log *slog.Logger, tg target, res projections.Result,
	awards []*model.Award, audits map[int]*model.AuditEntry, mr *projections.MilestoneReport) error {
	for _, w := range Plan(tg.m, res.Projection, tg.existing, awards, audits, tg.leaves) {
		w.Token = Token(w)
		if err := c.st.Milestones.WriteProjection(ctx, w); err != nil {
			return err
		}
		mr.Written, mr.Version = true, w.ExpectedVersion+1
		c.stats.writes.Add(1)
		c.stats.awards.Add(int64(len(w.Awards)))
		for _, a := range w.Awards {
			log.InfoContext(ctx, "award minted", "partIndex", a.PartIndex, "activityId", a.ActivityID, "correlationId", a.CorrelationID,
				"version", mr.Version)
		}
	}
	return nil
}
