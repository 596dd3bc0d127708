package stravasim_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/scripts/stravasim"
)

// fetch GETs an activity with tok through client (nil: no timeout) and
// returns the status, the decoded body and the read-rate usage header.
func fetch(t *testing.T, client *http.Client, sim *stravasim.Server, tok string, id string) (int, map[string]any, string, error) {
	t.Helper()
	if client == nil {
		client = http.DefaultClient
	}
	req, _ := http.NewRequest(http.MethodGet, sim.URL+"/api/v3/activities/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body, resp.Header.Get("X-ReadRateLimit-Usage"), nil
}

func faultSim(t *testing.T) (*stravasim.Server, string) {
	t.Helper()
	sim := stravasim.New(stravasim.Options{SubscriptionID: 3})
	t.Cleanup(sim.Close)
	for _, body := range []string{
		`{"athleteId":5,"sport_type":"Run","distance":5000,"start_date":"2026-03-01T06:00:00Z"}`,
		`{"athleteId":5,"sport_type":"Ride","distance":40000,"start_date":"2026-03-02T06:00:00Z"}`,
	} {
		id := "1"
		if strings.Contains(body, "Ride") {
			id = "2"
		}
		if st, b := control(t, sim, http.MethodPut, "activities/"+id, body); st != http.StatusOK {
			t.Fatalf("PUT activity %s = %d %s", id, st, b)
		}
	}
	return sim, sim.IssueTokens(5, 0).AccessToken
}

// A status fault answers that status for its activity only, as often as
// its count says, then the activity is served again.
func TestFaultStatusPerActivity(t *testing.T) {
	t.Parallel()
	sim, tok := faultSim(t)
	if st, b := control(t, sim, http.MethodPost, "faults", `{"activityId":1,"status":503,"count":2}`); st != http.StatusCreated {
		t.Fatalf("POST faults = %d %s", st, b)
	}
	for i, tc := range []struct {
		id   string
		want int
	}{{"1", 503}, {"2", 200}, {"1", 503}, {"1", 200}} {
		if got, body, _, err := fetch(t, nil, sim, tok, tc.id); err != nil || got != tc.want {
			t.Fatalf("request %d (activity %s): got %d %v %v, want %d", i, tc.id, got, body, err, tc.want)
		}
	}
	if got := sim.Stats().ScriptedFailures; got != 2 {
		t.Errorf("ScriptedFailures: got %d, want 2", got)
	}
}

// A slow answer is decided when the request arrives: an activity changed
// during the pause is answered as it was (a stale answer), and the request
// shows in the in-flight gauge meanwhile.
func TestFaultSlowAnswerIsStale(t *testing.T) {
	t.Parallel()
	sim, tok := faultSim(t)
	if st, b := control(t, sim, http.MethodPost, "faults", `{"activityId":1,"delayMs":400}`); st != http.StatusCreated {
		t.Fatalf("POST faults = %d %s", st, b)
	}
	type answer struct {
		status int
		body   map[string]any
		err    error
	}
	done := make(chan answer, 1)
	go func() {
		st, body, _, err := fetch(t, nil, sim, tok, "1")
		done <- answer{st, body, err}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for sim.Stats().ActivityInFlight == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the slow request never showed in ActivityInFlight")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !sim.UpdateActivity(1, func(a *stravasim.Activity) { a.SportType, a.Distance = "Ride", 40000 }) {
		t.Fatal("activity 1 missing")
	}
	a := <-done
	if a.err != nil || a.status != http.StatusOK || a.body["sport_type"] != "Run" || a.body["distance"] != 5000.0 {
		t.Fatalf("slow answer: got %d %v %v, want the state before the update (Run 5000)", a.status, a.body, a.err)
	}
	if st, body, _, err := fetch(t, nil, sim, tok, "1"); err != nil || st != http.StatusOK || body["sport_type"] != "Ride" {
		t.Fatalf("next answer: got %d %v %v, want the current state (Ride)", st, body, err)
	}
	if got := sim.Stats().ActivityInFlight; got != 0 {
		t.Errorf("ActivityInFlight after the answers: got %d, want 0", got)
	}
}

// A delay beyond the client's timeout is a timeout; the fault is used up.
func TestFaultTimeout(t *testing.T) {
	t.Parallel()
	sim, tok := faultSim(t)
	sim.AddFault(stravasim.Fault{Delay: 3 * time.Second})
	client := &http.Client{Timeout: 100 * time.Millisecond}
	_, _, _, err := fetch(t, client, sim, tok, "2")
	var ne interface{ Timeout() bool }
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("got %v, want a client timeout", err)
	}
	if st, _, _, err := fetch(t, client, sim, tok, "2"); err != nil || st != http.StatusOK {
		t.Fatalf("after the fault: got %d %v, want 200", st, err)
	}
}

