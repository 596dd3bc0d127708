package bff_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/handlers/bff"
	"github.com/commitcollect/backend/handlers/bff/milestones"
	"github.com/commitcollect/backend/handlers/bff/respond"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/scripts/stravasim"
)

// TestReplayedStateDoesNotVoidTheVictimsLogin: a third party who learns a
// victim's state (it travels in Strava's redirect) and calls the callback
// with it first, without the victim's state cookie, is refused and does not
// use the state up: the victim's own callback still signs them in.
func TestReplayedStateDoesNotVoidTheVictimsLogin(t *testing.T) {
	t.Parallel()
	e, sim := oauthEnv(t)
	sim.AddAthlete(stravasim.Athlete{ID: 31337, Firstname: "Victim"})

	// The victim's browser goes to Strava and stops at the callback.
	victim := e.browser()
	victim.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.URL.Path == "/auth/strava/callback" {
			return http.ErrUseLastResponse
		}
		return nil
	}
	resp, err := victim.Get(e.srv.URL + "/auth/strava/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	callbackURL := resp.Header.Get("Location")
	if u, err := url.Parse(callbackURL); err != nil || u.Query().Get("state") == "" {
		t.Fatalf("Strava's redirect %q carries no state", callbackURL)
	}

	// The attacker replays it without the cookie (and with a forged one).
	for _, cookie := range []string{"", model.NewID()} {
		req, _ := http.NewRequest(http.MethodGet, callbackURL, nil)
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: bff.StateCookie, Value: cookie})
		}
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != http.StatusBadRequest {
			t.Fatalf("replay with cookie %q: status %d, want 400", cookie, r.StatusCode)
		}
	}

	// The victim's callback still works.
	victim.CheckRedirect = e.browser().CheckRedirect
	r, err := victim.Get(callbackURL)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusFound || r.Header.Get("Location") != "/" || sessionFrom(t, victim, e.srv.URL) == "" {
		t.Fatalf("victim's callback after the replay: status %d location %q, want 302 to / with a session", r.StatusCode, r.Header.Get("Location"))
	}
}

// dumpTable returns every item of a table as text (attribute values of all
// types, binary included). A Scan is fine here: this is a test.
func dumpTable(t *testing.T, db *dynamodb.Client, table string) string {
	t.Helper()
	var b strings.Builder
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			writeAV(&b, &types.AttributeValueMemberM{Value: it})
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func writeAV(b *strings.Builder, av types.AttributeValue) {
	switch v := av.(type) {
	case *types.AttributeValueMemberM:
		for k, x := range v.Value {
			b.WriteString(k + "=")
			writeAV(b, x)
			b.WriteByte(' ')
		}
	case *types.AttributeValueMemberL:
		for _, x := range v.Value {
			writeAV(b, x)
			b.WriteByte(' ')
		}
	case *types.AttributeValueMemberB:
		b.Write(v.Value)
	case *types.AttributeValueMemberBS:
		for _, x := range v.Value {
			b.Write(x)
		}
	default:
		fmt.Fprintf(b, "%v", v)
	}
}

// TestLoginStoresNoCookieValueAndNoToken: after a login (and a started login
// left pending), no item of any table holds the session cookie, the state
// cookie or a Strava token; the raw cookie is not a session key.
func TestLoginStoresNoCookieValueAndNoToken(t *testing.T) {
	t.Parallel()
	e, sim := oauthEnv(t)
	sim.AddAthlete(stravasim.Athlete{ID: 4711, Firstname: "Dumped"})
	ctx := context.Background()
	b := e.browser()
	if r := e.login(b); r.status != http.StatusFound {
		t.Fatalf("login: %d %s", r.status, r.body)
	}
	sid := sessionFrom(t, b, e.srv.URL)
	var me bff.MeJSON
	e.do(http.MethodGet, "/v1/me", sid, nil).json(t, &me)
	conn, err := e.st.Connections.StravaConnection(ctx, me.UserID)
	if err != nil || conn.AccessToken == "" || conn.RefreshToken == "" {
		t.Fatalf("connection: %+v, %v", conn, err)
	}
	pending := e.do(http.MethodGet, "/auth/strava/login", "", nil)
	var state string
	for _, c := range (&http.Response{Header: pending.header}).Cookies() {
		if c.Name == bff.StateCookie {
			state = c.Value
		}
	}
	if state == "" {
		t.Fatal("no state cookie")
	}
	if _, err := e.ss.Session(ctx, sid); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("session read by the raw cookie value: %v; want ErrNotFound (keys hold its hash)", err)
	}
	tb := e.st.DB.Tables()
	var dump strings.Builder
	for _, table := range []string{tb.Main, tb.Sessions, tb.Audit, tb.Idempotency} {
		dump.WriteString(dumpTable(t, e.st.DB.Client(), table))
	}
	for name, secret := range map[string]string{
		"session cookie": sid, "state cookie": state, "access token": conn.AccessToken, "refresh token": conn.RefreshToken,
	} {
		if strings.Contains(dump.String(), secret) {
			t.Errorf("a table holds the %s", name)
		}
	}
}

