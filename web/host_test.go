package web_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/web"
)

// A request naming a host the server does not answer to (a page's own
// name resolving to 127.0.0.1: DNS rebinding) is refused with 421 and a
// short plain body on every route, from loopback, with the token or not;
// the loopback names and addresses and the allowed hosts are served on
// every route, and any IP address on /metrics and /healthz (probes).
func TestHostsAnswered(t *testing.T) {
	t.Parallel()
	g := &fakeGuard{last: t0.Add(-time.Second), status: demoStatus(t0)}
	srv, err := web.New(web.Options{Guard: g, Controls: &fakeControls{},
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("riskguard_up 1\n")) }),
		Token:   testToken, AllowedHosts: []string{"Guard.Example.org", "192.0.2.7", "::2"}, HealthMaxAge: 10 * time.Second,
		Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	routes := []struct{ method, path, body string }{
		{"GET", "/", ""}, {"GET", "/api/v1/status", ""}, {"GET", "/api/v1/silences", ""}, {"GET", "/api/v1/pauses", ""},
		{"GET", "/metrics", ""}, {"GET", "/healthz", ""},
		{"POST", "/api/v1/pause", `{"createdBy":"eve","duration":"1h"}`}, {"GET", "/nowhere", ""},
	}
	for _, tc := range []struct {
		host   string
		served func(path string) bool
	}{
		{"rebind.test", nil},
		{"rebind.test:9464", nil},
		{"localhost.rebind.test:9464", nil},
		{"127.0.0.1.rebind.test", nil},
		{"guard.example.org.evil.test", nil},
		{"localhost:9464", func(string) bool { return true }},
		{"LocalHost", func(string) bool { return true }},
		{"localhost.:9464", func(string) bool { return true }},
		{"127.0.0.1:9464", func(string) bool { return true }},
		{"127.0.0.2", func(string) bool { return true }},
		{"[::1]:9464", func(string) bool { return true }},
		{"[::1]", func(string) bool { return true }},
		{"guard.example.org:443", func(string) bool { return true }},
		{"GUARD.example.org.", func(string) bool { return true }},
		{"192.0.2.7:9464", func(string) bool { return true }},
		{"[::2]:9464", func(string) bool { return true }},
		{"0.0.0.0:9464", func(string) bool { return true }},
		{"[::]:9464", func(string) bool { return true }},
		{":9464", func(string) bool { return true }},
		// An address cannot be DNS-rebound: the daemon's own address on
		// the LAN, with the right token, is answered (issue 32, item 6);
		// the token still guards the control API.
		{"10.1.2.3:9464", func(string) bool { return true }},
		{"[2001:db8::1]:9464", func(string) bool { return true }},
	} {
		for _, rt := range routes {
			req := httptest.NewRequest(rt.method, rt.path, strings.NewReader(rt.body))
			req.RemoteAddr, req.Host = loopback, tc.host
			req.Header.Set("Authorization", "Bearer "+testToken)
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			name := fmt.Sprintf("%s %s with Host %s", rt.method, rt.path, tc.host)
			if tc.served != nil && tc.served(rt.path) {
				if rec.Code == http.StatusMisdirectedRequest {
					t.Errorf("%s = 421, want it served", name)
				}
				continue
			}
			body := rec.Body.String()
			if rec.Code != http.StatusMisdirectedRequest || !strings.HasPrefix(body, "misdirected request") || len(body) > 200 ||
				!strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain") {
				t.Errorf("%s = %d %q, want 421 and a short plain body", name, rec.Code, body)
			}
			for _, leak := range []string{"XBTC", "riskguard_up", "ok:", "grace@desk"} {
				if strings.Contains(body, leak) {
					t.Errorf("%s leaks %q", name, leak)
				}
			}
		}
	}
}
