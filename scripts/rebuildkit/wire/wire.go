// Package wire builds the operator commands' Env from the environment, the
// way the Lambdas build theirs: configuration read once (handlers/config;
// pointed at a local stack's DynamoDB Local, with the stack's token key:
// config.LocalStackEnv), the AWS clients (DynamoDB Local when
// DYNAMODB_ENDPOINT is set), the store,
// and the projector (projections/consumer) adapted to rebuildkit's narrow
// Recompute contract. scripts/rebuild (each subcommand) calls Setup.
package wire

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/commitcollect/backend/handlers/app"
	"github.com/commitcollect/backend/handlers/config"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/store/tableadmin"
	"github.com/commitcollect/backend/projections"
	"github.com/commitcollect/backend/projections/consumer"
	"github.com/commitcollect/backend/scripts/rebuildkit"
	"github.com/commitcollect/backend/scripts/rebuildkit/cli"
)

// Setup implements rebuildkit.Setup: it reads the configuration (table
// prefix from the flag), loads the default AWS credential chain and wires
// the projector in process. It returns the configuration's errors, all
// together.
func Setup(ctx context.Context, tablePrefix string) (*cli.Env, error) {
	cfg, err := config.FromEnv(config.LocalStackEnv(nil), config.Need{})
	if err != nil {
		return nil, err
	}
	cfg.TablePrefix = tablePrefix
	log := cfg.Logger().With("service", "rebuild-tools")
	conn, err := app.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	st, db, awsCfg := conn.Store, conn.DB, conn.AWS
	c := app.ProjectorOf(st, io.Discard, log)
	return &cli.Env{
		Store:      st,
		Streams:    conn.Streams,
		StreamARN:  func(ctx context.Context) (string, error) { return tableadmin.StreamARN(ctx, db, st.DB.Tables()) },
		Recompute:  Recompute(c),
		ProcessJob: worker(cfg, st, log),
		Projector:  c.Handle,
		Lambda:     lambda.NewFromConfig(awsCfg),
		SQS:        sqs.NewFromConfig(awsCfg),
		Logger:     log,
	}, nil
}

// Recomputer is the projector's on-demand recompute (*consumer.Consumer).
type Recomputer interface {
	RecomputeUser(ctx context.Context, userID string, dryRun bool) (projections.UserReport, error)
}

var _ Recomputer = (*consumer.Consumer)(nil)

// Recompute adapts the projector's RecomputeUser to rebuildkit.Recompute.
// Milestone or award items the projector could not read (a newer schema)
// and milestones it could not project (an invalid definition) make the user
// fail, after everything else was done: they need a human, and a rebuild
// must not report them as fixed.
func Recompute(c Recomputer) rebuildkit.Recompute {
	return func(ctx context.Context, userID string, dryRun bool) (rebuildkit.Outcome, error) {
		rep, err := c.RecomputeUser(ctx, userID, dryRun)
		out := Outcome(rep, dryRun)
		if err != nil {
			return out, err
		}
		if len(rep.Unreadable) > 0 {
			return out, fmt.Errorf("recompute user %s: items left alone, unreadable by this code: %v: %w", userID, rep.Unreadable, model.ErrUnsupportedSchema)
		}
		for _, m := range rep.Milestones {
			if m.Skipped != "" {
				return out, fmt.Errorf("recompute user %s: milestone %s not projected: %s: %w", userID, m.MilestoneID, m.Skipped, model.ErrInvalid)
			}
		}
		return out, nil
	}
}

// Outcome converts the projector's report into rebuildkit's Outcome: per
// milestone, one Drift per projected field that differs and per missing
// award item; changes and awards are counted as written (or, in a dry run,
// as they would be).
func Outcome(rep projections.UserReport, dryRun bool) rebuildkit.Outcome {
	out := rebuildkit.Outcome{UserID: rep.UserID, Milestones: len(rep.Milestones), ConflictsRetried: max(rep.Attempts-1, 0)}
	for _, m := range rep.Milestones {
		if m.Skipped != "" {
			continue
		}
		if (dryRun && (m.Changed || len(m.Minted) > 0)) || m.Written {
			out.MilestonesChanged++
			out.AwardsMinted += len(m.Minted)
		}
		d := func(field string, stored, recomputed any) {
			s, r := fmt.Sprint(stored), fmt.Sprint(recomputed)
			if s != r {
				out.Drift = append(out.Drift, rebuildkit.Drift{UserID: rep.UserID, MilestoneID: m.MilestoneID, Field: field, Stored: s, Recomputed: r})
			}
		}
		s, r := m.Stored, m.Recomputed
		if s.Status == "" {
			s.Status = model.StatusActive // never projected yet: the projector reads it as active
		}
		d(rebuildkit.FieldProgress, s.ProgressValue, r.ProgressValue)
		d(rebuildkit.FieldWorkoutsCounted, s.WorkoutsCounted, r.WorkoutsCounted)
		d(rebuildkit.FieldAwardedParts, s.AwardedParts, r.AwardedParts)
		d(rebuildkit.FieldStatus, s.Status, r.Status)
		d(rebuildkit.FieldTruncated, s.Truncated, r.Truncated)
		d(rebuildkit.FieldExactFrom, instant(s.ExactFromUtc), instant(r.ExactFromUtc))
		for _, i := range m.MissingAwards {
			out.Drift = append(out.Drift, rebuildkit.Drift{UserID: rep.UserID, MilestoneID: m.MilestoneID,
				Field: rebuildkit.FieldAward, Stored: "missing", Recomputed: fmt.Sprintf("part %d", i)})
		}
		if len(m.Unjustified) > 0 {
			unjustifiedDrift(&out, rep.UserID, m)
		}
	}
	return out
}

// unjustifiedDrift explains awards the stored state claims beyond what is
// justified: on the awardedParts drift when the counter is what claims
// them, else as an award drift (award items without their AWARD_MINTED
// entry, which are never counted).
func unjustifiedDrift(out *rebuildkit.Outcome, userID string, m projections.MilestoneReport) {
	msg := m.UnjustifiedMessage()
	for i := range out.Drift {
		if d := &out.Drift[i]; d.MilestoneID == m.MilestoneID && d.UserID == userID && d.Field == rebuildkit.FieldAwardedParts {
			d.Message = msg
			return
		}
	}
	out.Drift = append(out.Drift, rebuildkit.Drift{UserID: userID, MilestoneID: m.MilestoneID, Field: rebuildkit.FieldAward,
		Stored: fmt.Sprintf("parts %v", m.Unjustified), Recomputed: "unjustified", Message: msg})
}

// instant renders an optional instant for drift lines ("-" when unset).
func instant(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339Nano)
}
