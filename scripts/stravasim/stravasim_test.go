package stravasim_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/commitcollect/backend/scripts/stravasim"
)

func noRedirect() *http.Client {
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func oauthConfig(sim *stravasim.Server) *oauth2.Config {
	return &oauth2.Config{ClientID: sim.ClientID(), ClientSecret: sim.ClientSecret(),
		RedirectURL: "http://app.example/callback", Scopes: []string{"read,activity:read_all"},
		Endpoint: oauth2.Endpoint{AuthURL: sim.URL + "/oauth/authorize", TokenURL: sim.URL + "/oauth/token",
			AuthStyle: oauth2.AuthStyleInParams}}
}

func authorize(t *testing.T, sim *stravasim.Server) url.Values {
	t.Helper()
	resp, err := noRedirect().Get(oauthConfig(sim).AuthCodeURL("st4te"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("authorize: got %d, want 302", resp.StatusCode)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || loc.Host != "app.example" {
		t.Fatalf("authorize redirect %q: %v", resp.Header.Get("Location"), err)
	}
	return loc.Query()
}

func TestOAuthFlow(t *testing.T) {
	t.Parallel()
	sim := stravasim.New(stravasim.Options{})
	defer sim.Close()
	sim.AddAthlete(stravasim.Athlete{ID: 42, Firstname: "Ada", Lastname: "L"})
	ctx := context.Background()

	q := authorize(t, sim)
	if q.Get("state") != "st4te" || q.Get("code") == "" || q.Get("scope") != "read,activity:read_all" {
		t.Fatalf("got redirect query %v, want state, code and the requested scope", q)
	}
	cfg := oauthConfig(sim)
	tok, err := cfg.Exchange(ctx, q.Get("code"))
	if err != nil {
		t.Fatal(err)
	}
	athlete, _ := tok.Extra("athlete").(map[string]any)
	if athlete["id"] != float64(42) || athlete["firstname"] != "Ada" || tok.RefreshToken == "" || tok.Expiry.IsZero() {
		t.Fatalf("got token %+v athlete %v", tok, athlete)
	}
	if _, err := cfg.Exchange(ctx, q.Get("code")); err == nil {
		t.Fatal("a code was accepted twice")
	}

	// Refresh rotates: the old refresh token stops working.
	src := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: tok.RefreshToken, Expiry: time.Unix(1, 0)})
	next, err := src.Token()
	if err != nil {
		t.Fatal(err)
	}
	if next.RefreshToken == tok.RefreshToken || next.AccessToken == tok.AccessToken {
		t.Fatal("refresh did not rotate the tokens")
	}
	if !sim.RefreshTokenValid(next.RefreshToken) || sim.RefreshTokenValid(tok.RefreshToken) {
		t.Fatal("want only the new refresh token valid")
	}
	_, err = cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: tok.RefreshToken, Expiry: time.Unix(1, 0)}).Token()
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || re.Response.StatusCode != http.StatusBadRequest {
		t.Fatalf("old refresh token: got %v, want a 400 RetrieveError", err)
	}
	st := sim.Stats()
	if st.Authorizations != 1 || st.CodeExchanges != 1 || st.TokenRefreshes != 1 || st.RefusedTokens != 2 {
		t.Fatalf("got stats %+v", st)
	}

	// Wrong client secret is refused.
	bad := *cfg
	bad.ClientSecret = "wrong"
	if _, err := bad.Exchange(ctx, authorize(t, sim).Get("code")); err == nil {
		t.Fatal("a wrong client secret was accepted")
	}
}

func TestAuthorizeScopeAndDeny(t *testing.T) {
	t.Parallel()
	sim := stravasim.New(stravasim.Options{})
	defer sim.Close()
	sim.AddAthlete(stravasim.Athlete{ID: 1})
	sim.SetAuthorization(stravasim.Authorization{Scope: "read"})
	q := authorize(t, sim)
	if q.Get("scope") != "read" || q.Get("code") == "" {
		t.Fatalf("got %v, want the narrowed scope read", q)
	}
	// A token with only "read" cannot read activities.
	tok, err := oauthConfig(sim).Exchange(context.Background(), q.Get("code"))
	if err != nil {
		t.Fatal(err)
	}
	sim.PutActivity(stravasim.Activity{ID: 5, AthleteID: 1, SportType: "Run", StartDate: time.Now()})
	req, _ := http.NewRequest(http.MethodGet, sim.URL+"/api/v3/activities/5", nil)
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "activity:read_permission") {
		t.Fatalf("got %d %s, want 401 activity:read_permission missing", resp.StatusCode, body)
	}

	sim.SetAuthorization(stravasim.Authorization{Deny: true})
	q = authorize(t, sim)
	if q.Get("error") != "access_denied" || q.Get("code") != "" || q.Get("state") != "st4te" {
		t.Fatalf("got %v, want error=access_denied with state and no code", q)
	}
}

