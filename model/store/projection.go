package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
)

// WorkoutLogFields are the only workout attributes a projection reads (the
// projection expression of WorkoutLog): keys and meta for normalization,
// then what the milestone math and award attribution need. LSI1 projects
// exactly these (plus its own key), so the log never reads the table.
var WorkoutLogFields = []string{
	"PK", "SK", "entityType", "schemaVersion", "userId", "activityId", "sportType",
	"distanceMeters", "totalElevationGain", "movingTimeSeconds", "startDateUtc", "isDeleted", "correlationId",
}

// workoutLogNonKeyAttributes are WorkoutLogFields without the table's keys:
// LSI1's INCLUDE projection.
func workoutLogNonKeyAttributes() []string {
	var out []string
	for _, f := range WorkoutLogFields {
		if f != "PK" && f != "SK" {
			out = append(out, f)
		}
	}
	return out
}

// Log is the part of a user's workout log one recompute inspects.
type Log struct {
	// Workouts started inside the requested windows, newest first.
	Workouts []model.Workout
	// Truncated says the guardrail left out workouts of the windows; every
	// one left out started before ExactFrom.
	Truncated bool
	// ExactFrom (set when Truncated) is the instant from which the log is
	// complete: Workouts holds every workout of the windows started at or
	// after it, and none started before it.
	ExactFrom time.Time
}

// WorkoutLog reads the user's workouts started inside windows (their union;
// a window without end reads to the newest workout) from LSI1 with a key
// condition per merged window, newest first, strongly consistent, projected
// to WorkoutLogFields, and stops at the MaxWorkoutsToInspect guardrail. So
// whatever the guardrail leaves out is older than everything it keeps; the
// workouts sharing the start date of the newest one left out are dropped
// too, so that Log.ExactFrom is exact. No windows read nothing. Only the
// projected fields are set on the returned workouts. It fails closed with
// ErrUnsupportedSchema when a workout read was written by newer code.
func (s *Store) WorkoutLog(ctx context.Context, userID string, windows []model.Window) (Log, error) {
	var (
		items   []Item
		dropped Item
		budget  = model.MaxWorkoutsToInspect
	)
	for _, w := range model.MergeWindows(windows) {
		lo, hi := model.WorkoutDateRange(w)
		kc := expression.Key("PK").Equal(expression.Value(model.UserPK(userID))).
			And(expression.Key(AttrLSI1SK).Between(expression.Value(lo), expression.Value(hi)))
		ex, err := expression.NewBuilder().WithKeyCondition(kc).Build()
		if err != nil {
			return Log{}, fmt.Errorf("read workout log of user %s: build query: %w", userID, err)
		}
		// LSI1 projects exactly WorkoutLogFields: ask for what it holds
		// (ALL_PROJECTED_ATTRIBUTES), not for a list of names, which
		// DynamoDB Local bills as a fetch from the table per item (7 RCU
		// instead of 1 for 6 workouts).
		res, err := s.queryPages(ctx, &dynamodb.QueryInput{
			TableName: aws.String(s.t.Main), IndexName: aws.String(IndexLSI1), ConsistentRead: aws.Bool(true),
			KeyConditionExpression: ex.KeyCondition(), Select: types.SelectAllProjectedAttributes,
			ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
			ScanIndexForward: aws.Bool(false),
		}, budget)
		if err != nil {
			return Log{}, fmt.Errorf("read workout log of user %s in %s..%s: %w", userID, lo, hi, err)
		}
		items = append(items, res.Items...)
		budget -= len(res.Items)
		if res.Truncated {
			dropped = res.next
			break
		}
	}
	out := Log{Workouts: make([]model.Workout, len(items))}
	for i, item := range items {
		if err := Unmarshal(item, &out.Workouts[i]); err != nil {
			return Log{}, fmt.Errorf("read workout log of user %s: %w", userID, err)
		}
	}
	if dropped == nil {
		return out, nil
	}
	var d model.Workout
	if err := Unmarshal(dropped, &d); err != nil {
		return Log{}, fmt.Errorf("read workout log of user %s: %w", userID, err)
	}
	// Keys order (start date, activity id): workouts kept at the very start
	// date of one left out are only part of that instant, so they go too.
	ws := out.Workouts
	for len(ws) > 0 && !ws[len(ws)-1].StartDateUtc.After(d.StartDateUtc) {
		ws = ws[:len(ws)-1]
	}
	out.Workouts, out.Truncated, out.ExactFrom = ws, true, d.StartDateUtc.UTC().Add(time.Nanosecond)
	if len(ws) > 0 {
		out.ExactFrom = ws[len(ws)-1].StartDateUtc.UTC()
	}
	return out, nil
}

