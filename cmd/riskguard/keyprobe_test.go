package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
)

// corrupting serves ex with every open position of the positions
// listing (or only those on the symbol ids in only) having field set to
// the raw JSON value: an exchange listing nonsense.
func corrupting(t *testing.T, ex *sim.Exchange, field, value string, only ...int64) string {
	t.Helper()
	var v any
	vd := json.NewDecoder(strings.NewReader(value))
	vd.UseNumber() // 1e400 stays as written
	if err := vd.Decode(&v); err != nil {
		t.Fatalf("value %s: %v", value, err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		ex.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if r.URL.Path == "/v1/contracts/positions" && rec.Code == http.StatusOK {
			var env struct {
				Success bool             `json:"success"`
				Data    []map[string]any `json:"data"`
			}
			d := json.NewDecoder(bytes.NewReader(body))
			d.UseNumber()
			if err := d.Decode(&env); err != nil {
				t.Errorf("positions answer: %v", err)
			}
			for _, p := range env.Data {
				id, _ := p["symbolId"].(json.Number).Int64()
				if p["empty"] == false && (len(only) == 0 || contains(only, id)) {
					p[field] = v
				}
			}
			body, _ = json.Marshal(env)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rec.Code)
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func contains(ids []int64, id int64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// check --exchange over an account whose open positions list nonsense
// (issue 32, item 4): every position it could not judge is named with
// why, it never says the model fits when it judged none, and it exits 1
// saying what to do. Before, each of these printed "fits (every figure
// exact)" over an empty table and exited 0.
func TestCheckNamesPositionsItCannotJudge(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, field, value string
		only               []int64 // symbol ids corrupted; none: every open position
		why                string  // in every not-checked row
		summary            string
	}{
		{"margin NaN", "margin", `"NaN"`, nil, "unreadable: margin: ", "margin model: not checked: none of the 3 open positions could be judged (below)"},
		{"entry price -1", "entryPrice", `"-1"`, nil, "entry price -1 is not positive", "margin model: not checked: none of the 3 open positions could be judged (below)"},
		{"liquidation -5000", "liquidationPrice", `"-5000"`, nil, "liquidation price -5000 is negative", "margin model: not checked: none of the 3 open positions could be judged (below)"},
		{"margin 1e400", "margin", `"1e400"`, nil, "margin 1e400 is out of range", "margin model: not checked: none of the 3 open positions could be judged (below)"},
		{"liquidation 1e400", "liquidationPrice", `1e400`, nil, "liquidation price 1e400 is out of range", "margin model: not checked: none of the 3 open positions could be judged (below)"},
		{"one position's entry price 0", "entryPrice", `"0"`, []int64{103}, "entry price 0 is not positive", "margin model: on 2 of 3 open positions (1 not checked, below): "},
		{"one position of an unlisted symbol", "symbolId", `999`, []int64{102}, "the exchange's symbol list has no contract symbol with id 999", "margin model: on 2 of 3 open positions (1 not checked, below): "},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			g := newGuardEnv(t, "", overMaxRule)
			url := corrupting(t, g.ex, c.field, c.value, c.only...)
			code, out, stderr := runOut(t, context.Background(), g.env, "check", "--config", g.config, "--exchange", url)
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			if !strings.Contains(out, c.summary) {
				t.Errorf("stdout lacks %q", c.summary)
			}
			if len(c.only) == 0 && strings.Contains(out, "fits") {
				t.Errorf("says the model fits though it judged no position")
			}
			bad := 3
			if len(c.only) > 0 {
				bad = len(c.only)
			}
			_, list, _ := strings.Cut(out, "  not checked:\n")
			list, _, _ = strings.Cut(list, "\n\n")
			rows := strings.Split(strings.TrimSpace(list), "\n")
			if len(rows) != bad+1 || !regexp.MustCompile(`^SYMBOL\s+POSITION\s+WHY$`).MatchString(strings.TrimSpace(rows[0])) {
				t.Errorf("not-checked table %q, want a header and %d rows", list, bad)
			}
			for _, r := range rows[1:] {
				if !strings.Contains(r, c.why) || !regexp.MustCompile(`^\s+(XBTC|XETH|XSOL|symbol id 999)\s+1_\d+\s`).MatchString(r) {
					t.Errorf("row %q: want the symbol, the position's id and %q", r, c.why)
				}
			}
			want := "of 3 open positions could not be judged (under \"not checked\" above): look at "
			if !strings.Contains(stderr, want) {
				t.Errorf("stderr lacks %q", want)
			}
			if t.Failed() {
				t.Logf("stdout:\n%s\nstderr:\n%s", out, stderr)
			}
		})
	}
}

// An account holding no open position is not said to fit: there was
// nothing to judge.
func TestCheckFlatAccountNotChecked(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "", overMaxRule)
	for _, s := range []string{"XBTC", "XETH", "XSOL"} {
		if err := g.ex.PutPosition(sim.PositionSpec{Symbol: s, Empty: true}); err != nil {
			t.Fatal(err)
		}
	}
	code, out, stderr := runOut(t, context.Background(), g.env, "check", "--config", g.config, "--exchange", g.url)
	if code != 0 || !strings.Contains(out, "margin model: not checked: the account holds no open position") || strings.Contains(out, "fits") {
		t.Errorf("exit %d\n%s%s", code, out, stderr)
	}
}