func TestActivityEndpoint(t *testing.T) {
	t.Parallel()
	sim := stravasim.New(stravasim.Options{Limits: stravasim.Limits{ReadShort: 3}})
	defer sim.Close()
	start := time.Date(2026, 3, 1, 7, 0, 0, 0, time.UTC)
	sim.PutActivity(stravasim.Activity{ID: 9, AthleteID: 1, Name: "Lunch", SportType: "Ride", Distance: 20000,
		TotalElevationGain: 120, MovingTime: 2400, StartDate: start})
	tok := sim.IssueTokens(1, time.Hour)
	get := func() (*http.Response, map[string]any) {
		req, _ := http.NewRequest(http.MethodGet, sim.URL+"/api/v3/activities/9", nil)
		req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp, m
	}
	resp, m := get()
	if resp.StatusCode != 200 || m["sport_type"] != "Ride" || m["distance"] != 20000.0 || m["total_elevation_gain"] != 120.0 ||
		m["moving_time"] != 2400.0 || m["start_date"] != "2026-03-01T07:00:00Z" {
		t.Fatalf("got %d %v", resp.StatusCode, m)
	}
	if got := resp.Header.Get("X-ReadRateLimit-Usage"); got != "1,1" {
		t.Fatalf("got read usage %q, want 1,1", got)
	}
	if got := resp.Header.Get("X-ReadRateLimit-Limit"); got != "3,1000" {
		t.Fatalf("got read limit %q, want 3,1000", got)
	}
	sim.UpdateActivity(9, func(a *stravasim.Activity) { a.SportType = "GravelRide" })
	if _, m = get(); m["sport_type"] != "GravelRide" {
		t.Fatalf("update not served: %v", m)
	}
	get()
	// The fourth read in the window exceeds the limit of 3.
	if resp, m = get(); resp.StatusCode != http.StatusTooManyRequests || m["message"] != "Rate Limit Exceeded" {
		t.Fatalf("got %d %v, want 429 Rate Limit Exceeded", resp.StatusCode, m)
	}
	sim.SetUsage(0, 0, 0, 0)
	sim.DeleteActivity(9)
	if resp, m = get(); resp.StatusCode != 404 || m["message"] != "Record Not Found" {
		t.Fatalf("got %d %v, want 404 Record Not Found", resp.StatusCode, m)
	}
	if st := sim.Stats(); st.ActivityFetches != 3 || st.ActivityRequests != 5 {
		t.Fatalf("got %+v, want 3 fetches of 5 requests", st)
	}
}

func TestDeliverRetriesUntil200(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	var last stravasim.Event
	var raw []map[string]any
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m, wire map[string]any
		_ = json.Unmarshal(b, &m)
		_ = json.Unmarshal(b, &wire)
		raw = append(raw, wire)
		// Decode the way a tolerant reader does: ids as numbers or strings.
		m["subscription_id"], _ = strconv.ParseInt(fmt.Sprint(m["subscription_id"]), 10, 64)
		b, _ = json.Marshal(m)
		_ = json.Unmarshal(b, &last)
		if calls.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer cb.Close()
	sim := stravasim.New(stravasim.Options{SubscriptionID: 77, DeliveryBackoff: time.Millisecond})
	defer sim.Close()
	ev := sim.ActivityEvent("create", 5, 1, nil)
	d, err := sim.Deliver(context.Background(), cb.URL, ev)
	if err != nil || d.Attempts != 3 || d.Statuses[0] != 503 || d.Statuses[2] != 200 {
		t.Fatalf("got %+v, %v; want 3 attempts ending in 200", d, err)
	}
	if last.SubscriptionID != 77 || last.ObjectID != 5 || last.AspectType != "create" || last.ObjectType != "activity" {
		t.Fatalf("got event %+v", last)
	}
	// Strava's recorded shapes: an odd object id's subscription_id is a
	// string, an event without updates has no updates key, and a field no
	// document names is there.
	if got := raw[0]; got["subscription_id"] != "77" || got["updates"] != nil || got["resource_state"] == nil {
		t.Fatalf("got wire %v, want subscription_id \"77\", no updates, and resource_state", got)
	}

	calls.Store(-100) // never 200 again
	d, err = sim.Deliver(context.Background(), cb.URL, sim.DeauthorizationEvent(1))
	if !errors.Is(err, stravasim.ErrNotDelivered) || d.Attempts != 3 {
		t.Fatalf("got %+v, %v; want ErrNotDelivered after 3 attempts", d, err)
	}
	if last.Updates["authorized"] != "false" || last.ObjectType != "athlete" {
		t.Fatalf("got event %+v, want athlete deauthorization", last)
	}
	if got := sim.Stats().WebhookDeliveries; got != 6 {
		t.Fatalf("got %d deliveries, want 6", got)
	}
}

