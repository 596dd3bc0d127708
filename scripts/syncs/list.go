package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/store"
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
	State     *model.SyncState
	Attention string
}

// Lister is what List reads (model/store.Store).
type Lister interface {
	ListUsers(ctx context.Context, shard int, after string, limit int) (store.UsersPage, error)
	SyncState(ctx context.Context, userID string) (*model.SyncState, error)
}

var _ Lister = (*store.Store)(nil)

// Attention classifies a sync at now: failed; stuck when it runs (or is
// deferred) but has not been updated for stuckAfter past when it was due;
// deferred while it waits for Strava's budget; none otherwise.
func Attention(s *model.SyncState, now time.Time, stuckAfter time.Duration) string {
	due := s.UpdatedAtUtc
	if s.NextSyncAtUtc.After(due) {
		due = s.NextSyncAtUtc
	}
	switch {
	case s.State == model.SyncFailed:
		return AttentionFailed
	case s.Running() && now.Sub(due) > stuckAfter:
		return AttentionStuck
	case s.State == model.SyncDeferred:
		return AttentionDeferred
	}
	return AttentionNone
}

// List reads every user's sync state through the users index (no Scan)
// and returns those needing attention (every one with all).
func List(ctx context.Context, st Lister, now time.Time, stuckAfter time.Duration, all bool) ([]Row, error) {
	var rows []Row
	for shard := range model.UserListShards {
		after := ""
		for {
			page, err := st.ListUsers(ctx, shard, after, 0)
			if err != nil {
				return nil, err
			}
			for _, u := range page.UserIDs {
				s, err := st.SyncState(ctx, u)
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

// Print writes rows as a table.
func Print(w io.Writer, rows []Row) {
	if len(rows) == 0 {
		fmt.Fprintln(w, "no sync needs attention")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "USER\tATTENTION\tSTATE\tMODE\tIMPORTED\tHORIZON\tUPDATED\tNEXT\tREASON")
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.UserID, att, s.State, s.Mode, s.ImportedCount,
			ts(s.HorizonUtc), ts(s.UpdatedAtUtc), ts(s.NextSyncAtUtc), s.DeferredReason)
	}
	_ = tw.Flush()
}
