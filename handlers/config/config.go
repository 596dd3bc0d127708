// Package config reads the process configuration from the environment once,
// validates it and reports every problem together. Lambdas, the local stack
// and scripts share it; tests build Config literals.
package config

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/secrets"
	"github.com/commitcollect/backend/model/store"
)

// Config is everything the handlers read from the environment.
type Config struct {
	// StravaBaseURL hangs both /oauth/* and /api/v3/* (STRAVA_BASE_URL,
	// default https://www.strava.com).
	StravaBaseURL string
	// StravaClientID and StravaClientSecret are the API application's
	// credentials (STRAVA_CLIENT_ID, STRAVA_CLIENT_SECRET).
	StravaClientID     string
	StravaClientSecret string
	// StravaVerifyToken answers the webhook subscription handshake
	// (STRAVA_VERIFY_TOKEN).
	StravaVerifyToken string
	// StravaSubscriptionID is the push subscription whose events we accept
	// (STRAVA_SUBSCRIPTION_ID).
	StravaSubscriptionID int64
	// DynamoDBEndpoint overrides the DynamoDB endpoint (DYNAMODB_ENDPOINT),
	// e.g. DynamoDB Local; empty means AWS.
	DynamoDBEndpoint string
	// TablePrefix prefixes the four table names (CC_TABLE_PREFIX).
	TablePrefix string
	// PublicURL is where athletes reach the API (CC_PUBLIC_URL), used for
	// OAuth redirects and cookie security.
	PublicURL string
	// WorkerFunction is the worker Lambda the api invokes asynchronously
	// (CC_WORKER_FUNCTION; AWS only).
	WorkerFunction string
	// CORSOrigins lists the origins allowed by CORS (CC_CORS_ORIGINS,
	// comma-separated; empty disables CORS).
	CORSOrigins []string
	// LogLevel is debug, info, warn or error (CC_LOG_LEVEL, default info).
	LogLevel slog.Level
	// LogOutput is where Logger writes (os.Stderr when nil; tests set it).
	LogOutput io.Writer
	// TokenKMSKey is the KMS key (id, ARN or alias) that wraps the data keys
	// sealing Strava tokens (CC_TOKEN_KMS_KEY; AWS).
	TokenKMSKey string
	// TokenKey is the local master key for the same envelope format
	// (CC_TOKEN_KEY, base64 of 32 bytes; `make run` and tests).
	TokenKey []byte
	// OutboxLease is how long a hand-off of an accepted webhook event is
	// presumed in flight before the sweeper dispatches it again
	// (CC_OUTBOX_LEASE, a Go duration; 0 means the default, 5m).
	OutboxLease time.Duration
	// OutboxShards is how many partitions the outbox's pending index spreads
	// items over (CC_OUTBOX_SHARDS, 1..model.MaxOutboxShards; 0 means the
	// default, model.DefaultOutboxShards). The api, the worker and the
	// sweeper must agree; raise it freely, lower it only with an empty
	// backlog (store.Store.OutboxShards).
	OutboxShards int
	// AthleteReadsPerWindow caps the Strava reads one athlete's events may
	// cause per 15-minute window (CC_ATHLETE_READS_PER_WINDOW; unset means
	// the default, 30; 0 disables the cap).
	AthleteReadsPerWindow int
	// StravaWindow is the length of Strava's short rate-limit window the
	// worker assumes (CC_STRAVA_WINDOW; 0 means Strava's 15m). Only a
	// simulator runs shorter windows (the chaos suite), so deferred work
	// settles in seconds there.
	StravaWindow time.Duration
	// RetryBase is the worker's first backoff after a failed attempt
	// (CC_RETRY_BASE; 0 means the default, 15s).
	RetryBase time.Duration
	// SyncMaxDays bounds how far back a backfill imports (CC_SYNC_MAX_DAYS;
	// 0 means the default, 365).
	SyncMaxDays int
	// SyncBudgetShare is the share of each Strava budget window backfill and
	// reconciliation may spend (CC_SYNC_BUDGET_SHARE, in (0, 1]; 0 means the
	// default, 0.5); webhooks keep the rest.
	SyncBudgetShare float64
	// ReconcileDays is how many recent days a reconciliation re-lists
	// (CC_RECONCILE_DAYS; 0 means the default, 14).
	ReconcileDays int
	// ReconcileInterval is the period of each athlete's reconciliation slot
	// (CC_RECONCILE_INTERVAL, a Go duration; 0 means the default, 168h).
	ReconcileInterval time.Duration
	// ReconcileIdle is how long an athlete with an active milestone but no
	// upload goes without a reconciliation (CC_RECONCILE_IDLE, a Go
	// duration; 0 means the default, 672h).
	ReconcileIdle time.Duration
}

