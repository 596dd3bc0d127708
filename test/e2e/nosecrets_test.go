package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/handlers/bff"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/scripts/stravasim"
)

// TestLocalStackTablesHoldNoTokenOrCookie is the table dump of a `make run`
// session: the local stack (scripts/runkit, what `make run` starts) with
// the simulator, a login through the real OAuth redirects, a second login
// left pending, an activity fetched by the worker with the stored token. Then
// every item of the four tables (a Scan: this is a test) is searched for
// every token the simulator issued, the session and state cookie values and
// the client secret. None may appear.
func TestLocalStackTablesHoldNoTokenOrCookie(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := startQuietStack(t)
	const athlete = 8675309
	st.Sim.AddAthlete(stravasim.Athlete{ID: athlete, Firstname: "Dump"})
	st.Sim.SetAuthorization(stravasim.Authorization{AthleteID: athlete})

	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if req.URL.Path == "/" {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	resp, err := browser.Get(st.APIURL + "/auth/strava/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	api, _ := url.Parse(st.APIURL)
	var session string
	for _, c := range jar.Cookies(api) {
		if c.Name == bff.SessionCookie {
			session = c.Value
		}
	}
	if resp.StatusCode != http.StatusFound || session == "" {
		t.Fatalf("login: status %d, session cookie %q", resp.StatusCode, session)
	}
	// A second login, left at Strava's door: its state is pending.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	pending, err := noFollow.Get(st.APIURL + "/auth/strava/login")
	if err != nil {
		t.Fatal(err)
	}
	pending.Body.Close()
	var state string
	for _, c := range pending.Cookies() {
		if c.Name == bff.StateCookie {
			state = c.Value
		}
	}
	if state == "" {
		t.Fatal("pending login: no state cookie")
	}

	// The worker fetches an activity with the stored (sealed) token.
	owner, err := st.Store.Users.AthleteOwner(ctx, athlete)
	if err != nil {
		t.Fatal(err)
	}
	st.Sim.PutActivity(stravasim.Activity{ID: 5550001, AthleteID: athlete, SportType: "Run", Distance: 5000, MovingTime: 1500,
		ElapsedTime: 1600, StartDate: time.Now().UTC().Add(-time.Hour)})
	if _, err := st.Sim.Publish(ctx, st.Sim.ActivityEvent("create", 5550001, athlete, nil)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var w model.Workout
		err := st.Store.DB.Get(ctx, st.Store.DB.Tables().Main, keys.WorkoutKey(owner.UserID, 5550001), &w)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("workout never written: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	secrets := map[string]string{"session cookie": session, "state cookie": state, "client secret": st.Sim.ClientSecret()}
	for i, tok := range st.Sim.IssuedTokens() {
		secrets[fmt.Sprintf("strava token %d", i)] = tok
	}
	if len(secrets) < 5 {
		t.Fatalf("only %d secrets to look for; want at least the session, state, secret and a token pair", len(secrets))
	}
	tables := st.Store.DB.Tables()
	items := 0
	for _, table := range []string{tables.Main, tables.Sessions, tables.Audit, tables.Idempotency} {
		p := dynamodb.NewScanPaginator(st.Store.DB.Client(), &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range page.Items {
				items++
				dump := render(&types.AttributeValueMemberM{Value: it})
				for name, secret := range secrets {
					if strings.Contains(dump, secret) {
						t.Errorf("%s: item %v holds the %s", table, keyOf(it), name)
					}
				}
			}
		}
	}
	t.Logf("searched %d items of 4 tables for %d secret values", items, len(secrets))
}

// render writes every attribute name and value of av, binary included.
func render(av types.AttributeValue) string {
	var b strings.Builder
	var walk func(types.AttributeValue)
	walk = func(av types.AttributeValue) {
		switch v := av.(type) {
		case *types.AttributeValueMemberM:
			for k, x := range v.Value {
				b.WriteString(k + "=")
				walk(x)
			}
		case *types.AttributeValueMemberL:
			for _, x := range v.Value {
				walk(x)
			}
		case *types.AttributeValueMemberS:
			b.WriteString(v.Value + " ")
		case *types.AttributeValueMemberSS:
			b.WriteString(strings.Join(v.Value, " ") + " ")
		case *types.AttributeValueMemberB:
			b.Write(v.Value)
		case *types.AttributeValueMemberBS:
			for _, x := range v.Value {
				b.Write(x)
			}
		default:
			fmt.Fprintf(&b, "%v ", v)
		}
	}
	walk(av)
	return b.String()
}

func keyOf(it map[string]types.AttributeValue) string {
	var parts []string
	for _, k := range []string{"PK", "SK", "IdempotencyKey"} {
		if s, ok := it[k].(*types.AttributeValueMemberS); ok {
			parts = append(parts, s.Value)
		}
	}
	return strings.Join(parts, " / ")
}
