package backtest_test

import (
	"math"
	"os"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/backtest"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/shopspring/decimal"
)

// Issue 38's wick: inside a 12% wick on a mixed account (XBTC ×25 cross,
// XETH short ×20 isolated, XSOL ×8 isolated, 3,000 free) the running σ
// jumps, every position is "liquidated by a likely move anyway", and the
// stack of vetoes let a funded isolation move XBTC much closer to its
// liquidation price in the middle of the wick. With rules.example.yaml no
// call moves a position closer while its index is in a fast move: every
// such call is left out and said, none is in the verdict's list of calls
// that left a position closer, and the guard liquidates nothing the run
// without it keeps.
func TestNoCloserCallInAWick(t *testing.T) {
	t.Parallel()
	d := decimal.RequireFromString
	sc := sim.DefaultScenario()
	sc.Balance = d("3000")
	sc.OpenOrders = nil
	sc.Positions = []sim.PositionSpec{
		{Symbol: "XBTC", Direction: "LONG", Quantity: d("0.5"), EntryPrice: d("65000"), Leverage: 25, Cross: true},
		{Symbol: "XETH", Direction: "SHORT", Quantity: d("12"), EntryPrice: d("3010"), Leverage: 20, Cross: false},
		{Symbol: "XSOL", Direction: "LONG", Quantity: d("400"), EntryPrice: d("150"), Leverage: 8, Cross: false},
	}
	// Ten quiet minutes (±0.1% every 10 s), then every index falls 12%
	// over four minutes and comes back over four, a step every 5 s.
	src := &sliceSource{}
	at := t0
	step := func(f float64) {
		src.steps = append(src.steps, backtest.Step{Time: at, Prices: map[string]decimal.Decimal{
			"BTC": decimal.NewFromFloat(65000 * f).Round(2), "ETH": decimal.NewFromFloat(3010 * f).Round(2), "SOL": decimal.NewFromFloat(150 * f).Round(3)}})
		at = at.Add(5 * time.Second)
	}
	for i := range 120 {
		step(1 + 0.001*math.Sin(float64(i)))
	}
	for i := 1; i <= 48; i++ {
		step(1 - 0.12*float64(i)/48)
	}
	for i := 1; i <= 48; i++ {
		step(0.88 + 0.12*float64(i)/48)
	}
	for range 60 {
		step(1)
	}
	example, err := os.ReadFile("../../rules.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, backtest.Options{Rules: parseRules(t, string(example)), Scenario: sc}, src)
	v := backtest.VerdictOf(res)
	for _, c := range v.Closer {
		t.Errorf("a call left a position closer to its liquidation price in the wick: %+v", c)
	}
	if len(v.Caused) != 0 {
		t.Errorf("self-inflicted liquidations %+v", v.Caused)
	}
	said := false
	for _, s := range v.Skips {
		said = said || s.Action == "set_isolated"
	}
	if !said {
		t.Errorf("no isolation left out in the wick; skips %+v", v.Skips)
	}
}
