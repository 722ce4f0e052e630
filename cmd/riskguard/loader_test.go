package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Every command that loads the configuration gives the same guarantees: a
// notify action naming an undefined channel, or a broken message template,
// is refused by check, by run --once and by a reload alike, with the same
// positioned line.
func TestEveryCommandRefusesWhatCheckRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, notify, rule, want string
	}{
		{
			name:   "undefined channel",
			notify: "notify:\n  channels:\n    ops: {type: log}\n",
			rule:   "  - name: r1\n    when: position.leverage > 1000\n    actions:\n      - action: notify\n        channels: [opz]\n",
			want:   `:16:20: rule "r1": notify channel "opz" is not defined under notify.channels (did you mean "ops"?)`,
		},
		{
			name: "template field typo",
			rule: "  - name: r1\n    when: position.leverage > 1000\n    message: \"{{.Symbol}} at {{pct .Distnce}}\"\n",
			want: `:11:14: rule "r1": message template line 1, column 21: unknown field .Distnce (did you mean .Distance?)`,
		},
		{
			// Accepted once by check, then a fatal out-of-memory on the
			// first tick (issue 12, item 13).
			name: "rule whose cost is unbounded",
			rule: "  - name: r1\n    when: 'len(reduce(1..40, #acc + #acc, \"ab\")) > 0'\n",
			want: `:10:11: rule "r1": when: reduce() is not allowed in a rule: its cost grows with its arguments, and a rule must not be able to exhaust the guard`,
		},
		{
			name: "template syntax",
			rule: "  - name: r1\n    when: position.leverage > 1000\n    message: \"{{.Symbol\"\n",
			want: `:11:14: rule "r1": message template line 1: unclosed action`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := newGuardEnv(t, "", overMaxRule)
			good, err := os.ReadFile(g.config)
			if err != nil {
				t.Fatal(err)
			}
			writeBad := func() {
				g.writeConfig("", tt.rule)
				if tt.notify != "" {
					body, _ := os.ReadFile(g.config)
					// notify goes before rules, after the engine section.
					s := strings.Replace(string(body), "\nrules:\n", "\n"+tt.notify+"rules:\n", 1)
					if err := os.WriteFile(g.config, []byte(s), 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			writeBad()
			want := g.config + tt.want

			code, _, stderr := runOut(t, context.Background(), g.env, "check", "--config", g.config)
			if code != 1 || !strings.Contains(stderr, want+"\n") {
				t.Errorf("check: exit %d, stderr:\n%s\nwant the line %q", code, stderr, want)
			}
			code, stderr = g.once()
			if code != 1 || !strings.Contains(stderr, want+"\n") {
				t.Errorf("run --once: exit %d, stderr:\n%s\nwant the line %q", code, stderr, want)
			}
			if n := len(g.mutating()); n != 0 {
				t.Errorf("run --once with a refused config sent %d mutating calls", n)
			}

			// A running daemon refuses the same file on reload and keeps
			// its rules.
			if err := os.WriteFile(g.config, good, 0o600); err != nil {
				t.Fatal(err)
			}
			dm := g.start(nil)
			defer dm.stop(t)
			waitFor(t, "the start", 10*time.Second, func() bool { return strings.Contains(dm.logs.String(), "riskguard started") })
			writeBad()
			dm.reload <- nil
			waitFor(t, "the reload to be rejected", 10*time.Second, func() bool {
				return strings.Contains(dm.logs.String(), "config reload rejected")
			})
			logs := dm.logs
			// The JSON log escapes quotes; compare the unquoted message.
			wantJSON := strings.ReplaceAll(want, `"`, `\"`)
			if !strings.Contains(logs.String(), wantJSON) {
				t.Errorf("the rejected reload does not say why (%q):\n%s", wantJSON, logs.String())
			}
		})
	}
}

// One check run reports every mistake of the file, sorted, in one format:
// an unknown key does not hide a bad value, and the notify errors come
// with the others.
func TestCheckReportsEveryMistakeInOnePass(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, `exchange:
  base_url: api.example.com
  timeuot: 5s
engine:
  interval: -2s
notify:
  channels:
    ops: {type: log}
    team: {type: slack}
rules:
  - name: r1
    when: position.leverage > 10
    actions:
      - action: notify
        channels: [pager]
`)
	code, stdout, stderr := runOut(t, context.Background(), envMap(nil), "check", "--config", path)
	if code != 1 || stdout != "" {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
	want := []string{
		path + `:2:13: exchange.base_url: "api.example.com" is not an http(s) URL like https://api.example.com`,
		path + `:3:3: unknown key "exchange.timeuot" (did you mean "exchange.timeout"?)`,
		path + `:5:13: engine.interval: must not be negative, got -2s`,
		path + `:9:11: notify.channels.team.webhook_url: required (or webhook_url_env naming an environment variable)`,
		path + `:15:20: rule "r1": notify channel "pager" is not defined under notify.channels (defined: ops, team)`,
		path + `: 5 errors`,
	}
	got := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("stderr:\n%s\nwant:\n%s", stderr, strings.Join(want, "\n"))
	}
}

