package sim_test

import (
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/shopspring/decimal"
)

// Isolating one of two cross positions at the same leverage moves no free
// balance, but takes its margin and PNL out of the pool: the other's
// liquidation price moves at once, and the next step liquidates it when
// the index is past it. (The exchange used to refresh the pool only when
// the free balance changed, so the other kept a stale price and outlived
// its liquidation.)
func TestIsolatingLeavesThePool(t *testing.T) {
	t.Parallel()
	d := decimal.RequireFromString
	sc := sim.DefaultScenario()
	sc.Balance = d("500")
	sc.Positions = []sim.PositionSpec{
		{Symbol: "XBTC", Direction: exchange.Long, Quantity: d("0.5"), EntryPrice: d("65000"), Leverage: 10, Cross: true},
		{Symbol: "XETH", Direction: exchange.Long, Quantity: d("10"), EntryPrice: d("3010"), Leverage: 20, Cross: true},
	}
	now := t0
	ex, err := sim.New(sim.Config{Key: testKey, Secret: testSecret, Now: func() time.Time { return now }, Scenario: sc})
	if err != nil {
		t.Fatal(err)
	}
	ex.SetIndexPrices(map[string]decimal.Decimal{"BTC": d("65000"), "ETH": d("2900")})
	ex.Step(now)
	before, _ := ex.Position("XETH")
	if before.Empty {
		t.Fatalf("XETH liquidated before the isolation: %+v", ex.Liquidations())
	}
	if _, err := ex.SetSettings("XBTC", exchange.Settings{Leverage: 10, Cross: false}); err != nil {
		t.Fatal(err)
	}
	after, _ := ex.Position("XETH")
	if !after.LiquidationPrice.GreaterThan(before.LiquidationPrice) {
		t.Fatalf("XETH's liquidation price %s → %s: want it closer once XBTC's margin left the pool", before.LiquidationPrice, after.LiquidationPrice)
	}
	now = now.Add(time.Second)
	ex.Step(now)
	if p, _ := ex.Position("XETH"); after.LiquidationPrice.GreaterThanOrEqual(d("2900")) != p.Empty {
		t.Errorf("XETH liquidation price %s, index 2900: liquidated %v", after.LiquidationPrice, p.Empty)
	}
}
