package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Every control command with no daemon at its address says to start one
// or to pass --addr, and keeps the raw error after it (issue 40, item 1).
func TestControlCommandsWithoutADaemonSayTheNextStep(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	addr := closedPort(t)
	cfg := filepath.Join(dir, "riskguard.yaml")
	b, err := os.ReadFile("../../rules.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The config's engine.listen, where nothing listens: as a newcomer
	// who never started run.
	b = bytes.Replace(b, []byte("listen: 127.0.0.1:9464"), []byte("listen: "+addr), 1)
	if !bytes.Contains(b, []byte("listen: "+addr)) {
		t.Fatal("rules.example.yaml has no listen: 127.0.0.1:9464")
	}
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"status"},
		{"status", "--json"},
		{"ack", "--liquidation", "XSOL"},
		{"ack", "--rule", "r", "--symbol", "XSOL"},
		{"pause"},
		{"pause", "list"},
		{"resume"},
		{"silence", "add", "--rule", "r"},
		{"silence", "list"},
		{"silence", "expire", "--by", "me", "abc"}, // the ID last
	} {
		for _, how := range []string{"config", "addr"} {
			flags := []string{"--config", cfg}
			if how == "addr" {
				flags = append(flags, "--addr", addr)
			}
			full := slices.Insert(slices.Clone(args), min(len(args), 2), flags...)
			if args[1:] == nil || args[0] != "silence" && args[0] != "pause" {
				full = append(slices.Clone(args), flags...)
			}
			code, stdout, stderr := runOut(t, context.Background(), envMap(nil), full...)
			name := strings.Join(args, " ") + " (" + how + ")"
			if code != 1 {
				t.Errorf("%s: exit %d, want 1\n%s%s", name, code, stdout, stderr)
			}
			for _, want := range []string{
				"nothing listens at ", addr, "start `riskguard run`, or pass --addr HOST:PORT",
				"connection refused", // the raw error, after the step
			} {
				if !strings.Contains(stderr, want) {
					t.Errorf("%s: lacks %q:\n%s", name, want, stderr)
				}
			}
			if i, j := strings.Index(stderr, "start `riskguard run`"), strings.Index(stderr, "connection refused"); i > j {
				t.Errorf("%s: the step is not before the raw error:\n%s", name, stderr)
			}
		}
	}
}

// ack without the control token (or with a wrong one) says where the
// CLI reads it from (issue 40, item 3).
func TestControlUnauthorizedNamesTheTokenVariable(t *testing.T) {
	t.Parallel()
	g := newControlEnv(t, overMaxRule, "")
	addr, _, stop := g.serve()
	defer stop()
	for _, tc := range []struct {
		name, env, want string
	}{
		{"no token", "", "this command sent no token: export RISKGUARD_CONTROL_TOKEN"},
		{"a wrong token", "guess", "the token from RISKGUARD_CONTROL_TOKEN is not the daemon's: export RISKGUARD_CONTROL_TOKEN"},
	} {
		// --config of a file without the token: as a newcomer's own.
		other := filepath.Join(t.TempDir(), "riskguard.yaml")
		if err := os.WriteFile(other, []byte("exchange:\n  base_url: "+g.url+"\nrules: []\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		env := map[string]string{}
		if tc.env != "" {
			env["RISKGUARD_CONTROL_TOKEN"] = tc.env
		}
		code, _, stderr := runOut(t, context.Background(), envMap(env), "ack", "--liquidation", "XSOL", "--addr", addr, "--config", other)
		if code != 1 || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "401 Unauthorized: missing or wrong bearer token") {
			t.Errorf("%s: exit %d\n%s", tc.name, code, stderr)
		}
	}
}

// check --exchange says the next step for every way of not reaching the
// exchange, as run does, and keeps the raw error (issue 40, item 2).
func TestCheckExchangeSaysTheNextStep(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "", overMaxRule)
	tlsSrv := httptest.NewTLSServer(g.ex)
	t.Cleanup(tlsSrv.Close)
	for _, tc := range []struct {
		name, url string
		want      []string
	}{
		{"https:// against plain HTTP", strings.Replace(g.url, "http://", "https://", 1),
			[]string{"the exchange answers plain HTTP at that address: write http:// in the --exchange URL", "server gave HTTP response to HTTPS client"}},
		{"http:// against TLS", strings.Replace(tlsSrv.URL, "https://", "http://", 1),
			[]string{"the exchange answers HTTPS at that address: write https:// in the --exchange URL"}},
		{"nothing listening", "http://" + closedPort(t),
			[]string{"nothing listens at the --exchange URL", "riskguard sim serves the simulated exchange at http://127.0.0.1:8790", "connection refused"}},
		{"an untrusted certificate", tlsSrv.URL,
			[]string{"the exchange's TLS certificate is not trusted: check the --exchange URL", "certificate"}},
	} {
		code, _, stderr := runOut(t, context.Background(), envMap(nil), "check", "--config", g.config, "--exchange", tc.url)
		if code != 1 {
			t.Errorf("%s: exit %d\n%s", tc.name, code, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: lacks %q:\n%s", tc.name, w, stderr)
			}
		}
	}
	// With credentials, the account's read says it too.
	env := envMap(map[string]string{"RISKGUARD_API_KEY": "demo-key", "RISKGUARD_API_SECRET": "wrong"})
	code, _, stderr := runOut(t, context.Background(), env, "check", "--config", g.config, "--exchange", g.url)
	if code != 1 || !strings.Contains(stderr, "the exchange refused the credentials: check RISKGUARD_API_KEY and RISKGUARD_API_SECRET") {
		t.Errorf("a wrong secret: exit %d\n%s", code, stderr)
	}
}

