package config

import (
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestFromEnvReportsEveryProblem(t *testing.T) {
	t.Parallel()
	_, err := FromEnv(env(map[string]string{
		"STRAVA_SUBSCRIPTION_ID": "abc", "DYNAMODB_ENDPOINT": "localhost", "CC_LOG_LEVEL": "loud",
		"CC_OUTBOX_LEASE": "5", "CC_ATHLETE_READS_PER_WINDOW": "-1", "CC_ATHLETE_READS_PER_DAY": "many", "CC_STRAVA_WINDOW": "soon", "CC_RETRY_BASE": "-1s",
		"CC_WEBHOOK_PATH_SECRET": "short/one",
	}), Need{Strava: true, Webhook: true, PublicURL: true})
	if err == nil {
		t.Fatal("got nil, want errors")
	}
	for _, want := range []string{"STRAVA_SUBSCRIPTION_ID \"abc\"", "DYNAMODB_ENDPOINT", "CC_LOG_LEVEL", "STRAVA_CLIENT_ID is required",
		"STRAVA_CLIENT_SECRET is required", "STRAVA_VERIFY_TOKEN is required", "CC_PUBLIC_URL is required",
		"CC_OUTBOX_LEASE", "CC_ATHLETE_READS_PER_WINDOW", "CC_ATHLETE_READS_PER_DAY", "CC_STRAVA_WINDOW", "CC_RETRY_BASE", "CC_WEBHOOK_PATH_SECRET"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestFromEnvDefaults(t *testing.T) {
	t.Parallel()
	c, err := FromEnv(env(map[string]string{"CC_TABLE_PREFIX": "dev-", "CC_CORS_ORIGINS": "https://a.example, https://b.example"}), Need{})
	if err != nil {
		t.Fatal(err)
	}
	if c.StravaBaseURL != "https://www.strava.com" || c.Tables().Main != "dev-CommitCollect" || len(c.CORSOrigins) != 2 ||
		c.OutboxLease != 0 || c.AthleteReadsPerWindow != DefaultAthleteReadsPerWindow {
		t.Fatalf("got %+v", c)
	}
	c, err = FromEnv(env(map[string]string{"CC_OUTBOX_LEASE": "90s", "CC_ATHLETE_READS_PER_WINDOW": "0",
		"CC_STRAVA_WINDOW": "10s", "CC_RETRY_BASE": "500ms"}), Need{})
	if err != nil || c.OutboxLease.Seconds() != 90 || c.AthleteReadsPerWindow != 0 || c.StravaWindow.Seconds() != 10 ||
		c.RetryBase.Milliseconds() != 500 {
		t.Fatalf("got %+v, %v; want a 90 s lease and no cap", c, err)
	}
}

func TestFromEnvSyncSettings(t *testing.T) {
	t.Parallel()
	c, err := FromEnv(env(map[string]string{"CC_SYNC_MAX_DAYS": "90", "CC_SYNC_BUDGET_SHARE": "0.25", "CC_SYNC_DAY_HEAD_START": "1",
		"CC_RECONCILE_DAYS": "7", "CC_RECONCILE_INTERVAL": "2s", "CC_RECONCILE_IDLE": "8s"}), Need{})
	if err != nil || c.SyncMaxDays != 90 || c.SyncBudgetShare != 0.25 || c.SyncDayHeadStart != 1 || c.ReconcileDays != 7 || c.ReconcileInterval.Seconds() != 2 || c.ReconcileIdle.Seconds() != 8 {
		t.Fatalf("got %+v, %v; want 90 days, share 0.25, 7 days every 2s", c, err)
	}
	_, err = FromEnv(env(map[string]string{"CC_SYNC_MAX_DAYS": "0", "CC_SYNC_BUDGET_SHARE": "1.5", "CC_SYNC_DAY_HEAD_START": "2",
		"CC_RECONCILE_DAYS": "x", "CC_RECONCILE_INTERVAL": "6", "CC_RECONCILE_IDLE": "soon"}), Need{})
	for _, want := range []string{"CC_SYNC_MAX_DAYS", "CC_SYNC_BUDGET_SHARE", "CC_SYNC_DAY_HEAD_START", "CC_RECONCILE_DAYS", "CC_RECONCILE_INTERVAL", "CC_RECONCILE_IDLE"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %q", err, want)
		}
	}
}

func TestLocalFromEnv(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want Local
	}{
		{nil, Local{HTTPAddr: DefaultHTTPAddr, SimAddr: DefaultSimAddr}},
		{map[string]string{"CC_HTTP_ADDR": "127.0.0.1:0", "CC_STRAVA_SIM_ADDR": ":9000", "CC_DATA_DIR": "/tmp/cc"},
			Local{HTTPAddr: "127.0.0.1:0", SimAddr: ":9000", DataDir: "/tmp/cc"}},
	} {
		if got := LocalFromEnv(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("LocalFromEnv(%v) = %+v, want %+v", tc.env, got, tc.want)
		}
	}
}

// TestWebhookPathSecrets: CC_WEBHOOK_PATH_SECRET holds the current segment,
// or the new and the previous one while a callback is re-registered; more,
// or a weak one, is refused naming the variable.
func TestWebhookPathSecrets(t *testing.T) {
	t.Parallel()
	tests := []struct {
		value   string
		want    int
		wantErr bool
	}{
		{"abcdefghijklmnop", 1, false},
		{"abcdefghijklmnop,qrstuvwxyz012345", 2, false},
		{"abcdefghijklmnop,qrstuvwxyz012345,ABCDEFGHIJKLMNOP", 0, true},
		{"abcdefghijklmnop,short", 0, true},
	}
	for _, tt := range tests {
		c, err := FromEnv(env(map[string]string{"CC_WEBHOOK_PATH_SECRET": tt.value}), Need{})
		if (err != nil) != tt.wantErr || (err == nil && len(c.WebhookPathSecrets) != tt.want) ||
			(err != nil && !strings.Contains(err.Error(), "CC_WEBHOOK_PATH_SECRET")) {
			t.Errorf("%q: %v, %v; want %d segments (error %v)", tt.value, c.WebhookPathSecrets, err, tt.want, tt.wantErr)
		}
	}
}
