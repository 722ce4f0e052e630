package main

// The daemon's surfaces against a hostile world (issue 20): the status
// page and API through the real daemon's listener, rendered by headless
// Chromium where the page matters.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// chromiumDOM loads url in headless Chromium with args and returns the DOM
// after the page's script ran; the test skips when chromium is not
// installed (.ci/run installs it as root).
func chromiumDOM(t *testing.T, url string, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium not installed (apt-get install chromium): the status page is not rendered")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=5000", "--dump-dom"}, args...)
	cmd := exec.CommandContext(ctx, bin, append(all, url)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.String()
}

// get GETs url with the Host header host ("" keeps the URL's) and returns
// the status and body.
func get(t *testing.T, url, host string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// statusOf decodes GET /api/v1/status, failing the test unless it is a
// 200 with valid JSON.
func statusOf(t *testing.T, addr string) map[string]any {
	t.Helper()
	code, body := get(t, "http://"+addr+"/api/v1/status", "")
	var st map[string]any
	if code != 200 || json.Unmarshal([]byte(body), &st) != nil {
		t.Fatalf("GET /api/v1/status = %d, not JSON: %q", code, body)
	}
	return st
}

// positionOf returns the status's position of symbol, or nil.
func positionOf(st map[string]any, symbol string) map[string]any {
	ps, _ := st["positions"].([]any)
	for _, p := range ps {
		if pm, _ := p.(map[string]any); pm["symbol"] == symbol {
			return pm
		}
	}
	return nil
}

// renderedPositions checks that Chromium rendered the page with its data:
// a row per symbol and no error line.
func renderedPositions(t *testing.T, dom string, symbols ...string) {
	t.Helper()
	if strings.Contains(dom, `<div id="err">cannot`) || !strings.Contains(dom, `id="positions"`) {
		t.Errorf("the page did not render the status:\n%s", dom)
	}
	for _, s := range symbols {
		if !strings.Contains(dom, `data-symbol="`+s+`"`) {
			t.Errorf("the rendered page lacks %s", s)
		}
	}
}

// An index price a float cannot hold ("1e400", +Inf as a float) never
// blanks the status: /api/v1/status stays valid JSON with that symbol as
// no data (no index, no distance) and the others as they are, and the page
// renders. Before, the encoder failed after the header: a 200 with an
// empty body and nothing logged.
func TestStatusWithAnIndexPastFloatRange(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "", overMaxRule)
	p := newFaultProxy(t, g.url)
	p.setRewrite(func(path string, body []byte) []byte {
		if path != "/v1/market/indexPrices" {
			return body
		}
		return rewriteJSON(t, body, func(data any) any {
			data.(map[string]any)["SOL"] = "1e400"
			return data
		})
	})
	g.url = p.url()
	g.writeConfig("  listen: 127.0.0.1:0\n", overMaxRule)
	addr, logs, stop := g.serve()
	waitFor(t, "a complete snapshot in the status", 10*time.Second, func() bool {
		return positionOf(statusOf(t, addr), "XBTC")["liquidationDistance"] != nil
	})
	st := statusOf(t, addr)
	xsol := positionOf(st, "XSOL")
	if xsol == nil || xsol["liquidationDistance"] != nil || xsol["index"] != "0" {
		t.Errorf("XSOL is not shown as no data: %v", xsol)
	}
	if d, ok := positionOf(st, "XBTC")["liquidationDistance"].(float64); !ok || !(d > 0) {
		t.Errorf("XBTC's distance = %v", positionOf(st, "XBTC")["liquidationDistance"])
	}
	renderedPositions(t, chromiumDOM(t, "http://"+addr+"/"), "XBTC", "XETH", "XSOL")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if calls := g.mutatingOn("XSOL"); len(calls) != 0 {
		t.Errorf("acted on XSOL without a usable index: %+v", calls)
	}
	if strings.Contains(logs.String(), "GET /api/v1/status failed") {
		t.Errorf("the status failed to encode:\n%s", logs)
	}
}