// A webhook whose scheme is not the receiver's says which to write, and
// shows the URL's scheme, host and port but not its secret path (issue
// 40, item 4); a scheme mismatch is not retried.
func TestNotifyWebhookSchemeMismatchSaysTheScheme(t *testing.T) {
	t.Parallel()
	plain := newHookServer(t, "")
	tlsHook := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(tlsHook.Close)
	for _, tc := range []struct {
		name, url, want, host string
	}{
		{"https:// to plain HTTP", strings.Replace(plain.srv.URL, "http://", "https://", 1) + "/T0/SECRETPATH?key=SECRETQUERY",
			"channel hook answers plain HTTP at that address: write http:// in notify.channels.hook.url", strings.Replace(plain.srv.URL, "http://", "https://", 1)},
		{"http:// to TLS", strings.Replace(tlsHook.URL, "https://", "http://", 1) + "/T0/SECRETPATH?key=SECRETQUERY",
			"channel hook answers HTTPS at that address: write https:// in notify.channels.hook.url", strings.Replace(tlsHook.URL, "https://", "http://", 1)},
		{"nothing listening", "http://" + closedPort(t) + "/T0/SECRETPATH",
			"nothing listens at notify.channels.hook.url", ""},
	} {
		g := newGuardEnv(t, "", overMaxRule+"notify:\n  channels:\n    hook: {type: webhook, url: \""+tc.url+"\"}\n")
		code, stdout, stderr := runOut(t, context.Background(), g.env, "notify", "test", "--config", g.config)
		out := stdout + stderr
		if code != 1 || !strings.Contains(out, tc.want) {
			t.Errorf("%s: exit %d, want 1 and %q:\n%s", tc.name, code, tc.want, out)
		}
		if strings.Contains(tc.name, "://") && !strings.Contains(out, "attempts=1 ") {
			t.Errorf("%s: a scheme mismatch was tried again (it cannot change):\n%s", tc.name, out)
		}
		if strings.Contains(out, "SECRET") {
			t.Errorf("%s: a secret part of the URL is shown:\n%s", tc.name, out)
		}
		if strings.HasPrefix(tc.name, "https://") && !strings.Contains(out, tc.host+"/REDACTED") {
			t.Errorf("%s: the URL's scheme, host and port are not shown (%s/REDACTED):\n%s", tc.name, tc.host, out)
		}
	}
	if n := len(plain.received()); n != 0 {
		t.Errorf("the plain receiver got %d messages", n)
	}
}
