package config

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// params is a ParamReader over a map; it counts reads.
type params struct {
	values map[string]string
	reads  int
}

func (p *params) read(_ context.Context, name string) (string, error) {
	p.reads++
	v, ok := p.values[name]
	if !ok {
		return "", errors.New("ParameterNotFound")
	}
	return v, nil
}

func TestResolveSecrets(t *testing.T) {
	t.Parallel()
	const secretARN = "arn:aws:ssm:ap-southeast-2:123456789012:parameter/cc/secret"
	tests := []struct {
		name      string
		given     map[string]string
		want      map[string]string // key → value through the returned getenv
		wantErr   []string
		wantReads int
	}{
		{
			name:  "no references: nothing read, plain values pass through",
			given: map[string]string{"STRAVA_CLIENT_SECRET": "local", "CC_LOG_LEVEL": "debug"},
			want:  map[string]string{"STRAVA_CLIENT_SECRET": "local", "CC_LOG_LEVEL": "debug"},
		},
		{
			name:      "both references resolved",
			given:     map[string]string{"STRAVA_CLIENT_SECRET_PARAM": secretARN, "STRAVA_VERIFY_TOKEN_PARAM": "/cc/verify", "STRAVA_CLIENT_ID": "42"},
			want:      map[string]string{"STRAVA_CLIENT_SECRET": "s3cret", "STRAVA_VERIFY_TOKEN": "v3rify", "STRAVA_CLIENT_ID": "42"},
			wantReads: 2,
		},
		{
			name:    "value and reference both set",
			given:   map[string]string{"STRAVA_CLIENT_SECRET": "plain", "STRAVA_CLIENT_SECRET_PARAM": secretARN},
			wantErr: []string{"STRAVA_CLIENT_SECRET and STRAVA_CLIENT_SECRET_PARAM are both set"},
		},
		{
			name:      "every failed read reported",
			given:     map[string]string{"STRAVA_CLIENT_SECRET_PARAM": "/missing", "STRAVA_VERIFY_TOKEN_PARAM": "/empty"},
			wantErr:   []string{"read STRAVA_CLIENT_SECRET from /missing: ParameterNotFound", "read STRAVA_VERIFY_TOKEN from /empty: parameter is empty"},
			wantReads: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := &params{values: map[string]string{secretARN: "s3cret", "/cc/verify": "v3rify", "/empty": ""}}
			getenv, err := ResolveSecrets(context.Background(), env(tt.given), p.read)
			if p.reads != tt.wantReads {
				t.Errorf("got %d reads, want %d", p.reads, tt.wantReads)
			}
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("got nil error, want %q", tt.wantErr)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("got error %q, want it to mention %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for k, w := range tt.want {
				if got := getenv(k); got != w {
					t.Errorf("getenv(%s): got %q, want %q", k, got, w)
				}
			}
		})
	}
}

func TestResolvedSecretsSatisfyFromEnv(t *testing.T) {
	t.Parallel()
	p := &params{values: map[string]string{"/s": "s3cret", "/v": "v3rify"}}
	getenv, err := ResolveSecrets(context.Background(), env(map[string]string{
		"STRAVA_CLIENT_ID": "42", "STRAVA_CLIENT_SECRET_PARAM": "/s", "STRAVA_VERIFY_TOKEN_PARAM": "/v", "STRAVA_SUBSCRIPTION_ID": "7",
	}), p.read)
	if err != nil {
		t.Fatal(err)
	}
	c, err := FromEnv(getenv, Need{Strava: true, Webhook: true})
	if err != nil {
		t.Fatal(err)
	}
	if c.StravaClientSecret != "s3cret" || c.StravaVerifyToken != "v3rify" {
		t.Fatalf("got secret %q token %q, want the resolved values", c.StravaClientSecret, c.StravaVerifyToken)
	}
}

func TestHasSecretRefs(t *testing.T) {
	t.Parallel()
	if HasSecretRefs(env(map[string]string{"STRAVA_CLIENT_SECRET": "plain"})) {
		t.Error("got true for a plain value, want false")
	}
	if !HasSecretRefs(env(map[string]string{"STRAVA_VERIFY_TOKEN_PARAM": "/v"})) {
		t.Error("got false for a reference, want true")
	}
}
