// Package milestones holds what the projector and the BFF read and write
// of a user's goals: milestones and their awards (read with the user's
// guard in one Query, keys.GuardAndMilestones), the projection's versioned
// writes that mint awards in transactions, a series' periods
// (series.go), the collection of every award a user holds (collection.go),
// and the model catalog the awards copy.
package milestones

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ports"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/dynerr"
)

// Milestones holds milestones, their awards and projections, and the model catalog.
type Milestones struct {
	DB *dynamo.DB
	// Guard checks, after a milestone is created, that the user was not
	// deleted meanwhile (store.Guard).
	Guard interface {
		CheckDeleted(ctx context.Context, userID string, k model.Key) error
	}
	// Counted, when set, is called once a creation has read the user's
	// count, before its transaction: tests order a race there.
	Counted func(userID string)
}

// ModelMeta reads a model's metadata; model.ErrNotFound for an unknown model.
func (s *Milestones) ModelMeta(ctx context.Context, modelID string) (model.ModelMeta, error) {
	var m model.ModelMeta
	if err := s.DB.Get(ctx, s.DB.Tables().Main, keys.ModelMetaKey(modelID), &m); err != nil {
		return model.ModelMeta{}, fmt.Errorf("model %s: %w", modelID, err)
	}
	return m, nil
}

// SeedModel writes a model's parts and then its metadata where they differ
// from what is stored, and removes stored parts beyond meta.PartCount. It
// returns how many items it changed (0 when everything matched, so re-seeding
// changes nothing and emits no stream records). It returns an error matching
// model.ErrConflict when the stored model was written by a newer catalog
// version.
func (s *Milestones) SeedModel(ctx context.Context, meta *model.ModelMeta, parts []model.ModelPart) (int, error) {
	var cur model.ModelMeta
	err := s.DB.Get(ctx, s.DB.Tables().Main, meta.ItemKey(), &cur)
	switch {
	case errors.Is(err, model.ErrNotFound):
	case err != nil:
		return 0, fmt.Errorf("seed model %s: %w", meta.ModelID, err)
	case cur.CatalogVersion > meta.CatalogVersion:
		return 0, fmt.Errorf("seed model %s: stored catalog version %d is newer than %d: %w",
			meta.ModelID, cur.CatalogVersion, meta.CatalogVersion, model.ErrConflict)
	}
	changed := 0
	existing, _, err := dynamo.QueryEntities[model.ModelPart](ctx, s.DB, s.DB.Tables().Main, keys.ModelPK(meta.ModelID), keys.PrefixPart, dynamo.QueryOptions{})
	if err != nil {
		return 0, fmt.Errorf("seed model %s: %w", meta.ModelID, err)
	}
	stored := map[int]model.ModelPart{}
	var stale []model.Key
	for _, p := range existing {
		stored[p.PartIndex] = p
		if p.PartIndex >= meta.PartCount {
			stale = append(stale, p.ItemKey())
		}
	}
	for i := range parts {
		p := &parts[i]
		p.Stamp()
		if old, ok := stored[p.PartIndex]; ok && reflect.DeepEqual(old, *p) {
			continue
		}
		if err := s.DB.Put(ctx, s.DB.Tables().Main, p); err != nil {
			return changed, fmt.Errorf("seed model %s: %w", meta.ModelID, err)
		}
		changed++
	}
	if err := s.DB.BatchDelete(ctx, s.DB.Tables().Main, stale); err != nil {
		return changed, fmt.Errorf("seed model %s: remove parts beyond %d: %w", meta.ModelID, meta.PartCount, err)
	}
	changed += len(stale)
	meta.Stamp()
	if reflect.DeepEqual(cur, *meta) {
		return changed, nil
	}
	cond := expression.Or(expression.AttributeNotExists(expression.Name("PK")),
		expression.Name("catalogVersion").LessThanEqual(expression.Value(meta.CatalogVersion)))
	if err := s.DB.PutIf(ctx, s.DB.Tables().Main, meta, cond); err != nil {
		return changed, fmt.Errorf("seed model %s: %w", meta.ModelID, err)
	}
	return changed + 1, nil
}

