package runkit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"time"
)

// Browser is an HTTP client that keeps cookies like a browser and stops at
// the redirect home (GET /) that ends the OAuth login, so the login's
// answer can be checked. The chaos suite and the scale run log athletes in
// with it (Login).
func Browser(timeout time.Duration) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: timeout, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if req.URL.Path == "/" {
			return http.ErrUseLastResponse // the callback's redirect home ends the login
		}
		return nil
	}}
}

// Login runs the API's OAuth login at apiURL with a Browser client: through
// the (simulated) Strava authorization to the callback, which must end with
// a 302 home. The session cookie stays in c.
func Login(ctx context.Context, c *http.Client, apiURL string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, apiURL+"/auth/strava/login", nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		return fmt.Errorf("login ended at %s with %d", resp.Request.URL, resp.StatusCode)
	}
	return nil
}

// SendJSON does one JSON request with client and decodes a JSON answer into
// out (when not nil); an answer other than want is an error quoting the
// body. The demo and the chaos suite drive the API with it.
func SendJSON(ctx context.Context, client *http.Client, method, url string, in, out any, want int) error {
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s %s: encode request: %w", method, url, err)
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, url, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, bytes.TrimSpace(raw))
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%s %s: decode answer: %w", method, url, err)
		}
	}
	return nil
}
