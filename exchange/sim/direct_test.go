package sim_test

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"testing"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/shopspring/decimal"
)

// The direct calls answer what the HTTP API answers for the same state.
func TestDirectMatchesHTTP(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{Seed: 7})
	c, err := exchange.New(v.srv.URL, testKey, testSecret, exchange.WithClock(v.clock.Now), exchange.WithRateLimit(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	tr, err := c.Trades(ctx)
	if err != nil {
		t.Fatal(err)
	}
	direct := v.sim.Trades()
	if !reflect.DeepEqual(stripDecimals(t, *tr), stripDecimals(t, direct)) {
		t.Errorf("Trades differs from /v1/market/trades:\n got %+v\nwant %+v", direct, *tr)
	}

	idx, err := c.IndexPrices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := v.sim.IndexPrices()
	if len(got) != len(idx) {
		t.Fatalf("IndexPrices: %d names, HTTP %d", len(got), len(idx))
	}
	for name, p := range idx {
		if !got[name].Equal(p) {
			t.Errorf("IndexPrices[%s] = %s, HTTP %s", name, got[name], p)
		}
	}
}

// stripDecimals compares decimals by value: JSON numbers decode with
// another exponent than the in-memory values.
func stripDecimals(t *testing.T, tr exchange.Trades) exchange.Trades {
	t.Helper()
	for i := range tr.ContractsSymbols {
		c := &tr.ContractsSymbols[i]
		d := &c.RiskLimit
		d.InitialMarginRate = dec(d.InitialMarginRate.String())
		d.MaintenanceMarginRate = dec(d.MaintenanceMarginRate.String())
		d.MarginRateStep = dec(d.MarginRateStep.String())
		d.RiskLimitBase = dec(d.RiskLimitBase.String())
		d.RiskLimitStep = dec(d.RiskLimitStep.String())
		d.MaxQuantity = dec(d.MaxQuantity.String())
		c.SettlementFeeRate = dec(c.SettlementFeeRate.String())
		c.BaseMinimumIncrement = dec(c.BaseMinimumIncrement.String())
		c.BaseMaximumQuantity = dec(c.BaseMaximumQuantity.String())
		c.QuoteMinimumIncrement = dec(c.QuoteMinimumIncrement.String())
	}
	for i := range tr.SpotsSymbols {
		s := &tr.SpotsSymbols[i]
		s.BaseMinimumIncrement = dec(s.BaseMinimumIncrement.String())
		s.BaseMaximumQuantity = dec(s.BaseMaximumQuantity.String())
		s.QuoteMinimumIncrement = dec(s.QuoteMinimumIncrement.String())
	}
	return tr
}

func TestSetSettingsDirect(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		symbol   string
		settings exchange.Settings
		status   int
		code     string
		wantLiq  string
	}{
		// DefaultScenario's doc: XSOL at 10× liquidates at 139.84.
		{name: "lower XSOL to 10", symbol: "XSOL", settings: exchange.Settings{Leverage: 10}, wantLiq: "139.84"},
		{name: "above max leverage", symbol: "XSOL", settings: exchange.Settings{Leverage: 12}, status: http.StatusBadRequest, code: sim.CodeParameterInvalid},
		{name: "unknown symbol", symbol: "NOPE", settings: exchange.Settings{Leverage: 1}, status: http.StatusNotFound, code: sim.CodeSymbolNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := newEnv(t, sim.Config{})
			balance := v.sim.Balance()
			p, err := v.sim.SetSettings(tt.symbol, tt.settings)
			if tt.status != 0 {
				var ae *exchange.APIError
				if !errors.As(err, &ae) || ae.Status != tt.status || ae.Code != tt.code {
					t.Fatalf("err = %v, want status %d code %s", err, tt.status, tt.code)
				}
				if !v.sim.Balance().Equal(balance) {
					t.Errorf("a refused change moved the balance: %s → %s", balance, v.sim.Balance())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantDec(t, "liquidation price", p.LiquidationPrice, tt.wantLiq)
			if p.Leverage != tt.settings.Leverage || p.Cross != tt.settings.Cross {
				t.Errorf("position %d× cross=%t, want %d× cross=%t", p.Leverage, p.Cross, tt.settings.Leverage, tt.settings.Cross)
			}
			stored, _ := v.sim.Position(tt.symbol)
			if !stored.LiquidationPrice.Equal(p.LiquidationPrice) {
				t.Errorf("stored liquidation %s, returned %s", stored.LiquidationPrice, p.LiquidationPrice)
			}
			// The extra margin comes out of the free balance.
			moved := balance.Sub(v.sim.Balance())
			wantDec(t, "margin moved", moved, p.Margin.Sub(dec("4053.33333333")).String())
		})
	}
}

func TestCancelDirect(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{})
	for i, want := range []int{5, 0} {
		n, err := v.sim.Cancel("XSOL")
		if err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("cancel #%d: %d cancelled, want %d", i+1, n, want)
		}
	}
	if got := v.sim.OpenOrders("XSOL"); got != 0 {
		t.Errorf("open orders after cancel: %d", got)
	}
	var ae *exchange.APIError
	if _, err := v.sim.Cancel("NOPE"); !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
		t.Errorf("cancel on an unknown symbol: %v", err)
	}
}

