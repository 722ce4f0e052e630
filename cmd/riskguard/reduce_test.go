package main

// reduce_position end to end (issue 19, item 4): the daemon's run path,
// over HTTP, against the simulated exchange.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/act"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/shopspring/decimal"
)

// The adapters the daemon and backtests run with can place orders.
var (
	_ act.OrderPlacer = (*exchange.Client)(nil)
	_ act.OrderPlacer = sim.Local{}
)

// exchange.order_path: the default, an override from the environment, and
// a path the signing cannot carry refused at load with its key.
func TestLoadConfigOrderPath(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, "exchange:\n  base_url: https://api.example.com\n"+minimalRules)
	cfg, err := loadConfig(path, envMap(nil))
	if err != nil || cfg.Exchange.OrderPath != exchange.DefaultOrderPath {
		t.Fatalf("order path %q, %v; want the default", cfg.Exchange.OrderPath, err)
	}
	cfg, err = loadConfig(path, envMap(map[string]string{"RISKGUARD_EXCHANGE_ORDER_PATH": "/v1/orders/{symbol}"}))
	if err != nil || cfg.Exchange.OrderPath != "/v1/orders/{symbol}" {
		t.Fatalf("order path %q, %v; want the override", cfg.Exchange.OrderPath, err)
	}
	bad := writeConfig(t, "exchange:\n  base_url: https://api.example.com\n  order_path: /v1/orders\n"+minimalRules)
	if _, err := loadConfig(bad, envMap(nil)); err == nil || !strings.Contains(err.Error(), "order_path") || !strings.Contains(err.Error(), "hold {symbol} once") {
		t.Errorf("err = %v, want order_path refused", err)
	}
}

// reduceXBTCRule halves XBTC (the default scenario's one cross position,
// long 0.8) when it comes within 5% of its liquidation price.
const reduceXBTCRule = `
  - name: reduce-near-liquidation
    when: liquidationDistance < 0.05
    symbols: [XBTC]
    cooldown: %s
    severity: critical
    actions:
      - action: cancel_orders
      - action: reduce_position
        fraction: 0.5
`

func reduceRule(cooldown string) string { return strings.Replace(reduceXBTCRule, "%s", cooldown, 1) }

// reduceRecords are the audit log's reduce_position records.
func (g *guardEnv) reduceRecords() []journal.Record {
	var out []journal.Record
	for _, r := range g.auditLines() {
		if r.Action == "reduce_position" {
			out = append(out, r)
		}
	}
	return out
}

// XBTC 3% from liquidation: one tick cancels its orders, then sends a
// reduce-only IOC SELL of 0.4 over HTTP; the exchange fills it, the
// read-back shows 0.4 left and the liquidation price the model predicted,
// further from the index.
func TestRunReducesPositionNearLiquidation(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "", reduceRule("5m"))
	g.putNearLiquidation("XBTC", "BTC", 0.03)
	before := g.position("XBTC")
	if !before.Quantity.Equal(decimal.RequireFromString("0.8")) || !before.Cross {
		t.Fatalf("scenario changed: XBTC %+v", before)
	}
	code, stderr := g.once()
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	after := g.position("XBTC")
	if !after.Quantity.Equal(decimal.RequireFromString("0.4")) {
		t.Fatalf("XBTC quantity = %s after the tick, want 0.4\n%s", after.Quantity, stderr)
	}
	if !after.LiquidationPrice.LessThan(before.LiquidationPrice) {
		t.Errorf("liquidation %s → %s: want further from the index", before.LiquidationPrice, after.LiquidationPrice)
	}
	// Cancel first, then the order; the order's body is the documented one.
	var paths []string
	var orderBody string
	for _, c := range g.mutating() {
		paths = append(paths, c.Path)
		if strings.HasSuffix(c.Path, "/create") {
			orderBody = c.Body
		}
	}
	if want := []string{"/v1/contracts/orders/XBTC/cancel", "/v1/contracts/orders/XBTC/create"}; strings.Join(paths, " ") != strings.Join(want, " ") {
		t.Errorf("mutating calls = %v, want %v", paths, want)
	}
	var body exchange.OrderRequest
	if err := json.Unmarshal([]byte(orderBody), &body); err != nil || body.Side != exchange.Sell || body.Type != exchange.OrderMarket ||
		body.Flags != exchange.ReduceOnly|exchange.ImmediateOrCancel || !body.Quantity.Equal(decimal.RequireFromString("0.4")) {
		t.Errorf("order body %s (%v)", orderBody, err)
	}
	var result *journal.Record
	for _, r := range g.reduceRecords() {
		if r.Phase == "result" {
			result = &r
		}
	}
	if result == nil || result.Prediction == nil {
		t.Fatalf("no reduce_position result with a prediction in the audit log: %+v\n%s", g.reduceRecords(), stderr)
	}
	p := result.Prediction
	if p.ActualQuantity == nil || !p.ActualQuantity.Equal(decimal.RequireFromString("0.4")) || p.QuantityAfter == nil || !p.QuantityAfter.Equal(*p.ActualQuantity) {
		t.Errorf("prediction quantity after %v, read back %v: want 0.4 both", p.QuantityAfter, p.ActualQuantity)
	}
	if p.Actual == nil || !p.Actual.Equal(p.LiquidationAfter) || !p.Actual.Equal(after.LiquidationPrice) {
		t.Errorf("liquidation predicted %s, read back %v, exchange %s", p.LiquidationAfter, p.Actual, after.LiquidationPrice)
	}
	if p.RealisedPNL == nil || !p.RealisedPNL.IsNegative() || !p.MarginMoved.IsNegative() || p.FreeAfter == nil {
		t.Errorf("prediction = %+v: want a realised loss, margin released and the free balance after", p)
	}
	if !p.FreeAfter.Equal(g.ex.Balance()) {
		t.Errorf("free balance predicted %s, exchange %s", p.FreeAfter, g.ex.Balance())
	}
	for _, want := range []string{"reduce_position XBTC SELL 0.4 (reduce-only, IOC)", "quantity 0.8 → 0.4 at", "realised PNL", "cross pool"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("log lacks %q:\n%s", want, stderr)
		}
	}
	for _, r := range g.auditLines() {
		if r.Type == "model" {
			t.Errorf("the model disagreed with the exchange: %s", r.Reason)
		}
	}
}