// UnreadableItem is an item a reader skipped because it could not decode it
// (e.g. written by a newer schema); Err says why.
type UnreadableItem struct {
	Key model.Key
	Err error
}

// UserMilestones is a user's milestones with their minted awards, read with
// one query of begins_with(SK, "MILESTONE#").
type UserMilestones struct {
	// Milestones sorted by id.
	Milestones []model.Milestone
	// Awards by milestone id, then part index.
	Awards map[string]map[int]model.Award
	// Unreadable milestones and awards (newer schema, malformed): the
	// caller must leave them alone rather than guess.
	Unreadable []UnreadableItem
	// Truncated says the user has more milestone items than the guardrail;
	// CreateMilestone's cap (model.MaxMilestonesPerUser × (1 + MaxPartCount)
	// ≤ MaxWorkoutsToInspect) keeps it false for milestones it created.
	Truncated bool
}

// UserMilestones reads every milestone and award of a user in one strongly
// consistent query. Items it cannot decode are listed in Unreadable, not
// returned as an error, so one bad milestone cannot block the others. It
// returns an error only when the query itself fails.
func (s *Store) UserMilestones(ctx context.Context, userID string) (UserMilestones, error) {
	res, err := s.QueryPrefix(ctx, s.t.Main, model.UserPK(userID), model.PrefixMilestone, QueryOptions{})
	if err != nil {
		return UserMilestones{}, fmt.Errorf("read milestones of user %s: %w", userID, err)
	}
	out := UserMilestones{Awards: map[string]map[int]model.Award{}, Truncated: res.Truncated}
	for _, item := range res.Items {
		k, err := itemKey(item)
		if err != nil {
			out.Unreadable = append(out.Unreadable, UnreadableItem{Key: k, Err: err})
			continue
		}
		p, err := model.ParseKey(k)
		if err != nil {
			out.Unreadable = append(out.Unreadable, UnreadableItem{Key: k, Err: err})
			continue
		}
		switch p.Kind {
		case model.KindMilestone:
			var m model.Milestone
			if err := Unmarshal(item, &m); err != nil {
				out.Unreadable = append(out.Unreadable, UnreadableItem{Key: k, Err: err})
				continue
			}
			out.Milestones = append(out.Milestones, m)
		case model.KindAward:
			var a model.Award
			if err := Unmarshal(item, &a); err != nil {
				out.Unreadable = append(out.Unreadable, UnreadableItem{Key: k, Err: err})
				continue
			}
			if out.Awards[p.MilestoneID] == nil {
				out.Awards[p.MilestoneID] = map[int]model.Award{}
			}
			out.Awards[p.MilestoneID][p.PartIndex] = a
		}
	}
	sort.Slice(out.Milestones, func(i, j int) bool { return out.Milestones[i].MilestoneID < out.Milestones[j].MilestoneID })
	return out, nil
}

// ModelParts reads the parts of a model (MODEL#{modelId} / PART#…) by part
// index. A model without parts yields an empty map, not an error; an
// unreadable part fails the read.
func (s *Store) ModelParts(ctx context.Context, modelID string) (map[int]model.ModelPart, error) {
	parts, _, err := QueryEntities[model.ModelPart](ctx, s, s.t.Main, model.ModelPK(modelID), model.PrefixPart, QueryOptions{})
	if err != nil {
		return nil, fmt.Errorf("read parts of model %s: %w", modelID, err)
	}
	out := make(map[int]model.ModelPart, len(parts))
	for _, p := range parts {
		out[p.PartIndex] = p
	}
	return out, nil
}

// ProjectionWrite is one milestone's projected state, written over the
// version it was computed from.
type ProjectionWrite struct {
	UserID, MilestoneID string
	// ExpectedVersion is the milestone version the projection was computed
	// from; the write is conditioned on it and sets it to ExpectedVersion+1.
	ExpectedVersion int64
	Projection      model.Projection
	// Awards to mint with the update, each only if absent.
	Awards []*model.Award
	// Audits are written in the same transaction, each only if absent (the
	// AWARD_MINTED entries of Awards, keyed deterministically), so an award
	// never exists without its audit entry.
	Audits []*model.AuditEntry
	// Token is the transaction's ClientRequestToken (≤ 36 characters), used
	// when Awards or Audits is not empty.
	Token string
}