// The in-process client's cancel answers as the endpoint's data does, and
// refuses an unknown symbol as it does.
func TestLocalCancelOrders(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{})
	l := v.sim.Local()
	for _, want := range []string{`{"symbol":"XSOL","cancelled":5}`, `{"symbol":"XSOL","cancelled":0}`} {
		got, err := l.CancelOrders(context.Background(), "XSOL")
		if err != nil || string(got) != want {
			t.Errorf("CancelOrders = %s, %v; want %s", got, err, want)
		}
	}
	var ae *exchange.APIError
	if _, err := l.CancelOrders(context.Background(), "NOPE"); !errors.As(err, &ae) || ae.Status != http.StatusNotFound || ae.Code != sim.CodeSymbolNotFound {
		t.Errorf("cancel on an unknown symbol: %v", err)
	}
}

// SetIndexPrices moves every index before liquidating, once.
func TestSetIndexPrices(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{})
	v.sim.SetIndexPrices(map[string]decimal.Decimal{"SOL": dec("144.9"), "ETH": dec("3000")})
	if p, _ := v.sim.IndexPrice("SOL"); !p.Equal(dec("144.9")) {
		t.Errorf("SOL = %s", p)
	}
	liq := v.sim.Liquidations()
	if len(liq) != 1 || liq[0].Symbol != "XSOL" {
		t.Fatalf("liquidations = %+v, want XSOL only", liq)
	}
	if pos, _ := v.sim.Position("XSOL"); !pos.Empty {
		t.Errorf("XSOL not empty after liquidation")
	}
}

// LiquidationPrices agrees with Positions and leaves out empty positions.
func TestLiquidationPrices(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{})
	v.sim.SetIndexPrices(map[string]decimal.Decimal{"SOL": dec("144.9")}) // liquidates XSOL
	got := v.sim.LiquidationPrices()
	names := map[int64]string{}
	for _, c := range v.sim.Trades().ContractsSymbols {
		names[c.ID] = c.Name
	}
	want := 0
	for _, p := range v.sim.Positions() {
		name := names[p.SymbolID]
		liq, ok := got[name]
		switch {
		case p.Empty && ok:
			t.Errorf("%s: empty, yet listed at %s", name, liq)
		case !p.Empty && (!ok || !liq.Equal(p.LiquidationPrice)):
			t.Errorf("%s: %s, %v; Positions says %s", name, liq, ok, p.LiquidationPrice)
		}
		if !p.Empty {
			want++
		}
	}
	if _, ok := got["XSOL"]; ok || len(got) != want || want == 0 {
		t.Errorf("got %v, want the %d open positions without XSOL", got, want)
	}
}

// Equity is the balance and each open position's margin and unrealised
// PNL at the index prices: the same sum as from the positions list, at a
// few prices and after a settings change.
func TestEquityMatchesPositions(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{})
	fromList := func() decimal.Decimal {
		prices := v.sim.IndexPrices()
		base := map[int64]string{}
		for _, c := range v.sim.Trades().ContractsSymbols {
			base[c.ID] = c.BaseName
		}
		eq := v.sim.Balance()
		for _, p := range v.sim.Positions() {
			if p.Empty {
				continue
			}
			eq = eq.Add(p.Margin)
			if ix, ok := prices[base[p.SymbolID]]; ok {
				u := ix.Sub(p.EntryPrice).Mul(p.Quantity)
				if p.Direction == exchange.Short {
					u = u.Neg()
				}
				eq = eq.Add(u)
			}
		}
		return eq
	}
	check := func(when string) {
		t.Helper()
		if got, want := v.sim.Equity(), fromList(); !got.Equal(want) {
			t.Errorf("%s: Equity = %s, from the positions %s", when, got, want)
		}
	}
	check("at start")
	prices := v.sim.IndexPrices()
	for name, p := range prices {
		prices[name] = p.Mul(decimal.RequireFromString("0.97"))
	}
	v.sim.SetIndexPrices(prices)
	check("after a 3% fall")
	if _, err := v.sim.SetSettings("XSOL", exchange.Settings{Leverage: 10}); err != nil {
		t.Fatal(err)
	}
	check("after a leverage cut")
}
