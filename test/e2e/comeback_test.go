package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/test/capture"

	"github.com/commitcollect/backend/handlers/bff"
	"github.com/commitcollect/backend/test/dynamolocal"
	"github.com/commitcollect/backend/test/privacyscan"
)

var simLine = regexp.MustCompile(`Strava sim\s+(http://\S+)`)

// buildRun builds `make run`'s binary (scripts/run) and returns its path.
func buildRun(t *testing.T) (bin, root string) {
	t.Helper()
	root, err := dynamolocal.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(t.TempDir(), "run")
	build := exec.Command("go", "build", "-o", bin, "./scripts/run")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./scripts/run: %v\n%s", err, out)
	}
	return bin, root
}

// runClient talks to a running `make run`: its API as a browser with a
// cookie jar, and the simulator's control API.
type runClient struct {
	t        *testing.T
	api, sim string
}

func (c runClient) control(method, path string, body any) {
	c.t.Helper()
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, c.sim+"/_sim/"+path, bytes.NewReader(raw))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(resp.Body)
		c.t.Fatalf("%s /_sim/%s: %d %s", method, path, resp.StatusCode, b)
	}
}

// login signs in through the API's OAuth redirects and the simulator's
// authorize page; it returns the browser holding the session.
func (c runClient) login() *http.Client {
	c.t.Helper()
	jar, _ := cookiejar.New(nil)
	b := &http.Client{Jar: jar, Timeout: 10 * time.Second, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if req.URL.Path == "/" {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	resp, err := b.Get(c.api + "/auth/strava/login")
	if err != nil {
		c.t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/" {
		c.t.Fatalf("login ended with %d at %s, want a redirect home: %s", resp.StatusCode, resp.Request.URL, body)
	}
	return b
}

func (c runClient) do(b *http.Client, method, path string, out any) int {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.api+path, nil)
	resp, err := b.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode < 300 {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			c.t.Fatalf("%s %s: %v", method, path, err)
		}
	}
	return resp.StatusCode
}

// waitMe polls GET /v1/me until ok holds.
func (c runClient) waitMe(b *http.Client, what string, ok func(bff.MeJSON) bool) {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var me bff.MeJSON
		if c.do(b, http.MethodGet, "/v1/me", &me) == http.StatusOK && ok(me) {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: not within 60 s (GET /v1/me = %+v)", what, me)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Through `make run`'s binary: an athlete with three activities signs in,
// revokes CommitCollect on Strava (the webhook's deauthorization is
// confirmed and purged), deletes the account (202), and signs in again:
// a new user, connected, with nothing of the deleted account back. After
// the deletion no table holds the athlete id, an activity id or the name
// outside items that expire within 7 days.
func TestRunBinaryLetsARevokedAndDeletedAthleteSignUpAgain(t *testing.T) {
	t.Parallel()
	bin, root := buildRun(t)
	prefix := dynamolocal.UniquePrefix()
	cmd := exec.Command(bin)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CC_HTTP_ADDR=127.0.0.1:0", "CC_STRAVA_SIM_ADDR=127.0.0.1:0",
		"DYNAMODB_ENDPOINT="+dynamolocal.Endpoint(t), "CC_TABLE_PREFIX="+prefix, "STRAVA_BASE_URL=", "CC_DATA_DIR=",
		"CC_SYNC_DAY_HEAD_START=1")
	var stdout, stderr capture.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("run's logs:\n%s", stderr.String())
		}
	})
	api, _ := readBanner(t, &stdout, cmd, &stderr)
	m := simLine.FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("no simulator in the banner:\n%s", stdout.String())
	}
	c := runClient{t: t, api: api, sim: m[1]}

	const athlete, first = int64(918273645), int64(553311997700)
	c.control(http.MethodPost, "athletes", map[string]any{"id": athlete, "firstname": "Kathleen", "lastname": "Booth"})
	c.control(http.MethodPut, "authorization", map[string]any{"athleteId": athlete})
	for i := range int64(3) {
		c.control(http.MethodPut, "activities/"+strconv.FormatInt(first+i, 10), map[string]any{"athleteId": athlete, "sport_type": "Run",
			"name": "Morning Run", "distance": 5000, "moving_time": 1500, "elapsed_time": 1600,
			"start_date": time.Now().UTC().Add(-time.Duration(i+1) * 24 * time.Hour).Truncate(time.Second)})
	}
	b := c.login()
	var me bff.MeJSON
	c.do(b, http.MethodGet, "/v1/me", &me)
	c.waitMe(b, "backfill of 3 activities", func(m bff.MeJSON) bool { return m.Sync.ImportedCount >= 3 })

	c.control(http.MethodPost, "events", map[string]any{"deauthorize": athlete})
	c.waitMe(b, "revocation purged", func(m bff.MeJSON) bool { return m.AthleteID == 0 && m.DisplayName == "" && !m.Connected })

	var rep bff.DeletionReport
	if st := c.do(b, http.MethodDelete, "/v1/me", &rep); st != http.StatusAccepted || rep.Status != "deleted" {
		t.Fatalf("DELETE /v1/me: %d %+v", st, rep)
	}
	ctx := context.Background()
	tb := dynamo.TableNames(prefix)
	db, _ := dynamolocal.Clients(t)
	clear := []string{strconv.FormatInt(athlete, 10), "Kathleen", "Booth"}
	for i := range int64(3) {
		clear = append(clear, strconv.FormatInt(first+i, 10))
	}
	left, n, err := privacyscan.Lingering(ctx, db, []string{tb.Main, tb.Sessions, tb.Audit, tb.Idempotency}, clear, time.Now().Add(7*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range left {
		t.Error(l)
	}
	fmt.Printf("comeback: after the deletion %d items read, %d hold a Strava id past 7 days\n", n, len(left))

	again := c.login()
	var back bff.MeJSON
	if st := c.do(again, http.MethodGet, "/v1/me", &back); st != http.StatusOK {
		t.Fatalf("GET /v1/me after signing up again: %d", st)
	}
	if back.UserID == me.UserID || back.AthleteID != athlete || !back.Connected {
		t.Fatalf("GET /v1/me = %+v; want a new user (not %s), connected", back, me.UserID)
	}
	var ms struct{ Milestones []json.RawMessage }
	if st := c.do(again, http.MethodGet, "/v1/milestones", &ms); st != http.StatusOK || len(ms.Milestones) != 0 {
		t.Fatalf("GET /v1/milestones: %d, %d milestones; want none of the deleted account's", st, len(ms.Milestones))
	}
}