// A spent read window answers 429 with headers saying the read budget is
// gone, until the (shortened) window resets.
func TestSpendReadWindow(t *testing.T) {
	t.Parallel()
	sim, tok := faultSim(t)
	if st, b := control(t, sim, http.MethodPost, "ratelimit/spend", `{"resetInMs":300}`); st != http.StatusOK {
		t.Fatalf("POST ratelimit/spend = %d %s", st, b)
	}
	st, _, usage, err := fetch(t, nil, sim, tok, "1")
	if err != nil || st != http.StatusTooManyRequests || !strings.HasPrefix(usage, "101,") {
		t.Fatalf("in the spent window: got %d usage %q %v, want 429 with read usage 101 of 100", st, usage, err)
	}
	time.Sleep(350 * time.Millisecond)
	st, _, usage, err = fetch(t, nil, sim, tok, "1")
	if err != nil || st != http.StatusOK || !strings.HasPrefix(usage, "1,") {
		t.Fatalf("after the reset: got %d usage %q %v, want 200 with read usage 1", st, usage, err)
	}
}

// The control API refuses faults that script nothing, and lists activities.
func TestControlFaultsAndActivities(t *testing.T) {
	t.Parallel()
	sim, _ := faultSim(t)
	for _, tc := range []struct{ name, method, path, body string }{
		{"nothing scripted", http.MethodPost, "faults", `{"activityId":1}`},
		{"not an error status", http.MethodPost, "faults", `{"status":200}`},
		{"negative delay", http.MethodPost, "faults", `{"delayMs":-1}`},
		{"unknown field", http.MethodPost, "faults", `{"status":500,"when":"now"}`},
		{"negative reset", http.MethodPost, "ratelimit/spend", `{"resetInMs":-5}`},
	} {
		if st, b := control(t, sim, tc.method, tc.path, tc.body); st != http.StatusBadRequest {
			t.Errorf("%s: got %d %s, want 400", tc.name, st, b)
		}
	}
	if st, _ := control(t, sim, http.MethodDelete, "faults", ""); st != http.StatusNoContent {
		t.Errorf("DELETE faults = %d", st)
	}
	st, body := control(t, sim, http.MethodGet, "activities", "")
	var acts []stravasim.ControlActivity
	if err := json.Unmarshal([]byte(body), &acts); err != nil || st != http.StatusOK || len(acts) != 2 ||
		acts[0].ID != 1 || acts[0].AthleteID != 5 || acts[1].SportType != "Ride" {
		t.Fatalf("GET activities = %d %s", st, body)
	}
}

// Deliver reports the body of the answer that ended it.
func TestDeliverReportsAnswer(t *testing.T) {
	t.Parallel()
	sim := stravasim.New(stravasim.Options{SubscriptionID: 3})
	t.Cleanup(sim.Close)
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write([]byte(`{"status":"accepted"}` + "\n"))
	}))
	t.Cleanup(cb.Close)
	d, err := sim.Deliver(context.Background(), cb.URL, sim.ActivityEvent("create", 1, 5, nil))
	if err != nil || d.Answer != `{"status":"accepted"}` {
		t.Fatalf("got %+v %v, want the callback's answer", d, err)
	}
}

// A shortened window (Options.Window) rolls on its own boundaries: a spent
// read budget comes back at the next one, as Strava's does at the quarter
// hour.
func TestShortWindowRolls(t *testing.T) {
	t.Parallel()
	const window = 400 * time.Millisecond
	sim := stravasim.New(stravasim.Options{Window: window})
	t.Cleanup(sim.Close)
	sim.PutActivity(stravasim.Activity{ID: 1, AthleteID: 5, SportType: "Run", StartDate: time.Now()})
	tok := sim.IssueTokens(5, 0).AccessToken
	// Start right after a boundary, so the whole test fits in one window.
	time.Sleep(time.Until(time.Now().Truncate(window).Add(window + 10*time.Millisecond)))
	sim.SpendReadWindow(0)
	if st, _, usage, err := fetch(t, nil, sim, tok, "1"); err != nil || st != http.StatusTooManyRequests {
		t.Fatalf("in the spent window: got %d usage %q %v, want 429", st, usage, err)
	}
	time.Sleep(time.Until(time.Now().Truncate(window).Add(window + 10*time.Millisecond)))
	if st, _, usage, err := fetch(t, nil, sim, tok, "1"); err != nil || st != http.StatusOK || !strings.HasPrefix(usage, "1,") {
		t.Fatalf("in the next window: got %d usage %q %v, want 200 with read usage 1", st, usage, err)
	}
}
