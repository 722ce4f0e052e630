package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/shopspring/decimal"
)

// marker is in every secret of these tests; no output may contain it.
const marker = "d34db33f"

const (
	markedSecret  = "SECRET-" + marker
	markedKey     = "KEY-" + marker
	markedToken   = "TOKEN-" + marker
	markedHookKey = "HOOK-" + marker
)

// secretsEnv is a simulated exchange whose key pair carries the marker, a
// notification endpoint that always fails, and a config using both.
type secretsEnv struct {
	ex      *sim.Exchange
	url     string
	hookURL string
	hooks   atomic.Int64
	// closeHook takes the notification endpoint away.
	closeHook func()
	dir       string
	config    string
}

func newSecretsEnv(t *testing.T, engineYAML string) *secretsEnv {
	t.Helper()
	ex, err := sim.New(sim.Config{Key: markedKey, Secret: markedSecret, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ex)
	t.Cleanup(srv.Close)
	s := &secretsEnv{ex: ex, url: srv.URL, dir: t.TempDir()}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hooks.Add(1)
		http.Error(w, "upstream exploded", http.StatusInternalServerError)
	}))
	t.Cleanup(hook.Close)
	s.closeHook = hook.Close
	s.hookURL = hook.URL
	s.config = filepath.Join(s.dir, "riskguard.yaml")
	body := fmt.Sprintf(`exchange:
  base_url: %s
  timeout: 250ms
  max_retries: 1
engine:
  interval: 100ms
  audit_log: %s
  state_file: %s
  listen: 127.0.0.1:0
  max_actions_per_minute: 1
%s
notify:
  channels:
    team: {type: slack, webhook_url_env: SLACK_WEBHOOK}
    pager: {type: webhook, url_env: PAGER_URL, headers: {Authorization_env: PAGER_AUTH}}
  max_attempts: 2
  group_wait: 10ms
  heartbeat_url_env: HEARTBEAT_URL
rules:
%s%s`, s.url, filepath.Join(s.dir, "audit.jsonl"), filepath.Join(s.dir, "state.json"), engineYAML, overMaxRule, nearLiqRule)
	if err := os.WriteFile(s.config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

// environ is the process environment with every secret carrying the
// marker: the API pair, webhook URLs with tokens in their paths and
// queries, an Authorization header.
func (s *secretsEnv) environ(secret string) []string {
	return append(os.Environ(),
		"RISKGUARD_API_KEY="+markedKey,
		"RISKGUARD_API_SECRET="+secret,
		"SLACK_WEBHOOK="+s.hookURL+"/services/T0/B0/"+markedToken,
		"PAGER_URL="+s.hookURL+"/hook?token="+markedToken,
		"PAGER_AUTH=Bearer "+markedHookKey,
		"HEARTBEAT_URL="+s.hookURL+"/ping/"+markedToken,
	)
}

// checkClean fails the test when an output holds the marker.
func checkClean(t *testing.T, what, out string) {
	t.Helper()
	if i := strings.Index(out, marker); i >= 0 {
		lo, hi := max(i-200, 0), min(i+100, len(out))
		t.Errorf("%s reveals a secret: …%s…", what, out[lo:hi])
	}
}

// The real daemon through its failure paths with secrets that carry a
// marker: actions, the breaker, 5xx, timeouts, a rejected reload,
// notification channels that fail, /metrics and /healthz, SIGTERM. Then
// one tick with a wrong secret (signature rejected) in text format. No
// log line, audit line, state file, metrics page or error shows a secret.
func TestBinarySecretsNeverShown(t *testing.T) {
	t.Parallel()
	bin := testBinary(t)
	s := newSecretsEnv(t, "")
	s.ex.SetBalance(decimal.Zero)
	p, _ := s.ex.Position("XBTC")
	s.ex.SetIndexPrice("BTC", p.LiquidationPrice.Div(decimal.RequireFromString("0.97")).Round(1))

	cmd := exec.Command(bin, "run", "--config", s.config, "--log-format", "json")
	cmd.Env = s.environ(markedSecret)
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	addr, logs := listenAddr(t, pr, 20*time.Second)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs.String())
		}
	})
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Errorf("metrics listener on %s, want loopback", addr)
	}
	has := func(s string) func() bool { return func() bool { return strings.Contains(logs.String(), s) } }
	// The breaker (one action a minute, three due) and failed notifications.
	waitFor(t, "the breaker to open", 20*time.Second, has("circuit breaker OPEN"))
	waitFor(t, "a notification given up on each channel", 30*time.Second, func() bool {
		return has(`"msg":"notification not delivered","channel":"team"`)() && has(`"msg":"notification not delivered","channel":"pager"`)()
	})
	// 5xx, then timeouts.
	s.ex.InjectFault("/v1/contracts/positions", sim.Fault{Status: 503})
	waitFor(t, "a 5xx tick failure", 20*time.Second, has("SERVICE_UNAVAILABLE"))
	s.ex.InjectFault("/v1/contracts/positions", sim.Fault{Latency: time.Second})
	waitFor(t, "a timeout", 20*time.Second, has("no complete answer within 250ms"))
	s.ex.ClearFaults()
	// A reload that fails; the bad file holds a secret too (on a line of
	// its own: see TestConfigErrorsHideSecrets for a secret on the bad line).
	bad := "exchange:\n  base_url: " + s.url + "\n  api_secret: " + markedSecret + "\n  timeout: forever\nrules: [\n"
	if err := os.WriteFile(s.config, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reload to be rejected", 20*time.Second, has("config reload rejected"))
	// The notification endpoint goes away: transport errors name the URL
	// unless it is redacted.
	s.closeHook()
	waitFor(t, "a refused notification", 30*time.Second, has("connection refused"))

	get := func(path string) string {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	metrics := get("/metrics")
	if !strings.Contains(metrics, "riskguard_ticks_total") {
		t.Errorf("/metrics does not look like the guard's:\n%.500s", metrics)
	}
	checkClean(t, "/metrics", metrics)
	checkClean(t, "/healthz", get("/healthz"))

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- cmd.Wait() }()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no exit within 20s of SIGTERM")
	}
	pw.Close()
	if s.hooks.Load() == 0 {
		t.Error("no notification was attempted")
	}
	checkClean(t, "the JSON log", logs.String())

	// A wrong secret: every signed call is refused; text logs this time.
	good := fmt.Sprintf("exchange:\n  base_url: %s\nengine:\n  audit_log: %s\n  state_file: %s\nrules:\n%s",
		s.url, filepath.Join(s.dir, "audit.jsonl"), filepath.Join(s.dir, "state.json"), overMaxRule)
	if err := os.WriteFile(s.config, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	once := exec.Command(bin, "run", "--config", s.config, "--once", "--log-format", "text", "--log-level", "debug")
	once.Env = s.environ(markedSecret + "-wrong")
	out, err := once.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "SIGNATURE_INVALID") {
		t.Errorf("--once with a wrong secret: %v, want a failure naming SIGNATURE_INVALID\n%s", err, out)
	}
	checkClean(t, "the text log of a rejected signature", string(out))

	for _, name := range []string{"audit.jsonl", "state.json"} {
		b, err := os.ReadFile(filepath.Join(s.dir, name))
		if err != nil {
			t.Fatal(err)
		}
		checkClean(t, name, string(b))
	}
}