// CreateMilestone writes a new milestone and counts it
// (model.MilestoneCount) in one transaction conditioned on the count read,
// so concurrent creations never exceed model.MaxMilestonesPerUser. A count
// that does not exist yet (a user from before the cap) starts from the
// milestones in the user's MILESTONE# range (keys only). It returns
// model.ErrMilestoneLimit at the cap, model.ErrConflict if the milestone's id is
// taken or the count kept moving, and model.ErrUserDeleted (the milestone and the
// count are removed again) when the account was deleted meanwhile.
func (s *Milestones) CreateMilestone(ctx context.Context, m *model.Milestone) error {
	for range milestoneCreateRetries {
		var cnt model.MilestoneCount
		err := s.DB.Get(ctx, s.DB.Tables().Main, keys.MilestoneCountKey(m.UserID), &cnt)
		cond := expression.Name("count").Equal(expression.Value(cnt.Count))
		switch {
		case errors.Is(err, model.ErrNotFound):
			n, err := s.countMilestones(ctx, m.UserID)
			if err != nil {
				return fmt.Errorf("create milestone %s: %w", m.MilestoneID, err)
			}
			cnt = model.MilestoneCount{UserID: m.UserID, Count: n}
			cond = expression.AttributeNotExists(expression.Name("PK"))
		case err != nil:
			return fmt.Errorf("create milestone %s: %w", m.MilestoneID, err)
		}
		if cnt.Count >= model.MaxMilestonesPerUser {
			return fmt.Errorf("create milestone %s: user %s has %d: %w", m.MilestoneID, m.UserID, cnt.Count, model.ErrMilestoneLimit)
		}
		if s.Counted != nil {
			s.Counted(m.UserID)
		}
		cnt.Count++
		cnt.UpdatedAtUtc = s.DB.Now().UTC()
		put, err := s.DB.TransactPutIfAbsent(s.DB.Tables().Main, m)
		if err != nil {
			return fmt.Errorf("create milestone %s: %w", m.MilestoneID, err)
		}
		item, err := dynamo.Marshal(&cnt)
		if err != nil {
			return fmt.Errorf("create milestone %s: %w", m.MilestoneID, err)
		}
		ex, err := expression.NewBuilder().WithCondition(cond).Build()
		if err != nil {
			return fmt.Errorf("create milestone %s: build condition: %w", m.MilestoneID, err)
		}
		count := types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.DB.Tables().Main), Item: item,
			ConditionExpression: ex.Condition(), ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values()}}
		err = s.DB.Transact(ctx, []types.TransactWriteItem{put, count}, "")
		var te *dynerr.TransactionError
		switch {
		case err == nil:
			if err := s.Guard.CheckDeleted(ctx, m.UserID, m.ItemKey()); err != nil {
				_ = s.DB.Delete(ctx, s.DB.Tables().Main, cnt.ItemKey())
				return fmt.Errorf("create milestone %s: %w", m.MilestoneID, err)
			}
			return nil
		case errors.As(err, &te) && slices.Contains(te.FailedIndexes(), 0):
			return fmt.Errorf("create milestone %s: id taken: %w", m.MilestoneID, err)
		case errors.As(err, &te) && slices.Contains(te.FailedIndexes(), 1), errors.Is(err, model.ErrRetryable):
			continue // the count moved (a concurrent creation): read it again
		default:
			return fmt.Errorf("create milestone %s: %w", m.MilestoneID, err)
		}
	}
	return fmt.Errorf("create milestone %s: the milestone count kept moving: %w", m.MilestoneID, model.ErrConflict)
}

// countMilestones counts the milestones (not awards) of a user's
// MILESTONE# range, keys only.
func (s *Milestones) countMilestones(ctx context.Context, userID string) (int, error) {
	res, err := s.DB.QueryPrefix(ctx, s.DB.Tables().Main, keys.UserPK(userID), keys.PrefixMilestone, dynamo.QueryOptions{Projection: []string{"PK", "SK"}})
	if err != nil {
		return 0, fmt.Errorf("count milestones of user %s: %w", userID, err)
	}
	n := 0
	for _, it := range res.Items {
		k, err := dynamo.KeyOf(it)
		if err != nil {
			return 0, err
		}
		if p, err := keys.ParseKey(k); err == nil && p.Kind == keys.KindMilestone {
			n++
		}
	}
	return n, nil
}