// A configuration with only an account rule, or with rules scoped to other
// symbols, gives every position "rules": [] (it was null, and the page
// threw and showed nothing); the page renders.
func TestStatusWithNoRuleOnAPosition(t *testing.T) {
	t.Parallel()
	for name, rules := range map[string]string{
		"only an account rule": `
  - name: account-margin-call
    scope: account
    when: account.marginRatio > 0.8
    actions:
      - action: notify
`,
		"rules of another symbol": `
  - name: xbtc-only
    symbols: [XBTC]
    when: position.leverage > 100
    actions:
      - action: notify
`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			g := newGuardEnv(t, "  listen: 127.0.0.1:0\n", rules)
			addr, _, stop := g.serve()
			// The account figures and the stress grid are made for the
			// status once it has been read (the grid at the tick after the
			// first read, even where a rule made the account already): wait
			// for them too, so that every null left would be a list or a
			// figure the page cannot show.
			waitFor(t, "positions, the account and the stress grid in the status", 10*time.Second, func() bool {
				s := statusOf(t, addr)
				return positionOf(s, "XSOL") != nil && s["account"] != nil && s["stress"] != nil
			})
			_, body := get(t, "http://"+addr+"/api/v1/status", "")
			if strings.Contains(body, "null") {
				t.Errorf("the status has a null:\n%s", body)
			}
			if r, ok := positionOf(statusOf(t, addr), "XSOL")["rules"].([]any); !ok || len(r) != 0 {
				t.Errorf("XSOL's rules = %v, want []", positionOf(statusOf(t, addr), "XSOL")["rules"])
			}
			renderedPositions(t, chromiumDOM(t, "http://"+addr+"/"), "XBTC", "XETH", "XSOL")
			if err := stop(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// DNS rebinding: a page whose own name (rebind.test) resolves to 127.0.0.1
// cannot read the guard. The daemon refuses that Host with 421 on every
// route, /metrics and /healthz included (they answer IP addresses, which
// cannot be rebound); Chromium loading the status page under that name
// renders no data; and an attacker's page, served first from its own
// server and then, same origin, "rebound" to the guard (a proxy forwarding
// with the browser's Host, as the browser does once the name points at
// 127.0.0.1), reads a 421, not the positions. A name in
// engine.allowed_hosts is served, which shows the same set-up reads the
// status when the host is allowed.
func TestStatusRefusesForeignHosts(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "  listen: 127.0.0.1:0\n  allowed_hosts: [guard.test]\n", overMaxRule)
	addr, _, stop := g.serve()
	_, port, _ := net.SplitHostPort(addr)
	waitFor(t, "positions in the status", 10*time.Second, func() bool { return positionOf(statusOf(t, addr), "XSOL") != nil })
	for _, path := range []string{"/", "/api/v1/status", "/api/v1/silences", "/api/v1/pauses", "/metrics", "/healthz"} {
		code, body := get(t, "http://"+addr+path, "rebind.test:"+port)
		if code != http.StatusMisdirectedRequest || strings.Contains(body, "XSOL") || len(body) > 200 {
			t.Errorf("GET %s with Host rebind.test = %d %q, want 421", path, code, body)
		}
		if code, _ := get(t, "http://"+addr+path, "guard.test:"+port); code != 200 {
			t.Errorf("GET %s with Host guard.test (allowed) = %d", path, code)
		}
	}
	for _, path := range []string{"/metrics", "/healthz"} {
		if code, _ := get(t, "http://"+addr+path, "192.0.2.7:"+port); code != 200 {
			t.Errorf("GET %s with an IP address as Host = %d, want 200 (probes)", path, code)
		}
	}
	// An address cannot be rebound: the daemon's status and control API
	// answer at it (issue 32, item 6; the token still guards the control).
	if code, _ := get(t, "http://"+addr+"/api/v1/status", "192.0.2.7:"+port); code != 200 {
		t.Errorf("GET /api/v1/status with a non-loopback IP address as Host = %d, want 200", code)
	}

	// The attacker's server: its page at /, everything else forwarded to
	// the guard with the browser's Host, as after the rebinding.
	target, _ := url.Parse("http://" + addr)
	rebound := httputil.NewSingleHostReverseProxy(target)
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			io.WriteString(w, `<!doctype html><div id="out">nothing</div><script>
fetch("/api/v1/status").then(r=>r.text().then(t=>{document.getElementById("out").textContent="read "+r.status+": "+t}))
</script>`)
			return
		}
		rebound.ServeHTTP(w, r)
	}))
	defer attacker.Close()
	_, aport, _ := net.SplitHostPort(attacker.Listener.Addr().String())
	rules := "--host-resolver-rules=MAP rebind.test 127.0.0.1, MAP guard.test 127.0.0.1"

	dom := chromiumDOM(t, "http://rebind.test:"+aport+"/", rules)
	if !strings.Contains(dom, "read 421: misdirected request") || strings.Contains(dom, "XSOL") {
		t.Errorf("the rebound page read the status, or nothing:\n%s", dom)
	}
	dom = chromiumDOM(t, "http://guard.test:"+aport+"/", rules)
	if !strings.Contains(dom, "read 200: ") || !strings.Contains(dom, "XSOL") {
		t.Errorf("the same page under an allowed name did not read the status (the set-up proves nothing):\n%s", dom)
	}
	dom = chromiumDOM(t, "http://rebind.test:"+port+"/", rules)
	if strings.Contains(dom, "data-symbol") || strings.Contains(dom, "XSOL") || !strings.Contains(dom, "misdirected request") {
		t.Errorf("the status page rendered under a foreign name:\n%s", dom)
	}
	renderedPositions(t, chromiumDOM(t, "http://guard.test:"+port+"/", rules), "XBTC", "XETH", "XSOL")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// hostileBot is a Bot API server that anyone can write to: botAPI's
