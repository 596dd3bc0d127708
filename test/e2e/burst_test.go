package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/test/capture"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/scripts/runkit"
	"github.com/commitcollect/backend/scripts/stravasim"
	"github.com/commitcollect/backend/test/dynamolocal"
)

// TestLocalStackAbsorbsABurst: 300 webhooks from 8
// concurrent senders into the local stack (what `make run` runs) with a
// worker queue of 8. Every one is answered 200 accepted at the first
// attempt, none refused although the queue overflows (the log shows failed
// hand-offs), and every workout is written: the outbox keeps what the queue
// cannot take and the sweeper delivers it. Protection: the webhook answers
// 200 once the event is in the outbox, whatever the hand-off says.
func TestLocalStackAbsorbsABurst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	logs := &capture.Buffer{}
	// Strava's read budget (100 per 15 min) would defer most of the burst
	// to the next window: this simulator's limits are out of the way, so
	// only the queue bounds the pace.
	const subscription, big = 1, 1 << 30
	sim, err := stravasim.Start("127.0.0.1:0", stravasim.Options{SubscriptionID: subscription,
		Limits: stravasim.Limits{Short: big, Daily: big, ReadShort: big, ReadDaily: big}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	stack, err := runkit.Start(ctx, runkit.Options{
		Getenv: lookup(map[string]string{
			"CC_HTTP_ADDR": "127.0.0.1:0", "CC_OUTBOX_LEASE": "2s",
			"DYNAMODB_ENDPOINT": dynamolocal.Endpoint(t), "CC_TABLE_PREFIX": dynamolocal.UniquePrefix(),
			"STRAVA_BASE_URL": sim.URL, "STRAVA_CLIENT_ID": sim.ClientID(), "STRAVA_CLIENT_SECRET": sim.ClientSecret(),
			"STRAVA_SUBSCRIPTION_ID": strconv.Itoa(subscription), "STRAVA_VERIFY_TOKEN": "burst",
		}),
		Log: slog.New(slog.NewJSONHandler(logs, nil)), PollInterval: 20 * time.Millisecond,
		SweepInterval: 100 * time.Millisecond, QueueCapacity: 8,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		stack.Close(cctx)
	})
	// 3 creates per athlete: each is fetched (a 4th would be gathered into
	// a list page's burst, deferred at once, and the queue would never fill).
	const users, perUser, senders = 100, 3, 8
	st, tables := stack.Store, stack.Store.DB.Tables()
	start := time.Date(2026, 3, 1, 6, 0, 0, 0, time.UTC)
	var evs []stravasim.Event
	for u := range users {
		athlete := int64(8100 + u)
		user := fmt.Sprintf("burst-%d", u)
		sim.AddAthlete(stravasim.Athlete{ID: athlete, Firstname: "B"})
		tok := sim.IssueTokens(athlete, time.Hour)
		if err := st.DB.Put(ctx, tables.Main, &model.StravaConnection{UserID: user, AthleteID: athlete, AccessToken: tok.AccessToken,
			RefreshToken: tok.RefreshToken, ExpiresAtUtc: tok.ExpiresAt, Scopes: tok.Scope, TokenVersion: 1}); err != nil {
			t.Fatal(err)
		}
		if err := st.DB.Put(ctx, tables.Main, &model.AthleteOwner{AthleteID: athlete, UserID: user}); err != nil {
			t.Fatal(err)
		}
		for i := range perUser {
			id := athlete*1000 + int64(i)
			sim.PutActivity(stravasim.Activity{ID: id, AthleteID: athlete, Name: "B", SportType: "Run", Distance: 5000,
				MovingTime: 1500, ElapsedTime: 1600, StartDate: start.Add(time.Duration(i) * time.Hour)})
			evs = append(evs, sim.ActivityEvent("create", id, athlete, nil))
		}
	}

	began := time.Now()
	var accepted, refused, other atomic.Int64
	work := make(chan stravasim.Event)
	var wg sync.WaitGroup
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ev := range work {
				body, _ := json.Marshal(ev)
				resp, err := http.Post(stack.WebhookURL, "application/json", bytes.NewReader(body))
				if err != nil {
					other.Add(1)
					continue
				}
				var out map[string]string
				_ = json.NewDecoder(resp.Body).Decode(&out)
				resp.Body.Close()
				switch {
				case resp.StatusCode == http.StatusOK && out["status"] == "accepted":
					accepted.Add(1)
				case resp.StatusCode == http.StatusServiceUnavailable:
					refused.Add(1)
				default:
					other.Add(1)
				}
			}
		}()
	}
	for _, ev := range evs {
		work <- ev
	}
	close(work)
	wg.Wait()
	sent := time.Since(began)

	deadline := time.Now().Add(3 * time.Minute)
	var written int
	for {
		written = 0
		for u := range users {
			ws, _, err := dynamo.QueryEntities[model.Workout](ctx, st.DB, tables.Main, keys.UserPK(fmt.Sprintf("burst-%d", u)),
				keys.PrefixWorkoutStrava, dynamo.QueryOptions{})
			if err != nil {
				t.Fatal(err)
			}
			written += len(ws)
		}
		b, err := st.Pending.PendingOutbox(ctx, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if written == len(evs) && b.Pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 3 min: %d of %d written, backlog %+v", written, len(evs), b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	handOffFailed := strings.Count(logs.String(), "webhook hand-off failed")
	t.Logf("burst: %d webhooks from %d senders, queue 8: accepted %d refused %d other %d, hand-offs failed %d (queue full), "+
		"written %d, sent in %s, all written after %s", len(evs), senders, accepted.Load(), refused.Load(), other.Load(),
		handOffFailed, written, sent.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	if accepted.Load() != int64(len(evs)) || refused.Load() != 0 || other.Load() != 0 {
		t.Errorf("got accepted %d refused %d other %d; want all %d accepted at the first attempt",
			accepted.Load(), refused.Load(), other.Load(), len(evs))
	}
	if handOffFailed == 0 {
		t.Errorf("no hand-off failed: the burst did not overflow the queue, so it proves nothing")
	}
}