// MilestonesWithAwards reads a user's milestones and their awards with one Query of
// the user's partition (begins_with MILESTONE#, or MILESTONE#{milestoneID}
// when milestoneID is not empty), in key order. Truncated reports the
// guardrail stopped the read. Items of other milestones sharing the prefix
// are dropped; an item written by newer code fails the read (fail closed).
func (s *Milestones) MilestonesWithAwards(ctx context.Context, userID, milestoneID string) (ms []ports.MilestoneWithAwards, truncated bool, err error) {
	prefix := keys.PrefixMilestone
	if milestoneID != "" {
		prefix = keys.MilestoneSK(milestoneID)
	}
	res, err := s.DB.QueryPrefix(ctx, s.DB.Tables().Main, keys.UserPK(userID), prefix, dynamo.QueryOptions{})
	if err != nil {
		return nil, false, fmt.Errorf("milestones of user %s: %w", userID, err)
	}
	index := map[string]int{}
	for _, d := range decodeMilestoneItems(res.Items) {
		switch {
		case milestoneID != "" && d.p.MilestoneID != "" && d.p.MilestoneID != milestoneID:
		case d.err != nil:
			return nil, false, fmt.Errorf("milestones of user %s: %w", userID, d.err)
		case d.m != nil:
			index[d.m.MilestoneID] = len(ms)
			ms = append(ms, ports.MilestoneWithAwards{Milestone: *d.m, Awards: []model.Award{}})
		case d.a != nil:
			if i, ok := index[d.p.MilestoneID]; ok { // an award sorts after its milestone; none: the milestone is gone
				ms[i].Awards = append(ms[i].Awards, *d.a)
			}
		}
	}
	return ms, res.Truncated, nil
}

// UserMilestones reads every milestone and award of a user in one strongly
// consistent query. Items it cannot decode are listed in Unreadable, not
// returned as an error, so one bad milestone cannot block the others. It
// returns an error only when the query itself fails.
func (s *Milestones) UserMilestones(ctx context.Context, userID string) (ports.UserMilestones, error) {
	from, through := keys.GuardAndMilestones()
	res, err := s.DB.QueryPrefix(ctx, s.DB.Tables().Main, keys.UserPK(userID), from, dynamo.QueryOptions{Through: through})
	if err != nil {
		return ports.UserMilestones{}, fmt.Errorf("read milestones of user %s: %w", userID, err)
	}
	out := ports.UserMilestones{Awards: map[string]map[int]model.Award{}, Truncated: res.Truncated}
	for _, d := range decodeMilestoneItems(res.Items) {
		switch {
		case d.err != nil && d.p.Kind == keys.KindUserGuard:
			return ports.UserMilestones{}, fmt.Errorf("read guard of user %s: %w", userID, d.err)
		case d.err != nil:
			out.Unreadable = append(out.Unreadable, ports.UnreadableItem{Key: d.key, Err: d.err})
		case d.g != nil:
			out.Guard = d.g
		case d.m != nil:
			out.Milestones = append(out.Milestones, *d.m)
		case d.a != nil:
			if out.Awards[d.p.MilestoneID] == nil {
				out.Awards[d.p.MilestoneID] = map[int]model.Award{}
			}
			out.Awards[d.p.MilestoneID][d.p.PartIndex] = *d.a
		}
	}
	sort.Slice(out.Milestones, func(i, j int) bool { return out.Milestones[i].MilestoneID < out.Milestones[j].MilestoneID })
	return out, nil
}

// milestoneItem is one item of a read of a user's milestones, decoded: the
// milestone, award or guard it holds, or why it could not be read.
type milestoneItem struct {
	key model.Key
	p   keys.ParsedKey
	m   *model.Milestone
	a   *model.Award
	g   *model.UserGuard
	err error
}

