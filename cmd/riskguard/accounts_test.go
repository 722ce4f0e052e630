package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/control"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/riskguard/riskguard/rules"
	"github.com/riskguard/riskguard/web"
)

// hangProxy serves a simulated exchange until hang is set; then every
// request waits, unanswered, until its client gives up.
type hangProxy struct {
	ex      *sim.Exchange
	hang    atomic.Bool
	waiting atomic.Int32 // requests held now
}

func (p *hangProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p.hang.Load() {
		p.waiting.Add(1)
		defer p.waiting.Add(-1)
		<-r.Context().Done()
		return
	}
	p.ex.ServeHTTP(w, r)
}

// credFiles writes a key pair's files in dir for the account name.
func credFiles(t *testing.T, dir, name string) (string, string) {
	t.Helper()
	k, s := filepath.Join(dir, name+".key"), filepath.Join(dir, name+".secret")
	for f, v := range map[string]string{k: sim.DefaultKey, s: sim.DefaultSecret} {
		if err := os.WriteFile(f, []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return k, s
}

// ownCredFiles writes a key pair of account name's own (not the simulated
// exchange's), for tests whose accounts share an exchange that is never
// reached: two entries with one key there are one account, refused.
func ownCredFiles(t *testing.T, dir, name string) (string, string) {
	t.Helper()
	k, s := filepath.Join(dir, name+".key"), filepath.Join(dir, name+".secret")
	for f, v := range map[string]string{k: "key-" + name, s: "secret-" + name} {
		if err := os.WriteFile(f, []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return k, s
}

// One process guards three accounts on three simulated exchanges: a is
// paused through the CLI's --account, b turns dangerous and only b acts,
// and slow's exchange stops answering without holding b's ticks. Every
// metric, audit record and notification carries its account.
func TestAccountsOneProcessGuardsSeveral(t *testing.T) {
	t.Parallel()
	a := newGuardEnv(t, "", nearLiqXBTC)
	b := newGuardEnv(t, "", nearLiqXBTC)
	slowEx, err := sim.New(sim.Config{Key: sim.DefaultKey, Secret: sim.DefaultSecret, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	slow := &hangProxy{ex: slowEx}
	slowSrv := httptest.NewServer(slow)
	t.Cleanup(slowSrv.Close)
	hook := newHookServer(t, "")
	tok := filepath.Join(a.dir, "control.token")
	if err := os.WriteFile(tok, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var accts strings.Builder
	for _, x := range []struct{ name, url string }{{"a", a.url}, {"b", b.url}, {"slow", slowSrv.URL}} {
		k, s := credFiles(t, a.dir, x.name)
		fmt.Fprintf(&accts, "  - name: %s\n    exchange: {base_url: %s, api_key_file: %s, api_secret_file: %s}\n", x.name, x.url, k, s)
	}
	body := fmt.Sprintf("exchange:\n  timeout: 30s\n  max_retries: 0\nengine:\n  interval: 100ms\n  audit_log: %s\n  state_file: %s\n  listen: 127.0.0.1:0\n  control_token_file: %s\n%saccounts:\n%srules:\n%s",
		filepath.Join(a.dir, "audit.jsonl"), filepath.Join(a.dir, "state.json"), tok, hookYAML(hook.srv.URL), accts.String(), nearLiqXBTC)
	if err := os.WriteFile(a.config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, logs, stop := a.serve()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs.String())
			data, _ := os.ReadFile(filepath.Join(a.dir, "audit.b.jsonl"))
			t.Logf("audit b:\n%s", data)
		}
	})
	for _, name := range []string{"a", "b", "slow"} {
		waitFor(t, "a complete snapshot of "+name, 10*time.Second, func() bool {
			_, body := api(t, addr, "GET", "/api/v1/status?account="+name, "", nil)
			return strings.Contains(body, `"healthy": true`)
		})
	}

	// The CLI: an unknown or a missing account is refused with the list.
	if code, _, errOut := a.ctl(addr, "pause", "--account", "zz"); code == 0 || !strings.Contains(errOut, `no account "zz"`) || !strings.Contains(errOut, "--account with one of: a, b, slow") {
		t.Errorf("pause --account zz: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := a.ctl(addr, "pause"); code == 0 || !strings.Contains(errOut, "guards several accounts: pass --account with one of: a, b, slow") {
		t.Errorf("pause without --account: exit %d, stderr %q", code, errOut)
	}
	if code, out, errOut := a.ctl(addr, "pause", "--account", "a", "--by", "alice@desk"); code != 0 || !strings.Contains(out, "paused *") {
		t.Fatalf("pause --account a: exit %d\n%s%s", code, out, errOut)
	}
	for name, want := range map[string]int{"a": 1, "b": 0} {
		_, body := api(t, addr, "GET", "/api/v1/pauses?account="+name, "", nil)
		var got []control.Pause
		if err := json.Unmarshal([]byte(body), &got); err != nil || len(got) != want {
			t.Errorf("pauses of %s = %s, want %d", name, body, want)
		}
	}
	if code, out, errOut := a.ctl(addr, "status"); code != 0 || !strings.Contains(out, "ACCOUNT") || !strings.Contains(out, "slow") || !strings.Contains(out, "--account NAME") {
		t.Errorf("status: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := a.ctl(addr, "status", "--account", "b"); code != 0 || !strings.Contains(out, "riskguard account b: healthy") || !strings.Contains(out, "XBTC") {
		t.Errorf("status --account b: exit %d\n%s%s", code, out, errOut)
	}
	if code, body := api(t, addr, "GET", "/api/v1/status", "", nil); code != http.StatusBadRequest || !strings.Contains(body, "?account=NAME") {
		t.Errorf("GET /api/v1/status with several accounts = %d %s, want 400 naming ?account=NAME", code, body)
	}
	var list []map[string]any
	if _, body := api(t, addr, "GET", "/api/v1/accounts", "", nil); json.Unmarshal([]byte(body), &list) != nil || len(list) != 3 || list[2]["name"] != "slow" {
		t.Errorf("GET /api/v1/accounts = %s", body)
	}

	// slow's exchange hangs: its tick waits (30 s timeout) while b's go on.
	slow.hang.Store(true)
	waitFor(t, "a request held by slow's exchange", 10*time.Second, func() bool { return slow.waiting.Load() > 0 })
	before := positionReads(b.ex.Calls())
	waitFor(t, "b's ticks while slow's hang", 10*time.Second, func() bool { return positionReads(b.ex.Calls()) >= before+5 })
	if slow.waiting.Load() == 0 {
		t.Fatal("slow's request ended while b ticked: the test did not hold it")
	}

	// b turns dangerous: b acts, a (also near liquidation, but paused) and
	// slow do not.
	b.putNearLiquidation("XBTC", "BTC", 0.03)
	a.putNearLiquidation("XBTC", "BTC", 0.03)
	waitFor(t, "b's actions", 10*time.Second, func() bool {
		if len(b.mutatingOn("XBTC")) >= 1 {
			return true
		}
		return false
	})
	auditOf := func(name string) []journal.Record {
		data, err := os.ReadFile(filepath.Join(a.dir, "audit."+name+".jsonl"))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		var out []journal.Record
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var r journal.Record
			if json.Unmarshal([]byte(line), &r) == nil && r.Type != "" {
				out = append(out, r)
			}
		}
		return out
	}
	waitFor(t, "a's paused actions in its audit log", 10*time.Second, func() bool {
		for _, r := range auditOf("a") {
			if r.Type == "action" && r.Phase == "paused" {
				return true
			}
		}
		return false
	})
	if calls := a.mutating(); len(calls) != 0 {
		t.Errorf("paused account a sent %d mutating calls: %+v", len(calls), calls)
	}
	if calls := slowEx.Calls(); func() bool {
		for _, c := range calls {
			if c.Mutating {
				return true
			}
		}
		return false
	}() {
		t.Error("slow's exchange got a mutating call")
	}
	sent := 0
	for _, name := range []string{"a", "b"} {
		for _, r := range auditOf(name) {
			if r.Account != name {
				t.Fatalf("audit.%s.jsonl has a record of account %q: %+v", name, r.Account, r)
			}
			if r.Type == "action" && r.Phase == "sent" {
				sent++
				if name != "b" {
					t.Errorf("account %s sent an action: %+v", name, r)
				}
			}
		}
	}
	if sent == 0 {
		t.Error("no sent action in b's audit log")
	}
	if _, err := os.Stat(filepath.Join(a.dir, "audit.jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the top level's audit.jsonl was written (%v): each account has its own", err)
	}

	// b's action is counted once its outcome is collected, which can be a
	// tick after its sent record: the scrape waits for it, bounded.
	wants := []string{`riskguard_ticks_total{account="a",result="ok"}`, `riskguard_ticks_total{account="b",result="ok"}`,
		`riskguard_paused{account="a"} 1`, `riskguard_paused{account="b"} 0`, `riskguard_actions_total{account="b",action="cancel_orders",result="ok"}`}
	var metrics string
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, metrics = api(t, addr, "GET", "/metrics", "", nil)
		missing := false
		for _, want := range wants {
			missing = missing || !strings.Contains(metrics, want)
		}
		if !missing || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, want := range wants {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, "riskguard_ticks_total{") && !strings.Contains(line, "account=") {
			t.Errorf("a metric without its account: %s", line)
		}
	}
	waitFor(t, "a notification naming b", 10*time.Second, func() bool {
		for _, m := range hook.received() {
			if strings.Contains(m, "[b] ") && strings.Contains(m, "XBTC") {
				return true
			}
		}
		return false
	})
	// Each account's line; slow turns unhealthy after healthMaxAge (10 s).
	if code, body := api(t, addr, "GET", "/healthz", "", nil); code != http.StatusOK || !strings.Contains(body, "account slow: ok") || !strings.Contains(body, "account b: ok") {
		t.Errorf("/healthz = %d\n%s", code, body)
	}
	if err := stop(); err != nil {
		t.Errorf("stop: %v\n%s", err, logs.String())
	}
}

// The accounts: section's checks: each problem said once, where it is,
// with what to do.
func TestAccountsConfigErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	k, s := credFiles(t, dir, "x")
	cred := fmt.Sprintf("api_key_file: %s, api_secret_file: %s", k, s)
	top := "exchange:\n  base_url: http://127.0.0.1:1\nengine:\n  state_file: /tmp/rg-state.json\n  audit_log: \"\"\n"
	cases := []struct {
		name, accounts string
		want           []string
	}{
		{"duplicate", "  - {name: a, exchange: {" + cred + "}}\n  - {name: a, exchange: {" + cred + "}}\n", []string{`accounts[1].name "a": duplicate account name (first at line`}},
		{"bad name", "  - {name: Main, exchange: {" + cred + "}}\n", []string{`accounts[0].name "Main": use 1 to 32 of a-z, 0-9, _ and -`}},
		{"no name", "  - {exchange: {" + cred + "}}\n", []string{"accounts[0].name is required"}},
		{"no credentials", "  - {name: a}\n", []string{`account "a" has no credentials: set RISKGUARD_A_API_KEY and RISKGUARD_A_API_SECRET, or accounts[0].exchange.api_key_file and api_secret_file`}},
		{"shared state file", "  - {name: a, state_file: /tmp/same.json, exchange: {" + cred + "}}\n  - {name: b, state_file: /tmp/same.json, exchange: {" + cred + "}}\n",
			[]string{`account "b": its state_file /tmp/same.json is account "a"'s too: give each account its own (accounts[1].state_file)`}},
		{"unknown key", "  - {name: a, rule: [], exchange: {" + cred + "}}\n", []string{`unknown key "accounts[0].rule" (did you mean "accounts[0].rules"?)`}},
		{"empty", "  []\n", []string{"accounts: expected a list of accounts"}},
		{"same variables", "  - {name: bot-2, exchange: {" + cred + "}}\n  - {name: bot_2, exchange: {" + cred + "}}\n",
			[]string{`accounts[1].name "bot_2": its variables (RISKGUARD_BOT_2_…) are those of account "bot-2" too: rename one`}},
		{"bad exchange key", "  - {name: a, exchange: {" + cred + ", timout: 3s}}\n", []string{`unknown key "exchange.timout"`}},
		// Two entries on one exchange and key are one account: both would
		// send every order (issue 30, item 3). The key is never printed.
		{"one account twice", "  - {name: a, exchange: {" + cred + "}}\n  - {name: b, exchange: {base_url: \"HTTP://127.0.0.1:1/\", " + cred + "}}\n",
			[]string{`account "b" is account "a": the same exchange (HTTP://127.0.0.1:1/) and API key (fingerprint `, "send each order twice"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeConfig(t, top+"accounts:\n"+c.accounts+minimalRules)
			_, err := loadConfig(path, envMap(nil))
			var list *rules.ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("err = %v, want an error list", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			// The top level is loaded once per account: no error twice.
			seen := map[string]bool{}
			for _, e := range list.Errors {
				if seen[e.Error()] {
					t.Errorf("error said twice: %s", e.Error())
				}
				seen[e.Error()] = true
			}
		})
	}
}

// Each account sees the top level with its own keys over it: credentials
// from its variables or files (never the top level's), its rules inline,
// from a file, or the top level's, and paths derived from the top level's.
func TestAccountsConfigLoads(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	k, s := credFiles(t, dir, "b")
	rulesFile := filepath.Join(dir, "b.rules.yaml")
	if err := os.WriteFile(rulesFile, []byte("rules:\n  - name: b-only\n    when: position.leverage > 20\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`exchange:
  base_url: http://127.0.0.1:1
  api_key_file: %[1]s
  api_secret_file: %[2]s
  timeout: 3s
engine:
  state_file: %[3]s/riskguard-state.json
  audit_log: %[3]s/audit.jsonl
accounts:
  - name: main
  - name: bot-2
    exchange: {base_url: "http://127.0.0.1:2", api_key_file: %[1]s, api_secret_file: %[2]s, timeout: 5s}
    rules_file: b.rules.yaml
    state_file: %[3]s/bot2.json
  - name: c
    exchange: {api_key_file: %[1]s, api_secret_file: %[2]s}
    rules:
      - name: c-only
        when: position.leverage > 30
%[4]s`, k, s, dir, minimalRules)
	path := filepath.Join(dir, "riskguard.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	env := envMap(map[string]string{"RISKGUARD_MAIN_API_KEY": "k-main", "RISKGUARD_MAIN_API_SECRET": "s-main",
		"RISKGUARD_API_KEY": "top", "RISKGUARD_API_SECRET": "top", "RISKGUARD_EXCHANGE_TIMEOUT": "7s"})
	cfg, err := loadConfig(path, env)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.AccountNames(), ","); got != "main,bot-2,c" {
		t.Fatalf("accounts = %s", got)
	}
	m, b, c := cfg.Accounts[0], cfg.Accounts[1], cfg.Accounts[2]
	type row struct{ got, want any }
	for name, r := range map[string]row{
		"main key from RISKGUARD_MAIN_API_KEY": {m.Exchange.APIKey, "k-main"},
		"bot-2 key from its file":              {b.Exchange.APIKey, sim.DefaultKey},
		"main base_url, the top level's":       {m.Exchange.BaseURL, "http://127.0.0.1:1"},
		"bot-2 base_url, its own":              {b.Exchange.BaseURL, "http://127.0.0.1:2"},
		"main timeout, the top level's env":    {m.Exchange.Timeout, 7 * time.Second},
		"bot-2 timeout, its own over the env":  {b.Exchange.Timeout, 5 * time.Second},
		"main state file, derived":             {m.Engine.StateFile, dir + "/riskguard-state.main.json"},
		"bot-2 state file, its own":            {b.Engine.StateFile, dir + "/bot2.json"},
		"c audit log, derived":                 {c.Engine.AuditLog, dir + "/audit.c.jsonl"},
		"main rules, the top level's":          {m.Rules.Rules[0].Name, "over-max-leverage"},
		"bot-2 rules, its rules_file":          {b.Rules.Rules[0].Name, "b-only"},
		"c rules, inline":                      {c.Rules.Rules[0].Name, "c-only"},
		"names":                                {m.Name + "," + b.Name, "main,bot-2"},
	} {
		if r.got != r.want {
			t.Errorf("%s: got %v, want %v", name, r.got, r.want)
		}
	}
	// The commands that read one account pick it by --account.
	if got, err := pickAccount(cfg, "c"); err != nil || got != c {
		t.Errorf("pickAccount c = %v, %v", got, err)
	}
	code, _, stderr := runOut(t, context.Background(), env, "backtest", "--config", path, "--csv", filepath.Join(dir, "none.csv"))
	if code != 2 || !strings.Contains(stderr, "guards several accounts: pass --account with one of: main, bot-2, c") {
		t.Errorf("backtest without --account: exit %d\n%s", code, stderr)
	}
	code, _, stderr = runOut(t, context.Background(), env, "record", "--config", path, "--account", "d", "--out", filepath.Join(dir, "rec.jsonl"))
	if code != 2 || !strings.Contains(stderr, `no account "d" in `+path+": pass --account with one of: main, bot-2, c") {
		t.Errorf("record --account d: exit %d\n%s", code, stderr)
	}
	// Without RISKGUARD_MAIN_*, main has no key pair: the top level's is
	// never inherited.
	_, err = loadConfig(path, envMap(map[string]string{"RISKGUARD_API_KEY": "top", "RISKGUARD_API_SECRET": "top"}))
	if err == nil || !strings.Contains(err.Error(), `account "main" has no credentials: set RISKGUARD_MAIN_API_KEY`) {
		t.Errorf("main without its variables: %v", err)
	}
}

// SIGHUP reloads every account, all or nothing: a bad rule in one
// account's file leaves both running as they were; a good file applies
// to both, and a renamed account takes a restart.
func TestAccountsReloadAllOrNothing(t *testing.T) {
	t.Parallel()
	a := newGuardEnv(t, "", nearLiqXBTC)
	b := newGuardEnv(t, "", nearLiqXBTC)
	ka, sa := credFiles(t, a.dir, "a")
	kb, sb := credFiles(t, a.dir, "b")
	bRules := filepath.Join(a.dir, "b.rules.yaml")
	write := func(path, body string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Both accounts start with a rule that never fires.
	calm := "rules:\n  - name: never\n    when: position.leverage > 1000\n"
	config := func(nameB string) string {
		return fmt.Sprintf("exchange:\n  timeout: 2s\nengine:\n  interval: 100ms\n  audit_log: %s\n  state_file: %s\naccounts:\n"+
			"  - name: a\n    exchange: {base_url: %s, api_key_file: %s, api_secret_file: %s}\n"+
			"  - name: %s\n    exchange: {base_url: %s, api_key_file: %s, api_secret_file: %s}\n    rules_file: %s\n%s",
			filepath.Join(a.dir, "audit.jsonl"), filepath.Join(a.dir, "state.json"), a.url, ka, sa, nameB, b.url, kb, sb, bRules, calm)
	}
	write(bRules, calm)
	write(a.config, config("b"))
	d := a.start(nil)
	defer d.stop(t)
	waitFor(t, "the start", 10*time.Second, func() bool { return strings.Contains(d.logs.String(), "riskguard started") })
	a.putNearLiquidation("XBTC", "BTC", 0.03)
	b.putNearLiquidation("XBTC", "BTC", 0.03)

	// b's file is broken, a's top-level rules act: rejected whole.
	write(a.config, strings.Replace(config("b"), calm, "rules:\n"+nearLiqXBTC, 1))
	write(bRules, "rules:\n  - name: broken\n    when: position.levrage > 1\n")
	d.reload <- nil
	waitFor(t, "the reload to be rejected", 10*time.Second, func() bool { return strings.Contains(d.logs.String(), "config reload rejected") })
	if !strings.Contains(d.logs.String(), "b.rules.yaml") {
		t.Errorf("the rejection does not name b's rules file:\n%s", d.logs.String())
	}
	if n := len(a.mutating()) + len(b.mutating()); n != 0 {
		t.Fatalf("a rejected reload applied some rules: %d mutating calls", n)
	}

	// A renamed account takes a restart: rejected, nothing applied.
	write(bRules, "rules:\n"+nearLiqXBTC)
	write(a.config, strings.Replace(config("b2"), calm, "rules:\n"+nearLiqXBTC, 1))
	d.reload <- nil
	waitFor(t, "the rename to be rejected", 10*time.Second, func() bool {
		return strings.Contains(d.logs.String(), "the accounts changed (a, b2, was a, b)")
	})
	if n := len(a.mutating()) + len(b.mutating()); n != 0 {
		t.Fatalf("a rejected reload applied some rules: %d mutating calls", n)
	}

	// Both files good: both accounts act.
	write(a.config, strings.Replace(config("b"), calm, "rules:\n"+nearLiqXBTC, 1))
	d.reload <- nil
	waitFor(t, "both accounts to act on the reloaded rules", 10*time.Second, func() bool {
		return len(a.mutatingOn("XBTC")) > 0 && len(b.mutatingOn("XBTC")) > 0
	})
	if !strings.Contains(d.logs.String(), `"msg":"config reloaded","accounts":2`) {
		t.Errorf("no 'config reloaded' line for two accounts:\n%s", d.logs.String())
	}
}

// Without accounts: status needs no --account and names none; an
// --account is refused with what to do.
func TestAccountsFlagWithoutAccounts(t *testing.T) {
	t.Parallel()
	g := newControlEnv(t, nearLiqXBTC, "")
	addr, _, stop := g.serve()
	defer stop()
	waitHealthy(t, addr)
	if code, out, errOut := g.ctl(addr, "status"); code != 0 || !strings.HasPrefix(out, "riskguard: healthy") || !strings.Contains(out, "XBTC") {
		t.Errorf("status: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := g.ctl(addr, "pause", "--account", "main"); code == 0 || !strings.Contains(errOut, "has no accounts: section (it guards one account): leave --account out") {
		t.Errorf("pause --account main: exit %d, stderr %q", code, errOut)
	}
	var list []web.AccountSummary
	if _, body := api(t, addr, "GET", "/api/v1/accounts", "", nil); json.Unmarshal([]byte(body), &list) != nil || len(list) != 0 {
		t.Errorf("GET /api/v1/accounts without accounts: = %s, want []", body)
	}
}

// The status page of a guard of two accounts: a row per account, and the
// account the address names (#account=b) with its positions below.
func TestAccountsStatusPage(t *testing.T) {
	t.Parallel()
	a := newGuardEnv(t, "", overMaxRule)
	b := newGuardEnv(t, "", overMaxRule)
	var accts strings.Builder
	for _, x := range []struct{ name, url string }{{"a", a.url}, {"b", b.url}} {
		k, s := credFiles(t, a.dir, x.name)
		fmt.Fprintf(&accts, "  - name: %s\n    exchange: {base_url: %s, api_key_file: %s, api_secret_file: %s}\n", x.name, x.url, k, s)
	}
	body := fmt.Sprintf("engine:\n  interval: 100ms\n  audit_log: %s\n  state_file: %s\n  listen: 127.0.0.1:0\naccounts:\n%srules:\n%s",
		filepath.Join(a.dir, "audit.jsonl"), filepath.Join(a.dir, "state.json"), accts.String(), overMaxRule)
	if err := os.WriteFile(a.config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, _, stop := a.serve()
	defer stop()
	for _, name := range []string{"a", "b"} {
		waitFor(t, "a complete snapshot of "+name, 10*time.Second, func() bool {
			_, body := api(t, addr, "GET", "/api/v1/status?account="+name, "", nil)
			return strings.Contains(body, `"healthy": true`)
		})
	}
	dom := chromiumDOM(t, "http://"+addr+"/#account=b")
	renderedPositions(t, dom, "XBTC", "XETH", "XSOL")
	for _, want := range []string{`id="accountlist"`, `href="#account=a"`, `href="#account=b"`, "<h2>Account b</h2>"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page lacks %s:\n%s", want, dom)
		}
	}
}

// Telegram with two accounts: /pause NAME pauses that account alone (its
// question names it), /status without a name says both.
func TestAccountsTelegram(t *testing.T) {
	t.Parallel()
	bot := &botAPI{}
	srv := httptest.NewServer(bot)
	defer srv.Close()
	a := newGuardEnv(t, "", nearLiqXBTC)
	b := newGuardEnv(t, "", nearLiqXBTC)
	var accts strings.Builder
	for _, x := range []struct{ name, url string }{{"a", a.url}, {"b", b.url}} {
		k, s := credFiles(t, a.dir, x.name)
		fmt.Fprintf(&accts, "  - name: %s\n    exchange: {base_url: %s, api_key_file: %s, api_secret_file: %s}\n", x.name, x.url, k, s)
	}
	body := fmt.Sprintf("engine:\n  interval: 100ms\n  audit_log: %s\n  state_file: %s\n"+
		"notify:\n  channels:\n    ops: {type: telegram, token_env: TG_TOKEN, chat_id: 100, api_url: %s, control_chat_ids: [100]}\n  group_wait: 0s\naccounts:\n%srules:\n%s",
		filepath.Join(a.dir, "audit.jsonl"), filepath.Join(a.dir, "state.json"), srv.URL, accts.String(), nearLiqXBTC)
	writeFile(t, a.config, body)
	d := a.start(map[string]string{"TG_TOKEN": "1:tok"})
	waitFor(t, "the control listening", 10*time.Second, func() bool { return strings.Contains(d.logs.String(), "telegram control listening") })

	bot.say(100, "/pause b")
	bot.confirm(t, "Account b: Pause every action until resumed?")
	waitFor(t, "b paused", 10*time.Second, func() bool {
		return strings.Contains(d.logs.String(), `"msg":"guard PAUSED by telegram:@alice for every rule and symbol until resumed`)
	})
	if strings.Count(d.logs.String(), `"msg":"guard PAUSED`) != 1 || !strings.Contains(d.logs.String(), `"account":"b","rule":"","symbol":"","by":"telegram:@alice"`) {
		t.Errorf("want one pause, of b:\n%s", d.logs.String())
	}
	a.putNearLiquidation("XBTC", "BTC", 0.03)
	b.putNearLiquidation("XBTC", "BTC", 0.03)
	waitFor(t, "a acting", 10*time.Second, func() bool { return len(a.mutatingOn("XBTC")) > 0 })
	waitFor(t, "b's held action said", 10*time.Second, func() bool {
		return strings.Contains(d.logs.String(), `"msg":"would cancel_orders XBTC, paused`) && strings.Contains(d.logs.String(), `"account":"b"`)
	})
	if calls := b.mutating(); len(calls) != 0 {
		t.Fatalf("paused account b sent %+v", calls)
	}
	bot.say(100, "/status")
	waitFor(t, "the status of both", 10*time.Second, func() bool {
		for _, m := range bot.sent("100", "[a] riskguard") {
			if strings.Contains(m["text"].(string), "[b] riskguard") && strings.Contains(m["text"].(string), "PAUSED") {
				return true
			}
		}
		return false
	})
	if code := d.stop(t); code != 0 {
		t.Errorf("exit %d", code)
	}
}
