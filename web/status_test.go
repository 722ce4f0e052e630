package web_test

import (
	"bytes"
	"context"
	"flag"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/internal/golden"
	"github.com/riskguard/riskguard/web"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// checkGolden compares got with testdata/name, or rewrites it with
// -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), got, *update)
}

// GET /api/v1/status is the engine's Status with healthy, exchange and
// controlEnabled beside its fields, byte for byte as the page and scripts
// read it.
func TestStatusJSON(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testToken)
	e.guard.status = demoStatus(t0)
	rec := e.do(t, "GET", "/api/v1/status", loopback, "", "")
	if rec.Code != 200 {
		t.Fatalf("GET /api/v1/status = %d %s", rec.Code, rec.Body)
	}
	for k, want := range map[string]string{"Content-Type": "application/json", "Cache-Control": "no-store"} {
		if got := rec.Header().Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	checkGolden(t, "status.json.golden", rec.Body.String())

	// Unhealthy, no control token, no exchange figures: the flags say so
	// and the figures are zeros.
	srv, err := web.New(web.Options{Guard: &fakeGuard{}, Controls: &fakeControls{}, Metrics: http.NotFoundHandler(), HealthMaxAge: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("GET", "/api/v1/status", nil)
	req.RemoteAddr, req.Host = loopback, "127.0.0.1:9464"
	rec = httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	for _, want := range []string{`"healthy": false`, `"controlEnabled": false`, `"snapshotAgeSeconds": null`, `"liquidations": []`,
		`"exchange": {
    "requests": 0,
    "errors": 0,
    "lastLatencyMs": 0,
    "avgLatencyMs": 0
  },`} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("status without a snapshot, token nor exchange figures lacks %s:\n%s", want, rec.Body)
		}
	}
}

// The page is the embedded status.html, never cached, under a strict
// content security policy.
func TestStatusPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	rec := e.do(t, "GET", "/", loopback, "", "")
	page, err := os.ReadFile("status.html")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Code != 200 || !bytes.Equal(rec.Body.Bytes(), page) {
		t.Errorf("GET / = %d, %d bytes; want 200 and status.html's %d bytes", rec.Code, rec.Body.Len(), len(page))
	}
	for k, want := range map[string]string{
		"Content-Type":            "text/html; charset=utf-8",
		"Cache-Control":           "no-store",
		"Content-Security-Policy": "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:",
	} {
		if got := rec.Header().Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if rec := e.do(t, "GET", "/index.html", loopback, "", ""); rec.Code != 404 {
		t.Errorf("GET /index.html = %d, want 404 (the page is at / only)", rec.Code)
	}
}

// The read endpoints are open to loopback clients; others need the token:
// 401 without it or with a wrong one, 403 when none is configured.
func TestReadsOpenOnLoopbackOnly(t *testing.T) {
	t.Parallel()
	withToken, without := newEnv(t, testToken), newEnv(t, "")
	for _, path := range []string{"/", "/api/v1/status", "/api/v1/silences", "/api/v1/pauses"} {
		for _, tc := range []struct {
			name          string
			e             *env
			from, token   string
			code          int
			authenticates bool
		}{
			{"loopback", withToken, loopback, "", 200, false},
			{"loopback with a wrong token", withToken, loopback, "guess", 200, false},
			{"IPv6 loopback", withToken, "[::1]:40000", "", 200, false},
			{"loopback without a token configured", without, loopback, "", 200, false},
			{"remote with the token", withToken, remote, testToken, 200, false},
			{"remote without a token", withToken, remote, "", 401, true},
			{"remote with a wrong token", withToken, remote, "guess", 401, true},
			{"remote without a token configured", without, remote, testToken, 403, false},
			{"unix socket peer", withToken, "@", "", 401, true},
		} {
			rec := tc.e.do(t, "GET", path, tc.from, tc.token, "")
			if rec.Code != tc.code {
				t.Errorf("%s: GET %s = %d %s, want %d", tc.name, path, rec.Code, rec.Body, tc.code)
			}
			if got := rec.Header().Get("WWW-Authenticate"); (got == `Bearer realm="riskguard"`) != tc.authenticates {
				t.Errorf("%s: GET %s: WWW-Authenticate = %q", tc.name, path, got)
			}
		}
	}
}

