package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/web"
)

func TestNewValidates(t *testing.T) {
	t.Parallel()
	metrics := http.NotFoundHandler()
	ok := web.Options{Guard: &fakeGuard{}, Controls: &fakeControls{}, Metrics: metrics, HealthMaxAge: time.Second}
	for _, tc := range []struct {
		name string
		edit func(*web.Options)
		want string
	}{
		{"complete", func(*web.Options) {}, ""},
		{"no guard", func(o *web.Options) { o.Guard = nil }, "no guard"},
		{"no controls", func(o *web.Options) { o.Controls = nil }, "no controls"},
		{"no metrics", func(o *web.Options) { o.Metrics = nil }, "no metrics handler"},
		{"no health max age", func(o *web.Options) { o.HealthMaxAge = 0 }, "health max age must be positive, got 0s"},
		{"negative health max age", func(o *web.Options) { o.HealthMaxAge = -time.Second }, "health max age must be positive, got -1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := ok
			tc.edit(&opts)
			srv, err := web.New(opts)
			switch {
			case tc.want == "" && (err != nil || srv == nil):
				t.Fatalf("New: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("New: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// /healthz says whether the last complete snapshot is at most HealthMaxAge
// old, and lists the calls in flight; it is open to every client.
func TestHealthz(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		last     time.Time
		inFlight []engine.CallInFlight
		code     int
		body     string
	}{
		{"no snapshot yet", time.Time{}, nil, 503, "unhealthy: no complete snapshot read yet\n"},
		{"recent", t0.Add(-1500 * time.Millisecond), nil, 200, "ok: last complete snapshot 1.5s ago\n"},
		{"at the limit", t0.Add(-10 * time.Second), nil, 200, "ok: last complete snapshot 10s ago\n"},
		{"past the limit", t0.Add(-10*time.Second - time.Millisecond), nil, 503, "unhealthy: last complete snapshot 10.001s ago\n"},
		{"calls in flight", t0.Add(-time.Second), []engine.CallInFlight{
			{Symbol: "XSOL", Call: "POST /v1/contracts/positions/XSOL/leverage", Since: t0.Add(-1234567 * time.Microsecond), Running: 1.234567},
			{Symbol: "XBTC", Call: "DELETE /v1/contracts/orders/XBTC", Since: t0, Running: 0},
		}, 200, "ok: last complete snapshot 1s ago\n" +
			"in flight for 1.235s: POST /v1/contracts/positions/XSOL/leverage\n" +
			"in flight for 0s: DELETE /v1/contracts/orders/XBTC\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, "")
			e.guard.last, e.guard.inFlight = tc.last, tc.inFlight
			rec := e.do(t, "GET", "/healthz", remote, "", "")
			if rec.Code != tc.code || rec.Body.String() != tc.body {
				t.Errorf("GET /healthz = %d %q, want %d %q", rec.Code, rec.Body.String(), tc.code, tc.body)
			}
			// The recorder keeps the headers of an explicit WriteHeader,
			// before the server would sniff the body's type.
			if got := rec.Header().Get("Content-Type"); tc.code == 200 && got != "text/plain; charset=utf-8" {
				t.Errorf("Content-Type = %q", got)
			}
		})
	}
}

// /metrics is the handler given, open to every client (Prometheus scrapes
// from afar); an unknown path or method is the mux's 404 or 405.
func TestRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testToken)
	for _, tc := range []struct {
		method, path string
		code         int
		body         string
	}{
		{"GET", "/metrics", 200, "riskguard_up 1\n"},
		{"GET", "/nope", 404, "404 page not found\n"},
		{"GET", "/api/v1/nope", 404, "404 page not found\n"},
		{"PUT", "/api/v1/status", 405, "Method Not Allowed\n"},
		{"POST", "/healthz", 405, "Method Not Allowed\n"},
	} {
		rec := e.do(t, tc.method, tc.path, remote, "", "")
		if rec.Code != tc.code || rec.Body.String() != tc.body {
			t.Errorf("%s %s = %d %q, want %d %q", tc.method, tc.path, rec.Code, rec.Body.String(), tc.code, tc.body)
		}
	}
	if got := e.do(t, "PUT", "/api/v1/status", loopback, "", "").Header().Get("Allow"); got != "GET, HEAD" {
		t.Errorf("Allow = %q, want GET, HEAD", got)
	}
}

// syncBuffer is a bytes.Buffer safe for the listener's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Start listens, logs where, serves, and stops with its context; a bad
// address is an error at once.
func TestStart(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	srv, err := web.New(web.Options{Guard: &fakeGuard{last: time.Now()}, Controls: &fakeControls{}, Metrics: http.NotFoundHandler(),
		Token: testToken, HealthMaxAge: time.Hour, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := srv.Start(ctx, "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(logs.String()), &line); err != nil {
		t.Fatalf("the listen line: %v\n%s", err, logs.String())
	}
	addr, _ := line["addr"].(string)
	delete(line, "time")
	delete(line, "addr")
	if want := map[string]any{"level": "INFO", "msg": "serving /metrics and /healthz", "status_page": "/", "control_api": true}; !reflect.DeepEqual(line, want) {
		t.Errorf("listen line = %v, want %v with time and addr", line, want)
	}
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(string(body), "ok: ") {
		t.Errorf("GET /healthz = %d %q", resp.StatusCode, body)
	}
	cancel()
	waitFor(t, "the listener to close", 10*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})

	err = srv.Start(context.Background(), "127.0.0.1:-1")
	var oe *net.OpError
	if err == nil || !strings.HasPrefix(err.Error(), "listen 127.0.0.1:-1: ") || !errors.As(err, &oe) {
		t.Errorf("Start on a bad address: %v, want a wrapped *net.OpError", err)
	}
}
