package store_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/test/dynamolocal"
	"github.com/commitcollect/backend/test/fixture"
)

// afterGuardRead is an HTTP transport in front of DynamoDB Local that, once
// armed, runs hook right after the first read of a user guard has been
// answered: what another process does between a writer's guard read and
// its next write.
type afterGuardRead struct {
	armed atomic.Bool
	hook  func()
}

func (a *afterGuardRead) RoundTrip(r *http.Request) (*http.Response, error) {
	guardRead := false
	if a.armed.Load() && r.Header.Get("X-Amz-Target") == "DynamoDB_20120810.GetItem" && r.Body != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		guardRead = bytes.Contains(body, []byte(`"GUARD"`))
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if guardRead && a.armed.CompareAndSwap(true, false) {
		a.hook()
	}
	return resp, err
}

// TestGuardRemovalYieldsToReconnect: a workout write whose guard check read
// the revocation, and whose removal runs after a reconnect cleared it, is
// kept (the reconnect's backfill may have written it). Protection: the
// guard condition in the check's removal transaction (deleteIfStillRevoked).
func TestGuardRemovalYieldsToReconnect(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	seedConnection(t, s, "u1", 7, 1)
	grant, err := s.Connections.StravaConnectionGrant(ctx, "u1")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	revokedAt := now.Truncate(time.Second)
	if err := s.Connections.RevokeStravaConnection(ctx, grant, revokedAt, now, now); err != nil {
		t.Fatal(err)
	}
	tr := &afterGuardRead{hook: func() { // the reconnect
		if err := s.Connections.ClearStravaRevocation(ctx, "u1", revokedAt, now); err != nil {
			t.Error(err)
		}
	}}
	db := dynamodb.NewFromConfig(dynamolocal.Config(dynamolocal.Endpoint(t)), func(o *dynamodb.Options) {
		o.HTTPClient = &http.Client{Transport: tr}
	})
	writer := store.New(db, s.DB.Tables())
	tr.armed.Store(true)
	if err := writer.Workouts.UpsertWorkout(ctx, fixture.Workout("u1", 1)); err != nil {
		t.Fatal(err)
	}
	if err := writer.Guard.CheckWrites(ctx, "u1", []model.Key{keys.WorkoutKey("u1", 1)}); !errors.Is(err, model.ErrStravaRevoked) {
		t.Fatalf("got %v; the check read the revocation, want model.ErrStravaRevoked", err)
	}
	if tr.armed.Load() {
		t.Fatal("the write never read the guard")
	}
	if _, err := s.Workouts.Workout(ctx, "u1", 1); err != nil {
		t.Fatalf("workout: %v; want it kept after the reconnect", err)
	}
}
