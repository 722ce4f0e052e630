package main

import (
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riskguard/riskguard/internal/golden"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// checkGoldenAt compares got with testdata/name, or rewrites it with
// -update.
func checkGoldenAt(t *testing.T, name, got string) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), got, *update)
}

// hookServer stands in for a Slack incoming webhook or a generic JSON
// webhook and keeps the bodies it received.
type hookServer struct {
	mu     sync.Mutex
	bodies []string
	srv    *httptest.Server
}

func newHookServer(t *testing.T, answer string) *hookServer {
	h := &hookServer{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.bodies = append(h.bodies, string(b))
		h.mu.Unlock()
		io.WriteString(w, answer)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookServer) received() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.bodies...)
}

// An action in the simulated exchange reaches every channel exactly once,
// with the text the engine wrote, through the real dispatcher.
func TestRunNotifiesEveryChannelOnce(t *testing.T) {
	t.Parallel()
	slack := newHookServer(t, "ok")
	hook := newHookServer(t, "")
	notifyYAML := "notify:\n  channels:\n    team: {type: slack, webhook_url: " + slack.srv.URL + "/services/T/B/X}\n" +
		"    pager: {type: webhook, url: " + hook.srv.URL + "/hook}\n  default: [team, pager]\n  group_wait: 0s\n"
	g := newGuardEnv(t, "", overMaxRule+notifyYAML)
	code, stderr := g.once()
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	count := func(bodies []string, s string) int {
		n := 0
		for _, b := range bodies {
			if strings.Contains(b, s) {
				n++
			}
		}
		return n
	}
	for name, h := range map[string]*hookServer{"slack": slack, "webhook": hook} {
		got := h.received()
		if n := count(got, "lower_leverage XSOL 15→10"); n != 1 {
			t.Errorf("%s: %d messages about the action, want 1: %q", name, n, got)
		}
		if n := count(got, "over-max-leverage firing on XSOL"); n != 1 {
			t.Errorf("%s: %d firing messages, want 1: %q", name, n, got)
		}
		if len(got) != 2 {
			t.Errorf("%s: %d messages, want 2 (firing, action): %q", name, len(got), got)
		}
	}
	// What the trader reads on Slack, in order.
	checkGoldenAt(t, "notify_slack.golden", strings.Join(slack.received(), "\n")+"\n")
	var msg struct{ Kind, Symbol, Action string }
	for _, b := range hook.received() {
		if err := json.Unmarshal([]byte(b), &msg); err != nil {
			t.Fatalf("webhook body %q: %v", b, err)
		}
		if msg.Kind == "action" && (msg.Symbol != "XSOL" || msg.Action != "lower_leverage") {
			t.Errorf("webhook action message = %+v", msg)
		}
	}
}

// Issue 32: group_wait held the first message of every group, so "XSOL 1%
// from liquidation" reached the phone 30 s after the guard knew. Through
// the daemon with group_wait 30s, the start message and then the critical
// rule's message each reach the webhook within seconds of their cause,
// while the daemon runs (not at group_wait's end, nor in the flush at
// shutdown).
func TestRunCriticalNotificationNotHeldByGroupWait(t *testing.T) {
	t.Parallel()
	hook := newHookServer(t, "")
	const rule = `
  - name: near-liquidation
    when: liquidationDistance < 0.02
    symbols: [XSOL]
    severity: critical
    actions:
      - action: notify
`
	g := newGuardEnv(t, "", rule+"notify:\n  channels:\n    pager: {type: webhook, url: "+hook.srv.URL+"/hook}\n  group_wait: 30s\n")
	arrived := func(what string) func() bool {
		return func() bool {
			for _, b := range hook.received() {
				if strings.Contains(b, what) {
					return true
				}
			}
			return false
		}
	}
	// waitFor polls every 20 ms up to its bound; the bound is what is
	// asserted: a few seconds, against a group_wait of 30.
	const within = 5 * time.Second
	start := time.Now()
	d := g.start(nil)
	waitFor(t, "the start message, first of its group", within, arrived("riskguard started"))
	t.Logf("start message after %s", time.Since(start).Round(time.Millisecond))
	if arrived("near-liquidation on XSOL")() {
		t.Fatal("scenario changed: the rule fired before the price moved (XSOL starts 3.4% from liquidation)")
	}
	g.putNearLiquidation("XSOL", "SOL", 0.01)
	moved := time.Now()
	// The rule's notify action says its firing (the transition itself is
	// then quiet): "[critical] near-liquidation on XSOL: … distance 1.00% …".
	waitFor(t, "the critical message", within, arrived("[critical] near-liquidation on XSOL"))
	t.Logf("critical message after %s (group_wait 30s)", time.Since(moved).Round(time.Millisecond))
	d.running(t)
	var msg struct{ Kind, Severity, Symbol string }
	for _, b := range hook.received() {
		if strings.Contains(b, "[critical] near-liquidation on XSOL") {
			if err := json.Unmarshal([]byte(b), &msg); err != nil {
				t.Fatalf("webhook body %q: %v", b, err)
			}
		}
	}
	if msg.Kind != "rule" || msg.Severity != "critical" || msg.Symbol != "XSOL" {
		t.Errorf("critical message = %+v", msg)
	}
	if code := d.stop(t); code != 0 {
		t.Errorf("exit %d", code)
	}
}

