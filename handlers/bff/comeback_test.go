package bff_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/bff"
	"github.com/commitcollect/backend/handlers/bff/deletion"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/purge"
	"github.com/commitcollect/backend/scripts/stravasim"
	"github.com/commitcollect/backend/test/privacyscan"
)

// Ids long enough that a keyed hash's hex never holds them by chance.
const (
	comebackAthlete  = int64(918273645)
	comebackActivity = int64(553311997755)
	comebackName     = "Kathleen Booth"
)

// revokedAndDeleted signs the athlete in, gives the account workouts, an
// award, audit entries about the user and under the athlete, has the
// athlete revoke on Strava (confirmed and purged) when revoke is set, and
// then delete the account. It returns the deleted user's id.
func revokedAndDeleted(t *testing.T, e *env, sim *stravasim.Server, revoke bool) string {
	t.Helper()
	ctx := context.Background()
	sim.AddAthlete(stravasim.Athlete{ID: comebackAthlete, Firstname: "Kathleen", Lastname: "Booth"})
	b := e.browser()
	if cb := e.login(b); cb.status != http.StatusFound {
		t.Fatalf("first login: %d %s", cb.status, cb.body)
	}
	owner, err := e.st.Users.AthleteOwner(ctx, comebackAthlete)
	if err != nil {
		t.Fatal(err)
	}
	user, now := owner.UserID, e.clock.Now()
	for id := comebackActivity; id < comebackActivity+3; id++ {
		if err := e.st.Workouts.UpsertWorkout(ctx, &model.Workout{UserID: user, AthleteID: comebackAthlete, ActivityID: id, SportType: "Run",
			DistanceMeters: 5000, StartDateUtc: now.Add(-time.Hour), CreatedAtUtc: now}); err != nil {
			t.Fatal(err)
		}
	}
	award := &model.Award{UserID: user, MilestoneID: "m1", ModelID: "rocket", PartIndex: 0, PartName: "Nose", AwardedAtUtc: now, ActivityID: comebackActivity}
	if err := e.st.DB.Put(ctx, e.st.DB.Tables().Main, award); err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{"athleteId": itoa(comebackAthlete), "activityId": itoa(comebackActivity),
		"reason": "fetch activity " + itoa(comebackActivity) + " of " + comebackName}
	e.st.Audits.Audit(ctx, slog.New(slog.DiscardHandler), model.NewAuditEntry(keys.UserPK(user), user, "EVENT_REJECTED", "c1", "r1", now, ids))
	e.st.Audits.Audit(ctx, slog.New(slog.DiscardHandler), model.NewAuditEntry(keys.AthletePK(comebackAthlete), "", "ATHLETE_NOT_LINKED", "c2", "r2", now, ids))

	if revoke {
		sim.RevokeAthlete(comebackAthlete)
		grant, err := e.st.Connections.StravaConnectionGrant(ctx, user)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.st.Connections.RevokeStravaConnection(ctx, grant, now, now, now); err != nil {
			t.Fatal(err)
		}
		if _, err := purge.New(e.st).PurgeStravaData(ctx, user, comebackAthlete, now); err != nil {
			t.Fatal(err)
		}
	}
	var rep bff.DeletionReport
	res := e.do(http.MethodDelete, "/v1/me", sessionFrom(t, b, e.srv.URL), nil)
	if res.status != http.StatusAccepted {
		t.Fatalf("DELETE /v1/me: %d %s", res.status, res.body)
	}
	if res.json(t, &rep); rep.Status != "deleted" {
		t.Fatalf("deletion %+v", rep)
	}
	return user
}

// signUpAgain signs the athlete in once more and returns GET /v1/me.
func signUpAgain(t *testing.T, e *env) bff.MeJSON {
	t.Helper()
	b := e.browser()
	if cb := e.login(b); cb.status != http.StatusFound {
		t.Fatalf("login after the deletion: %d %s; want a redirect home", cb.status, cb.body)
	}
	var me bff.MeJSON
	res := e.do(http.MethodGet, "/v1/me", sessionFrom(t, b, e.srv.URL), nil)
	if res.status != http.StatusOK {
		t.Fatalf("GET /v1/me after signing up again: %d %s", res.status, res.body)
	}
	res.json(t, &me)
	return me
}

// TestSignUpAgainAfterRevokingAndDeleting: an athlete who revoked on
// strava.com (purged) and then deleted the account signs in again and is
// a new user, connected, with nothing of the deleted account. The
// deletion removed the keyed-hash mapping the revocation left, and left no
// Strava id (athlete id, activity id, name) in any table outside items
// that expire within 7 days. Protections: the deletion's removal of the
// keyed-hash mapping (the mapping check fails), the audit trail's expiry
// at deletion and ACCOUNT_DELETED without an athlete id (the scan fails),
// the 3-day TTL of entries filed under an athlete (the scan fails).
func TestSignUpAgainAfterRevokingAndDeleting(t *testing.T) {
	t.Parallel()
	for _, revoke := range []bool{true, false} {
		t.Run(map[bool]string{true: "revoked first", false: "connected"}[revoke], func(t *testing.T) {
			t.Parallel()
			e, sim := oauthEnvWith(t, envOpts{})
			ctx := context.Background()
			old := revokedAndDeleted(t, e, sim, revoke)
			if u, err := purge.New(e.st).RevokedAthleteOwner(ctx, comebackAthlete); !errors.Is(err, model.ErrNotFound) {
				t.Fatalf("keyed-hash mapping names %q (%v) after the deletion; want it gone", u, err)
			}
			by := e.clock.Now().Add(7 * 24 * time.Hour)
			if now := time.Now().Add(7 * 24 * time.Hour); now.Before(by) {
				by = now
			}
			tb := e.st.DB.Tables()
			left, n, err := privacyscan.Lingering(ctx, e.st.DB.Client(), []string{tb.Main, tb.Sessions, tb.Audit, tb.Idempotency},
				[]string{itoa(comebackAthlete), itoa(comebackActivity), comebackName, "Kathleen"}, by)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range left {
				t.Error(l)
			}
			t.Logf("read %d items: %d hold a Strava id past 7 days", n, len(left))

			me := signUpAgain(t, e)
			if me.UserID == old || me.AthleteID != comebackAthlete || me.DisplayName != comebackName || !me.Connected {
				t.Fatalf("GET /v1/me = %+v; want a new user (not %s), connected, with the athlete's name", me, old)
			}
			if items, err := e.st.DB.QueryPrefix(ctx, tb.Main, keys.UserPK(me.UserID), keys.PrefixMilestone, dynamo.QueryOptions{}); err != nil || len(items.Items) != 0 {
				t.Fatalf("the new user holds %d milestone items (%v); want none of the deleted account's", len(items.Items), err)
			}
		})
	}
}