// TestCreateMilestoneRefusesHostileBodies: text that is not valid UTF-8 is
// refused naming the field (never stored with U+FFFD in its place), so are
// a key given twice, data after the JSON value and a known key in another
// case (decodeJSON's JSON v2 reading: with encoding/json each of these is
// taken, last value or case-folded), and a body over the limit is 413;
// nothing is written.
func TestCreateMilestoneRefusesHostileBodies(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	sid := e.user("u1", 1)
	const rest = `"modelId":"road-bike","metric":"count","target":10,"periodStartAtUtc":"2026-03-01T00:00:00Z"`
	for _, tc := range []struct {
		name, body string
		want       []string
	}{
		{"invalid byte in the title", "{" + rest + ",\"title\":\"Ride \xff\xfe\"}", []string{"title"}},
		{"escaped lone surrogate", "{" + rest + `,"title":"Ride \udc00"}`, []string{"title"}},
		{"invalid sport type", "{" + rest + ",\"title\":\"Ride\",\"sportTypes\":[\"Ride\",\"R\xc3\"]}", []string{"sportTypes[1]"}},
		// Read strictly: what a lenient reader would take one way and a
		// proxy or a log another is refused.
		{"a key given twice", "{" + rest + `,"title":"Ride","title":"Run"}`, []string{"title"}},
		{"data after the value", "{" + rest + `,"title":"Ride"} {"title":"x"}`, []string{"body"}},
		{"a closing bracket after the value", "{" + rest + `,"title":"Ride"}]`, []string{"body"}},
		{"a known key in another case", "{" + rest + `,"Title":"Ride"}`, []string{"Title"}},
		{"a nested key given twice", "{" + rest + `,"title":"Ride","sportTypes":["Run"],"sportTypes":["Ride"]}`, []string{"sportTypes"}},
	} {
		r := e.do(http.MethodPost, "/v1/milestones", sid, tc.body)
		var body respond.ErrorBody
		r.json(t, &body)
		var got []string
		for _, f := range body.Error.Fields {
			got = append(got, f.Field)
		}
		if r.status != http.StatusBadRequest || strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: %d fields %v (%s), want 400 naming %v", tc.name, r.status, got, r.body, tc.want)
		}
	}
	big := "{" + rest + `,"title":"` + strings.Repeat("a", 65<<10) + `"}`
	r := e.do(http.MethodPost, "/v1/milestones", sid, big)
	var body respond.ErrorBody
	r.json(t, &body)
	if r.status != http.StatusRequestEntityTooLarge || body.Error.Code != respond.CodePayloadTooLarge {
		t.Errorf("65 KiB body: %d %s, want 413 %s", r.status, body.Error.Code, respond.CodePayloadTooLarge)
	}
	var list struct{ Milestones []milestones.MilestoneJSON }
	e.do(http.MethodGet, "/v1/milestones", sid, nil).json(t, &list)
	if len(list.Milestones) != 0 {
		t.Fatalf("refused requests wrote milestones: %+v", list.Milestones)
	}
}
