package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/journal"
)

const testToken = "s3cret-control-token"

// newControlEnv is a guard listening on loopback with the control token in
// a file; extra is appended after the engine section (a notify section).
func newControlEnv(t *testing.T, rulesYAML, extra string) *guardEnv {
	t.Helper()
	g := newGuardEnv(t, "", rulesYAML)
	tok := filepath.Join(g.dir, "control.token")
	if err := os.WriteFile(tok, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g.writeConfig("  listen: 127.0.0.1:0\n  control_token_file: "+tok+"\n"+extra, rulesYAML)
	return g
}

// api calls the daemon's API with token ("" for none) and returns the
// status and body.
func api(t *testing.T, addr, method, path, token string, body any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://"+addr+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// ctl runs a control command of the CLI against addr, with the token read
// from the config's engine.control_token_file.
func (g *guardEnv) ctl(addr string, args ...string) (int, string, string) {
	g.t.Helper()
	var stdout, stderr bytes.Buffer
	m := &Main{Stdout: &stdout, Stderr: &stderr, Getenv: g.env}
	n := 1
	if args[0] == "silence" {
		n = 2
	}
	full := append(slices.Clone(args[:n]), "--addr", addr, "--config", g.config)
	err := m.Run(context.Background(), append(full, args[n:]...))
	code := 0
	if err != nil {
		code = 1
	}
	return code, stdout.String(), stderr.String()
}

func waitHealthy(t *testing.T, addr string) {
	t.Helper()
	waitFor(t, "a complete snapshot", 10*time.Second, func() bool {
		_, body := api(t, addr, "GET", "/api/v1/status", "", nil)
		return strings.Contains(body, `"healthy": true`)
	})
}

func (g *guardEnv) records(match func(journal.Record) bool) []journal.Record {
	var out []journal.Record
	for _, r := range g.auditLines() {
		if match(r) {
			out = append(out, r)
		}
	}
	return out
}

// A paused guard sends nothing and says what it would do (log, audit,
// metric); the pause survives a restart; resume, and it acts.
func TestControlPauseHoldsActionsUntilResumed(t *testing.T) {
	t.Parallel()
	g := newControlEnv(t, nearLiqXBTC, "")
	addr, logs, stop := g.serve()
	waitHealthy(t, addr)
	if code, out, errOut := g.ctl(addr, "pause", "--comment", "maintenance", "--by", "alice@desk"); code != 0 || !strings.Contains(out, "paused *") {
		t.Fatalf("pause: exit %d\n%s%s", code, out, errOut)
	}
	g.putNearLiquidation("XBTC", "BTC", 0.03)
	pausedOn := func() []journal.Record {
		return g.records(func(r journal.Record) bool { return r.Type == "action" && r.Phase == "paused" && r.Symbol == "XBTC" })
	}
	waitFor(t, "a paused action on XBTC", 10*time.Second, func() bool { return len(pausedOn()) >= 2 })
	if calls := g.mutating(); len(calls) != 0 {
		t.Fatalf("a paused guard sent %d mutating calls: %+v", len(calls), calls)
	}
	if r := pausedOn()[0]; !strings.Contains(r.Reason, "paused by alice@desk until resumed") {
		t.Errorf("paused record reason = %q", r.Reason)
	}
	if !strings.Contains(logs.String(), "would cancel_orders XBTC, paused") {
		t.Errorf("no 'would …, paused' log line:\n%s", logs.String())
	}
	if got := g.records(func(r journal.Record) bool { return r.Type == "pause" && r.To == "paused" && r.By == "alice@desk" }); len(got) != 1 {
		t.Errorf("pause audit records by alice@desk = %d, want 1", len(got))
	}
	_, metrics := api(t, addr, "GET", "/metrics", "", nil)
	for _, want := range []string{"riskguard_paused 1", `riskguard_actions_total{action="cancel_orders",result="paused"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// The rule does not start its cooldown: it tries every tick.
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	state, err := os.ReadFile(filepath.Join(g.dir, "state.json"))
	if err != nil || !strings.Contains(string(state), `"createdBy": "alice@desk"`) {
		t.Fatalf("the pause is not in the state file (%v):\n%s", err, state)
	}

	addr, _, stop = g.serve()
	before := len(pausedOn())
	waitFor(t, "a paused action after the restart", 10*time.Second, func() bool { return len(pausedOn()) > before })
	if _, body := api(t, addr, "GET", "/api/v1/pauses", "", nil); !strings.Contains(body, "alice@desk") {
		t.Errorf("the pause did not survive the restart: %s", body)
	}
	if calls := g.mutating(); len(calls) != 0 {
		t.Fatalf("sent %d calls after the restart while paused", len(calls))
	}
	if code, out, errOut := g.ctl(addr, "resume", "--by", "bob@desk"); code != 0 || !strings.Contains(out, "resumed") {
		t.Fatalf("resume: exit %d\n%s%s", code, out, errOut)
	}
	waitFor(t, "the actions after resume", 10*time.Second, func() bool { return len(g.mutatingOn("XBTC")) >= 1 })
	if got := g.records(func(r journal.Record) bool { return r.Type == "pause" && r.To == "resumed" && r.By == "bob@desk" }); len(got) != 1 {
		t.Errorf("resume audit records by bob@desk = %d, want 1", len(got))
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// A pause for a duration ends by itself; a pause of one rule leaves the
// others acting.
func TestControlPauseOfOneRuleForADuration(t *testing.T) {
	t.Parallel()
	g := newControlEnv(t, nearLiqXBTC+overMaxRule, "")
	addr, _, stop := g.serve()
	defer stop()
	// The over-max rule acts on XSOL at the first tick; the pause is of
	// near-liquidation alone.
	code, body := api(t, addr, "POST", "/api/v1/pause", testToken, map[string]string{"rule": "near-liquidation", "duration": "4s", "createdBy": "carol@desk"})
	if code != 201 {
		t.Fatalf("pause: %d %s", code, body)
	}
	// XSOL first: once XBTC (cross) is near liquidation, XSOL's cut,
	// which takes free balance from XBTC's pool, is rightly refused.
	waitFor(t, "XSOL acted on", 10*time.Second, func() bool { return len(g.mutatingOn("XSOL")) > 0 })
	g.putNearLiquidation("XBTC", "BTC", 0.03)
	waitFor(t, "the pause to end by itself and XBTC acted on", 15*time.Second, func() bool { return len(g.mutatingOn("XBTC")) > 0 })
	if got := g.records(func(r journal.Record) bool { return r.Type == "action" && r.Phase == "paused" && r.Symbol == "XBTC" }); len(got) == 0 {
		t.Error("no paused record on XBTC before the pause ended")
	}
	if got := g.records(func(r journal.Record) bool { return r.Type == "pause" && r.To == "resumed" }); len(got) != 1 {
		t.Errorf("pause end records = %d, want 1", len(got))
	}
}

const notifyRule = `
  - name: xbtc-near
    when: liquidationDistance < 0.05
    symbols: [XBTC]
    cooldown: 1s
    severity: critical
    actions:
      - action: notify
`

func hookYAML(url string) string {
	return "notify:\n  channels:\n    pager: {type: webhook, url: " + url + "/hook}\n  group_wait: 0s\n  repeat_interval: 1ms\n"
}

func ruleMessages(h *hookServer, rule string) []string {
	var out []string
	for _, b := range h.received() {
		if strings.Contains(b, `"rule":"`+rule+`"`) {
			out = append(out, b)
		}
	}
	return out
}

// A silenced rule notifies nothing until the silence ends; lifecycle
// messages are not muted.
func TestControlSilenceMutesUntilItEnds(t *testing.T) {
	t.Parallel()
	hook := newHookServer(t, "ok")
	g := newControlEnv(t, notifyRule, hookYAML(hook.srv.URL))
	addr, _, stop := g.serve()
	defer stop()
	waitHealthy(t, addr)
	code, out, errOut := g.ctl(addr, "silence", "add", "--rule", "xbtc-near", "--for", "1h", "--comment", "known", "--by", "dave@desk")
	if code != 0 {
		t.Fatalf("silence add: %s%s", out, errOut)
	}
	id := strings.Fields(out)[1]
	g.putNearLiquidation("XBTC", "BTC", 0.03)
	firing := func() []journal.Record {
		return g.records(func(r journal.Record) bool {
			return r.Type == "action" && r.Action == "notify" && r.Symbol == "XBTC"
		})
	}
	waitFor(t, "the rule's notify action twice", 10*time.Second, func() bool { return len(firing()) >= 2 })
	if got := ruleMessages(hook, "xbtc-near"); len(got) != 0 {
		t.Fatalf("a silenced rule notified:\n%s", strings.Join(got, "\n"))
	}
	if !slices.ContainsFunc(hook.received(), func(b string) bool { return strings.Contains(b, "riskguard started") }) {
		t.Error("the start message was muted too")
	}
	code, out, _ = g.ctl(addr, "silence", "list")
	if code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "rule=xbtc-near") || !strings.Contains(out, "dave@desk") {
		t.Errorf("silence list:\n%s", out)
	}
	_, metrics := api(t, addr, "GET", "/metrics", "", nil)
	if !strings.Contains(metrics, "riskguard_silences_active 1") {
		t.Error("/metrics lacks riskguard_silences_active 1")
	}
	if code, out, errOut := g.ctl(addr, "silence", "expire", "--by", "erin@desk", id); code != 0 {
		t.Fatalf("silence expire: %s%s", out, errOut)
	}
	waitFor(t, "the rule's notification after the silence", 10*time.Second, func() bool { return len(ruleMessages(hook, "xbtc-near")) > 0 })
	if got := g.records(func(r journal.Record) bool { return r.Type == "silence" && r.To == "expired" && r.By == "erin@desk" }); len(got) != 1 {
		t.Errorf("silence expiry records by erin@desk = %d, want 1", len(got))
	}
}

// An acknowledgement mutes a firing alert until it resolves; the resolved
// message goes out and the acknowledgement is gone.
func TestControlAckEndsWhenResolved(t *testing.T) {
	t.Parallel()
	hook := newHookServer(t, "ok")
	g := newControlEnv(t, notifyRule, hookYAML(hook.srv.URL))
	addr, _, stop := g.serve()
	defer stop()
	waitHealthy(t, addr)
	if code, body := api(t, addr, "POST", "/api/v1/ack", testToken, map[string]string{"rule": "xbtc-near", "symbol": "XBTC", "createdBy": "x"}); code != 409 {
		t.Errorf("ack of an inactive alert: %d %s, want 409", code, body)
	}
	g.putNearLiquidation("XBTC", "BTC", 0.03)
	waitFor(t, "the alert to fire", 10*time.Second, func() bool {
		_, body := api(t, addr, "GET", "/api/v1/status", "", nil)
		return strings.Contains(body, `"state": "firing"`) && len(ruleMessages(hook, "xbtc-near")) > 0
	})
	if code, out, errOut := g.ctl(addr, "ack", "--rule", "xbtc-near", "--symbol", "XBTC", "--by", "frank@desk"); code != 0 {
		t.Fatalf("ack: %s%s", out, errOut)
	}
	n := len(ruleMessages(hook, "xbtc-near"))
	notified := func() int {
		return len(g.records(func(r journal.Record) bool { return r.Type == "action" && r.Action == "notify" && r.Symbol == "XBTC" }))
	}
	m := notified()
	waitFor(t, "two more notify actions", 10*time.Second, func() bool { return notified() >= m+3 })
	if got := ruleMessages(hook, "xbtc-near"); len(got) > n+1 { // one may have been in flight
		t.Fatalf("an acknowledged alert notified %d more times", len(got)-n)
	}
	g.putNearLiquidation("XBTC", "BTC", 0.2)
	waitFor(t, "the resolved message", 10*time.Second, func() bool {
		return slices.ContainsFunc(ruleMessages(hook, "xbtc-near"), func(b string) bool { return strings.Contains(b, `"kind":"resolved"`) })
	})
	// The acknowledgement's end is written right after the transition it
	// follows (control.Service.ResolveAcks), whose message may reach the
	// hook first: waited for, then counted.
	ackEnds := func() []journal.Record {
		return g.records(func(r journal.Record) bool {
			return r.Type == "silence" && r.To == "expired" && strings.Contains(r.Reason, "the alert resolved")
		})
	}
	waitFor(t, "the acknowledgement's end in the audit log", 10*time.Second, func() bool { return len(ackEnds()) > 0 })
	if got := ackEnds(); len(got) != 1 {
		t.Errorf("ack end records = %d, want 1", len(got))
	}
	if _, body := api(t, addr, "GET", "/api/v1/silences", "", nil); strings.TrimSpace(body) != "[]" {
		t.Errorf("silences after the resolution: %s", body)
	}
}

// The daemon serves its control API with the token of
// engine.control_token_file: a wrong or missing one is 401, the right one
// goes through; the reads are open on loopback; without a token configured
// the CLI gets 403. (Every endpoint's token rules are web's tests.)
func TestControlTokenRequired(t *testing.T) {
	t.Parallel()
	g := newControlEnv(t, overMaxRule, "")
	addr, logs, stop := g.serve()
	defer stop()
	pause := map[string]string{"createdBy": "mallory"}
	for _, tc := range []struct {
		name, method, path, token string
		want                      int
	}{
		{"wrong token", "POST", "/api/v1/pause", "guess", 401},
		{"no token", "POST", "/api/v1/pause", "", 401},
		{"status is open on loopback", "GET", "/api/v1/status", "", 200},
		{"the page is open on loopback", "GET", "/", "", 200},
		{"no author", "POST", "/api/v1/pause", testToken, 400},
	} {
		body := any(pause)
		if tc.name == "no author" {
			body = map[string]string{}
		}
		if code, out := api(t, addr, tc.method, tc.path, tc.token, body); code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, code, out, tc.want)
		}
	}
	if _, body := api(t, addr, "GET", "/api/v1/pauses", "", nil); strings.TrimSpace(body) != "[]" {
		t.Errorf("a refused call paused the guard: %s", body)
	}
	if strings.Contains(logs.String(), testToken) {
		t.Error("the control token appears in the logs")
	}
	// Without a token configured the mutating endpoints are refused.
	g2 := newGuardEnv(t, "  listen: 127.0.0.1:0\n", overMaxRule)
	addr2, _, stop2 := g2.serve()
	defer stop2()
	code, body := api(t, addr2, "POST", "/api/v1/pause", testToken, pause)
	if code != 403 || !strings.Contains(body, "no control token is configured") {
		t.Errorf("without a token configured: %d %s, want 403", code, body)
	}
	if code, out, errOut := g2.ctl(addr2, "pause"); code == 0 || !strings.Contains(errOut, "403") {
		t.Errorf("pause CLI without a token configured: exit %d %s%s", code, out, errOut)
	}
}
