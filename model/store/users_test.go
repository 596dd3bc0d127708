package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/test/dynamolocal"
	"github.com/commitcollect/backend/test/fixture"
)

func TestListUsersPaginatesEveryShard(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	var want []string
	var es []model.Entity
	for i := range 230 {
		id := fmt.Sprintf("user-%04d", i)
		want = append(want, id)
		es = append(es, &model.Profile{UserID: id, DisplayName: id})
	}
	// Items that are not profiles must not appear: the index is sparse.
	es = append(es, fixture.Workout("user-0001", 1), fixture.Workout("user-0002", 2))
	if err := s.DB.BatchPut(ctx, s.DB.Tables().Main, es); err != nil {
		t.Fatal(err)
	}

	var got []string
	pages := 0
	for shard := range keys.UserListShards {
		after := ""
		for {
			page, err := s.Users.ListUsers(ctx, shard, after, 7)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			if len(page.UserIDs) > 7 {
				t.Fatalf("shard %d: got a page of %d users, want at most 7", shard, len(page.UserIDs))
			}
			if !slices.IsSorted(page.UserIDs) || (len(page.UserIDs) > 0 && page.UserIDs[0] <= after) {
				t.Fatalf("shard %d: got %v after %q, want ascending ids after the cursor", shard, page.UserIDs, after)
			}
			for _, id := range page.UserIDs {
				if keys.UserListPK(id) != keys.UserListShardPK(shard) {
					t.Fatalf("got %s in shard %d, want it in %s", id, shard, keys.UserListPK(id))
				}
			}
			got = append(got, page.UserIDs...)
			if !page.More {
				break
			}
			after = page.Next
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("got %d users (%v…), want the %d profiles exactly once", len(got), got[:min(5, len(got))], len(want))
	}
	if pages < 230/7 {
		t.Fatalf("got %d pages, want at least %d with a limit of 7", pages, 230/7)
	}

	n, err := s.Users.CountUsers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 230 {
		t.Fatalf("CountUsers: got %d, want 230", n)
	}
}

func TestListUsersExactPageAndBadShard(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	// Find three users of shard 0, so a page of 3 ends exactly at the end.
	var ids []string
	for i := 0; len(ids) < 3; i++ {
		id := fmt.Sprintf("u%d", i)
		if keys.UserListPK(id) == keys.UserListShardPK(0) {
			ids = append(ids, id)
			if err := s.DB.Put(ctx, s.DB.Tables().Main, &model.Profile{UserID: id}); err != nil {
				t.Fatal(err)
			}
		}
	}
	page, err := s.Users.ListUsers(ctx, 0, "", 3)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	if !slices.Equal(page.UserIDs, ids) || page.More || page.Next != ids[2] {
		t.Fatalf("got %+v, want %v with More=false and Next=%s", page, ids, ids[2])
	}
	page, err = s.Users.ListUsers(ctx, 0, page.Next, 3)
	if err != nil || len(page.UserIDs) != 0 || page.More || page.Next != "" {
		t.Fatalf("past the end: got %+v, %v; want an empty final page", page, err)
	}
	if _, err := s.Users.ListUsers(ctx, keys.UserListShards, "", 0); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("bad shard: got %v, want ErrInvalid", err)
	}
	if page, err := s.Users.ListUsers(ctx, 0, "", 0); err != nil || len(page.UserIDs) != 3 {
		t.Fatalf("default limit (%d): got %+v, %v; want the 3 users", store.MaxUsersPage, page, err)
	}
}
