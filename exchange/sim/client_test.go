package sim_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
)

// TestWithClient drives every endpoint through the project's client, so
// the two agree on paths, envelope, signing and shapes.
func TestWithClient(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{})
	v.sim.Step(t0.Add(5 * time.Second))
	v.clock.Set(t0.Add(5 * time.Second))
	c, err := exchange.New(v.srv.URL, testKey, testSecret, exchange.WithClock(v.clock.Now), exchange.WithRateLimit(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	tr, err := c.Trades(ctx)
	if err != nil || len(tr.ContractsSymbols) != 4 {
		t.Fatalf("trades: %v", err)
	}
	if st, err := c.ServerTime(ctx); err != nil || !st.Equal(t0.Add(5*time.Second)) {
		t.Errorf("server time = %v, %v", st, err)
	}
	ip, err := c.IndexPrices(ctx)
	if err != nil || len(ip) != 4 {
		t.Errorf("index prices = %v, %v", ip, err)
	}
	if p, err := c.Prices(ctx); err != nil || len(p["XETH"]) != 3 {
		t.Errorf("prices = %v, %v", p, err)
	}
	if iv, err := c.IndexValue(ctx); err != nil || !iv.IsPositive() {
		t.Errorf("index value = %v, %v", iv, err)
	}
	if h, err := c.IndexHistory(ctx, "ETH", nil); err != nil || len(h) != 6 {
		t.Errorf("index history = %v, %v", h, err)
	}
	if codes, err := c.ErrorCodes(ctx); err != nil || codes[sim.CodeSignatureInvalid] == "" {
		t.Errorf("error codes = %v, %v", codes, err)
	}
	for name, f := range map[string]func() (int, error){
		"ticks":     func() (int, error) { r, err := c.Ticks(ctx, "XBTC"); return len(r), err },
		"bars":      func() (int, error) { r, err := c.Bars(ctx, "XBTC", "1m", nil); return len(r), err },
		"orderBook": func() (int, error) { r, err := c.OrderBook(ctx, "XBTC"); return len(r), err },
		"indexes":   func() (int, error) { r, err := c.Indexes(ctx); return len(r), err },
		"balances":  func() (int, error) { r, err := c.SpotBalances(ctx); return len(r), err },
	} {
		if n, err := f(); err != nil || n < 3 {
			t.Errorf("%s: %d bytes, %v", name, n, err)
		}
	}

	ps, err := c.Positions(ctx)
	if err != nil || len(ps) != 4 {
		t.Fatalf("positions: %v", err)
	}
	p, err := c.SetPositionSettings(ctx, "XSOL", exchange.Settings{Cross: false, Leverage: 10})
	if err != nil {
		t.Fatal(err)
	}
	wantDec(t, "XSOL liquidation", p.LiquidationPrice, "139.84")
	if p.Leverage != 10 || p.Version != 2 {
		t.Errorf("position = %+v", p)
	}
	_, err = c.SetPositionSettings(ctx, "XSOL", exchange.Settings{Cross: false, Leverage: 11})
	var apiErr *exchange.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != sim.CodeParameterInvalid || apiErr.Field != "leverage" || apiErr.Status != 400 {
		t.Errorf("leverage 11: %v", err)
	}
	if _, err := c.CancelOrders(ctx, "XETH"); err != nil || v.sim.OpenOrders("XETH") != 0 {
		t.Errorf("cancel: %v, %d left", err, v.sim.OpenOrders("XETH"))
	}
	n := 0
	for _, err := range c.ClosedOrdersAll(ctx, "202611", 50, 10) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 122 { // 120 generated + the 2 just cancelled
		t.Errorf("closed orders = %d, want 122", n)
	}

	// The client measures the server's clock: an offset of ten minutes
	// does not stop it signing valid requests.
	v.sim.SetClockOffset(10 * time.Minute)
	skewed, err := exchange.New(v.srv.URL, testKey, testSecret, exchange.WithClock(v.clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := skewed.Positions(ctx); err != nil {
		t.Errorf("positions with a skewed server clock: %v", err)
	}
}