// check runs where the notification secrets are not set: it says what run
// will need. run refuses to start without them, pointing at the key.
func TestCheckNeedsNoNotificationSecrets(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "", overMaxRule)
	body, err := os.ReadFile(g.config)
	if err != nil {
		t.Fatal(err)
	}
	withNotify := strings.Replace(string(body), "\nrules:\n", "\nnotify:\n  channels:\n    ops: {type: telegram, token_env: TG_TOKEN_UNSET, chat_id: \"123\"}\nrules:\n", 1)
	if err := os.WriteFile(g.config, []byte(withNotify), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runOut(t, context.Background(), envMap(nil), "check", "--config", g.config)
	if code != 0 {
		t.Fatalf("check without the secret: exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stdout, "warning: notify.channels.ops.token_env: environment variable TG_TOKEN_UNSET is unset or empty (needed by run, demo and notify test)") {
		t.Errorf("check does not say the secret is missing:\n%s", stdout)
	}
	code, stderr = g.once()
	want := fmt.Sprintf("%s:10:38: notify.channels.ops.token_env: environment variable TG_TOKEN_UNSET is unset or empty", g.config)
	if code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("run --once without the secret: exit %d\n%s\nwant %q", code, stderr, want)
	}
}

// /healthz and /metrics answer while a tick's read is held by the
// exchange: no lock they take is held across the network.
func TestHealthAnswersWhileAReadHangs(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "", overMaxRule)
	var holding atomic.Bool
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if holding.Load() && r.URL.Path == "/v1/contracts/positions" {
			select {
			case entered <- struct{}{}:
			default:
			}
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		g.ex.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	g.url = srv.URL
	g.writeConfig("  listen: 127.0.0.1:0\n", overMaxRule)

	addr, _, stop := g.serve()
	client := &http.Client{Timeout: 5 * time.Second}
	get := func(path string) (int, time.Duration) {
		began := time.Now()
		resp, err := client.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s while a read hangs: %v", path, err)
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, time.Since(began)
	}
	waitFor(t, "a healthy tick", 10*time.Second, func() bool { code, _ := get("/healthz"); return code == 200 })

	holding.Store(true)
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no positions read reached the exchange")
	}
	// The read is held now (for up to exchange.timeout, 10 s, per attempt).
	var worst time.Duration
	for range 5 {
		for _, path := range []string{"/healthz", "/metrics"} {
			code, took := get(path)
			if code != 200 {
				t.Errorf("GET %s = %d during a held read within the health window", path, code)
			}
			worst = max(worst, took)
		}
	}
	// Before the read left the lock, these waited for the whole held read
	// (seconds); the bound is loose for a loaded -race run.
	if worst > time.Second {
		t.Errorf("slowest answer during a held read: %s", worst)
	}
	t.Logf("slowest /healthz or /metrics answer during a held read: %s", worst)
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
}

// Credentials in the base URL are refused, and not echoed.
func TestBaseURLWithUserinfoRefused(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, "exchange:\n  base_url: https://alice:s3cretXYZ@api.example.com\n"+minimalRules)
	code, _, stderr := runOut(t, context.Background(), envMap(nil), "check", "--config", path)
	if code != 1 || !strings.Contains(stderr, path+":2:13: exchange.base_url: carries credentials (user@host)") || strings.Contains(stderr, "s3cretXYZ") {
		t.Errorf("exit %d\n%s", code, stderr)
	}
}