// updates and methods, getUpdates failing with 502 while down, and the
// limit each getUpdates asked for.
type hostileBot struct {
	*botAPI
	mu     sync.Mutex
	down   bool
	limits []float64
}

func (h *hostileBot) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/getUpdates") {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		json.Unmarshal(b, &body)
		h.mu.Lock()
		down := h.down
		limit, _ := body["limit"].(float64)
		h.limits = append(h.limits, limit)
		h.mu.Unlock()
		if down {
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, `{"ok":false,"error_code":502,"description":"Bad Gateway"}`)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	h.botAPI.ServeHTTP(w, r)
}

func (h *hostileBot) setDown(down bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.down = down
}

// withTelegram adds a telegram channel at api with control chat 100 to
// the guard's configuration; extra goes into the engine section.
func withTelegram(t *testing.T, g *guardEnv, api, token, extra string) {
	t.Helper()
	body := strings.Replace(readFile(t, g.config), "rules:\n", "notify:\n  channels:\n    ops: {type: telegram, token"+token+", chat_id: 100, api_url: "+api+", control_chat_ids: [100]}\n  group_wait: 0s\nrules:\n", 1)
	body = strings.Replace(body, "engine:\n", "engine:\n"+extra, 1)
	writeFile(t, g.config, body)
}