// keyRules make every call a rule can: the settings call (two kinds),
// the cancel and the reduce-only order.
const keyRules = `
  - name: over-max-leverage
    when: position.leverage > riskLimit.maxLeverage
    actions:
      - action: lower_leverage
        leverage: riskLimit.maxLeverage
  - name: ring-fence
    when: position.cross && liquidationDistance < 0.02
    actions:
      - action: cancel_orders
      - action: set_isolated
  - name: cut-losing
    when: liquidationDistance < 0.01
    actions:
      - action: reduce_position
        fraction: 0.5
      - action: notify
`

// check --exchange lists the calls the rules make and, with --probe-key,
// whether the key may make each (issue 32, item 9), against a key with
// every permission and keys each lacking one (sim.Config.Forbidden): the
// settings call is sent back unchanged (yes, or NO: 403), the order is a
// reduce-only one on a symbol without a position (refused as
// REDUCE_ONLY_REJECTED: yes; 403: NO), the cancel is not probed; a NO
// exits 1 naming the call, its rules and the next step; no position
// changes and no order fills.
func TestCheckProbesTheKey(t *testing.T) {
	t.Parallel()
	settings := "POST " + exchange.RouteSettings
	order := "POST " + exchange.DefaultOrderPath
	for _, c := range []struct {
		name      string
		forbidden []string
		probe     bool
		code      int
		want      []string // each a regexp over the table's lines
		stderr    string
	}{
		{"without --probe-key", nil, false, 0, []string{
			`GET /v1/contracts/positions\s+every tick \(the account read\)\s+yes \(check read the account above\)`,
			`POST /v1/contracts/positions/\{symbol\}/settings \(lower_leverage, set_isolated\)\s+over-max-leverage, ring-fence\s+not probed: --probe-key tries it`,
			`POST /v1/contracts/orders/\{symbol\}/cancel \(cancel_orders\)\s+ring-fence\s+not probed: the exchange shows no open orders`,
			`POST /v1/contracts/orders/\{symbol\}/create \(reduce_position\)\s+cut-losing\s+not probed: --probe-key tries it`,
		}, ""},
		{"every permission", nil, true, 0, []string{
			`\(lower_leverage, set_isolated\)\s+over-max-leverage, ring-fence\s+yes \(XDOGE at its own \d+x (isolated|cross): accepted\)`,
			`\(cancel_orders\)\s+ring-fence\s+not probed: `,
			`\(reduce_position\)\s+cut-losing\s+yes \(a reduce-only IOC SELL 1 on XDOGE, where the account holds nothing: refused on its merits, 400 REDUCE_ONLY_REJECTED: no position on XDOGE to reduce\)`,
		}, ""},
		{"no order placing", []string{exchange.DefaultOrderPath}, true, 1, []string{
			`\(lower_leverage, set_isolated\)\s+over-max-leverage, ring-fence\s+yes \(`,
			`\(reduce_position\)\s+cut-losing\s+NO: 403 FORBIDDEN: the API key is not permitted to call POST /v1/contracts/orders/\{symbol\}/create`,
		}, order + " (rule cut-losing): the exchange refuses the key (403 FORBIDDEN: "},
		{"no settings", []string{exchange.RouteSettings}, true, 1, []string{
			`\(lower_leverage, set_isolated\)\s+over-max-leverage, ring-fence\s+NO: 403 FORBIDDEN: `,
			`\(reduce_position\)\s+cut-losing\s+yes \(`,
		}, settings + " (rules over-max-leverage, ring-fence): the exchange refuses the key (403 FORBIDDEN: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			g := newGuardEnvSim(t, sim.Config{Forbidden: c.forbidden}, "", keyRules)
			ex := g.ex
			before := ex.Positions()
			args := []string{"check", "--config", g.config, "--exchange", g.url}
			if c.probe {
				args = append(args, "--probe-key")
			}
			code, out, stderr := runOut(t, context.Background(), g.env, args...)
			if code != c.code {
				t.Errorf("exit %d, want %d", code, c.code)
			}
			_, table, _ := strings.Cut(out, "\nAPI key: the calls the guard makes\n")
			for _, w := range c.want {
				if !regexp.MustCompile(`(?m)^  .*` + w).MatchString(table) {
					t.Errorf("key table lacks %s", w)
				}
			}
			if !strings.Contains(stderr, c.stderr) || c.stderr == "" && stderr != "" {
				t.Errorf("stderr: want %q", c.stderr)
			}
			if c.stderr != "" && !strings.Contains(stderr, "allow the call in the key's settings on the exchange (README: Credentials), or take those actions out of the rules") {
				t.Errorf("stderr lacks the next step")
			}
			after := ex.Positions()
			if len(after) != len(before) {
				t.Fatalf("%d positions after the check, %d before", len(after), len(before))
			}
			for i := range before {
				b, a := before[i], after[i]
				if a.Leverage != b.Leverage || a.Cross != b.Cross || !a.Quantity.Equal(b.Quantity) || a.Version != b.Version || a.Empty != b.Empty {
					t.Errorf("position %s changed: %+v → %+v", b.ID, b, a)
				}
			}
			for _, call := range ex.Calls() {
				if call.Mutating && (!c.probe || call.Route != exchange.RouteSettings && call.Route != exchange.DefaultOrderPath) {
					t.Errorf("check sent %s %s (%d)", call.Method, call.Path, call.Status)
				}
				if call.Route == exchange.DefaultOrderPath && call.Status == http.StatusOK {
					t.Errorf("the probe order filled: %s", call.Body)
				}
			}
			if t.Failed() {
				t.Logf("stdout:\n%s\nstderr:\n%s", out, stderr)
			}
		})
	}
}

