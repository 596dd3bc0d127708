package strava

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/commitcollect/backend/model"
)

// DefaultTimeout bounds one Strava HTTP call when the caller's context has no
// earlier deadline.
const DefaultTimeout = 10 * time.Second

// maxBody bounds how much of a Strava response is read.
const maxBody = 1 << 20

// Client calls Strava's REST API. It is safe for concurrent use.
type Client struct {
	base string
	http *http.Client
}

// NewClient returns a client for baseURL (https://www.strava.com or the
// simulator); httpClient nil means a client with DefaultTimeout.
func NewClient(baseURL string, httpClient *http.Client) *Client {
	if httpClient == nil {
		httpClient = &http.Client{Timeout: DefaultTimeout}
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), http: httpClient}
}

// HTTPClient returns the underlying HTTP client (the token refresher uses
// the same one).
func (c *Client) HTTPClient() *http.Client { return c.http }

// Activity is the subset of Strava's DetailedActivity that CommitCollect
// reads, with Strava's JSON field names.
type Activity struct {
	ID                 int64           `json:"id"`
	Athlete            ActivityAthlete `json:"athlete"`
	Name               string          `json:"name"`
	SportType          string          `json:"sport_type"`
	Type               string          `json:"type"`
	Distance           float64         `json:"distance"`
	TotalElevationGain float64         `json:"total_elevation_gain"`
	MovingTime         int64           `json:"moving_time"`
	ElapsedTime        int64           `json:"elapsed_time"`
	StartDate          time.Time       `json:"start_date"`
	// StartDateLocal is the wall clock where the activity was recorded,
	// written by Strava with a misleading "Z" (calendar.LocalStart reads
	// it); Timezone names that zone, e.g. "(GMT+10:00) Australia/Sydney".
	StartDateLocal string `json:"start_date_local"`
	Timezone       string `json:"timezone"`
	Private        bool   `json:"private"`
	// Manual, Trainer and Commute are Strava's marks of an activity
	// entered by hand, recorded indoors on a trainer, or flagged as a
	// commute (milestone rules read them).
	Manual  bool `json:"manual"`
	Trainer bool `json:"trainer"`
	Commute bool `json:"commute"`
}

// ActivityAthlete is the meta athlete embedded in an activity.
type ActivityAthlete struct {
	ID int64 `json:"id"`
}

// Fault is one entry of a Strava error body.
type Fault struct {
	Resource string `json:"resource"`
	Field    string `json:"field"`
	Code     string `json:"code"`
}

// APIError is a non-2xx answer from Strava. It matches model.ErrNotFound
// (404), model.ErrUnauthorized (401: the token is dead or lacks every
// activity scope) or model.ErrRetryable (429, 5xx) with errors.Is; anything
// else, 403 included, matches model.ErrInvalid: a 403 says nothing about the
// athlete's grant, so it flags nobody (the job is parked with Strava's
// answer for an operator).
type APIError struct {
	Status  int
	Message string  `json:"message"`
	Errors  []Fault `json:"errors"`
}

// Error implements error.
func (e *APIError) Error() string {
	s := fmt.Sprintf("strava %d", e.Status)
	if e.Message != "" {
		s += " " + e.Message
	}
	for _, f := range e.Errors {
		s += fmt.Sprintf(" [%s.%s %s]", f.Resource, f.Field, f.Code)
	}
	return s
}

// Is classifies the status into model's vocabulary.
func (e *APIError) Is(target error) bool {
	switch {
	case e.Status == http.StatusNotFound:
		return target == model.ErrNotFound
	case e.Status == http.StatusUnauthorized:
		return target == model.ErrUnauthorized
	case e.Status == http.StatusTooManyRequests || e.Status >= 500:
		return target == model.ErrRetryable
	}
	return target == model.ErrInvalid
}

