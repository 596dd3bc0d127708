package config

import (
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/secrets"
)

// pathSecret is what CC_WEBHOOK_PATH_SECRET may hold.
var pathSecret = regexp.MustCompile(`^[A-Za-z0-9_-]{16,128}$`)

// variable is one environment variable FromEnv reads: parse stores a
// non-empty value in the Config and says what is wrong with it, if anything.
type variable struct {
	name  string
	parse func(c *Config, name, v string) error
}

// variables is every variable FromEnv reads, in the order its problems are
// reported (STRAVA_BASE_URL is checked after them, with its default).
var variables = []variable{
	{"STRAVA_BASE_URL", text(func(c *Config) *string { return &c.StravaBaseURL }, trimSlash)},
	{"STRAVA_CLIENT_ID", text(func(c *Config) *string { return &c.StravaClientID }, nil)},
	{"STRAVA_CLIENT_SECRET", text(func(c *Config) *string { return &c.StravaClientSecret }, nil)},
	{"STRAVA_VERIFY_TOKEN", text(func(c *Config) *string { return &c.StravaVerifyToken }, nil)},
	{"CC_TABLE_PREFIX", text(func(c *Config) *string { return &c.TablePrefix }, nil)},
	{"CC_WORKER_FUNCTION", text(func(c *Config) *string { return &c.WorkerFunction }, nil)},
	{"CC_TOKEN_KMS_KEY", text(func(c *Config) *string { return &c.TokenKMSKey }, nil)},
	{"STRAVA_SUBSCRIPTION_ID", func(c *Config, name, v string) error {
		id, err := strconv.ParseInt(v, 10, 64)
		c.StravaSubscriptionID = id
		if err != nil || id <= 0 {
			return fmt.Errorf("%s %q is not a positive integer", name, v)
		}
		return nil
	}},
	{"CC_WEBHOOK_PATH_SECRET", func(c *Config, name, v string) error {
		c.WebhookPathSecrets = strings.Split(v, ",")
		if len(c.WebhookPathSecrets) > 2 {
			return fmt.Errorf("%s: want one segment, or the new and the previous one comma-separated", name)
		}
		for _, s := range c.WebhookPathSecrets {
			if !pathSecret.MatchString(s) {
				return fmt.Errorf("%s: want 16 to 128 letters, digits, '-' or '_' (a path segment hard to guess)", name)
			}
		}
		return nil
	}},
	{"DYNAMODB_ENDPOINT", absoluteURL(func(c *Config) *string { return &c.DynamoDBEndpoint }, nil)},
	{"CC_PUBLIC_URL", absoluteURL(func(c *Config) *string { return &c.PublicURL }, trimSlash)},
	{"CC_CORS_ORIGINS", func(c *Config, _, v string) error {
		for _, o := range strings.Split(v, ",") {
			if o = strings.TrimSpace(o); o != "" {
				c.CORSOrigins = append(c.CORSOrigins, o)
			}
		}
		return nil
	}},
	{"CC_OUTBOX_LEASE", duration(func(c *Config) *time.Duration { return &c.OutboxLease }, time.Second, "at least 1s (e.g. 5m)")},
	{"CC_STRAVA_WINDOW", positiveDuration(func(c *Config) *time.Duration { return &c.StravaWindow })},
	{"CC_RETRY_BASE", positiveDuration(func(c *Config) *time.Duration { return &c.RetryBase })},
	{"CC_STRAVA_TIMEOUT", positiveDuration(func(c *Config) *time.Duration { return &c.StravaTimeout })},
	{"CC_SYNC_MAX_DAYS", days(func(c *Config) *int { return &c.SyncMaxDays })},
	{"CC_RECONCILE_DAYS", days(func(c *Config) *int { return &c.ReconcileDays })},
	{"CC_SYNC_BUDGET_SHARE", func(c *Config, name, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		c.SyncBudgetShare = f
		if err != nil || !(f > 0 && f <= 1) {
			return fmt.Errorf("%s %q: want a share in (0, 1], e.g. 0.5", name, v)
		}
		return nil
	}},
	{"CC_SYNC_DAY_HEAD_START", func(c *Config, name, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		c.SyncDayHeadStart = f
		if err != nil || !(f >= 0 && f <= 1) {
			return fmt.Errorf("%s %q: want a part of the day in [0, 1], e.g. 0.1", name, v)
		}
		return nil
	}},
	{"CC_RECONCILE_INTERVAL", duration(func(c *Config) *time.Duration { return &c.ReconcileInterval }, time.Second, "at least 1s (e.g. 168h)")},
	{"CC_RECONCILE_IDLE", duration(func(c *Config) *time.Duration { return &c.ReconcileIdle }, time.Second, "at least 1s (e.g. 168h)")},
	{"CC_OUTBOX_SHARDS", func(c *Config, name, v string) error {
		n, err := strconv.Atoi(v)
		c.OutboxShards = n
		if err != nil || n < 1 || n > keys.MaxOutboxShards {
			return fmt.Errorf("%s %q: want an integer in 1..%d", name, v, keys.MaxOutboxShards)
		}
		return nil
	}},
	{"CC_SWEEP_READ", nonNegative(func(c *Config) *int { return &c.SweepRead })},
	{"CC_ATHLETE_READS_PER_WINDOW", nonNegative(func(c *Config) *int { return &c.AthleteReadsPerWindow })},
	{"CC_ATHLETE_READS_PER_DAY", nonNegative(func(c *Config) *int { return &c.AthleteReadsPerDay })},
	{"CC_LOG_LEVEL", func(c *Config, name, v string) error {
		if err := c.LogLevel.UnmarshalText([]byte(v)); err != nil {
			return fmt.Errorf("%s %q: want debug, info, warn or error", name, v)
		}
		return nil
	}},
	{"CC_TOKEN_KEY", func(c *Config, _, v string) error {
		k, err := secrets.ParseLocalKey(v)
		c.TokenKey = k
		return err
	}},
}

