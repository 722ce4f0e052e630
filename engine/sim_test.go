package engine_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// Compile-time checks that the client, and the simulated exchange's
// in-process client, are what the engine reads and actuates.
var (
	_ market.Reader          = (*exchange.Client)(nil)
	_ engine.Actuator        = (*exchange.Client)(nil)
	_ market.Reader          = sim.Local{}
	_ engine.Actuator        = sim.Local{}
	_ market.InProcessReader = sim.Local{}
)

// simEngine runs the engine through the real client against the simulated
// exchange over HTTP.
func simEngine(t testing.TB, rs ...*rules.Rule) (*engine.Engine, *sim.Exchange) {
	t.Helper()
	for _, r := range rs {
		if err := r.Compile(); err != nil {
			t.Fatal(err)
		}
	}
	return simEngineWith(t, &rules.Set{Rules: rs}, nil)
}

// simEngineWith runs the engine with set and notifier n (nil: none)
// through the real client against a simulated exchange over HTTP.
func simEngineWith(t testing.TB, set *rules.Set, n journal.Notifier) (*engine.Engine, *sim.Exchange) {
	t.Helper()
	return simEngineDeps(t, set, engine.Deps{Notifier: n})
}

// simEngineDeps runs the engine with set and the collaborators d (its
// Reader and Actuator are the real client) against a simulated exchange
// over HTTP, without rate limit.
func simEngineDeps(t testing.TB, set *rules.Set, d engine.Deps) (*engine.Engine, *sim.Exchange) {
	t.Helper()
	ex, err := sim.New(sim.Config{Key: "k", Secret: "s", Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	client := overHTTP(t, ex)
	d.Reader, d.Actuator = client, client
	e, err := engine.New(engine.Config{}, set, d)
	if err != nil {
		t.Fatal(err)
	}
	return e, ex
}

// overHTTP serves h (the simulated exchange, or a proxy of it) on loopback
// for the test and returns the real client of it, with the sim's key pair
// "k", "s".
func overHTTP(t testing.TB, h http.Handler) *exchange.Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	client, err := exchange.New(srv.URL, "k", "s", exchange.WithRateLimit(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	return client
}

func reads(ex *sim.Exchange) map[string]int {
	n := make(map[string]int)
	for _, c := range ex.Calls() {
		n[c.Route]++
	}
	return n
}

// In steady state a tick makes two calls, whatever the number of positions:
// positions and index prices. Symbols are read once, and each open
// position's index history once (the stress grid's σ starts from it).
func TestCallsPerTick(t *testing.T) {
	t.Parallel()
	e, ex := simEngine(t, &rules.Rule{Name: "far", When: "liquidationDistance < 0.0001", OnNoData: rules.NoDataAlert,
		Actions: []rules.Action{{Kind: rules.CancelOrders}}})
	const ticks = 20
	for range ticks {
		if _, err := e.Tick(context.Background(), time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	got := reads(ex)
	want := map[string]int{"/v1/market/trades": 1, "/v1/contracts/positions": ticks, "/v1/market/indexPrices": ticks, "/v1/market/timestamp": 1}
	for route, n := range want {
		if got[route] != n {
			t.Errorf("%s called %d times, want %d", route, got[route], n)
		}
	}
	total := 0
	for _, n := range got {
		total += n
	}
	history := got["/v1/market/indexes/{name}"]
	if history != 3 {
		t.Errorf("%d index histories read, want 3 (BTC, ETH, SOL: the open positions' indexes)", history)
	}
	if total != 2*ticks+2+history {
		t.Errorf("total calls %d over %d ticks, want %d (2 per tick + symbols + clock + each index's history)", total, ticks, 2*ticks+2+history)
	}
}

// The tick that first sees the price past a rule's threshold sends the
// action: no tick of delay.
func TestActionInTheCrossingTick(t *testing.T) {
	t.Parallel()
	e, ex := simEngine(t, &rules.Rule{Name: "near", When: "liquidationDistance < 0.04", OnNoData: rules.NoDataAlert, Symbols: []string{"XBTC"},
		Cooldown: time.Minute, Actions: []rules.Action{{Kind: rules.CancelOrders}}})
	ctx := context.Background()
	if _, err := e.Tick(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if n := reads(ex)["/v1/contracts/orders/{symbol}/cancel"]; n != 0 {
		t.Fatalf("cancelled before the crossing: %d", n)
	}
	p, _ := ex.Position("XBTC")
	// Move BTC to 3% above XBTC's liquidation price.
	ex.SetIndexPrice("BTC", p.LiquidationPrice.Div(decimal.RequireFromString("0.97")).Round(1))
	rep, err := e.Tick(ctx, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if n := reads(ex)["/v1/contracts/orders/{symbol}/cancel"]; n != 1 || len(rep.Actions) != 1 || rep.Actions[0].Symbol != "XBTC" {
		t.Fatalf("crossing tick: %d cancel calls, actions %+v; want XBTC cancelled in this tick", n, rep.Actions)
	}
	if ex.OpenOrders("XBTC") != 0 {
		t.Error("XBTC orders still open")
	}
}

// BenchmarkTickOverHTTP is a whole tick through the client against the
// simulated exchange on loopback; it reports the calls each tick makes.
func BenchmarkTickOverHTTP(b *testing.B) {
	e, ex := simEngine(b, &rules.Rule{Name: "far", When: "liquidationDistance < 0.0001", OnNoData: rules.NoDataAlert,
		Actions: []rules.Action{{Kind: rules.CancelOrders}}})
	ctx := context.Background()
	if _, err := e.Tick(ctx, time.Now()); err != nil {
		b.Fatal(err)
	}
	ex.ResetCalls()
	ticks := 0
	for b.Loop() {
		if _, err := e.Tick(ctx, time.Now()); err != nil {
			b.Fatal(err)
		}
		ticks++
	}
	calls := 0
	for _, n := range reads(ex) {
		calls += n
	}
	b.ReportMetric(float64(calls)/float64(ticks), "calls/tick")
}
