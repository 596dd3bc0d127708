package rebuildkit_test

// TEMPORARY SCAFFOLD, replaced by projections/consumer once it is on main:
// a minimal recompute-from-log with the projector's contract, so the
// commands can be tested end to end before the projector lands.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/scripts/rebuildkit"
)

func projectorRecompute(st *store.Store) rebuildkit.Recompute {
	return func(ctx context.Context, userID string, dryRun bool) (rebuildkit.Outcome, error) {
		out := rebuildkit.Outcome{UserID: userID}
		for attempt := 0; ; attempt++ {
			o, err := scaffoldOnce(ctx, st, userID, dryRun)
			if errors.Is(err, model.ErrConflict) && attempt < 5 {
				out.ConflictsRetried++
				continue
			}
			o.ConflictsRetried = out.ConflictsRetried
			return o, err
		}
	}
}

func scaffoldOnce(ctx context.Context, st *store.Store, userID string, dryRun bool) (rebuildkit.Outcome, error) {
	out := rebuildkit.Outcome{UserID: userID}
	res, err := st.QueryPrefix(ctx, st.Tables().Main, model.UserPK(userID), model.PrefixMilestone, store.QueryOptions{})
	if err != nil {
		return out, err
	}
	var ms []model.Milestone
	awards := map[string]map[int]bool{}
	for _, item := range res.Items {
		var k model.Key
		k.PK, k.SK = attr(item, "PK"), attr(item, "SK")
		p, err := model.ParseKey(k)
		if err != nil {
			return out, err
		}
		switch p.Kind {
		case model.KindMilestone:
			var m model.Milestone
			if err := store.Unmarshal(item, &m); err != nil {
				return out, err
			}
			ms = append(ms, m)
		case model.KindAward:
			if awards[p.MilestoneID] == nil {
				awards[p.MilestoneID] = map[int]bool{}
			}
			awards[p.MilestoneID][p.PartIndex] = true
		}
	}
	if len(ms) == 0 {
		return out, nil
	}
	ws, _, err := store.QueryEntities[model.Workout](ctx, st, st.Tables().Main, model.UserPK(userID), model.PrefixWorkoutStrava, store.QueryOptions{})
	if err != nil {
		return out, err
	}
	for _, m := range ms {
		out.Milestones++
		var value int64
		counted := 0
		for _, w := range ws {
			if w.IsDeleted || w.StartDateUtc.Before(m.PeriodStartAtUtc) || (m.PeriodEndAtUtc != nil && !w.StartDateUtc.Before(*m.PeriodEndAtUtc)) ||
				(len(m.SportTypes) > 0 && !slices.Contains(m.SportTypes, w.SportType)) {
				continue
			}
			counted++
			switch m.Metric {
			case model.MetricDistance:
				value += int64(math.Round(w.DistanceMeters * 1000))
			case model.MetricCount:
				value++
			}
		}
		target := int64(m.Target)
		if m.Metric == model.MetricDistance {
			target *= 1000
		}
		earned := int(min(int64(m.PartCount), value*int64(m.PartCount)/target))
		next := model.Projection{ProgressValue: value, WorkoutsCounted: counted, AwardedParts: max(m.AwardedParts, earned), Status: model.StatusActive}
		if m.Status == model.StatusCompleted || next.AwardedParts >= m.PartCount {
			next.Status = model.StatusCompleted
		}
		drift := func(field string, a, b any) {
			if fmt.Sprint(a) != fmt.Sprint(b) {
				out.Drift = append(out.Drift, rebuildkit.Drift{UserID: userID, MilestoneID: m.MilestoneID, Field: field, Stored: fmt.Sprint(a), Recomputed: fmt.Sprint(b)})
			}
		}
		drift(rebuildkit.FieldProgress, m.ProgressValue, next.ProgressValue)
		drift(rebuildkit.FieldWorkoutsCounted, m.WorkoutsCounted, next.WorkoutsCounted)
		drift(rebuildkit.FieldAwardedParts, m.AwardedParts, next.AwardedParts)
		drift(rebuildkit.FieldStatus, m.Status, next.Status)
		var mint []int
		for i := range next.AwardedParts {
			if !awards[m.MilestoneID][i] {
				mint = append(mint, i)
				if i < m.AwardedParts {
					out.Drift = append(out.Drift, rebuildkit.Drift{UserID: userID, MilestoneID: m.MilestoneID, Field: rebuildkit.FieldAward, Stored: "missing", Recomputed: "part " + strconv.Itoa(i)})
				}
			}
		}
		changed := next.ProgressValue != m.ProgressValue || next.WorkoutsCounted != m.WorkoutsCounted || next.AwardedParts != m.AwardedParts || next.Status != m.Status
		if changed || len(mint) > 0 {
			out.MilestonesChanged++
			out.AwardsMinted += len(mint)
		}
		if dryRun || (!changed && len(mint) == 0) {
			continue
		}
		if _, err := st.UpdateVersioned(ctx, st.Tables().Main, m.Key, m.Version, store.Changes{Set: map[string]any{
			"progressValue": next.ProgressValue, "workoutsCounted": next.WorkoutsCounted, "awardedParts": next.AwardedParts,
			"status": next.Status, "writtenBy": model.WriterProjector,
		}}); err != nil {
			return out, err
		}
		for _, i := range mint {
			a := &model.Award{UserID: userID, MilestoneID: m.MilestoneID, ModelID: m.ModelID, PartIndex: i, PartName: "part"}
			if err := st.PutIfAbsent(ctx, st.Tables().Main, a); err != nil && !errors.Is(err, model.ErrConflict) {
				return out, err
			}
		}
	}
	return out, nil
}

func attr(item store.Item, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func projectorHandle(st *store.Store) func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	rc := projectorRecompute(st)
	return func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		for _, u := range rebuildkit.AffectedUsers(ev.Records) {
			if _, err := rc(ctx, u, false); err != nil {
				return events.DynamoDBEventResponse{}, err
			}
		}
		return events.DynamoDBEventResponse{}, nil
	}
}
