// Package config reads the process configuration from the environment once,
// validates it and reports every problem together. Lambdas, the local stack
// and scripts share it; tests build Config literals.
package config

import (
	"errors"
	"fmt"
	"github.com/commitcollect/backend/handlers/ingest/budget"
	"io"
	"log/slog"
	"net/url"
	"os"
	"time"

	"github.com/commitcollect/backend/model/store/dynamo"
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
	// WebhookPathSecrets are the callback path's secret segment, and while
	// a new callback is registered the previous one (CC_WEBHOOK_PATH_SECRET,
	// comma-separated, the current first; intake.CallbackPath): Strava's
	// deliveries get a route, and in AWS a throttle, of their own.
	WebhookPathSecrets []string
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
	// items over (CC_OUTBOX_SHARDS, 1..keys.MaxOutboxShards; 0 means the
	// default, keys.DefaultOutboxShards). The api, the worker and the
	// sweeper must agree; raise it freely, lower it only with an empty
	// backlog (dynamo.DB.OutboxShards).
	OutboxShards int
	// SweepRead bounds the due items one sweep reads (CC_SWEEP_READ; 0
	// means the default, handoff.DefaultSweepRead): the chaos suite's
	// reduced run lowers it to try a backlog past it at a tenth the size.
	SweepRead int
	// AthleteReadsPerWindow caps the Strava reads one athlete's events may
	// cause per 15-minute window (CC_ATHLETE_READS_PER_WINDOW; unset means
	// the default, 30; 0 disables the cap).
	AthleteReadsPerWindow int
	// AthleteReadsPerDay caps the Strava reads one athlete's events may
	// cause per UTC day (CC_ATHLETE_READS_PER_DAY; unset means the default,
	// 100; 0 disables the cap).
	AthleteReadsPerDay int
	// StravaWindow is the length of Strava's short rate-limit window the
	// worker assumes (CC_STRAVA_WINDOW; 0 means Strava's 15m). Only a
	// simulator runs shorter windows (the chaos suite), so deferred work
	// settles in seconds there.
	StravaWindow time.Duration
	// RetryBase is the worker's first backoff after a failed attempt
	// (CC_RETRY_BASE; 0 means the default, 15s).
	RetryBase time.Duration
	// StravaTimeout bounds one Strava HTTP call of the worker
	// (CC_STRAVA_TIMEOUT; 0 means the client's default, 10s).
	StravaTimeout time.Duration
	// SyncMaxDays bounds how far back a backfill imports (CC_SYNC_MAX_DAYS;
	// 0 means the default, 365).
	SyncMaxDays int
	// SyncBudgetShare is the share of each Strava budget window backfill and
	// reconciliation may spend (CC_SYNC_BUDGET_SHARE, in (0, 1]; 0 means the
	// default, 0.5); webhooks keep the rest.
	SyncBudgetShare float64
	// SyncDayHeadStart is the part of the day's sync share available at
	// midnight UTC (CC_SYNC_DAY_HEAD_START, in [0, 1]; 0 means one rate
	// window's worth): daily pacing then spreads the rest over the day.
	// Test pipelines set 1, so the hour they run at (just after midnight
	// the day's allowance is a few reads) does not decide their outcome.
	SyncDayHeadStart float64
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

// DefaultAthleteReadsPerWindow is CC_ATHLETE_READS_PER_WINDOW's default
// (the fetcher's own, defined there once).
const DefaultAthleteReadsPerWindow = budget.DefaultAthleteReadsPerWindow

// DefaultAthleteReadsPerDay is CC_ATHLETE_READS_PER_DAY's default (the
// fetcher's own).
const DefaultAthleteReadsPerDay = budget.DefaultAthleteReadsPerDay

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
func (c Config) Tables() dynamo.Tables { return dynamo.TableNames(c.TablePrefix) }

// FromEnv reads the configuration with getenv (os.Getenv when nil) and
// validates what need requires, returning every problem at once. Each
// variable is a row of the variables table (env.go).
func FromEnv(getenv func(string) string, need Need) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := Config{
		StravaBaseURL:         "https://www.strava.com",
		AthleteReadsPerWindow: DefaultAthleteReadsPerWindow,
		AthleteReadsPerDay:    DefaultAthleteReadsPerDay,
	}
	var errs []error
	for _, v := range variables {
		if val := getenv(v.name); val != "" {
			if err := v.parse(&c, v.name, val); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if u, err := url.Parse(c.StravaBaseURL); err != nil || u.Scheme == "" || u.Host == "" {
		errs = append(errs, fmt.Errorf("STRAVA_BASE_URL %q is not an absolute URL", c.StravaBaseURL))
	}
	errs = append(errs, c.required(getenv, need)...)
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("configuration:\n%w", err)
	}
	return c, nil
}

// required reports what need requires and c lacks, and a token key set twice.
func (c Config) required(getenv func(string) string, need Need) []error {
	var errs []error
	switch {
	case c.TokenKMSKey != "" && getenv("CC_TOKEN_KEY") != "":
		errs = append(errs, errors.New("CC_TOKEN_KMS_KEY and CC_TOKEN_KEY are both set: keep one"))
	case need.Tokens && c.TokenKMSKey == "" && getenv("CC_TOKEN_KEY") == "":
		errs = append(errs, errors.New("CC_TOKEN_KMS_KEY (AWS) or CC_TOKEN_KEY (local) is required"))
	}
	for _, r := range []struct {
		ok        bool
		name, val string
	}{
		{need.Strava, "STRAVA_CLIENT_ID", c.StravaClientID},
		{need.Strava, "STRAVA_CLIENT_SECRET", c.StravaClientSecret},
		{need.Webhook, "STRAVA_VERIFY_TOKEN", c.StravaVerifyToken},
		{need.PublicURL, "CC_PUBLIC_URL", c.PublicURL},
		{need.Worker, "CC_WORKER_FUNCTION", c.WorkerFunction},
	} {
		if r.ok && r.val == "" {
			errs = append(errs, fmt.Errorf("%s is required", r.name))
		}
	}
	return errs
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