// The key's prober is the exchange client.
var _ keyProber = (*exchange.Client)(nil)

// A key that may not read the account: check says so with the next step.
func TestCheckKeyMayNotRead(t *testing.T) {
	t.Parallel()
	g := newGuardEnvSim(t, sim.Config{Forbidden: []string{"/v1/contracts/positions"}}, "", keyRules)
	code, out, stderr := runOut(t, context.Background(), g.env, "check", "--config", g.config, "--exchange", g.url)
	if code != 1 || !strings.Contains(stderr, "403: FORBIDDEN") ||
		!strings.Contains(stderr, ": the exchange refused the credentials: check RISKGUARD_API_KEY and RISKGUARD_API_SECRET, and that the key may read the account (README: Credentials)") {
		t.Errorf("exit %d\n%s%s", code, out, stderr)
	}
}

// --probe-key needs --exchange (a usage error) and credentials.
func TestCheckProbeKeyNeeds(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "", keyRules)
	code, _, stderr := runOut(t, context.Background(), g.env, "check", "--config", g.config, "--probe-key")
	if code != 2 || !strings.Contains(stderr, "--probe-key needs --exchange URL") {
		t.Errorf("without --exchange: exit %d\n%s", code, stderr)
	}
	code, out, stderr := runOut(t, context.Background(), envMap(nil), "check", "--config", g.config, "--exchange", g.url, "--probe-key")
	if code != 1 || !strings.Contains(stderr, "--probe-key needs the API key pair: set RISKGUARD_API_KEY and RISKGUARD_API_SECRET") ||
		!regexp.MustCompile(`\(reduce_position\)\s+cut-losing\s+not probed: no credentials`).MatchString(out) {
		t.Errorf("without credentials: exit %d\n%s%s", code, out, stderr)
	}
}