// Items is how many items the write puts in one transaction: the milestone
// update plus every award and audit entry (at most model.TransactionLimit).
func (w ProjectionWrite) Items() int { return 1 + len(w.Awards) + len(w.Audits) }

// WriteProjection stores a milestone's projection with writtenBy =
// projector. Without awards or audits it is one UpdateItem conditioned on the
// version; otherwise one TransactWriteItems (across the main and the audit
// table) holding that update plus a Put per award and per audit entry, each
// conditioned on attribute_not_exists, so awards and their AWARD_MINTED
// entries land together or not at all and a retry never writes either twice.
// It returns ErrConflict when the version moved, the milestone is gone or an
// award or audit entry already exists (re-read and recompute), ErrRetryable
// for transaction conflicts and throttling, and ErrInvalid for more items
// than one transaction holds (w.Items() > model.TransactionLimit).
func (s *Store) WriteProjection(ctx context.Context, w ProjectionWrite) error {
	p := w.Projection
	c := Changes{Set: map[string]any{
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
	k := model.MilestoneKey(w.UserID, w.MilestoneID)
	if len(w.Awards) == 0 && len(w.Audits) == 0 {
		if _, err := s.UpdateVersioned(ctx, s.t.Main, k, w.ExpectedVersion, c); err != nil {
			return fmt.Errorf("write projection of milestone %s: %w", w.MilestoneID, err)
		}
		return nil
	}
	in, err := s.VersionedUpdateInput(s.t.Main, k, w.ExpectedVersion, c)
	if err != nil {
		return fmt.Errorf("write projection of milestone %s: %w", w.MilestoneID, err)
	}
	items := []types.TransactWriteItem{TransactUpdate(in)}
	for _, a := range w.Awards {
		put, err := s.TransactPutIfAbsent(s.t.Main, a)
		if err != nil {
			return fmt.Errorf("write projection of milestone %s: %w", w.MilestoneID, err)
		}
		items = append(items, put)
	}
	for _, e := range w.Audits {
		put, err := s.TransactPutIfAbsent(s.t.Audit, e)
		if err != nil {
			return fmt.Errorf("write projection of milestone %s: %w", w.MilestoneID, err)
		}
		items = append(items, put)
	}
	if err := s.Transact(ctx, items, w.Token); err != nil {
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

// AwardAudits reports which parts of a user's milestone have their
// AWARD_MINTED audit entry, keyed at keyAt (the milestone's createdAtUtc, see
// model.AwardMintedAuditKey): one strongly consistent Query of the user's
// audit partition, begins_with the milestone's prefix, keys only.
func (s *Store) AwardAudits(ctx context.Context, userID, milestoneID string, keyAt time.Time) (map[int]bool, error) {
	res, err := s.QueryPrefix(ctx, s.t.Audit, model.UserPK(userID), model.AwardMintedAuditPrefix(milestoneID, keyAt),
		QueryOptions{Projection: []string{"PK", "SK"}})
	if err != nil {
		return nil, fmt.Errorf("read award audits of milestone %s: %w", milestoneID, err)
	}
	out := make(map[int]bool, len(res.Items))
	for _, item := range res.Items {
		k, err := itemKey(item)
		if err != nil {
			return nil, fmt.Errorf("read award audits of milestone %s: %w", milestoneID, err)
		}
		if i, ok := model.ParseAwardMintedAuditSK(k.SK, milestoneID, keyAt); ok {
			out[i] = true
		}
	}
	return out, nil
}

// AuditEntriesAt reads a user's audit entries keyed in the second of at
// (AUDIT#{unix seconds}#…): one strongly consistent Query. The projector
// uses it to find AWARD_MINTED entries written before their keys were
// deterministic, which were keyed at the second of the award's
// awardedAtUtc.
func (s *Store) AuditEntriesAt(ctx context.Context, userID string, at time.Time) ([]model.AuditEntry, error) {
	es, _, err := QueryEntities[model.AuditEntry](ctx, s, s.t.Audit, model.UserPK(userID), model.AuditSK(at, ""), QueryOptions{})
	if err != nil {
		return nil, fmt.Errorf("read audit entries of user %s at %d: %w", userID, at.Unix(), err)
	}
	return es, nil
}