// Anyone who can message the bot cannot silence the control: twenty
// 4,000-character messages from an unlisted chat (one getUpdates answer
// over the 64 KiB it was read with) and an update that cannot be decoded
// are read, ignored or skipped and logged, and the command from the
// allowed chat behind them is answered. getUpdates asks for a limit.
func TestTelegramControlSurvivesAFlood(t *testing.T) {
	t.Parallel()
	bot := &hostileBot{botAPI: &botAPI{}}
	srv := httptest.NewServer(bot)
	defer srv.Close()
	long := strings.Repeat("é", 3999) + "!"
	for range 20 {
		bot.say(999, long)
	}
	bot.push(map[string]any{"message": map[string]any{"message_id": 1, "chat": map[string]any{"id": "not a number"}, "text": 42}})
	bot.say(100, "/status")
	g := newGuardEnv(t, "", overMaxRule)
	withTelegram(t, g, srv.URL, "_env: TG_TOKEN", "")
	env := campaignEnv(g.url)
	env["TG_TOKEN"] = "1:tok"
	d := g.start(env)
	waitFor(t, "/status answered", 20*time.Second, func() bool { return len(bot.sent("100", "riskguard: ")) > 0 })
	bot.say(100, "/status")
	waitFor(t, "the next /status answered", 10*time.Second, func() bool { return len(bot.sent("100", "riskguard: ")) > 1 })
	if len(bot.sent("999", "")) != 0 {
		t.Error("the unlisted chat got an answer")
	}
	logs := d.logs.String()
	if n := strings.Count(logs, "a command from a chat not in control_chat_ids; ignored"); n != 20 {
		t.Errorf("%d flood messages logged as ignored, want 20", n)
	}
	if !strings.Contains(logs, "an update that cannot be decoded; skipped") || !strings.Contains(logs, `"update_id":21`) {
		t.Errorf("the undecodable update is not logged with its id:\n%s", logs)
	}
	if strings.Contains(logs, "getUpdates failed") {
		t.Errorf("getUpdates failed on the flood:\n%s", logs)
	}
	bot.mu.Lock()
	limits := slices.Clone(bot.limits)
	bot.mu.Unlock()
	if len(limits) == 0 || limits[0] != 100 {
		t.Errorf("getUpdates limits %v, want 100", limits)
	}
	if code := d.stop(t); code != 0 {
		t.Errorf("exit %d", code)
	}
}

// A control that cannot read its commands for engine.control_fail_after
// says so: a critical notification and riskguard_telegram_control_failing
// 1; once it reads again, a notification and 0.
func TestTelegramControlFailingIsNotified(t *testing.T) {
	t.Parallel()
	bot := &hostileBot{botAPI: &botAPI{}, down: true}
	srv := httptest.NewServer(bot)
	defer srv.Close()
	g := newGuardEnv(t, "  listen: 127.0.0.1:0\n", overMaxRule)
	withTelegram(t, g, srv.URL, `: "1:tok"`, "  control_fail_after: 2s\n")
	addr, logs, stop := g.serve()
	metric := func() string {
		_, body := get(t, "http://"+addr+"/metrics", "")
		for line := range strings.Lines(body) {
			if strings.HasPrefix(line, `riskguard_telegram_control_failing{channel="ops"}`) {
				return strings.TrimSpace(line)
			}
		}
		return ""
	}
	// /metrics is served (and its address logged) just before the control
	// starts and sets its gauge: a scrape in between, seen on a loaded
	// CPU, has no line yet. The gauge must read 0 before the failure
	// (control_fail_after, 2s) turns it to 1.
	waitFor(t, "the gauge at 0 before failing", 10*time.Second, func() bool {
		return metric() == `riskguard_telegram_control_failing{channel="ops"} 0`
	})
	waitFor(t, "the failure notified", 20*time.Second, func() bool {
		return len(bot.sent("100", "The Telegram control cannot read commands: getUpdates has been failing for")) > 0
	})
	if got := metric(); got != `riskguard_telegram_control_failing{channel="ops"} 1` {
		t.Errorf("while failing: %q", got)
	}
	bot.setDown(false)
	waitFor(t, "the recovery notified", 40*time.Second, func() bool {
		return len(bot.sent("100", "The Telegram control reads commands again")) > 0
	})
	if got := metric(); got != `riskguard_telegram_control_failing{channel="ops"} 0` {
		t.Errorf("after recovering: %q", got)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "telegram control: commands cannot be read") {
		t.Errorf("the failure is not logged:\n%s", logs)
	}
}
