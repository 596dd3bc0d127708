package bff_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/handlers/app"
	"github.com/commitcollect/backend/handlers/bff"
	"github.com/commitcollect/backend/handlers/bff/deletion"
	"github.com/commitcollect/backend/handlers/bff/respond"
	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/limits"
	"github.com/commitcollect/backend/model/store/tableadmin"
	"github.com/commitcollect/backend/model/strava"
	"github.com/commitcollect/backend/model/streams"
	"github.com/commitcollect/backend/model/syncstate"
	"github.com/commitcollect/backend/projections/consumer"
	"github.com/commitcollect/backend/test/dynamolocal"
)

// account is everything one user owns, as created by populate.
type account struct {
	userID    string
	athleteID int64
	sessions  []string
}

// populate creates a user with three sessions, 30 workouts (more than one
// batch of 25), two milestones and three awards each.
func (e *env) populate(userID string, athleteID int64) account {
	e.t.Helper()
	ctx := context.Background()
	a := account{userID: userID, athleteID: athleteID, sessions: []string{e.user(userID, athleteID), e.session(userID), e.session(userID)}}
	var items []model.Entity
	for i := range 30 {
		items = append(items, &model.Workout{UserID: userID, AthleteID: athleteID, ActivityID: athleteID*1000 + int64(i), SportType: "Run",
			DistanceMeters: 5000, StartDateUtc: e.clock.Now().Add(-time.Duration(i) * time.Hour)})
	}
	for m := range 2 {
		mid := model.NewID()
		items = append(items, &model.Milestone{UserID: userID, MilestoneID: mid, MilestoneDefinition: model.MilestoneDefinition{
			ModelID: "road-bike", Title: "m", Metric: model.MetricCount, Target: 8, PeriodStartAtUtc: e.clock.Now().Add(-48 * time.Hour), PartCount: 8}})
		for p := range 3 {
			items = append(items, &model.Award{UserID: userID, MilestoneID: mid, ModelID: "road-bike", PartIndex: p, PartName: fmt.Sprint("part ", m, p)})
		}
	}
	if err := e.st.DB.BatchPut(ctx, e.st.DB.Tables().Main, items); err != nil {
		e.t.Fatal(err)
	}
	// A job of the athlete parked for redrive (its payload may hold a whole
	// workout image).
	if err := e.st.Parked.Park(ctx, &ops.ParkedRecord{Source: keys.ParkSourceWorker, RecordID: "parked-" + userID,
		UserID: userID, AthleteID: athleteID, Payload: "{}", Reason: "test"}); err != nil {
		e.t.Fatal(err)
	}
	return a
}

