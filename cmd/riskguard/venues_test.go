package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riskguard/riskguard/config"
	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/engine/act"
	"github.com/riskguard/riskguard/engine/backtest"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/engine/window"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/conformance"
	"github.com/riskguard/riskguard/exchange/sim"
)

// The consumers' own interfaces are each satisfied by the contract, the
// signed client and the simulated exchange's in-process client: a change
// to one that the contract does not follow fails to compile here.
var (
	_ market.Reader            = exchange.Reader(nil)
	_ engine.Actuator          = exchange.Actuator(nil)
	_ act.Exchange             = exchange.Actuator(nil)
	_ act.OrderPlacer          = exchange.OrderPlacer(nil)
	_ window.HistoryReader     = exchange.HistoryReader(nil)
	_ backtest.HistoryClient   = exchange.HistoryReader(nil)
	_ engine.ClosedOrderReader = exchange.ClosedOrderReader(nil)
	_ keyProber                = (*exchange.Client)(nil)
	_ backtest.BarsClient      = (*exchange.Client)(nil)

	_ exchange.Venue             = (*exchange.Client)(nil)
	_ exchange.OrderPlacer       = (*exchange.Client)(nil)
	_ exchange.HistoryReader     = (*exchange.Client)(nil)
	_ exchange.ClosedOrderReader = (*exchange.Client)(nil)
	_ exchange.Venue             = sim.Local{}
	_ exchange.OrderPlacer       = sim.Local{}
)

// simVenueConfig is an account's configuration for the simulated
// exchange served at url, with the key pair it accepts.
func simVenueConfig(url string) *config.Config {
	return &config.Config{Exchange: config.Exchange{BaseURL: url, APIKey: "k", APISecret: "s", MaxRetries: 1}}
}

// TestVenueRowsOfferWhatTheyBuild builds every row of the registry (the
// shipped one and the tests' venue without orders) against the simulated
// exchange over HTTP: what it builds offers the calls the row declares
// (load checks the rules against the declaration, without building it),
// and passes the conformance suite.
func TestVenueRowsOfferWhatTheyBuild(t *testing.T) {
	t.Parallel()
	for _, row := range testVenues() {
		t.Run(row.Name, func(t *testing.T) {
			t.Parallel()
			conformance.Run(t, func(t *testing.T) conformance.Target {
				now := time.Date(2026, 11, 15, 12, 0, 0, 0, time.UTC)
				ex, err := sim.New(sim.Config{Key: "k", Secret: "s", Now: func() time.Time { return now }})
				if err != nil {
					t.Fatal(err)
				}
				for range 30 { // half a minute of index history
					now = now.Add(time.Second)
					ex.Step(now)
				}
				srv := httptest.NewServer(ex)
				t.Cleanup(srv.Close)
				v, err := row.New(simVenueConfig(srv.URL), slog.New(slog.DiscardHandler), exchange.WithClock(ex.Now), exchange.WithRateLimit(0, 0))
				if err != nil {
					t.Fatal(err)
				}
				return conformance.Target{Venue: v, Offers: row.Offers, Symbol: "XBTC", Quantity: "0.8", Unknown: "XNOPE", Index: "BTC", Month: "202611"}
			})
		})
	}
}

// TestKindsNeedCallsOfTheContract: every call the kinds' table says a
// kind needs is a call of the exchange contract, so that a venue can
// offer it.
func TestKindsNeedCallsOfTheContract(t *testing.T) {
	t.Parallel()
	for _, k := range act.DefaultKinds() {
		spec := k.Spec()
		for _, c := range spec.Needs {
			if !exchange.Contract().Has(exchange.Call(c)) {
				t.Errorf("%s needs %q: not a call of the contract (%v)", spec.Name, c, exchange.Contract())
			}
		}
		if spec.Call != "" && len(spec.Needs) == 0 {
			t.Errorf("%s makes the %s call but needs none of the venue", spec.Name, spec.Call)
		}
	}
}

// withoutOrders is a venue that places no orders: the signed client's
// reads and idempotent calls only.
type withoutOrders struct{ exchange.Venue }

// testVenues is the shipped registry and a row for a venue that places
// no orders.
func testVenues() venues {
	return append(defaultVenues(), venue{
		Name:   "noorders",
		Offers: exchange.Calls{exchange.CallPositions, exchange.CallIndexPrices, exchange.CallTrades, exchange.CallSetPositionSettings, exchange.CallCancelOrders},
		New: func(cfg *config.Config, logger *slog.Logger, opts ...exchange.Option) (exchange.Venue, error) {
			c, err := newClient(cfg, logger, opts...)
			if err != nil {
				return nil, err
			}
			return withoutOrders{c}, nil
		},
	})
}