// GetActivity fetches GET /api/v3/activities/{id} with the athlete's access
// token. The rate-limit reading is returned whenever Strava sent the headers,
// also with an error. Errors match model.ErrNotFound (deleted or invisible
// activity), model.ErrUnauthorized (401: token revoked or no activity scope),
// model.ErrRetryable (429, 5xx, transport failures) or model.ErrInvalid (an
// undecodable body).
func (c *Client) GetActivity(ctx context.Context, accessToken string, id int64) (Activity, RateLimit, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/api/v3/activities/"+strconv.FormatInt(id, 10), nil)
	if err != nil {
		return Activity{}, RateLimit{}, fmt.Errorf("get activity %d: %w", id, err)
	}
	req.Header.Set("Authorization", "Bearer "+accessToken)
	req.Header.Set("Accept", "application/json")
	var a Activity
	rl, err := c.do(req, &a)
	if err != nil {
		return Activity{}, rl, fmt.Errorf("get activity %d: %w", id, err)
	}
	if a.ID != id {
		return Activity{}, rl, fmt.Errorf("get activity %d: response carries id %d: %w", id, a.ID, model.ErrInvalid)
	}
	return a, rl, nil
}

// GetAthlete fetches the athlete the access token belongs to
// (GET /api/v3/athlete): the cheapest call that proves a grant is alive. The
// rate-limit reading is returned whenever Strava sent the headers, also with
// an error. Errors are a *APIError for Strava's answers (401: the token or
// its grant is revoked; 429, 5xx match model.ErrRetryable), model.ErrRetryable
// for transport failures and model.ErrInvalid for an undecodable body.
func (c *Client) GetAthlete(ctx context.Context, accessToken string) (Athlete, RateLimit, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/api/v3/athlete", nil)
	if err != nil {
		return Athlete{}, RateLimit{}, fmt.Errorf("get athlete: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+accessToken)
	req.Header.Set("Accept", "application/json")
	var a Athlete
	rl, err := c.do(req, &a)
	if err != nil {
		return Athlete{}, rl, fmt.Errorf("get athlete: %w", err)
	}
	return a, rl, nil
}

// MaxPerPage is the largest page Strava's list endpoints serve.
const MaxPerPage = 200

// ListOptions selects a page of the athlete's activities
// (GET /api/v3/athlete/activities). Zero times and numbers are left out of
// the request (Strava's defaults: no bound, page 1, 30 per page).
type ListOptions struct {
	// Before lists activities started before it (Strava's before, epoch
	// seconds, exclusive).
	Before time.Time
	// After lists activities started after it (Strava's after, epoch
	// seconds, exclusive).
	After time.Time
	// Page is 1-based.
	Page int
	// PerPage is at most MaxPerPage.
	PerPage int
}

// ListActivities fetches one page of the authenticated athlete's activities
// (GET /api/v3/athlete/activities, SummaryActivity: the same fields as
// Activity). Strava lists newest first unless only After is given. The
// rate-limit reading is returned whenever Strava sent the headers, also
// with an error. It returns ErrInvalid (without a request) for PerPage
// beyond MaxPerPage or a negative page; Strava's errors classify as in
// GetActivity (ErrUnauthorized, ErrRetryable for 429/5xx/transport).
func (c *Client) ListActivities(ctx context.Context, accessToken string, o ListOptions) ([]Activity, RateLimit, error) {
	if o.PerPage < 0 || o.PerPage > MaxPerPage || o.Page < 0 {
		return nil, RateLimit{}, fmt.Errorf("list activities: page %d of %d (at most %d): %w", o.Page, o.PerPage, MaxPerPage, model.ErrInvalid)
	}
	q := url.Values{}
	if !o.Before.IsZero() {
		q.Set("before", strconv.FormatInt(o.Before.Unix(), 10))
	}
	if !o.After.IsZero() {
		q.Set("after", strconv.FormatInt(o.After.Unix(), 10))
	}
	if o.Page > 0 {
		q.Set("page", strconv.Itoa(o.Page))
	}
	if o.PerPage > 0 {
		q.Set("per_page", strconv.Itoa(o.PerPage))
	}
	u := c.base + "/api/v3/athlete/activities"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, RateLimit{}, fmt.Errorf("list activities: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+accessToken)
	req.Header.Set("Accept", "application/json")
	var out []Activity
	rl, err := c.do(req, &out)
	if err != nil {
		return nil, rl, fmt.Errorf("list activities: %w", err)
	}
	return out, rl, nil
}

// Deauthorize revokes an access token and with it the application's access
// to the athlete (POST /oauth/deauthorize). Errors match model.ErrUnauthorized
// when the token is already invalid (nothing left to revoke) and
// model.ErrRetryable for 429/5xx/transport failures.
func (c *Client) Deauthorize(ctx context.Context, accessToken string) error {
	form := url.Values{"access_token": {accessToken}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/oauth/deauthorize", strings.NewReader(form.Encode()))
	if err != nil {
		return fmt.Errorf("deauthorize: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+accessToken)
	if _, err := c.do(req, nil); err != nil {
		return fmt.Errorf("deauthorize: %w", err)
	}
	return nil
}

// do sends req and decodes a 2xx JSON body into out (when not nil).
func (c *Client) do(req *http.Request, out any) (RateLimit, error) {
	resp, err := c.http.Do(req)
	if err != nil {
		// Transport failures (timeouts, resets) are worth retrying.
		return RateLimit{}, fmt.Errorf("%s %s: %w: %w", req.Method, req.URL.Path, model.ErrRetryable, err)
	}
	defer resp.Body.Close()
	rl, _ := ParseRateLimit(resp.Header)
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return rl, fmt.Errorf("read %s: %w: %w", req.URL.Path, model.ErrRetryable, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		apiErr := &APIError{Status: resp.StatusCode}
		_ = json.Unmarshal(body, apiErr) // the status alone classifies; the body adds detail
		apiErr.Status = resp.StatusCode
		return rl, apiErr
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			return rl, fmt.Errorf("decode %s: %v: %w", req.URL.Path, err, model.ErrInvalid)
		}
	}
	return rl, nil
}

// RateLimit is one reading of Strava's per-application budget from the
// X-RateLimit-* (all requests) and X-ReadRateLimit-* (reads) headers. Each
// header holds "15-minute,daily".
type RateLimit struct {
	ShortLimit, DailyLimit         int
	ShortUsage, DailyUsage         int
	ReadShortLimit, ReadDailyLimit int
	ReadShortUsage, ReadDailyUsage int
}

// Header names of Strava's rate-limit reporting.
const (
	HeaderLimit     = "X-RateLimit-Limit"
	HeaderUsage     = "X-RateLimit-Usage"
	HeaderReadLimit = "X-ReadRateLimit-Limit"
	HeaderReadUsage = "X-ReadRateLimit-Usage"
)

// ParseRateLimit reads the rate-limit headers. ok is false when the overall
// limit and usage headers are missing or malformed (then nothing should be
// recorded); the read headers are optional and stay zero when absent or
// malformed.
func ParseRateLimit(h http.Header) (rl RateLimit, ok bool) {
	var okL, okU bool
	rl.ShortLimit, rl.DailyLimit, okL = parsePair(h.Get(HeaderLimit))
	rl.ShortUsage, rl.DailyUsage, okU = parsePair(h.Get(HeaderUsage))
	if !okL || !okU {
		return RateLimit{}, false
	}
	rsl, rdl, okRL := parsePair(h.Get(HeaderReadLimit))
	rsu, rdu, okRU := parsePair(h.Get(HeaderReadUsage))
	if okRL && okRU {
		rl.ReadShortLimit, rl.ReadDailyLimit, rl.ReadShortUsage, rl.ReadDailyUsage = rsl, rdl, rsu, rdu
	}
	return rl, true
}

func parsePair(v string) (short, daily int, ok bool) {
	a, b, found := strings.Cut(v, ",")
	if !found {
		return 0, 0, false
	}
	s, err1 := strconv.Atoi(strings.TrimSpace(a))
	d, err2 := strconv.Atoi(strings.TrimSpace(b))
	if err1 != nil || err2 != nil || s < 0 || d < 0 {
		return 0, 0, false
	}
	return s, d, true
}

// Valid reports whether the reading carries any numbers.
func (r RateLimit) Valid() bool { return r.ShortLimit > 0 || r.DailyLimit > 0 }