// The dry run says what it would send and what the model predicts, and
// sends nothing.
func TestRunDryReducePosition(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "  dry_run: true\n", reduceRule("5m"))
	g.putNearLiquidation("XBTC", "BTC", 0.03)
	code, stderr := g.once()
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if len(g.mutating()) != 0 {
		t.Errorf("a dry run sent %v", g.mutating())
	}
	if !strings.Contains(stderr, "would reduce_position XBTC SELL 0.4 (reduce-only, IOC): quantity 0.8 → 0.4") {
		t.Errorf("no would-line with the prediction:\n%s", stderr)
	}
}

// An exchange that ignores REDUCE_ONLY (the Grows fault: the order is
// answered FILLED and the position grows): the read-back shows the larger
// position, a critical error is audited, logged and notified, and no
// further reduce order goes out while the rule keeps firing.
func TestRunReduceGrowsStopsTheKind(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "", reduceRule("300ms"))
	g.ex.InjectFault(exchange.DefaultOrderPath, sim.Fault{Grows: true, Times: 1})
	g.putNearLiquidation("XBTC", "BTC", 0.03)
	d := g.start(campaignEnv(g.url))
	waitFor(t, "the kind stopped", 10*time.Second, func() bool {
		for _, r := range g.auditLines() {
			if r.Type == "stopped" && r.Action == "reduce_position" {
				return true
			}
		}
		return false
	})
	// The rule fires again after its cooldown; its reduce is held.
	waitFor(t, "a reduce held back", 10*time.Second, func() bool {
		for _, r := range g.reduceRecords() {
			if r.Phase == "skipped" && strings.Contains(r.Reason, "stopped until restart") {
				return true
			}
		}
		return false
	})
	// The other kinds go on: the rule's cancel_orders is sent again.
	var orders int
	waitFor(t, "a cancel after the stop", 10*time.Second, func() bool {
		orders = 0
		cancelsAfter := 0
		for _, c := range g.mutating() {
			switch {
			case strings.HasSuffix(c.Path, "/create"):
				orders++
			case strings.HasSuffix(c.Path, "/cancel") && orders > 0:
				cancelsAfter++
			}
		}
		return cancelsAfter > 0
	})
	d.running(t)
	if orders != 1 {
		t.Errorf("%d orders sent, want 1: none after the position grew", orders)
	}
	if q := g.position("XBTC").Quantity; !q.Equal(decimal.RequireFromString("1.2")) {
		t.Errorf("XBTC quantity %s, want 1.2 (grown by the faulty exchange, never reduced again)", q)
	}
	logs := d.logs.String()
	for _, want := range []string{"the position grew after a reduce-only order", "XBTC 0.8 → 1.2", "reduce_position is stopped", "until riskguard restarts"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q", want)
		}
	}
	var errRec bool
	for _, r := range g.reduceRecords() {
		if r.Phase == "error" && strings.Contains(r.Error, "grew") {
			errRec = true
		}
	}
	if !errRec {
		t.Errorf("no reduce_position error record: %+v", g.reduceRecords())
	}
	d.stop(t)
}

// An order path that would reach another endpoint once the server cleans
// or decodes it, or forge a header, is refused by check as by run (issue
// 32, item 2): check once said OK to each of these.
func TestOrderPathTraversalRefused(t *testing.T) {
	t.Parallel()
	for _, p := range []string{
		"/v1/contracts/orders/../../../admin/{symbol}",
		"/v1/../v1/market/{symbol}",
		"/v1/contracts/orders/%2e%2e/admin/{symbol}",
		"/v1/contracts/orders/{symbol}/create\r\nX-Injected: 1",
		"/v1/contracts//orders/{symbol}/create",
		`/v1/contracts/orders\..\{symbol}`,
	} {
		cfg := writeConfig(t, "exchange:\n  base_url: https://api.example.com\n  order_path: "+strconvQuote(p)+"\n"+minimalRules)
		code, _, stderr := runOut(t, context.Background(), envMap(nil), "check", "--config", cfg)
		if code == 0 || !strings.Contains(stderr, "order_path") {
			t.Errorf("check accepted order_path %q (exit %d):\n%s", p, code, stderr)
		}
	}
}

