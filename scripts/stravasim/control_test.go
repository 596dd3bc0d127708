package stravasim_test

import (
	"context"
	"encoding/json"
	"github.com/commitcollect/backend/scripts/stravasim/webhook"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/scripts/stravasim"
)

func control(t *testing.T, sim *stravasim.Server, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, sim.URL+stravasim.ControlPrefix+path, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// The control API lets another process play the athlete and Strava.
func TestControlAPI(t *testing.T) {
	t.Parallel()
	sim := stravasim.New(stravasim.Options{SubscriptionID: 77})
	t.Cleanup(sim.Close)

	for _, tc := range []struct {
		name, method, path, body string
		want                     int
	}{
		{"athlete", http.MethodPost, "athletes", `{"id":5,"firstname":"Ada"}`, http.StatusCreated},
		{"athlete without id", http.MethodPost, "athletes", `{"firstname":"Ada"}`, http.StatusBadRequest},
		{"unknown field", http.MethodPost, "athletes", `{"id":6,"nickname":"x"}`, http.StatusBadRequest},
		{"authorization", http.MethodPut, "authorization", `{"athleteId":5}`, http.StatusOK},
		{"activity", http.MethodPut, "activities/900", `{"athleteId":5,"sport_type":"Run","distance":5000,"start_date":"2026-03-01T06:00:00Z"}`, http.StatusOK},
		{"activity without owner", http.MethodPut, "activities/901", `{"sport_type":"Run","start_date":"2026-03-01T06:00:00Z"}`, http.StatusBadRequest},
		{"event before subscription", http.MethodPost, "events", `{"aspect":"create","activityId":900,"ownerId":5}`, http.StatusConflict},
		{"bad event", http.MethodPost, "events", `{"aspect":"explode","activityId":900,"ownerId":5}`, http.StatusBadRequest},
	} {
		if got, body := control(t, sim, tc.method, tc.path, tc.body); got != tc.want {
			t.Errorf("%s: got %d %s, want %d", tc.name, got, body, tc.want)
		}
	}

	// The activity is served to its owner's token like any other.
	tok := sim.IssueTokens(5, 0)
	req, _ := http.NewRequest(http.MethodGet, sim.URL+"/api/v3/activities/900", nil)
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var act map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&act)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || act["distance"] != 5000.0 || act["sport_type"] != "Run" {
		t.Fatalf("GET activity 900 = %d %v", resp.StatusCode, act)
	}

	// Events go to the subscription's callback, as Strava sends them.
	got := make(chan stravasim.Event, 2)
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			_ = json.NewEncoder(w).Encode(map[string]string{"hub.challenge": r.URL.Query().Get("hub.challenge")})
			return
		}
		var ev stravasim.Event
		_ = json.NewDecoder(r.Body).Decode(&ev)
		got <- ev
	}))
	t.Cleanup(cb.Close)
	if _, err := sim.Subscribe(context.Background(), cb.URL, "tok"); err != nil {
		t.Fatal(err)
	}
	status, body := control(t, sim, http.MethodPost, "events", `{"aspect":"create","activityId":900,"ownerId":5}`)
	var d webhook.ControlDelivery
	if err := json.Unmarshal([]byte(body), &d); err != nil || status != http.StatusOK || d.Attempts != 1 {
		t.Fatalf("POST events = %d %s", status, body)
	}
	if ev := <-got; ev.ObjectID != 900 || ev.AspectType != "create" || ev.OwnerID != 5 || ev.SubscriptionID != 77 || ev.EventTime != d.Event.EventTime {
		t.Fatalf("callback got %+v, control answered %+v", ev, d.Event)
	}
	if status, _ := control(t, sim, http.MethodPost, "events", `{"deauthorize":5}`); status != http.StatusOK {
		t.Fatalf("deauthorization event = %d", status)
	}
	if ev := <-got; ev.ObjectType != "athlete" || ev.Updates["authorized"] != "false" {
		t.Fatalf("callback got %+v, want a deauthorization", ev)
	}
	if status, _ := control(t, sim, http.MethodDelete, "activities/900", ""); status != http.StatusNoContent {
		t.Fatalf("DELETE activity = %d", status)
	}
	if status, body := control(t, sim, http.MethodGet, "stats", ""); status != http.StatusOK || !strings.Contains(body, "WebhookDeliveries") {
		t.Fatalf("GET stats = %d %s", status, body)
	}
}

// SetPrivate (and its control endpoint) hides an activity from an
// activity:read grant, as Strava does for a private one: its fetch answers
// 404 and lists leave it out, until it is public again.
func TestSetPrivateHidesAndShows(t *testing.T) {
	t.Parallel()
	sim := stravasim.New(stravasim.Options{})
	t.Cleanup(sim.Close)
	sim.AddAthlete(stravasim.Athlete{ID: 5})
	sim.PutActivity(stravasim.Activity{ID: 900, AthleteID: 5, SportType: "Run", Distance: 5000,
		StartDate: time.Date(2026, 3, 1, 6, 0, 0, 0, time.UTC)})
	tok := sim.IssueTokens(5, 0, "activity:read")
	get := func(path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, sim.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}
	visible := func(want bool) {
		t.Helper()
		status, _ := get("/api/v3/activities/900")
		_, list := get("/api/v3/athlete/activities")
		if (status == http.StatusOK) != want || strings.Contains(list, `"id":900`) != want {
			t.Fatalf("fetch %d, list %s: want visible=%v", status, list, want)
		}
	}
	visible(true)
	if !sim.SetPrivate(900, true) {
		t.Fatal("SetPrivate: activity 900 not found")
	}
	visible(false)
	if status, body := control(t, sim, http.MethodPut, "activities/900/private", `{"private":false}`); status != http.StatusOK {
		t.Fatalf("PUT private=false = %d %s", status, body)
	}
	visible(true)
	if status, _ := control(t, sim, http.MethodPut, "activities/900/private", `{"private":true}`); status != http.StatusOK {
		t.Fatalf("PUT private=true = %d", status)
	}
	visible(false)
	for _, tc := range []struct {
		path, body string
		want       int
	}{
		{"activities/900/private", `{}`, http.StatusBadRequest},
		{"activities/x/private", `{"private":true}`, http.StatusBadRequest},
		{"activities/901/private", `{"private":true}`, http.StatusNotFound},
	} {
		if status, body := control(t, sim, http.MethodPut, tc.path, tc.body); status != tc.want {
			t.Errorf("PUT %s %s = %d %s, want %d", tc.path, tc.body, status, body, tc.want)
		}
	}
	if sim.SetPrivate(901, true) {
		t.Fatal("SetPrivate of an unknown activity reported true")
	}
}