// footprint lists every key the account has: its partition in the main
// table (but its guard), its athlete partition, its parked records and its
// sessions.
func (e *env) footprint(a account) []string {
	e.t.Helper()
	ctx := context.Background()
	var ks []string
	for _, pk := range []string{keys.UserPK(a.userID), keys.AthletePK(a.athleteID)} {
		res, err := e.st.DB.QueryPrefix(ctx, e.st.DB.Tables().Main, pk, "", dynamo.QueryOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		for _, it := range res.Items {
			pk, _ := it["PK"].(*types.AttributeValueMemberS)
			sk, _ := it["SK"].(*types.AttributeValueMemberS)
			if pk == nil || sk == nil {
				e.t.Fatalf("item without PK/SK: %v", it)
			}
			k := model.Key{PK: pk.Value, SK: sk.Value}
			if k == keys.UserGuardKey(a.userID) {
				continue // kept on purpose (90 days): what in-flight writers check
			}
			ks = append(ks, k.String())
		}
	}
	for _, src := range []string{keys.ParkSourceWorker, keys.ParkSourceProjector} {
		recs, err := e.st.Parked.Parked(ctx, src)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, r := range recs {
			if r.UserID == a.userID || (r.UserID == "" && r.AthleteID == a.athleteID) {
				ks = append(ks, r.ItemKey().String())
			}
		}
	}
	for _, sid := range a.sessions {
		_, err := e.ss.Session(ctx, keys.SessionHash(sid))
		switch {
		case err == nil:
			ks = append(ks, keys.SessionKey(keys.SessionHash(sid)).String())
		case !errors.Is(err, model.ErrNotFound):
			e.t.Fatal(err)
		}
	}
	sort.Strings(ks)
	return ks
}

func (e *env) auditEvents(userID string) []string {
	e.t.Helper()
	entries, _, err := dynamo.QueryEntities[model.AuditEntry](context.Background(), e.st.DB, e.st.DB.Tables().Audit, keys.UserPK(userID), "", dynamo.QueryOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, a := range entries {
		out = append(out, a.EventType)
	}
	return out
}

func TestAccountDeletionSurvivesAStopAfterEveryStep(t *testing.T) {
	t.Parallel()
	fs := &fakeStrava{}
	e := newEnv(t, envOpts{strava: fs})
	bystander := e.populate("bystander", 1)
	before := e.footprint(bystander)
	if len(before) != 1+1+30+2*4+3+1+3+1 { // profile, connection, workouts, milestones+awards, pointers, owner, sessions, parked
		t.Fatalf("bystander footprint has %d keys: %v", len(before), before)
	}

	for i, step := range append([]string{"none"}, deletion.Steps...) {
		t.Run("stop after "+step, func(t *testing.T) {
			a := e.populate(fmt.Sprintf("victim%d", i), int64(100+i))
			if len(e.footprint(a)) != len(before) {
				t.Fatalf("victim footprint: %v", e.footprint(a))
			}
			crashed := false
			bff.SetAfterStep(e.h, func(s string) error {
				if s == step && !crashed {
					crashed = true
					return errors.New("simulated crash")
				}
				return nil
			})
			defer bff.SetAfterStep(e.h, nil)

			cookie := a.sessions[1]
			r := e.do(http.MethodDelete, "/v1/me", cookie, nil)
			var rep bff.DeletionReport
			r.json(t, &rep)
			if r.status != http.StatusAccepted {
				t.Fatalf("first DELETE: %d %s", r.status, r.body)
			}
			if step == "none" {
				if rep.Status != "deleted" || !reflect.DeepEqual(rep.Completed, deletion.Steps) {
					t.Fatalf("report = %+v, want every step", rep)
				}
			} else {
				if rep.Status != "incomplete" || rep.StoppedAt != step || rep.Error == nil {
					t.Fatalf("report = %+v, want incomplete at %s", rep, step)
				}
				// Re-run with the same cookie; after the last step the
				// session is gone and so is everything else.
				r = e.do(http.MethodDelete, "/v1/me", cookie, nil)
				if step == deletion.StepSessions {
					if r.status != http.StatusUnauthorized {
						t.Fatalf("re-run after the sessions step: %d %s, want 401 (nothing left)", r.status, r.body)
					}
				} else {
					r.json(t, &rep)
					if r.status != http.StatusAccepted || rep.Status != "deleted" {
						t.Fatalf("re-run: %d %s", r.status, r.body)
					}
				}
			}
			if left := e.footprint(a); len(left) != 0 {
				t.Fatalf("left behind after stopping at %s and re-running: %v", step, left)
			}
			if got := e.footprint(bystander); !reflect.DeepEqual(got, before) {
				t.Fatalf("bystander touched:\n got %v\nwant %v", got, before)
			}
			if r := e.do(http.MethodGet, "/v1/me", bystander.sessions[0], nil); r.status != http.StatusOK {
				t.Fatalf("bystander session: %d", r.status)
			}
			if ev := e.auditEvents(a.userID); len(ev) == 0 || ev[0] != model.AuditAccountDeleted {
				t.Fatalf("audit events = %v, want ACCOUNT_DELETED", ev)
			}
			fs.mu.Lock()
			deauth := fs.deauthorized
			fs.mu.Unlock()
			if !contains(deauth, "access-"+a.userID) {
				t.Fatalf("Strava was not deauthorized for %s: %v", a.userID, deauth)
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func TestAccountDeletionWaitsForStrava(t *testing.T) {
	t.Parallel()
	fs := &fakeStrava{deauthErr: fmt.Errorf("strava 503: %w", model.ErrRetryable)}
	e := newEnv(t, envOpts{strava: fs})
	a := e.populate("u1", 5)
	before := e.footprint(a)

	r := e.do(http.MethodDelete, "/v1/me", a.sessions[0], nil)
	var rep bff.DeletionReport
	r.json(t, &rep)
	if r.status != http.StatusAccepted || rep.Status != "incomplete" || rep.StoppedAt != deletion.StepDeauthorize ||
		rep.Error.Code != respond.CodeUnavailable || len(rep.Completed) != 0 {
		t.Fatalf("Strava down: %d %+v", r.status, rep)
	}
	if got := e.footprint(a); !reflect.DeepEqual(got, before) {
		t.Fatalf("deleted while Strava access could not be revoked: %v", got)
	}

	// Strava back, and the stored access token has expired meanwhile: the
	// deletion refreshes it (persisting the rotated one) and revokes.
	fs.mu.Lock()
	fs.deauthErr = nil
	fs.mu.Unlock()
	e.clock.Add(7 * time.Hour)
	r = e.do(http.MethodDelete, "/v1/me", a.sessions[0], nil)
	r.json(t, &rep)
	if r.status != http.StatusAccepted || rep.Status != "deleted" {
		t.Fatalf("retry: %d %s", r.status, r.body)
	}
	if !reflect.DeepEqual(fs.refreshed, []string{"refresh-u1"}) || !reflect.DeepEqual(fs.deauthorized, []string{"refreshed-1"}) {
		t.Fatalf("refreshed %v, deauthorized %v; want the stored refresh token used and the fresh access token revoked", fs.refreshed, fs.deauthorized)
	}
	if left := e.footprint(a); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}

func TestAccountDeletionWhenStravaAccessIsAlreadyRevoked(t *testing.T) {
	t.Parallel()
	fs := &fakeStrava{deauthErr: fmt.Errorf("strava 401: %w", model.ErrUnauthorized)}
	e := newEnv(t, envOpts{strava: fs})
	a := e.populate("u1", 6)
	r := e.do(http.MethodDelete, "/v1/me", a.sessions[0], nil)
	var rep bff.DeletionReport
	r.json(t, &rep)
	if r.status != http.StatusAccepted || rep.Status != "deleted" {
		t.Fatalf("revoked access: %d %s", r.status, r.body)
	}
	if left := e.footprint(a); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
	// Running it again (e.g. from a script, without a session) is harmless.
	rep2, err := e.h.DeleteAccount(context.Background(), "u1", "", "corr")
	if err != nil || rep2.Status != "deleted" {
		t.Fatalf("second run: %+v, %v", rep2, err)
	}
}

// slowFetch answers one activity fetch only when released (a slow Strava).
type slowFetch struct {
	athleteID int64
	fetched   chan struct{}
	release   chan struct{}
}

func (f *slowFetch) GetActivity(_ context.Context, _ string, id int64) (strava.Activity, strava.RateLimit, error) {
	close(f.fetched)
	<-f.release
	return strava.Activity{ID: id, Athlete: strava.ActivityAthlete{ID: f.athleteID}, SportType: "Run", Distance: 5000,
		MovingTime: 1500, ElapsedTime: 1600, StartDate: time.Date(2026, 3, 2, 6, 0, 0, 0, time.UTC)}, strava.RateLimit{}, nil
}

// GetAthlete is never reached: the test sends no deauthorization.
func (f *slowFetch) GetAthlete(context.Context, string) (strava.Athlete, strava.RateLimit, error) {
	return strava.Athlete{ID: f.athleteID}, strava.RateLimit{}, nil
}

type fixedToken struct{}

func (fixedToken) AccessToken(context.Context, string) (string, error) { return "tok", nil }

func (fixedToken) Verify(context.Context, string) (strava.Token, error) {
	return strava.Token{AccessToken: "tok"}, nil
}

// TestAccountDeletionIsFinalWithWorkInFlight: DELETE /v1/me answers while a
// fetch is in flight; the fetch lands afterwards, and a sync state write
// lands even later; neither leaves anything in USER#{id}.
// Protection: the guard step (MarkUserDeleted) and the check after the
// writes (the projector's for the fetch, the sync state's own).
func TestAccountDeletionIsFinalWithWorkInFlight(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{strava: &fakeStrava{}, tables: streamedTables})
	a := e.populate("inflight", 77)
	f := &slowFetch{athleteID: 77, fetched: make(chan struct{}), release: make(chan struct{})}
	w := app.NewWorker(e.st, fixedToken{}, f, slog.New(slog.DiscardHandler))
	w.Fetch.Reads.PerWindow = 0 // no read counter in the athlete's partition
	job := ingest.Job{Event: ingest.Event{ObjectType: ingest.ObjectActivity, ObjectID: 770001, AspectType: ingest.AspectCreate,
		OwnerID: 77, EventTime: e.clock.Now().Unix()}, CorrelationID: "c-inflight", ReceivedAtUtc: e.clock.Now()}
	for _, r := range []*ops.ParkedRecord{
		{Source: keys.ParkSourceProjector, RecordID: "p-inflight", UserID: a.userID, Payload: "{}"},
		{Source: keys.ParkSourceWorker, RecordID: "w-athlete-only", AthleteID: 77, Payload: "{}"},
	} {
		if err := e.st.Parked.Park(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- w.Process(context.Background(), job) }()
	<-f.fetched // resolved the athlete and asked Strava: in flight

	r := e.do(http.MethodDelete, "/v1/me", a.sessions[0], nil)
	var rep bff.DeletionReport
	r.json(t, &rep)
	if r.status != http.StatusAccepted || rep.Status != "deleted" {
		t.Fatalf("DELETE /v1/me: %d %s", r.status, r.body)
	}
	close(f.release)
	if err := <-done; err != nil {
		t.Fatalf("the fetch in flight: %v", err)
	}
	// The projector handles the landed write's record: the user's guard,
	// read with the milestones, removes it.
	db, streamsAPI := dynamolocal.Clients(t)
	arn, err := tableadmin.StreamARN(context.Background(), db, e.st.DB.Tables())
	if err != nil {
		t.Fatal(err)
	}
	recs, err := streams.ReadAll(context.Background(), streamsAPI, arn)
	if err != nil {
		t.Fatal(err)
	}
	proj := consumer.New(app.ProjectorStores(e.st), consumer.Options{Metrics: io.Discard})
	if resp, err := proj.Handle(context.Background(), events.DynamoDBEvent{Records: recs}); err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("projector: %+v, %v", resp, err)
	}
	// A sync page recorded even later (its put is conditioned only on the
	// item being absent).
	if _, err := limits.New(e.st).UpdateSyncState(context.Background(), a.userID, func(st *syncstate.SyncState) error {
		st.State = syncstate.SyncBackfilling
		return nil
	}); !errors.Is(err, model.ErrUserDeleted) {
		t.Fatalf("late sync state write: got %v, want ErrUserDeleted", err)
	}
	if left := e.footprint(a); len(left) != 0 {
		t.Fatalf("left after the deletion answered and the work in flight landed: %v", left)
	}
}
