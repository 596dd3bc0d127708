package strava_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/strava"
	"github.com/commitcollect/backend/scripts/stravasim"
)

func TestParseRateLimit(t *testing.T) {
	t.Parallel()
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	tests := []struct {
		name   string
		given  http.Header
		want   strava.RateLimit
		wantOK bool
	}{
		{"all four headers", h("X-RateLimit-Limit", "200,2000", "X-RateLimit-Usage", "12,340",
			"X-ReadRateLimit-Limit", "100,1000", "X-ReadRateLimit-Usage", "7,80"),
			strava.RateLimit{ShortLimit: 200, DailyLimit: 2000, ShortUsage: 12, DailyUsage: 340,
				ReadShortLimit: 100, ReadDailyLimit: 1000, ReadShortUsage: 7, ReadDailyUsage: 80}, true},
		{"overall only", h("X-RateLimit-Limit", "600,30000", "X-RateLimit-Usage", "0,0"),
			strava.RateLimit{ShortLimit: 600, DailyLimit: 30000}, true},
		{"spaces tolerated", h("X-RateLimit-Limit", " 200 , 2000", "X-RateLimit-Usage", "1, 2"),
			strava.RateLimit{ShortLimit: 200, DailyLimit: 2000, ShortUsage: 1, DailyUsage: 2}, true},
		{"malformed read headers ignored", h("X-RateLimit-Limit", "200,2000", "X-RateLimit-Usage", "1,2",
			"X-ReadRateLimit-Limit", "x,1000", "X-ReadRateLimit-Usage", "1,2"),
			strava.RateLimit{ShortLimit: 200, DailyLimit: 2000, ShortUsage: 1, DailyUsage: 2}, true},
		{"no headers", h(), strava.RateLimit{}, false},
		{"usage missing", h("X-RateLimit-Limit", "200,2000"), strava.RateLimit{}, false},
		{"one number", h("X-RateLimit-Limit", "200", "X-RateLimit-Usage", "1,2"), strava.RateLimit{}, false},
		{"negative", h("X-RateLimit-Limit", "200,2000", "X-RateLimit-Usage", "-1,2"), strava.RateLimit{}, false},
		{"three numbers", h("X-RateLimit-Limit", "200,2000,3", "X-RateLimit-Usage", "1,2"), strava.RateLimit{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := strava.ParseRateLimit(tt.given)
			if got != tt.want || ok != tt.wantOK {
				t.Fatalf("got %+v %v, want %+v %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestAPIErrorClassification(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		given int
		want  error
	}{
		{"404 not found", 404, model.ErrNotFound},
		{"401 unauthorized", 401, model.ErrUnauthorized},
		{"403 forbidden names nobody", 403, model.ErrInvalid},
		{"429 rate limited", 429, model.ErrRetryable},
		{"500", 500, model.ErrRetryable},
		{"503", 503, model.ErrRetryable},
		{"400 bad request", 400, model.ErrInvalid},
	}
	all := []error{model.ErrNotFound, model.ErrUnauthorized, model.ErrRetryable, model.ErrInvalid}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := error(&strava.APIError{Status: tt.given})
			for _, target := range all {
				if got := errors.Is(err, target); got != (target == tt.want) {
					t.Fatalf("errors.Is(%d, %v) = %v, want %v", tt.given, target, got, target == tt.want)
				}
			}
		})
	}
}

func newSim(t *testing.T) *stravasim.Server {
	t.Helper()
	sim := stravasim.New(stravasim.Options{})
	t.Cleanup(sim.Close)
	return sim
}

func TestGetActivity(t *testing.T) {
	t.Parallel()
	sim := newSim(t)
	ctx := context.Background()
	start := time.Date(2026, 3, 2, 6, 30, 0, 0, time.UTC)
	sim.PutActivity(stravasim.Activity{ID: 11, AthleteID: 1, Name: "Morning", SportType: "TrailRun",
		Distance: 10123.4, TotalElevationGain: 250.5, MovingTime: 3600, ElapsedTime: 3700, StartDate: start})
	sim.PutActivity(stravasim.Activity{ID: 12, AthleteID: 2, SportType: "Run", StartDate: start})
	tok := sim.IssueTokens(1, time.Hour)
	c := strava.NewClient(sim.URL, nil)

	a, rl, err := c.GetActivity(ctx, tok.AccessToken, 11)
	if err != nil {
		t.Fatal(err)
	}
	want := strava.Activity{ID: 11, Athlete: strava.ActivityAthlete{ID: 1}, Name: "Morning", SportType: "TrailRun",
		Type: "TrailRun", Distance: 10123.4, TotalElevationGain: 250.5, MovingTime: 3600, ElapsedTime: 3700, StartDate: start,
		StartDateLocal: "2026-03-02T06:30:00Z", Timezone: "(GMT+00:00) Etc/UTC"}
	if a != want {
		t.Fatalf("got %+v, want %+v", a, want)
	}
	if rl.ShortLimit != 200 || rl.ReadShortLimit != 100 || rl.ReadShortUsage != 1 || rl.DailyUsage != 1 {
		t.Fatalf("got rate limit %+v, want limits 200/100 and usage 1", rl)
	}

	tests := []struct {
		name  string
		setup func()
		token string
		id    int64
		want  error
	}{
		{"missing activity", nil, tok.AccessToken, 99, model.ErrNotFound},
		{"another athlete's activity", nil, tok.AccessToken, 12, model.ErrNotFound},
		{"bad token", nil, "nope", 11, model.ErrUnauthorized},
		{"scripted 429", func() { sim.FailNext(stravasim.EndpointActivity, 429, 1) }, tok.AccessToken, 11, model.ErrRetryable},
		{"scripted 500", func() { sim.FailNext(stravasim.EndpointActivity, 500, 1) }, tok.AccessToken, 11, model.ErrRetryable},
		{"scripted 404", func() { sim.FailNext(stravasim.EndpointActivity, 404, 1) }, tok.AccessToken, 11, model.ErrNotFound},
		{"scripted 401", func() { sim.FailNext(stravasim.EndpointActivity, 401, 1) }, tok.AccessToken, 11, model.ErrUnauthorized},
	}
	for _, tt := range tests { // sequential: they share the simulator's script
		if tt.setup != nil {
			tt.setup()
		}
		_, rl, err := c.GetActivity(ctx, tt.token, tt.id)
		if !errors.Is(err, tt.want) {
			t.Fatalf("%s: got %v, want %v", tt.name, err, tt.want)
		}
		var apiErr *strava.APIError
		if !errors.As(err, &apiErr) || apiErr.Message == "" {
			t.Fatalf("%s: got %v, want an *APIError with Strava's message", tt.name, err)
		}
		if !rl.Valid() {
			t.Fatalf("%s: rate-limit headers missing on an error answer", tt.name)
		}
	}
	if _, _, err := c.GetActivity(ctx, tok.AccessToken, 11); err != nil {
		t.Fatalf("after the script: %v", err)
	}
}

func TestGetActivityTransportFailureIsRetryable(t *testing.T) {
	t.Parallel()
	sim := stravasim.New(stravasim.Options{})
	url := sim.URL
	sim.Close()
	_, _, err := strava.NewClient(url, nil).GetActivity(context.Background(), "t", 1)
	if !errors.Is(err, model.ErrRetryable) {
		t.Fatalf("got %v, want ErrRetryable", err)
	}
}

func TestDeauthorize(t *testing.T) {
	t.Parallel()
	sim := newSim(t)
	ctx := context.Background()
	tok := sim.IssueTokens(3, time.Hour)
	c := strava.NewClient(sim.URL, nil)
	if err := c.Deauthorize(ctx, tok.AccessToken); err != nil {
		t.Fatal(err)
	}
	if sim.AccessTokenValid(tok.AccessToken) || sim.RefreshTokenValid(tok.RefreshToken) {
		t.Fatal("tokens still valid after deauthorize")
	}
	if err := c.Deauthorize(ctx, tok.AccessToken); !errors.Is(err, model.ErrUnauthorized) {
		t.Fatalf("second deauthorize: got %v, want ErrUnauthorized", err)
	}
	if got := sim.Stats().Deauthorizations; got != 1 {
		t.Fatalf("got %d deauthorizations, want 1", got)
	}
}

// TestGetAthlete: a live grant answers the athlete; a revoked one 401
// (ErrUnauthorized), both with the rate-limit headers.
func TestGetAthlete(t *testing.T) {
	t.Parallel()
	sim := newSim(t)
	ctx := context.Background()
	sim.AddAthlete(stravasim.Athlete{ID: 3, Firstname: "Ada"})
	tok := sim.IssueTokens(3, time.Hour)
	c := strava.NewClient(sim.URL, nil)
	a, rl, err := c.GetAthlete(ctx, tok.AccessToken)
	if err != nil || a.ID != 3 || a.Firstname != "Ada" || !rl.Valid() {
		t.Fatalf("got %+v, %+v, %v; want athlete 3 with a rate-limit reading", a, rl, err)
	}
	sim.RevokeAthlete(3)
	_, rl, err = c.GetAthlete(ctx, tok.AccessToken)
	var apiErr *strava.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnauthorized || !errors.Is(err, model.ErrUnauthorized) || !rl.Valid() {
		t.Fatalf("revoked: got %v, %+v; want a 401 with a rate-limit reading", err, rl)
	}
	if got := sim.Stats().AthleteRequests; got != 2 {
		t.Fatalf("got %d athlete requests, want 2", got)
	}
}