func trimSlash(v string) string { return strings.TrimRight(v, "/") }

// text stores the value as it is, or as norm makes it.
func text(field func(*Config) *string, norm func(string) string) func(*Config, string, string) error {
	return func(c *Config, _, v string) error {
		if norm != nil {
			v = norm(v)
		}
		*field(c) = v
		return nil
	}
}

// absoluteURL is text that must parse as an absolute URL.
func absoluteURL(field func(*Config) *string, norm func(string) string) func(*Config, string, string) error {
	return func(c *Config, name, v string) error {
		_ = text(field, norm)(c, name, v)
		if u, err := url.Parse(v); err != nil || u.Scheme == "" || u.Host == "" {
			return fmt.Errorf("%s %q is not an absolute URL", name, v)
		}
		return nil
	}
}

// duration is a Go duration of at least min; want ends the error.
func duration(field func(*Config) *time.Duration, min time.Duration, want string) func(*Config, string, string) error {
	return func(c *Config, name, v string) error {
		d, err := time.ParseDuration(v)
		*field(c) = d
		if err != nil || d < min {
			return fmt.Errorf("%s %q: want a Go duration of %s", name, v, want)
		}
		return nil
	}
}

// nonNegative is an integer of at least 0 (0 often switches a cap off).
func nonNegative(field func(*Config) *int) func(*Config, string, string) error {
	return func(c *Config, name, v string) error {
		n, err := strconv.Atoi(v)
		*field(c) = n
		if err != nil || n < 0 {
			return fmt.Errorf("%s %q is not a non-negative integer", name, v)
		}
		return nil
	}
}

// positiveDuration is a Go duration of at least a millisecond.
func positiveDuration(field func(*Config) *time.Duration) func(*Config, string, string) error {
	return func(c *Config, name, v string) error {
		d, err := time.ParseDuration(v)
		*field(c) = d
		if err != nil || d < time.Millisecond {
			return fmt.Errorf("%s %q: want a positive Go duration (e.g. 15m, 500ms)", name, v)
		}
		return nil
	}
}

// days is a whole number of days in 1..3650.
func days(field func(*Config) *int) func(*Config, string, string) error {
	return func(c *Config, name, v string) error {
		n, err := strconv.Atoi(v)
		*field(c) = n
		if err != nil || n < 1 || n > 3650 {
			return fmt.Errorf("%s %q: want a whole number of days in 1..3650", name, v)
		}
		return nil
	}
}
