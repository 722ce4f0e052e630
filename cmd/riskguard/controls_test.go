package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/control"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/exchange/sim"
)

// door stands in front of the simulated exchange: it notes when each
// mutating call arrives, and holds the first one on a symbol at the door
// until released, as a slow exchange would.
type door struct {
	ex     *sim.Exchange
	symbol string

	mu       sync.Mutex
	held     bool
	arrived  chan struct{}
	release  chan struct{}
	arrivals []time.Time
}

func (d *door) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		d.mu.Lock()
		d.arrivals = append(d.arrivals, time.Now())
		hold := !d.held && strings.Contains(r.URL.Path, "/"+d.symbol+"/")
		d.held = d.held || hold
		d.mu.Unlock()
		if hold {
			close(d.arrived)
			select {
			case <-d.release:
			case <-time.After(10 * time.Second):
			}
		}
	}
	d.ex.ServeHTTP(w, r)
}

// lastArrival is when the last mutating call arrived.
func (d *door) lastArrival() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.arrivals) == 0 {
		return time.Time{}
	}
	return d.arrivals[len(d.arrivals)-1]
}

// newDoorEnv is newControlEnv with the door in front of the exchange.
func newDoorEnv(t *testing.T, symbol, rulesYAML string) (*guardEnv, *door) {
	t.Helper()
	ex, err := sim.New(sim.Config{Key: sim.DefaultKey, Secret: sim.DefaultSecret, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	d := &door{ex: ex, symbol: symbol, arrived: make(chan struct{}), release: make(chan struct{})}
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		select {
		case <-d.release:
		default:
			close(d.release)
		}
	})
	g := &guardEnv{t: t, ex: ex, url: srv.URL, dir: t.TempDir()}
	g.config = filepath.Join(g.dir, "riskguard.yaml")
	tok := filepath.Join(g.dir, "control.token")
	if err := os.WriteFile(tok, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g.writeConfig("  listen: 127.0.0.1:0\n  control_token_file: "+tok+"\n", rulesYAML)
	return g, d
}

// cutXSOL cancels XSOL's orders and lowers its leverage (15x over a
// maximum of 10x) from the first tick: one job of two calls.
const cutXSOL = `
  - name: cut-xsol
    when: position.leverage > riskLimit.maxLeverage
    symbols: [XSOL]
    cooldown: 5m
    allow_closer_liquidation: true
    actions:
      - action: cancel_orders
      - action: lower_leverage
        leverage: riskLimit.maxLeverage
`

// A pause made while a call of its scope is on its way to the exchange
// answers only once that call has ended; every later call of the same
// decision is held and audited paused, and nothing reaches the exchange
// after the answer.
func TestControlPauseHoldsEveryCallNotYetSent(t *testing.T) {
	t.Parallel()
	g, d := newDoorEnv(t, "XSOL", cutXSOL)
	addr, _, stop := g.serve()
	defer stop()
	select { // cancel_orders XSOL, held at the door; lower_leverage waits its turn
	case <-d.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("no call on XSOL reached the exchange")
	}

	type answer struct {
		code int
		body string
		at   time.Time
	}
	answered := make(chan answer, 1)
	go func() {
		code, body := api(t, addr, "POST", "/api/v1/pause", testToken, map[string]string{"createdBy": "alice@desk", "comment": "hands off"})
		answered <- answer{code, body, time.Now()}
	}()
	waitFor(t, "the pause recorded", 10*time.Second, func() bool {
		_, body := api(t, addr, "GET", "/api/v1/pauses", "", nil)
		return strings.Contains(body, "alice@desk")
	})
	select {
	case a := <-answered:
		t.Fatalf("the pause answered %d while cancel_orders XSOL was on its way: %s", a.code, a.body)
	case <-time.After(300 * time.Millisecond):
	}
	close(d.release)
	var a answer
	select {
	case a = <-answered:
	case <-time.After(10 * time.Second):
		t.Fatal("the pause never answered")
	}
	if a.code != http.StatusCreated {
		t.Fatalf("pause: %d %s", a.code, a.body)
	}
	var p control.Pause
	if err := json.Unmarshal([]byte(a.body), &p); err != nil || len(p.InFlight) != 0 {
		t.Errorf("the answer names calls still on their way (%v): %s", err, a.body)
	}

	paused := func() []journal.Record {
		return g.records(func(r journal.Record) bool { return r.Type == "action" && r.Phase == "paused" && r.Symbol == "XSOL" })
	}
	waitFor(t, "the held calls audited paused", 10*time.Second, func() bool { return len(paused()) >= 2 })
	first := paused()[0]
	if first.Action != "lower_leverage" || !strings.Contains(first.Reason, "paused by alice@desk") {
		t.Errorf("the first held call: %s %q, want lower_leverage paused by alice@desk", first.Action, first.Reason)
	}
	if last := d.lastArrival(); last.After(a.at) {
		t.Errorf("a mutating call reached the exchange %s after the pause's answer", last.Sub(a.at))
	}
	if calls := g.mutatingOn("XSOL"); len(calls) != 1 || !strings.Contains(calls[0].Path, "cancel") {
		t.Errorf("mutating calls on XSOL = %+v, want the one cancel sent before the pause", calls)
	}
	if p := g.position("XSOL"); p.Leverage != 15 {
		t.Errorf("XSOL's leverage is %d after the pause, want 15 (untouched)", p.Leverage)
	}
}

// Controls that name a rule or a symbol the guard does not know are
// refused with the closest known name, by the API, the CLI and Telegram
// alike; a name in another case is stored as the guard spells it (and
// holds); --allow-unknown takes a symbol not open yet.
func TestControlRefusesUnknownNames(t *testing.T) {
	t.Parallel()
	g := newControlEnv(t, nearLiqXBTC+overMaxRule, "")
	addr, _, stop := g.serve()
	defer stop()
	waitHealthy(t, addr)

	for _, tc := range []struct {
		path string
		body map[string]any
		want string
	}{
		{"/api/v1/pause", map[string]any{"rule": "near-liquidaton", "createdBy": "x"}, `rule \"near-liquidaton\": the guard knows no such rule (did you mean near-liquidation?)`},
		{"/api/v1/pause", map[string]any{"symbol": "XBTX", "createdBy": "x"}, `(did you mean XBTC?); to name a symbol not open yet on purpose, add --allow-unknown`},
		{"/api/v1/silences", map[string]any{"rule": "near-liquidatoin", "duration": "1h", "createdBy": "x"}, "did you mean near-liquidation?"},
		{"/api/v1/silences", map[string]any{"symbol": "XETX", "duration": "1h", "createdBy": "x"}, "did you mean XETH?"},
		{"/api/v1/ack", map[string]any{"rule": "near-liquidaton", "symbol": "XBTC", "createdBy": "x"}, "did you mean near-liquidation?"},
	} {
		if code, body := api(t, addr, "POST", tc.path, testToken, tc.body); code != http.StatusBadRequest || !strings.Contains(body, tc.want) {
			t.Errorf("POST %s %v: %d %s, want 400 saying %s", tc.path, tc.body, code, body, tc.want)
		}
	}
	if code, out, errOut := g.ctl(addr, "pause", "--rule", "near-liquidaton", "--by", "x"); code == 0 || !strings.Contains(errOut, "400 Bad Request") || !strings.Contains(errOut, "did you mean near-liquidation?") {
		t.Errorf("CLI pause of a misspelt rule: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := g.ctl(addr, "silence", "add", "--symbol", "XETX", "--by", "x"); code == 0 || !strings.Contains(errOut, "did you mean XETH?") {
		t.Errorf("CLI silence of a misspelt symbol: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := g.ctl(addr, "silence", "add", "--symbol", "xeth", "--by", "x"); code != 0 || !strings.Contains(out, "of symbol=XETH until") {
		t.Errorf("CLI silence of xeth: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := g.ctl(addr, "pause", "--symbol", "XNEW", "--allow-unknown", "--by", "x"); code != 0 || !strings.Contains(out, "paused symbol=XNEW") {
		t.Errorf("CLI pause of a symbol not open yet, allowed: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := g.ctl(addr, "pause", "near-liquidation", "--by", "x"); code == 0 || !strings.Contains(errOut, `unexpected argument "near-liquidation"`) {
		t.Errorf("CLI pause with a stray word (not a pause of everything): exit %d\n%s%s", code, out, errOut)
	}
	for _, list := range [][]string{{"silence", "list", "XETH"}, {"pause", "list", "XETH"}} {
		if code, out, errOut := g.ctl(addr, list...); code == 0 || !strings.Contains(errOut, `unexpected argument "XETH"`) {
			t.Errorf("CLI %s with a stray word (it lists everything, not XETH's): exit %d\n%s%s", strings.Join(list[:2], " "), code, out, errOut)
		}
	}
	_, body := api(t, addr, "GET", "/api/v1/pauses", "", nil)
	var pauses []control.Pause
	if err := json.Unmarshal([]byte(body), &pauses); err != nil || len(pauses) != 1 || pauses[0].Symbol != "XNEW" {
		t.Errorf("pauses in force = %s (%v), want only the allowed one of XNEW", body, err)
	}
	if g.records(func(r journal.Record) bool { return r.Type == "pause" && r.Rule == "near-liquidaton" }) != nil {
		t.Error("a refused pause was audited")
	}

	// xbtc is XBTC: the pause holds XBTC's actions.
	if code, out, errOut := g.ctl(addr, "pause", "--symbol", "xbtc", "--by", "bob@desk"); code != 0 || !strings.Contains(out, "paused symbol=XBTC") {
		t.Fatalf("CLI pause of xbtc: exit %d\n%s%s", code, out, errOut)
	}
	g.putNearLiquidation("XBTC", "BTC", 0.03)
	waitFor(t, "XBTC's actions held", 10*time.Second, func() bool {
		return len(g.records(func(r journal.Record) bool {
			return r.Phase == "paused" && r.Symbol == "XBTC" && strings.Contains(r.Reason, "bob@desk")
		})) > 0
	})
	if calls := g.mutatingOn("XBTC"); len(calls) != 0 {
		t.Errorf("a pause of xbtc let through %+v", calls)
	}
}

// Telegram's /silence names a rule or a symbol: a misspelt one gets a
// did-you-mean, one in another case is stored as the guard spells it.
func TestTelegramSilenceNamesResolved(t *testing.T) {
	t.Parallel()
	bot := &botAPI{}
	srv := httptest.NewServer(bot)
	defer srv.Close()
	g := newGuardEnv(t, "", nearLiqXETH)
	body := strings.Replace(readFile(t, g.config), "rules:\n", "notify:\n  channels:\n    ops: {type: telegram, token_env: TG_TOKEN, chat_id: 100, api_url: "+srv.URL+", control_chat_ids: [100]}\n  group_wait: 0s\nrules:\n", 1)
	writeFile(t, g.config, body)
	env := campaignEnv(g.url)
	env["TG_TOKEN"] = "1:tok"
	dm := g.start(env)
	defer dm.stop(t)
	waitFor(t, "the control listening", 10*time.Second, func() bool { return strings.Contains(dm.logs.String(), "telegram control listening") })
	waitFor(t, "a complete snapshot", 10*time.Second, func() bool { return strings.Contains(dm.logs.String(), "XETH") || len(g.ex.Calls()) > 6 })
	bot.say(100, "/silence near-liquidaton 30m")
	waitFor(t, "the did-you-mean", 10*time.Second, func() bool { return len(bot.sent("100", "did you mean near-liquidation?")) > 0 })
	bot.say(100, "/silence xeth 30m")
	waitFor(t, "the silence", 10*time.Second, func() bool { return len(bot.sent("100", "Silenced symbol XETH until")) > 0 })
	if got := g.records(func(r journal.Record) bool { return r.Type == "silence" && r.Symbol == "XETH" }); len(got) != 1 {
		t.Errorf("silence records of XETH = %d, want 1", len(got))
	}
}

// A state file written while the host clock ran 20 minutes ahead holds a
// pause that starts in the future: it is clamped to now, listed as in
// force, riskguard_paused is 1, and it holds.
func TestControlFuturePauseFromTheStateFileHolds(t *testing.T) {
	t.Parallel()
	g := newControlEnv(t, nearLiqXBTC, "")
	ahead := time.Now().Add(20 * time.Minute).UTC()
	state := fmt.Sprintf(`{"version": 1, "savedAt": %q, "rules": {}, "breaker": {},
  "pauses": [{"id": "feedc0de", "startsAt": %q, "createdBy": "carol@desk", "comment": "from a clock ahead"}],
  "silences": [{"id": "5117", "symbol": "XBTC", "startsAt": %q, "endsAt": %q, "createdBy": "carol@desk", "createdAt": %q}]}`,
		ahead.Format(time.RFC3339), ahead.Format(time.RFC3339), ahead.Format(time.RFC3339), ahead.Add(time.Hour).Format(time.RFC3339), ahead.Format(time.RFC3339))
	if err := os.WriteFile(filepath.Join(g.dir, "state.json"), []byte(state), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, _, stop := g.serve()
	defer stop()
	waitHealthy(t, addr)
	if _, body := api(t, addr, "GET", "/api/v1/pauses", "", nil); !strings.Contains(body, "feedc0de") {
		t.Fatalf("the restored pause is not listed: %s", body)
	}
	_, metrics := api(t, addr, "GET", "/metrics", "", nil)
	for _, want := range []string{"riskguard_paused 1", "riskguard_silences_active 1"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	g.putNearLiquidation("XBTC", "BTC", 0.03)
	waitFor(t, "XBTC's actions held by the restored pause", 10*time.Second, func() bool {
		return len(g.records(func(r journal.Record) bool {
			return r.Phase == "paused" && r.Symbol == "XBTC" && strings.Contains(r.Reason, "feedc0de")
		})) >= 2
	})
	if calls := g.mutating(); len(calls) != 0 {
		t.Errorf("the pause listed as in force let through %+v", calls)
	}
	if got := g.records(func(r journal.Record) bool {
		return r.Type == "state" && strings.Contains(r.Reason, "times after now") && strings.Contains(r.Reason, "clamped to now")
	}); len(got) != 1 {
		t.Errorf("no audit record of the clamped times")
	}
}

// Every time and duration a control takes is bounded: the rest is refused
// with 400 and says the bound, and the state file and the status stay
// writable (a silence from year 9999 once made every save fail).
func TestControlTimesBounded(t *testing.T) {
	t.Parallel()
	g := newControlEnv(t, nearLiqXBTC, "")
	addr, _, stop := g.serve()
	waitHealthy(t, addr)
	for _, tc := range []struct {
		path string
		body map[string]any
		want string
	}{
		{"/api/v1/silences", map[string]any{"symbol": "XBTC", "startsAt": "9999-12-31T00:00:00Z", "duration": "48h", "createdBy": "x"}, "must start within 24h of now"},
		{"/api/v1/silences", map[string]any{"symbol": "XBTC", "startsAt": "0001-01-01T00:00:01Z", "duration": "48h", "createdBy": "x"}, "must start within 24h of now"},
		{"/api/v1/silences", map[string]any{"symbol": "XBTC", "duration": "2161h", "createdBy": "x"}, "at most 2160h0m0s (90 days)"},
		{"/api/v1/silences", map[string]any{"symbol": "XBTC", "endsAt": "9999-12-31T00:00:00Z", "createdBy": "x"}, "may last at most 90 days"},
		{"/api/v1/silences", map[string]any{"symbol": "XBTC", "endsAt": "2000-01-01T00:00:00Z", "createdBy": "x"}, "has ended already"},
		{"/api/v1/pause", map[string]any{"duration": "2400h", "createdBy": "x"}, "(90 days)"},
		{"/api/v1/pause", map[string]any{"endsAt": "9999-12-31T00:00:00Z", "createdBy": "x"}, "may last at most 90 days"},
		{"/api/v1/ack", map[string]any{"rule": "near-liquidation", "symbol": "XBTC", "duration": "9000h", "createdBy": "x"}, "(90 days)"},
	} {
		if code, body := api(t, addr, "POST", tc.path, testToken, tc.body); code != http.StatusBadRequest || !strings.Contains(body, tc.want) {
			t.Errorf("POST %s %v: %d %s, want 400 saying %q", tc.path, tc.body, code, body, tc.want)
		}
	}
	if code, out, errOut := g.ctl(addr, "silence", "add", "--symbol", "XBTC", "--for", "2500h", "--by", "x"); code == 0 || !strings.Contains(errOut, "90 days") {
		t.Errorf("CLI silence for 2500h: exit %d\n%s%s", code, out, errOut)
	}
	// The longest allowed, then a pause: the status answers and the state
	// file holds both.
	if code, body := api(t, addr, "POST", "/api/v1/silences", testToken, map[string]any{"symbol": "XBTC", "duration": "2160h", "createdBy": "x"}); code != http.StatusCreated {
		t.Fatalf("a 90-day silence: %d %s", code, body)
	}
	if code, body := api(t, addr, "POST", "/api/v1/pause", testToken, map[string]any{"createdBy": "dave@desk"}); code != http.StatusCreated {
		t.Fatalf("pause: %d %s", code, body)
	}
	if code, body := api(t, addr, "GET", "/api/v1/status", "", nil); code != 200 || !strings.Contains(body, "dave@desk") {
		t.Errorf("status: %d %.200s", code, body)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	state, err := os.ReadFile(filepath.Join(g.dir, "state.json"))
	if err != nil || !strings.Contains(string(state), "dave@desk") || !json.Valid(state) {
		t.Fatalf("the state file lacks the pause (%v):\n%s", err, state)
	}
	if strings.Contains(string(state), "9999") {
		t.Errorf("a refused time reached the state file:\n%s", state)
	}
}

// Control input is bounded (the comment's length, the number of silences)
// and what is printed of it on a terminal cannot drive it: a comment's
// escape sequences are shown, not obeyed.
func TestControlInputBoundedAndEscaped(t *testing.T) {
	t.Parallel()
	g := newControlEnv(t, nearLiqXBTC, "")
	addr, _, stop := g.serve()
	defer stop()
	waitHealthy(t, addr)
	long := strings.Repeat("x", 1001)
	if code, body := api(t, addr, "POST", "/api/v1/silences", testToken, map[string]any{"symbol": "XBTC", "duration": "1h", "comment": long, "createdBy": "x"}); code != 400 || !strings.Contains(body, "the comment is 1001 characters long: at most 1000") {
		t.Errorf("a 1,001-character comment: %d %s", code, body)
	}
	if code, body := api(t, addr, "POST", "/api/v1/pause", testToken, map[string]any{"comment": long, "createdBy": "x"}); code != 400 || !strings.Contains(body, "at most 1000") {
		t.Errorf("a pause with a 1,001-character comment: %d %s", code, body)
	}
	hostile := "\x1b[2J\x1b[1;1H\x1b[32mall clear\x1b[0m\r\n\u202e"
	if code, out, errOut := g.ctl(addr, "silence", "add", "--symbol", "XBTC", "--comment", hostile, "--by", "mallory\x1b]0;owned\x07"); code != 0 {
		t.Fatalf("silence add: exit %d\n%s%s", code, out, errOut)
	}
	for i := 2; i <= 100; i++ {
		if code, body := api(t, addr, "POST", "/api/v1/silences", testToken, map[string]any{"symbol": "XBTC", "duration": fmt.Sprintf("%dm", i), "createdBy": "x"}); code != 201 {
			t.Fatalf("silence %d: %d %s", i, code, body)
		}
	}
	if code, body := api(t, addr, "POST", "/api/v1/silences", testToken, map[string]any{"symbol": "XBTC", "duration": "1h", "createdBy": "x"}); code != 400 || !strings.Contains(body, "too many silences: 100 are kept, at most 100") {
		t.Errorf("silence 101: %d %s", code, body)
	}
	code, out, errOut := g.ctl(addr, "silence", "list")
	if code != 0 {
		t.Fatalf("silence list: exit %d\n%s%s", code, out, errOut)
	}
	if strings.ContainsAny(out, "\x1b\x07\r\u202e") {
		t.Errorf("silence list printed raw control characters:\n%q", out)
	}
	for _, want := range []string{`\x1b[2J\x1b[1;1H\x1b[32mall clear\x1b[0m\x0d\x0a\u202e`, `mallory\x1b]0;owned\x07`} {
		if !strings.Contains(out, want) {
			t.Errorf("silence list lacks %s:\n%s", want, out)
		}
	}
	if lines := strings.Count(out, "\n"); lines != 101 {
		t.Errorf("silence list has %d lines, want a header and 100 rows", lines)
	}
	if code, out, errOut := g.ctl(addr, "pause", "--comment", "\x1b[31mred", "--by", "x"); code != 0 || strings.Contains(out, "\x1b") {
		t.Fatalf("pause: exit %d\n%q%s", code, out, errOut)
	}
	code, out, errOut = g.ctl(addr, "pause", "list")
	if code != 0 || !strings.Contains(out, `\x1b[31mred`) || strings.Contains(out, "\x1b") || strings.Contains(out, "all clear") {
		t.Errorf("pause list: exit %d\n%q%s", code, out, errOut)
	}
}