// strconvQuote is s as a YAML double-quoted scalar.
func strconvQuote(s string) string { return strconv.Quote(s) }

// check refuses a base URL run would refuse: one verdict, one loader
// (issue 32, item 11: check said OK to a base URL with a path).
func TestCheckRefusesWhatRunRefuses(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, "exchange:\n  base_url: https://api.example.com\n"+minimalRules)
	env := envMap(map[string]string{"RISKGUARD_EXCHANGE_BASE_URL": "http://127.0.0.1:8790/api"})
	code, _, stderr := runOut(t, context.Background(), env, "check", "--config", cfg)
	if code == 0 || !strings.Contains(stderr, "a path is not supported") || !strings.Contains(stderr, "RISKGUARD_EXCHANGE_BASE_URL") {
		t.Errorf("check with a base URL with a path: exit %d\n%s", code, stderr)
	}
}

// check without a config says where it looked and the next step, as run
// does (issue 32, item 15).
func TestCheckWithoutConfigSaysTheNextStep(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "riskguard.yaml")
	code, _, stderr := runOut(t, context.Background(), envMap(nil), "check", "--config", missing)
	if code != 1 || !strings.Contains(stderr, "riskguard check: no config at "+missing+": copy rules.example.yaml to it") {
		t.Errorf("exit %d:\n%s", code, stderr)
	}
}

// A missing credential is named: a key set and its secret forgotten says
// the secret (issue 32, item 15).
func TestMissingCredentialNamed(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, "exchange:\n  base_url: http://127.0.0.1:1\n"+minimalRules)
	code, _, stderr := runOut(t, context.Background(), envMap(map[string]string{"RISKGUARD_API_KEY": "k"}), "run", "--config", cfg, "--once")
	if code == 0 || !strings.Contains(stderr, "credentials missing: the API secret (RISKGUARD_API_SECRET, or exchange.api_secret_file)") || strings.Contains(stderr, "the API key (") {
		t.Errorf("exit %d:\n%s", code, stderr)
	}
}

// exchange.client_order_id_field (issue 30): the order carries its client
// order id, a function of its intent, under the configured field; the
// audit's records of the order carry the same id; an exchange that takes
// such ids has it. Without the setting nothing is sent (the spec shows no
// such field; TestRunReducesPositionNearLiquidation's body).
func TestRunSendsTheClientOrderID(t *testing.T) {
	t.Parallel()
	g := newGuardEnvSim(t, sim.Config{ClientOrderIDField: "newClientOrderId"}, "", reduceRule("5m"))
	body := fmt.Sprintf("exchange:\n  base_url: %s\n  client_order_id_field: newClientOrderId\nengine:\n  interval: 100ms\n  audit_log: %s\n  state_file: %s\nrules:\n%s",
		g.url, filepath.Join(g.dir, "audit.jsonl"), filepath.Join(g.dir, "state.json"), reduceRule("5m"))
	if err := os.WriteFile(g.config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	g.putNearLiquidation("XBTC", "BTC", 0.03)
	if code, stderr := g.once(); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	var sent string
	for _, c := range g.mutatingOn("XBTC") {
		if strings.HasSuffix(c.Path, "/create") {
			var b struct {
				ID string `json:"newClientOrderId"`
			}
			if err := json.Unmarshal([]byte(c.Body), &b); err != nil {
				t.Fatal(err)
			}
			sent = b.ID
		}
	}
	var intent string
	for _, r := range g.reduceRecords() {
		if r.Phase == "sent" {
			intent = act.IntentID(r.Symbol, r.Action, r.Time)
		}
		if r.ClientOrderID != sent {
			t.Errorf("audit %s record's client order id %q, sent %q", r.Phase, r.ClientOrderID, sent)
		}
	}
	if want := act.ClientOrderID(intent); intent == "" || sent != want {
		t.Fatalf("client order id sent %q, want %q (intent %q)", sent, want, intent)
	}
	if got := g.position("XBTC").Quantity; !got.Equal(decimal.RequireFromString("0.4")) {
		t.Errorf("XBTC quantity %s, want 0.4: the order with its id filled once", got)
	}
	bad := strings.Replace(body, "client_order_id_field: newClientOrderId", "client_order_id_field: client id", 1)
	if err := os.WriteFile(g.config, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, stderr := g.run(context.Background(), "check", "--config", g.config); code == 0 || !strings.Contains(stderr, "client_order_id_field") {
		t.Errorf("check of a bad field name: exit %d\n%s", code, stderr)
	}
}
