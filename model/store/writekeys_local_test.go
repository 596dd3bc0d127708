package store_test

import (
	"context"
	"testing"

	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/metering"
	"github.com/commitcollect/backend/model/store/tableadmin"
	"github.com/commitcollect/backend/test/dynamolocal"
	"github.com/commitcollect/backend/test/fixture"
)

// TestMeterCountsWriteKeys proves the middleware feeds a meter's WriteKeys
// with the store's real calls on DynamoDB Local: three workouts of one user
// and one of another land in the main table and LSI1 under their users'
// keys, a meter started from it (a job's) counts into the same counter, and
// a refused conditional write counts nothing.
func TestMeterCountsWriteKeys(t *testing.T) {
	t.Parallel()
	st := dynamolocal.NewStore(t)
	main := st.DB.Tables().Main
	keys := metering.NewWriteKeys(tableadmin.KeySchemas(tableadmin.Specs(st.DB.Tables())), 0)
	m := metering.NewMeter()
	m.CountWriteKeys(keys)
	ctx := metering.WithMeter(context.Background(), m)
	for i := range 3 {
		if err := st.DB.Put(ctx, main, fixture.Workout("u1", int64(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	jobCtx, _ := metering.StartMeter(ctx)
	if err := st.DB.Put(jobCtx, main, fixture.Workout("u2", 9)); err != nil {
		t.Fatal(err)
	}
	if err := st.DB.PutIfAbsent(ctx, main, fixture.Workout("u2", 9)); err == nil {
		t.Fatal("PutIfAbsent of an existing workout: got nil, want ErrConflict")
	}
	got := map[string]metering.HotKey{}
	for _, h := range keys.Hottest() {
		got[h.Scope] = h
	}
	for _, scope := range []string{main, main + "/" + dynamo.IndexLSI1} {
		h := got[scope]
		if h.Writes != 4 || h.Key != "USER#u1" || h.Count != 3 || h.Keys != 2 {
			t.Errorf("%s: got %+v, want 4 writes, 2 keys, hottest USER#u1 with 3", scope, h)
		}
	}
	if h := got[main+"/"+dynamo.IndexGSI1]; h.Writes != 0 {
		t.Errorf("GSI1: got %+v, want no writes (workouts carry no GSI1PK)", h)
	}
}