func TestVerifyCallback(t *testing.T) {
	t.Parallel()
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("hub.verify_token") != "tok" || q.Get("hub.mode") != "subscribe" {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"hub.challenge": q.Get("hub.challenge")})
	}))
	defer cb.Close()
	sim := stravasim.New(stravasim.Options{})
	defer sim.Close()
	if err := sim.VerifyCallback(context.Background(), cb.URL, "tok"); err != nil {
		t.Fatal(err)
	}
	if err := sim.VerifyCallback(context.Background(), cb.URL, "wrong"); err == nil {
		t.Fatal("want an error for a refused handshake")
	}
}

func TestStartOnFixedAddress(t *testing.T) {
	t.Parallel()
	probe := stravasim.New(stravasim.Options{})
	addr := strings.TrimPrefix(probe.URL, "http://")
	if _, err := stravasim.Start(addr, stravasim.Options{}); err == nil {
		t.Fatal("want an error for an address in use")
	}
	probe.Close()
	sim, err := stravasim.Start(addr, stravasim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	if sim.URL != "http://"+addr {
		t.Fatalf("got URL %s, want http://%s", sim.URL, addr)
	}
}

func TestPushSubscriptionAndPublish(t *testing.T) {
	t.Parallel()
	var posted atomic.Int32
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posted.Add(1)
			return
		}
		q := r.URL.Query()
		if q.Get("hub.verify_token") != "tok" {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"hub.challenge": q.Get("hub.challenge")})
	}))
	defer cb.Close()
	sim := stravasim.New(stravasim.Options{})
	defer sim.Close()
	ctx := context.Background()
	if _, err := sim.Publish(ctx, sim.ActivityEvent("create", 1, 1, nil)); !errors.Is(err, stravasim.ErrNoSubscription) {
		t.Fatalf("got %v, want ErrNoSubscription", err)
	}
	creds := url.Values{"client_id": {sim.ClientID()}, "client_secret": {sim.ClientSecret()}}
	form := url.Values{"callback_url": {cb.URL}, "verify_token": {"wrong"}}
	for k, v := range creds {
		form[k] = v
	}
	resp, err := http.PostForm(sim.URL+"/api/v3/push_subscriptions", form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("failed handshake: got %d, want 400", resp.StatusCode)
	}
	form.Set("verify_token", "tok")
	resp, err = http.PostForm(sim.URL+"/api/v3/push_subscriptions", form)
	if err != nil {
		t.Fatal(err)
	}
	var created map[string]int64
	_ = json.NewDecoder(resp.Body).Decode(&created)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || created["id"] != 1 {
		t.Fatalf("got %d %v, want 201 id 1", resp.StatusCode, created)
	}
	resp, err = http.Get(sim.URL + "/api/v3/push_subscriptions?" + creds.Encode())
	if err != nil {
		t.Fatal(err)
	}
	var list []map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if len(list) != 1 || list[0]["callback_url"] != cb.URL {
		t.Fatalf("got %v, want the subscription listed", list)
	}
	ev := sim.ActivityEvent("create", 1, 1, nil)
	if ev.SubscriptionID != 1 {
		t.Fatalf("got subscription id %d on the event, want 1", ev.SubscriptionID)
	}
	if d, err := sim.Publish(ctx, ev); err != nil || d.Attempts != 1 || posted.Load() != 1 {
		t.Fatalf("publish: got %+v, %v, %d posts", d, err, posted.Load())
	}
	req, _ := http.NewRequest(http.MethodDelete, sim.URL+"/api/v3/push_subscriptions/1?"+creds.Encode(), nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: got %d, want 204", resp.StatusCode)
	}
	if _, _, ok := sim.Subscription(); ok {
		t.Fatal("subscription still registered after delete")
	}
}