// DefaultAthleteReadsPerWindow is CC_ATHLETE_READS_PER_WINDOW's default.
const DefaultAthleteReadsPerWindow = 30

// Need names the settings a process requires; the rest are optional for it.
type Need struct {
	Strava bool // client id and secret
	// Webhook needs the verify token. STRAVA_SUBSCRIPTION_ID stays optional:
	// the push subscription can only be created once the api answers the
	// handshake, and until it is set the webhook refuses every event.
	Webhook   bool
	PublicURL bool
	Worker    bool // CC_WORKER_FUNCTION
	// Tokens needs a token key: CC_TOKEN_KMS_KEY or CC_TOKEN_KEY (exactly
	// one), for processes that read or write Strava tokens.
	Tokens bool
}

// Tables returns the table names for this environment.
func (c Config) Tables() store.Tables { return store.TableNames(c.TablePrefix) }

// FromEnv reads the configuration with getenv (os.Getenv when nil) and
// validates what need requires, returning every problem at once.
func FromEnv(getenv func(string) string, need Need) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var errs []error
	c := Config{
		StravaBaseURL:      strings.TrimRight(or(getenv("STRAVA_BASE_URL"), "https://www.strava.com"), "/"),
		StravaClientID:     getenv("STRAVA_CLIENT_ID"),
		StravaClientSecret: getenv("STRAVA_CLIENT_SECRET"),
		StravaVerifyToken:  getenv("STRAVA_VERIFY_TOKEN"),
		DynamoDBEndpoint:   getenv("DYNAMODB_ENDPOINT"),
		TablePrefix:        getenv("CC_TABLE_PREFIX"),
		PublicURL:          strings.TrimRight(getenv("CC_PUBLIC_URL"), "/"),
		WorkerFunction:     getenv("CC_WORKER_FUNCTION"),
	}
	if u, err := url.Parse(c.StravaBaseURL); err != nil || u.Scheme == "" || u.Host == "" {
		errs = append(errs, fmt.Errorf("STRAVA_BASE_URL %q is not an absolute URL", c.StravaBaseURL))
	}
	if v := getenv("STRAVA_SUBSCRIPTION_ID"); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id <= 0 {
			errs = append(errs, fmt.Errorf("STRAVA_SUBSCRIPTION_ID %q is not a positive integer", v))
		}
		c.StravaSubscriptionID = id
	}
	if v := getenv("DYNAMODB_ENDPOINT"); v != "" {
		if u, err := url.Parse(v); err != nil || u.Scheme == "" || u.Host == "" {
			errs = append(errs, fmt.Errorf("DYNAMODB_ENDPOINT %q is not an absolute URL", v))
		}
	}
	if v := getenv("CC_PUBLIC_URL"); v != "" {
		if u, err := url.Parse(v); err != nil || u.Scheme == "" || u.Host == "" {
			errs = append(errs, fmt.Errorf("CC_PUBLIC_URL %q is not an absolute URL", v))
		}
	}
	for _, o := range strings.Split(getenv("CC_CORS_ORIGINS"), ",") {
		if o = strings.TrimSpace(o); o != "" {
			c.CORSOrigins = append(c.CORSOrigins, o)
		}
	}
	if v := getenv("CC_OUTBOX_LEASE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			errs = append(errs, fmt.Errorf("CC_OUTBOX_LEASE %q: want a Go duration of at least 1s (e.g. 5m)", v))
		}
		c.OutboxLease = d
	}
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{{"CC_STRAVA_WINDOW", &c.StravaWindow}, {"CC_RETRY_BASE", &c.RetryBase}} {
		if v := getenv(d.name); v != "" {
			x, err := time.ParseDuration(v)
			if err != nil || x < time.Millisecond {
				errs = append(errs, fmt.Errorf("%s %q: want a positive Go duration (e.g. 15m, 500ms)", d.name, v))
			}
			*d.dst = x
		}
	}
	for _, d := range []struct {
		name string
		dst  *int
	}{{"CC_SYNC_MAX_DAYS", &c.SyncMaxDays}, {"CC_RECONCILE_DAYS", &c.ReconcileDays}} {
		if v := getenv(d.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 3650 {
				errs = append(errs, fmt.Errorf("%s %q: want a whole number of days in 1..3650", d.name, v))
			}
			*d.dst = n
		}
	}
	if v := getenv("CC_SYNC_BUDGET_SHARE"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0 && f <= 1) {
			errs = append(errs, fmt.Errorf("CC_SYNC_BUDGET_SHARE %q: want a share in (0, 1], e.g. 0.5", v))
		}
		c.SyncBudgetShare = f
	}
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{{"CC_RECONCILE_INTERVAL", &c.ReconcileInterval}, {"CC_RECONCILE_IDLE", &c.ReconcileIdle}} {
		if v := getenv(d.name); v != "" {
			p, err := time.ParseDuration(v)
			if err != nil || p < time.Second {
				errs = append(errs, fmt.Errorf("%s %q: want a Go duration of at least 1s (e.g. 168h)", d.name, v))
			}
			*d.dst = p
		}
	}
	if v := getenv("CC_OUTBOX_SHARDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > model.MaxOutboxShards {
			errs = append(errs, fmt.Errorf("CC_OUTBOX_SHARDS %q: want an integer in 1..%d", v, model.MaxOutboxShards))
		}
		c.OutboxShards = n
	}
	c.AthleteReadsPerWindow = DefaultAthleteReadsPerWindow
	if v := getenv("CC_ATHLETE_READS_PER_WINDOW"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("CC_ATHLETE_READS_PER_WINDOW %q is not a non-negative integer", v))
		}
		c.AthleteReadsPerWindow = n
	}
	if v := getenv("CC_LOG_LEVEL"); v != "" {
		if err := c.LogLevel.UnmarshalText([]byte(v)); err != nil {
			errs = append(errs, fmt.Errorf("CC_LOG_LEVEL %q: want debug, info, warn or error", v))
		}
	}
	c.TokenKMSKey = getenv("CC_TOKEN_KMS_KEY")
	if v := getenv("CC_TOKEN_KEY"); v != "" {
		k, err := secrets.ParseLocalKey(v)
		if err != nil {
			errs = append(errs, err)
		}
		c.TokenKey = k
	}
	switch {
	case c.TokenKMSKey != "" && getenv("CC_TOKEN_KEY") != "":
		errs = append(errs, errors.New("CC_TOKEN_KMS_KEY and CC_TOKEN_KEY are both set: keep one"))
	case need.Tokens && c.TokenKMSKey == "" && getenv("CC_TOKEN_KEY") == "":
		errs = append(errs, errors.New("CC_TOKEN_KMS_KEY (AWS) or CC_TOKEN_KEY (local) is required"))
	}
	required := func(ok bool, name, val string) {
		if ok && val == "" {
			errs = append(errs, fmt.Errorf("%s is required", name))
		}
	}
	required(need.Strava, "STRAVA_CLIENT_ID", c.StravaClientID)
	required(need.Strava, "STRAVA_CLIENT_SECRET", c.StravaClientSecret)
	required(need.Webhook, "STRAVA_VERIFY_TOKEN", c.StravaVerifyToken)
	required(need.PublicURL, "CC_PUBLIC_URL", c.PublicURL)
	required(need.Worker, "CC_WORKER_FUNCTION", c.WorkerFunction)
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("configuration:\n%w", err)
	}
	return c, nil
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// Logger returns the JSON slog logger every process uses, with stable keys
// (correlationId, userId, athleteId, activityId, …). Never log tokens.
func (c Config) Logger() *slog.Logger {
	out := c.LogOutput
	if out == nil {
		out = os.Stderr
	}
	return slog.New(slog.NewJSONHandler(out, &slog.HandlerOptions{Level: c.LogLevel}))
}