// The lists are [] when empty, never null, and the controls' lists as
// they are otherwise.
func TestLists(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	for _, path := range []string{"/api/v1/silences", "/api/v1/pauses"} {
		if rec := e.do(t, "GET", path, loopback, "", ""); rec.Code != 200 || rec.Body.String() != "[]\n" {
			t.Errorf("GET %s = %d %q, want 200 []", path, rec.Code, rec.Body)
		}
	}
	st := demoStatus(t0)
	e.controls.silences, e.controls.pauses = st.Silences, st.Pauses
	if got := e.do(t, "GET", "/api/v1/silences", loopback, "", "").Body.String(); got != `[
  {
    "id": "a1",
    "rule": "watch-xeth",
    "symbol": "XETH",
    "startsAt": "2025-03-14T09:26:23Z",
    "ack": true,
    "comment": "known",
    "createdBy": "frank@desk",
    "createdAt": "2025-03-14T09:26:23Z"
  }
]
` {
		t.Errorf("GET /api/v1/silences = %s", got)
	}
	if got := e.do(t, "GET", "/api/v1/pauses", loopback, "", "").Body.String(); got != `[
  {
    "id": "p1",
    "symbol": "XBTC",
    "startsAt": "2025-03-14T09:26:33Z",
    "comment": "rolling",
    "createdBy": "grace@desk"
  }
]
` {
		t.Errorf("GET /api/v1/pauses = %s", got)
	}
}

// chromium runs headless Chromium with args and URL, returning its stdout;
// the test skips when Debian's chromium is not installed.
func chromium(t *testing.T, url string, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium not installed (apt-get install chromium; .ci/run installs it as root): the status page is not rendered")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir=" + t.TempDir()}, args...)
	cmd := exec.CommandContext(ctx, bin, append(all, url)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.String()
}

// The status page, rendered by headless Chromium after its script ran,
// shows the demo's positions, a firing rule, the last actions, a pause, an
// acknowledgement and a call in flight.
func TestStatusPageInChromium(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testToken)
	e.guard.status = demoStatus(t0)
	hs := httptest.NewServer(e.srv)
	defer hs.Close()
	url := hs.URL + "/"
	dom := chromium(t, url, "--virtual-time-budget=5000", "--dump-dom")
	for _, want := range []string{
		`data-symbol="XBTC"`, `data-symbol="XETH"`, `data-symbol="XSOL"`,
		`data-rule="watch-xeth" data-state="firing"`,
		"lower_leverage", "grace@desk", `id="paused"`, "breaker:", "last complete snapshot:", "exchange:",
		"frank@desk", `id="inflight"`, "GET /v1/contracts/positions: Service Unavailable",
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("the rendered page lacks %s", want)
		}
	}
	if strings.Contains(dom, `<div id="err">cannot`) {
		t.Errorf("the page could not read the API:\n%s", dom)
	}
	shot := filepath.Join(t.TempDir(), "status.png")
	chromium(t, url, "--virtual-time-budget=5000", "--window-size=1280,900", "--screenshot="+shot)
	png, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG")) || len(png) < 10_000 {
		t.Errorf("the screenshot is not a rendered page (%d bytes)", len(png))
	}
	if dir := os.Getenv("RISKGUARD_SCREENSHOT_DIR"); dir != "" {
		os.WriteFile(filepath.Join(dir, "status.png"), png, 0o644)
	}
}

// A status JSON cannot carry (a NaN figure) is a 500 saying so, with the
// error logged, never a 200 with an empty or cut body.
func TestStatusEncodingFailureIs500(t *testing.T) {
	t.Parallel()
	st := demoStatus(t0)
	nan := math.NaN()
	st.SnapshotAge = &nan
	var logs bytes.Buffer
	srv, err := web.New(web.Options{Guard: &fakeGuard{status: st}, Controls: &fakeControls{}, Metrics: http.NotFoundHandler(),
		HealthMaxAge: time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil)), Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("GET", "/api/v1/status", nil)
	req.RemoteAddr, req.Host = loopback, "127.0.0.1:9464"
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	if rec.Code != 500 || !strings.Contains(rec.Body.String(), "could not be encoded") || rec.Header().Get("Content-Type") == "application/json" {
		t.Errorf("GET /api/v1/status with a NaN = %d %q %v, want a plain 500", rec.Code, rec.Body, rec.Header())
	}
	if !strings.Contains(logs.String(), "GET /api/v1/status failed") || !strings.Contains(logs.String(), "unsupported value: NaN") {
		t.Errorf("the failure is not logged: %q", logs.String())
	}
}
