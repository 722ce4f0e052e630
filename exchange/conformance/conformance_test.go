package conformance_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/conformance"
	"github.com/riskguard/riskguard/exchange/sim"
)

// t0 is mid-month, so the simulated exchange's closed orders (120 hours
// back) are all in that month.
var t0 = time.Date(2026, 11, 15, 12, 0, 0, 0, time.UTC)

// newSim is the default scenario's exchange, a minute in: its indexes have
// a minute of history.
func newSim(t *testing.T) *sim.Exchange {
	t.Helper()
	now := t0
	ex, err := sim.New(sim.Config{Key: "k", Secret: "s", Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	for range 60 {
		now = now.Add(time.Second)
		ex.Step(now)
	}
	return ex
}

// target is what the default scenario holds: XBTC long 0.8, an increment
// of 0.001, so a reduce reads back 0.799.
func target(v exchange.Venue, offers exchange.Calls) conformance.Target {
	return conformance.Target{Venue: v, Offers: offers, Symbol: "XBTC", Quantity: "0.8", Unknown: "XNOPE", Index: "BTC", Month: "202611"}
}

// TestClient runs the suite against the signed client, over HTTP,
// against the simulated exchange's server.
func TestClient(t *testing.T) {
	t.Parallel()
	conformance.Run(t, func(t *testing.T) conformance.Target {
		ex := newSim(t)
		srv := httptest.NewServer(ex)
		t.Cleanup(srv.Close)
		c, err := exchange.New(srv.URL, "k", "s", exchange.WithClock(ex.Now), exchange.WithRateLimit(0, 0))
		if err != nil {
			t.Fatal(err)
		}
		return target(c, exchange.Contract())
	})
}

// TestSimLocal runs the suite against the simulated exchange in process
// (what backtests and rule tests drive the engine with): every call but
// the history and the closed orders.
func TestSimLocal(t *testing.T) {
	t.Parallel()
	conformance.Run(t, func(t *testing.T) conformance.Target {
		return target(newSim(t).Local(), exchange.Calls{exchange.CallPositions, exchange.CallIndexPrices, exchange.CallTrades,
			exchange.CallSetPositionSettings, exchange.CallCancelOrders, exchange.CallPlaceOrder})
	})
}
