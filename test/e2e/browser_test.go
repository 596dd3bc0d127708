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

// chromium finds Debian's chromium (make test installs it), or the one
// CHROMIUM names. Without it the test fails, saying how to get it: the
// landing page is checked in a real browser wherever make test runs.
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
	t.Fatal("chromium not found: the landing page is checked in headless Chromium; install Debian's chromium " +
		"(make test does, as root with apt-get) or set CHROMIUM=/path/to/chromium")
	return ""
}

// checkPageInChromium renders the landing page of userID in headless
// Chromium and checks what an athlete sees: the milestone, a full progress
// bar, its timeline drawn against its pace line, every award, and the
// streak's days. A proxy in front of the API adds the session cookie
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
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
		"--user-data-dir="+t.TempDir(), "--dump-dom", srv.URL+"/")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v", err)
	}
	dom := string(out)
	for _, want := range []string{
		`id="m-` + res.MilestoneID + `" data-status="completed"`, `aria-valuenow="100"`, `width: 100%`, "Run 100 km this month",
		`<svg class="timeline"`, `<polyline class="value" points="`, `<polyline class="pace" points="`,
		`<rect class="active"`, `data-state="alive"`,
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered page lacks %q:\n%s", want, dom)
		}
	}
	section, _, _ := strings.Cut(dom[max(strings.Index(dom, `id="m-`+res.MilestoneID+`"`), 0):], "</section>")
	if n := len(regexp.MustCompile(`<li value="\d+">`).FindAllString(section, -1)); n != res.PartCount {
		t.Errorf("rendered page lists %d awards, want %d:\n%s", n, res.PartCount, dom)
	}
}