func TestNotifyTestCommand(t *testing.T) {
	t.Parallel()
	hook := newHookServer(t, "")
	notifyYAML := "notify:\n  channels:\n    pager: {type: webhook, url: " + hook.srv.URL + "/hook}\n"
	g := newGuardEnv(t, "", overMaxRule+notifyYAML)
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantMsgs int
	}{
		{"every channel", nil, 0, 1},
		{"one channel", []string{"--channel", "pager"}, 0, 2},
		{"unknown channel", []string{"--channel", "nope"}, 1, 2},
	}
	for _, tt := range tests { // in order: the server counts across cases
		code, stderr := g.run(t.Context(), append([]string{"notify", "test", "--config", g.config}, tt.args...)...)
		if code != tt.wantCode {
			t.Errorf("%s: exit %d, want %d\n%s", tt.name, code, tt.wantCode, stderr)
		}
		if n := len(hook.received()); n != tt.wantMsgs {
			t.Errorf("%s: %d test messages received, want %d", tt.name, n, tt.wantMsgs)
		}
	}
	if code, _ := g.run(t.Context(), "notify"); code != 2 {
		t.Errorf("notify without test: exit %d, want 2", code)
	}
}

// check warns when a notification secret is written in a file others can
// read, as it does for the exchange's credentials.
func TestCheckWarnsReadableNotifySecret(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "", overMaxRule+"notify:\n  channels:\n    team: {type: slack, webhook_url: https://hooks.example/T/B/X}\n")
	if err := os.Chmod(g.config, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr lockedBuffer
	m := &Main{Stdout: &stdout, Stderr: &stderr, Getenv: g.env}
	if err := m.Run(t.Context(), []string{"check", "--config", g.config}); err != nil {
		t.Fatalf("check: %v\n%s", err, stderr.String())
	}
	out := stdout.String()
	if !strings.Contains(out, "holds notification secrets but is readable by other users (mode 0644)") {
		t.Errorf("no readable-file warning:\n%s", out)
	}
	if strings.Contains(out+stderr.String(), "hooks.example/T/B/X") {
		t.Error("check printed the webhook URL")
	}
}

// A critical rule that fires, resolves and fires again within group_wait
// (30s): the re-fire reaches the webhook within seconds, not merged into
// the follow-up at the wait's end (issue 40, left over). For a rule whose
// firing is its transition, and for one whose notify action says it.
func TestRunCriticalRefireNotHeldByGroupWait(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, actions, says string }{
		{"transition", "", "near-liquidation firing on XSOL"},
		{"notify action", "    cooldown: 0s\n    actions:\n      - action: notify\n", "[critical] near-liquidation on XSOL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			hook := newHookServer(t, "")
			rule := "\n  - name: near-liquidation\n    when: liquidationDistance < 0.02\n    symbols: [XSOL]\n    severity: critical\n" + tc.actions
			g := newGuardEnv(t, "", rule+"notify:\n  channels:\n    pager: {type: webhook, url: "+hook.srv.URL+"/hook}\n  group_wait: 30s\n")
			count := func(what string) int {
				n := 0
				for _, b := range hook.received() {
					if strings.Contains(b, what) {
						n++
					}
				}
				return n
			}
			const within = 5 * time.Second // against a group_wait of 30
			d := g.start(nil)
			waitFor(t, "the start message", within, func() bool { return count("riskguard started") == 1 })
			g.putNearLiquidation("XSOL", "SOL", 0.01)
			waitFor(t, "the first firing", within, func() bool { return count(tc.says) == 1 })
			g.putNearLiquidation("XSOL", "SOL", 0.05) // resolved: merged, told at the wait's end
			waitFor(t, "the resolution in the engine", within, func() bool {
				return strings.Contains(d.logs.String(), "resolved")
			})
			g.putNearLiquidation("XSOL", "SOL", 0.01) // fires again
			refired := time.Now()
			waitFor(t, "the re-fire at the webhook", within, func() bool { return count(tc.says) == 2 })
			t.Logf("re-fire after %s (group_wait 30s)", time.Since(refired).Round(time.Millisecond))
			if code := d.stop(t); code != 0 {
				t.Errorf("exit %d", code)
			}
		})
	}
}