// check --exchange URL --probe-key with accounts: reads and probes each
// account on that exchange with its own key pair, under its name, and
// names an account on another exchange without sending its key there
// (issue 40, left over from issue 37).
func TestCheckProbeKeyWithAccounts(t *testing.T) {
	t.Parallel()
	a := newGuardEnvSim(t, sim.Config{Forbidden: []string{exchange.DefaultOrderPath}}, "", keyRules) // may not place orders
	b := newGuardEnv(t, "", keyRules)
	var accts strings.Builder
	for _, x := range []struct{ name, url string }{{"a", a.url}, {"b", b.url}} {
		k, s := filepath.Join(a.dir, x.name+".key"), filepath.Join(a.dir, x.name+".secret")
		for f, v := range map[string]string{k: sim.DefaultKey, s: sim.DefaultSecret} {
			if err := os.WriteFile(f, []byte(v+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		fmt.Fprintf(&accts, "  - name: %s\n    exchange: {base_url: %s, api_key_file: %s, api_secret_file: %s}\n", x.name, x.url, k, s)
	}
	accounts := filepath.Join(a.dir, "accounts.yaml")
	if err := os.WriteFile(accounts, []byte("accounts:\n"+accts.String()+"rules:\n"+keyRules), 0o600); err != nil {
		t.Fatal(err)
	}
	refused := regexp.MustCompile(`\(reduce_position\)\s+cut-losing\s+NO: 403 FORBIDDEN`)
	allowed := regexp.MustCompile(`\(reduce_position\)\s+cut-losing\s+yes \(a reduce-only IOC SELL`)
	for _, tc := range []struct {
		name, url, read, other string
		code                   int
		probe                  *regexp.Regexp
		stderr                 string
	}{
		{"a's exchange", a.url, "a", "b", 1, refused,
			"riskguard check: account a: --exchange " + a.url + ": POST /v1/contracts/orders/{symbol}/create (rule cut-losing): the exchange refuses the key"},
		{"b's exchange", b.url, "b", "a", 0, allowed, ""},
	} {
		before := map[string]int{"a": len(a.ex.Calls()), "b": len(b.ex.Calls())}
		code, out, stderr := runOut(t, context.Background(), envMap(nil), "check", "--config", accounts, "--exchange", tc.url, "--probe-key")
		if code != tc.code {
			t.Errorf("%s: exit %d, want %d", tc.name, code, tc.code)
		}
		if !strings.Contains(out, "\n== account "+tc.read+", at "+tc.url+" ==\n") || !strings.Contains(out, "\n== account "+tc.other+": not read: its exchange is ") {
			t.Errorf("%s: the accounts read and not read are not named", tc.name)
		}
		if n := len(tc.probe.FindAllString(out, -1)); n != 1 {
			t.Errorf("%s: %d probe rows matching %s, want 1", tc.name, n, tc.probe)
		}
		if tc.stderr != "" && !strings.Contains(stderr, tc.stderr) || tc.stderr == "" && stderr != "" {
			t.Errorf("%s: stderr, want %q", tc.name, tc.stderr)
		}
		// The key of the account not read went nowhere.
		otherEx := map[string]*sim.Exchange{"a": a.ex, "b": b.ex}[tc.other]
		for _, c := range otherEx.Calls()[before[tc.other]:] {
			if !strings.HasPrefix(c.Path, "/v1/market/") {
				t.Errorf("%s: account %s's exchange got %s %s", tc.name, tc.other, c.Method, c.Path)
			}
		}
		if t.Failed() {
			t.Logf("stdout:\n%s\nstderr:\n%s", out, stderr)
		}
	}
}