// TestSignUpAgainPastMappingsOfADeletedAccount: mappings a deletion left
// behind (deletions before the keyed-hash mapping was removed with the
// account, or a reclaim cut short) name a deleted user; the athlete still
// signs up as a new user, and the stale mappings go. Protection: the
// login's check of the mapped user (forgetIfDeleted): without it the
// callback answers 503 (reclaiming a deleted user), or a session opens on
// a deleted account and GET /v1/me answers 404.
func TestSignUpAgainPastMappingsOfADeletedAccount(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		stale func(t *testing.T, e *env, user string)
	}{
		{"keyed-hash mapping", func(t *testing.T, e *env, user string) {
			if err := purge.New(e.st).RememberRevokedAthlete(context.Background(), comebackAthlete, user, e.clock.Now()); err != nil {
				t.Fatal(err)
			}
		}},
		{"owner mapping", func(t *testing.T, e *env, user string) {
			o := &model.AthleteOwner{AthleteID: comebackAthlete, UserID: user, CreatedAtUtc: e.clock.Now()}
			if err := e.st.DB.Put(context.Background(), e.st.DB.Tables().Main, o); err != nil {
				t.Fatal(err)
			}
		}},
		{"owner mapping past the guard", func(t *testing.T, e *env, user string) {
			o := &model.AthleteOwner{AthleteID: comebackAthlete, UserID: user, CreatedAtUtc: e.clock.Now()}
			if err := e.st.DB.Put(context.Background(), e.st.DB.Tables().Main, o); err != nil {
				t.Fatal(err)
			}
			// 90 days on, the guard's TTL removed it: only the profile's absence tells.
			if err := e.st.DB.Delete(context.Background(), e.st.DB.Tables().Main, keys.UserGuardKey(user)); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, sim := oauthEnvWith(t, envOpts{})
			old := revokedAndDeleted(t, e, sim, true)
			tc.stale(t, e, old)
			me := signUpAgain(t, e)
			if me.UserID == old || !me.Connected {
				t.Fatalf("GET /v1/me = %+v; want a new user, not the deleted %s", me, old)
			}
			if _, err := purge.New(e.st).RevokedAthleteOwner(context.Background(), comebackAthlete); !errors.Is(err, model.ErrNotFound) {
				t.Fatalf("keyed-hash mapping: %v; want it gone", err)
			}
			if o, err := e.st.Users.AthleteOwner(context.Background(), comebackAthlete); err != nil || o.UserID != me.UserID {
				t.Fatalf("owner mapping %+v, %v; want the new user %s", o, err, me.UserID)
			}
		})
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestSignUpAgainAfterADeletionStoppedPastTheGuard: a deletion that
// stopped right after marking the user deleted (the guard) still leaves the
// owner mapping and the profile; the athlete signing in again becomes a new
// user, not a session on the account being deleted. Protection: the
// login's guard check (forgetIfDeleted): without it the login joins the
// deleted account.
func TestSignUpAgainAfterADeletionStoppedPastTheGuard(t *testing.T) {
	t.Parallel()
	e, sim := oauthEnvWith(t, envOpts{})
	sim.AddAthlete(stravasim.Athlete{ID: comebackAthlete, Firstname: "Kathleen", Lastname: "Booth"})
	b := e.browser()
	if cb := e.login(b); cb.status != http.StatusFound {
		t.Fatalf("first login: %d %s", cb.status, cb.body)
	}
	owner, err := e.st.Users.AthleteOwner(context.Background(), comebackAthlete)
	if err != nil {
		t.Fatal(err)
	}
	bff.SetAfterStep(e.h, func(step string) error {
		if step == deletion.StepGuard {
			return errors.New("simulated crash")
		}
		return nil
	})
	res := e.do(http.MethodDelete, "/v1/me", sessionFrom(t, b, e.srv.URL), nil)
	bff.SetAfterStep(e.h, nil)
	var rep bff.DeletionReport
	if res.json(t, &rep); rep.StoppedAt != deletion.StepGuard {
		t.Fatalf("deletion %+v; want it stopped at the guard", rep)
	}
	if me := signUpAgain(t, e); me.UserID == owner.UserID {
		t.Fatalf("GET /v1/me = %+v; want a new user, not the account being deleted", me)
	}
}