func decodeMilestoneItems(items []dynamo.Item) []milestoneItem {
	out := make([]milestoneItem, len(items))
	for i, it := range items {
		d := &out[i]
		if d.key, d.err = dynamo.KeyOf(it); d.err == nil {
			d.p, d.err = keys.ParseKey(d.key)
		}
		switch {
		case d.err != nil:
		case d.p.Kind == keys.KindMilestone:
			d.m = new(model.Milestone)
			d.err = dynamo.Unmarshal(it, d.m)
		case d.p.Kind == keys.KindAward:
			d.a = new(model.Award)
			d.err = dynamo.Unmarshal(it, d.a)
		case d.p.Kind == keys.KindUserGuard:
			d.g = new(model.UserGuard)
			d.err = dynamo.Unmarshal(it, d.g)
		}
	}
	return out
}

// ModelParts reads the parts of a model (MODEL#{modelId} / PART#…) by part
// index. A model without parts yields an empty map, not an error; an
// unreadable part fails the read.
func (s *Milestones) ModelParts(ctx context.Context, modelID string) (map[int]model.ModelPart, error) {
	parts, _, err := dynamo.QueryEntities[model.ModelPart](ctx, s.DB, s.DB.Tables().Main, keys.ModelPK(modelID), keys.PrefixPart, dynamo.QueryOptions{})
	if err != nil {
		return nil, fmt.Errorf("read parts of model %s: %w", modelID, err)
	}
	out := make(map[int]model.ModelPart, len(parts))
	for _, p := range parts {
		out[p.PartIndex] = p
	}
	return out, nil
}

// WriteProjection stores a milestone's projection with writtenBy =
// projector, on the milestone's item, a series period's own item, or the
// series' item keeping the period (w.Current). Without awards, audits or a
// period left it is one UpdateItem conditioned on the version; otherwise
// one TransactWriteItems (across the main and the audit table) holding
// that update, the Put of the period left (w.Leaves), and a Put per award,
// per award's collection entry (Collection) and per audit entry, each
// conditioned on attribute_not_exists, so awards and their AWARD_MINTED
// entries land together or not at all and a retry never writes either twice.
// It returns ErrConflict when the version moved, the milestone is gone or an
// award or audit entry already exists (re-read and recompute), ErrRetryable
// for transaction conflicts and throttling, and ErrInvalid for more items
// than one transaction holds (w.Items() > model.TransactionLimit).
func (s *Milestones) WriteProjection(ctx context.Context, w ports.ProjectionWrite) error {
	p := w.Projection
	c := dynamo.Changes{Set: map[string]any{
		"progressValue":   p.ProgressValue,
		"workoutsCounted": p.WorkoutsCounted,
		"awardedParts":    p.AwardedParts,
		"status":          string(p.Status),
		"truncated":       p.Truncated,
		"writtenBy":       model.WriterProjector,
	}}
	if p.ProjectedAtUtc != nil {
		c.Set["projectedAtUtc"] = p.ProjectedAtUtc.UTC()
	} else {
		c.Remove = []string{"projectedAtUtc"}
	}
	if p.ExactFromUtc != nil {
		c.Set["exactFromUtc"] = p.ExactFromUtc.UTC()
	} else {
		c.Remove = append(c.Remove, "exactFromUtc")
	}
	if len(p.Excluded) > 0 {
		c.Set["excluded"] = p.Excluded
	} else {
		c.Remove = append(c.Remove, "excluded") // absent, never an empty map (stream images)
	}
	c.Set["weeks"], c.Set["days"] = p.Weeks, p.Days // NULL when unknown: sums (a streak's days) of another definition never outlive it
	k := keys.MilestoneKey(w.UserID, w.MilestoneID)
	if w.Current != nil {
		c.Set["current"] = w.Current // the series' item keeps the period
	} else if w.PeriodOf != "" {
		k = keys.SeriesPeriodKey(w.UserID, w.MilestoneID, w.PeriodOf)
	}
	if len(w.Awards) == 0 && len(w.Audits) == 0 && w.Leaves == nil {
		if _, err := s.DB.UpdateVersioned(ctx, s.DB.Tables().Main, k, w.ExpectedVersion, c); err != nil {
			return fmt.Errorf("write projection of milestone %s: %w", w.MilestoneID, err)
		}
		return nil
	}
	in, err := s.DB.VersionedUpdateInput(s.DB.Tables().Main, k, w.ExpectedVersion, c)
	if err != nil {
		return fmt.Errorf("write projection of milestone %s: %w", w.MilestoneID, err)
	}
	items, err := mintItems(s.DB, w, in)
	if err != nil {
		return fmt.Errorf("write projection of milestone %s: %w", w.MilestoneID, err)
	}
	if err := s.DB.Transact(ctx, items, w.Token); err != nil {
		var mismatch *types.IdempotentParameterMismatchException
		if errors.As(err, &mismatch) {
			// The same token was used for a different request: another
			// delivery computed from the same version first. Re-read.
			err = fmt.Errorf("%w: %w", model.ErrConflict, err)
		}
		return fmt.Errorf("mint %d awards on milestone %s at version %d: %w", len(w.Awards), w.MilestoneID, w.ExpectedVersion, err)
	}
	return nil
}