// venueConfig is a configuration on venue whose second rule cuts half
// the position, the other lowering leverage: a dry run without an audit
// log, which writes no file if it runs.
func venueConfig(venue, url string) string {
	return fmt.Sprintf(`exchange:
  venue: %s
  base_url: %s
engine:
  interval: 1s
  dry_run: true
  audit_log: ""
rules:
  - name: lower
    when: position.leverage > riskLimit.maxLeverage
    actions:
      - action: lower_leverage
        leverage: riskLimit.maxLeverage
  - name: cut-half
    when: liquidationDistance < 0.02
    actions:
      - action: notify
      - action: reduce_position
        fraction: 0.5
`, venue, url)
}

// TestLoadRefusesKindsTheVenueLacks: check and run refuse a rule whose
// kind needs a call the configured venue does not offer, naming the rule,
// the kind and the call at the action, before anything is built; the
// same rules on the shipped venue, or without the kind on the other,
// load.
func TestLoadRefusesKindsTheVenueLacks(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, venueConfig("noorders", "http://127.0.0.1:9"))
	want := path + `:18:17: rule "cut-half": reduce_position needs PlaceOrder, which venue "noorders" does not offer (it offers Positions, IndexPrices, Trades, SetPositionSettings, CancelOrders)`
	for _, args := range [][]string{
		{"check", "--config", path},
		{"run", "--config", path, "--once"},
	} {
		t.Run(args[0], func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			m := &Main{Stdout: &stdout, Stderr: &stderr, Getenv: envMap(map[string]string{"RISKGUARD_API_KEY": "k", "RISKGUARD_API_SECRET": "s"}), venues: testVenues()}
			err := m.Run(context.Background(), args)
			var ec exitCode
			if !errors.As(err, &ec) || ec != 1 {
				t.Fatalf("%v: %v, want exit status 1\n%s", args, err, stderr.String())
			}
			lines := strings.Split(stderr.String(), "\n")
			if !slices.Contains(lines, want) {
				t.Errorf("stderr lacks\n%s\ngot:\n%s", want, stderr.String())
			}
			if n := strings.Count(stderr.String(), "needs"); n != 1 {
				t.Errorf("%d refusals, want the one action:\n%s", n, stderr.String())
			}
		})
	}
	for _, tc := range []struct{ name, body string }{
		{"the shipped venue", venueConfig("rest", "https://api.example.com")},
		{"the default venue", strings.Replace(venueConfig("rest", "https://api.example.com"), "  venue: rest\n", "", 1)},
		{"no order kind", strings.Split(venueConfig("noorders", "https://api.example.com"), "  - name: cut-half")[0]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			m := &Main{Stdout: &stdout, Stderr: &stderr, Getenv: envMap(nil), venues: testVenues()}
			if err := m.Run(context.Background(), []string{"check", "--config", writeConfig(t, tc.body)}); err != nil {
				t.Fatalf("check: %v\n%s", err, stderr.String())
			}
		})
	}
}

// TestUnknownVenueIsRefused: a venue the registry does not name is the
// key's error, with the names it knows.
func TestUnknownVenueIsRefused(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, venueConfig("restt", "https://api.example.com"))
	code, _, stderr := runOut(t, context.Background(), envMap(nil), "check", "--config", path)
	want := path + `:2:10: exchange.venue: "restt" is not a venue riskguard knows (did you mean "rest"?): one of rest`
	if code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stderr:\n%s\nwant %s", code, stderr, want)
	}
}

// TestRunBuildsTheConfiguredVenue: the daemon builds the venue its row
// says: one tick through the venue without orders reads the simulated
// exchange and lowers XSOL's leverage, which it can.
func TestRunBuildsTheConfiguredVenue(t *testing.T) {
	t.Parallel()
	ex, err := sim.New(sim.Config{Key: "k", Secret: "s"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ex)
	t.Cleanup(srv.Close)
	body := strings.Split(venueConfig("noorders", srv.URL), "  - name: cut-half")[0]
	body = strings.Replace(body, "  dry_run: true\n", fmt.Sprintf("  state_file: %s/state.json\n", t.TempDir()), 1)
	path := writeConfig(t, body)
	reg := testVenues()
	var built atomic.Bool
	row := &reg[len(reg)-1]
	build := row.New
	row.New = func(cfg *config.Config, logger *slog.Logger, opts ...exchange.Option) (exchange.Venue, error) {
		built.Store(true)
		return build(cfg, logger, opts...)
	}
	var stdout, stderr bytes.Buffer
	m := &Main{Stdout: &stdout, Stderr: &stderr, Getenv: envMap(map[string]string{"RISKGUARD_API_KEY": "k", "RISKGUARD_API_SECRET": "s"}), venues: reg}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Run(ctx, []string{"run", "--config", path, "--once"}); err != nil {
		t.Fatalf("run --once: %v\n%s", err, stderr.String())
	}
	if p, _ := ex.Position("XSOL"); p.Leverage != 10 {
		t.Errorf("XSOL leverage %d after a tick, want 10\n%s", p.Leverage, stderr.String())
	}
	if !built.Load() {
		t.Error("run did not build the venue through its row")
	}
}

// TestReloadRefusesKindsTheVenueLacks: a reload that adds a rule whose
// kind needs a call the running venue does not offer is refused, all or
// nothing, as check refuses it; the old rules keep running.
func TestReloadRefusesKindsTheVenueLacks(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "", overMaxRule)
	body, err := os.ReadFile(g.config)
	if err != nil {
		t.Fatal(err)
	}
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(g.config, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	start := strings.Replace(string(body), "exchange:\n", "exchange:\n  venue: noorders\n", 1)
	write(start)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs, reload, done := &lockedBuffer{}, make(chan os.Signal, 1), make(chan error, 1)
	m := &Main{Stdout: io.Discard, Stderr: logs, Getenv: g.env, Reload: reload, venues: testVenues()}
	go func() { done <- m.Run(ctx, []string{"run", "--config", g.config, "--log-format", "json"}) }()
	waitFor(t, "the start", 10*time.Second, func() bool { return strings.Contains(logs.String(), "riskguard started") })

	write(start + `
  - name: cut-half
    when: liquidationDistance < 0.02
    actions:
      - action: reduce_position
        fraction: 0.5
`)
	reload <- nil
	waitFor(t, "the reload to be refused", 10*time.Second, func() bool {
		return strings.Contains(logs.String(), "config reload rejected") &&
			strings.Contains(logs.String(), `rule \"cut-half\": reduce_position needs PlaceOrder, which venue \"noorders\" does not offer`)
	})
	if strings.Contains(logs.String(), "config reloaded") {
		t.Errorf("the refused reload was applied:\n%s", logs.String())
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run: %v\n%s", err, logs.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the daemon did not stop within 20s")
	}
}

