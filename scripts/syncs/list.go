package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ports"
	"github.com/commitcollect/backend/model/syncstate"
)

// DefaultStuckAfter is how long a running sync may go without an update
// before it is reported stuck (a page takes seconds; a deferral updates the
// state when it starts and ends).
const DefaultStuckAfter = 30 * time.Minute

// What a listed sync needs.
const (
	AttentionNone     = ""
	AttentionDeferred = "deferred"
	AttentionFailed   = "failed"
	AttentionStuck    = "stuck"
)

// Row is one user's sync as listed.
type Row struct {
	UserID    string
	State     *syncstate.SyncState
	Attention string
}

// Lister is what List reads: the users index (the store's users) and each
// user's sync state (model/store/limits).
type Lister struct {
	Users interface {
		ListUsers(ctx context.Context, shard int, after string, limit int) (ports.UsersPage, error)
	}
	States interface {
		SyncState(ctx context.Context, userID string) (*syncstate.SyncState, error)
	}
}

// Attention classifies a sync at now: failed; stuck when it runs (or is
// deferred) but has not been updated for stuckAfter past when it was due;
// deferred while it waits for Strava's budget; none otherwise.
func Attention(s *syncstate.SyncState, now time.Time, stuckAfter time.Duration) string {
	due := s.UpdatedAtUtc
	if s.NextSyncAtUtc.After(due) {
		due = s.NextSyncAtUtc
	}
	switch {
	case s.State == syncstate.SyncFailed:
		return AttentionFailed
	case s.Running() && now.Sub(due) > stuckAfter:
		return AttentionStuck
	case s.State == syncstate.SyncDeferred:
		return AttentionDeferred
	}
	return AttentionNone
}

// List reads every user's sync state through the users index (no Scan)
// and returns those needing attention (every one with all).
func List(ctx context.Context, st Lister, now time.Time, stuckAfter time.Duration, all bool) ([]Row, error) {
	var rows []Row
	for shard := range keys.UserListShards {
		after := ""
		for {
			page, err := st.Users.ListUsers(ctx, shard, after, 0)
			if err != nil {
				return nil, err
			}
			for _, u := range page.UserIDs {
				s, err := st.States.SyncState(ctx, u)
				if errors.Is(err, model.ErrNotFound) {
					continue
				}
				if err != nil {
					return nil, err
				}
				r := Row{UserID: u, State: s, Attention: Attention(s, now, stuckAfter)}
				if all || r.Attention != AttentionNone {
					rows = append(rows, r)
				}
			}
			if !page.More {
				break
			}
			after = page.Next
		}
	}
	return rows, nil
}

// Print writes rows as a table: failed and stuck first, then the syncs
// waiting for the Strava budget in the order they will run (next attempt;
// the soonest-ending milestones were given the earliest), then the rest;
// and how many wait.
func Print(w io.Writer, rows []Row) {
	if len(rows) == 0 {
		fmt.Fprintln(w, "no sync needs attention")
		return
	}
	rank := map[string]int{AttentionFailed: 0, AttentionStuck: 1, AttentionDeferred: 2, AttentionNone: 3}
	slices.SortStableFunc(rows, func(a, b Row) int {
		if c := cmp.Compare(rank[a.Attention], rank[b.Attention]); c != 0 {
			return c
		}
		return a.State.NextSyncAtUtc.Compare(b.State.NextSyncAtUtc)
	})
	waiting := 0
	for _, r := range rows {
		if r.Attention == AttentionDeferred {
			waiting++
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "USER\tATTENTION\tSTATE\tMODE\tIMPORTED\tHORIZON\tUPDATED\tNEXT\tMILESTONE_END\tREASON")
	ts := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format(time.RFC3339)
	}
	for _, r := range rows {
		s := r.State
		att := r.Attention
		if att == "" {
			att = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", r.UserID, att, s.State, s.Mode, s.ImportedCount,
			ts(s.HorizonUtc), ts(s.UpdatedAtUtc), ts(s.NextSyncAtUtc), ts(s.MilestoneEndUtc), s.DeferredReason)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "%d syncs waiting for the strava budget (deferred: NEXT is the next attempt, REASON why)\n", waiting)
}