// mintItems are the items of w's transaction: the milestone's versioned
// update (in), the period it leaves, the series' check of a mint on a
// period's own item, each award with its collection entry, the audit
// entries, and the collection summary's update of each model minted.
func mintItems(s *dynamo.DB, w ports.ProjectionWrite, in *dynamodb.UpdateItemInput) ([]types.TransactWriteItem, error) {
	items := []types.TransactWriteItem{dynamo.TransactUpdate(in)}
	if w.Leaves != nil { // the period the series' item moves off, on its own item from now on
		put, err := s.TransactPut(s.Tables().Main, w.Leaves)
		if err != nil {
			return nil, err
		}
		items = append(items, put)
	}
	if w.PeriodOf != "" && w.Current == nil && len(w.Awards) > 0 {
		// A mint on a period's own item loses to the series' deletion,
		// which reads the award keys it deletes after its transaction.
		exists, err := seriesExists(s.Tables(), w.UserID, w.MilestoneID)
		if err != nil {
			return nil, err
		}
		items = append(items, exists)
	}
	for _, a := range w.Awards {
		a.Collected = true
		put, err := s.TransactPutIfAbsent(s.Tables().Main, a)
		if err != nil {
			return nil, err
		}
		collect, err := transactCollect(s.Tables(), a)
		if err != nil {
			return nil, err
		}
		items = append(items, put, collect)
	}
	for _, e := range w.Audits {
		put, err := s.TransactPutIfAbsent(s.Tables().Audit, e)
		if err != nil {
			return nil, err
		}
		items = append(items, put)
	}
	sums, err := summaryUpdates(s.Tables(), w.Awards) // the collection's summary counts each new entry
	return append(items, sums...), err
}

// AwardAudits reports which parts of a user's milestone have their
// AWARD_MINTED audit entry, keyed at keyAt (the milestone's createdAtUtc, see
// keys.AwardMintedAuditKey): one strongly consistent Query of the user's
// audit partition, begins_with the milestone's prefix, keys only.
func (s *Milestones) AwardAudits(ctx context.Context, userID, milestoneID string, keyAt time.Time) (map[int]bool, error) {
	res, err := s.DB.QueryPrefix(ctx, s.DB.Tables().Audit, keys.UserPK(userID), keys.AwardMintedAuditPrefix(milestoneID, keyAt),
		dynamo.QueryOptions{Projection: []string{"PK", "SK"}})
	if err != nil {
		return nil, fmt.Errorf("read award audits of milestone %s: %w", milestoneID, err)
	}
	out := make(map[int]bool, len(res.Items))
	for _, item := range res.Items {
		k, err := dynamo.KeyOf(item)
		if err != nil {
			return nil, fmt.Errorf("read award audits of milestone %s: %w", milestoneID, err)
		}
		if i, ok := keys.ParseAwardMintedAuditSK(k.SK, milestoneID, keyAt); ok {
			out[i] = true
		}
	}
	return out, nil
}

// milestoneCreateRetries bounds CreateMilestone's attempts when the count
// moves under it (concurrent creations by the same user).
const milestoneCreateRetries = 5