// check warns when the config holds secrets and when such a file is
// readable by others; the warnings do not repeat the secrets.
func TestCheckWarnsAboutSecrets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return path
	}
	base := "exchange:\n  base_url: https://api.example.com\n"
	cases := []struct {
		name, body string
		mode       os.FileMode
		want       []string
		not        []string
	}{
		{"secret in the YAML, readable by others", base + "  api_key: " + markedKey + "\n  api_secret: " + markedSecret + "\nrules: []\n", 0o644,
			[]string{"exchange.api_secret is set in the config file", "readable by other users (mode 0644): chmod 600 it"}, nil},
		{"secret in the YAML, private file", base + "  api_key: " + markedKey + "\n  api_secret: " + markedSecret + "\nrules: []\n", 0o600,
			[]string{"exchange.api_secret is set in the config file"}, []string{"readable by other users"}},
		{"notification token in the YAML", base + "notify:\n  channels:\n    team: {type: slack, webhook_url: \"https://hooks.slack.com/services/T0/B0/" + markedToken + "\"}\nrules: []\n", 0o600,
			[]string{"webhook_url: a secret written in the configuration file"}, nil},
		{"secrets from the environment", base + "rules: []\n", 0o644, nil, []string{"warning"}},
		{"metrics beyond loopback", base + "engine:\n  listen: 0.0.0.0:9464\nrules: []\n", 0o600,
			[]string{"engine.listen 0.0.0.0:9464 serves metrics beyond this machine, and the status page and control API with them"}, nil},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := write(fmt.Sprintf("c%d.yaml", i), tc.body, tc.mode)
			var stdout, stderr lockedBuffer
			m := &Main{Stdout: &stdout, Stderr: &stderr}
			if err := m.Run(context.Background(), []string{"check", "--config", path}); err != nil {
				t.Fatalf("check: %v\n%s", err, stderr.String())
			}
			out := stdout.String() + stderr.String()
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("check output lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(out, w) {
					t.Errorf("check output has %q:\n%s", w, out)
				}
			}
			checkClean(t, "check", out)
		})
	}
}

// /metrics and /healthz are off unless engine.listen is set, and the
// example configuration binds them to loopback.
func TestMetricsListenLoopbackByDefault(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(path, []byte("exchange:\n  base_url: https://api.example.com\nrules: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(path, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "" {
		t.Errorf("default engine.listen = %q, want off", cfg.Listen)
	}
	ex, err := loadConfig(filepath.Join("..", "..", "rules.example.yaml"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	host, _, err := net.SplitHostPort(ex.Listen)
	if err != nil || !(host == "localhost" || net.ParseIP(host).IsLoopback()) {
		t.Errorf("rules.example.yaml engine.listen = %q, want a loopback address", ex.Listen)
	}
	for _, w := range ex.Warnings {
		if strings.Contains(w, "beyond this machine") {
			t.Errorf("the example warns: %s", w)
		}
	}
}

// A configuration error never quotes a secret, whatever is wrong with the
// line that holds it.
func TestConfigErrorsHideSecrets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i, body := range []string{
		"exchange:\n  base_url: https://api.example.com\n  api_secret: \"" + markedSecret + "\nrules: []\n",
		"exchange:\n  base_url: https://api.example.com\n  api_secret: [" + markedSecret + "]\nrules: []\n",
		"exchange:\n  base_url: https://api.example.com\n  api_secret: {" + markedSecret + ": 1}\nrules: []\n",
		"exchange:\n  base_url: https://api.example.com\nnotify:\n  channels:\n    team: {type: slack, webhook_url: [" + markedToken + "]}\nrules: []\n",
	} {
		path := filepath.Join(dir, fmt.Sprintf("c%d.yaml", i))
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr lockedBuffer
		m := &Main{Stdout: &stdout, Stderr: &stderr}
		if err := m.Run(context.Background(), []string{"check", "--config", path}); err == nil {
			t.Errorf("check accepted %q", body)
		}
		checkClean(t, "check of a broken file", stdout.String()+stderr.String())
	}
}