// record reads through the venue exchange.venue names, built by its row
// as run builds it, not through the signed client by name.
func TestRecordBuildsTheConfiguredVenue(t *testing.T) {
	t.Parallel()
	ex, err := sim.New(sim.Config{Key: "k", Secret: "s"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ex)
	t.Cleanup(srv.Close)
	path := writeConfig(t, strings.Split(venueConfig("noorders", srv.URL), "  - name: cut-half")[0])
	reg := testVenues()
	var built atomic.Bool
	row := &reg[len(reg)-1]
	build := row.New
	row.New = func(cfg *config.Config, logger *slog.Logger, opts ...exchange.Option) (exchange.Venue, error) {
		built.Store(true)
		return build(cfg, logger, opts...)
	}
	out := filepath.Join(t.TempDir(), "data.jsonl")
	var stdout, stderr bytes.Buffer
	m := &Main{Stdout: &stdout, Stderr: &stderr, Getenv: envMap(map[string]string{"RISKGUARD_API_KEY": "k", "RISKGUARD_API_SECRET": "s"}), venues: reg}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Run(ctx, []string{"record", "--config", path, "--out", out, "--duration", "300ms", "--interval", "50ms", "--log-format", "text"}); err != nil {
		t.Fatalf("record: %v\n%s", err, stderr.String())
	}
	if !built.Load() {
		t.Error("record did not build the venue through its row")
	}
	if data, err := os.ReadFile(out); err != nil || !strings.Contains(string(data), "XSOL") {
		t.Errorf("recorded %q, %v; want snapshots with XSOL\n%s", data, err, stderr.String())
	}
}

// TestRuleTestsReadTheRegistry: `riskguard test` and a backtest's
// --baseline read a config's venue from the program's registry, as check
// and run do (the registry is the one list of venues), so a venue of the
// registry is known there and its missing calls are refused the same way.
func TestRuleTestsReadTheRegistry(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "riskguard.yaml")
	if err := os.WriteFile(path, []byte(venueConfig("noorders", "http://127.0.0.1:9")), 0o600); err != nil {
		t.Fatal(err)
	}
	// The backtest's own config is the same venue without the order kind.
	own := filepath.Join(dir, "own.yaml")
	if err := os.WriteFile(own, []byte(strings.Split(venueConfig("noorders", "http://127.0.0.1:9"), "  - name: cut-half")[0]), 0o600); err != nil {
		t.Fatal(err)
	}
	suite := filepath.Join(dir, "rules.test.yaml")
	if err := os.WriteFile(suite, []byte("rule_files: [riskguard.yaml]\ntests:\n  - name: nothing fires\n    scenario: default\n    expect:\n      - at: 0s\n        firing: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	want := `reduce_position needs PlaceOrder, which venue "noorders" does not offer`
	for _, args := range [][]string{
		{"test", suite},
		{"backtest", "--config", own, "--baseline", path, "--csv", filepath.Join(dir, "none.csv")},
	} {
		t.Run(args[0], func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			m := &Main{Stdout: &stdout, Stderr: &stderr, Getenv: envMap(nil), venues: testVenues()}
			err := m.Run(context.Background(), args)
			out := stdout.String() + stderr.String()
			if err == nil || !strings.Contains(out+err.Error(), want) {
				t.Errorf("%v: %v, want the refusal %q\n%s", args, err, want, out)
			}
			if strings.Contains(out+fmt.Sprint(err), "not a venue riskguard knows") {
				t.Errorf("%v read the venue outside the registry:\n%s", args, out)
			}
		})
	}
}
