package e2e_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/bff"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store/sessions"
	"github.com/commitcollect/backend/scripts/demokit"
	"github.com/commitcollect/backend/scripts/runkit"
)

// chromium finds Debian's chromium (`make test-browser` installs it).
// Without it the browser check is skipped with a notice, unless
// CC_REQUIRE_CHROMIUM=1 (make test-browser) makes that a failure.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("CHROMIUM"), "chromium", "chromium-browser"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CC_REQUIRE_CHROMIUM") == "1" {
		t.Fatal("chromium not found: apt-get install chromium (make test-browser does)")
	}
	t.Skip("chromium not installed: the landing page is checked in headless Chromium by `make test-browser`")
	return ""
}

// checkPageInChromium renders the landing page of userID in headless
// Chromium and checks what an athlete sees: the milestone, a full progress
// bar and every award. A proxy in front of the API adds the session cookie
// the browser would hold after signing in.
func checkPageInChromium(t *testing.T, st *runkit.Stack, res demokit.DemoResult) {
	bin := chromium(t)
	now := time.Now().UTC()
	cookie := model.NewID()
	sess := &model.Session{SessionID: keys.SessionHash(cookie), UserID: res.UserID, CreatedAtUtc: now, ExpiresAtUtc: now.Add(time.Hour).Unix()}
	if err := sessions.New(st.Store.DB).CreateSession(context.Background(), sess); err != nil {
		t.Fatal(err)
	}
	target, _ := url.Parse(st.APIURL)
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = target.Host
		r.Out.AddCookie(&http.Cookie{Name: bff.SessionCookie, Value: cookie})
	}}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--user-data-dir="+t.TempDir(), "--dump-dom", srv.URL+"/")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v", err)
	}
	dom := string(out)
	for _, want := range []string{
		`id="m-` + res.MilestoneID + `" data-status="completed"`, `aria-valuenow="100"`, `width: 100%`, "Run 100 km this month",
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered page lacks %q:\n%s", want, dom)
		}
	}
	if n := len(regexp.MustCompile(`<li value="\d+">`).FindAllString(dom, -1)); n != res.PartCount {
		t.Errorf("rendered page lists %d awards, want %d:\n%s", n, res.PartCount, dom)
	}
}
