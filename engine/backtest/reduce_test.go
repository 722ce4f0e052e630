package backtest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/backtest"
	"github.com/shopspring/decimal"
)

// btcCrash moves BTC from 65,000 down to 33,000 in two minutes, one step a
// second: past the default XBTC's liquidation price (cross, long 0.8 at
// 10×, 33,101).
func btcCrash() *sliceSource {
	src := &sliceSource{}
	for s := 0; s <= 120; s++ {
		p := 65000 - 32000*float64(s)/120
		src.steps = append(src.steps, backtest.Step{
			Time:   t0.Add(time.Duration(s) * time.Second),
			Prices: map[string]decimal.Decimal{"BTC": decimal.NewFromFloat(p).Round(1)},
		})
	}
	return src
}

const reduceXBTC = `
rules:
  - name: reduce-near-liquidation
    when: liquidationDistance < 0.05
    symbols: [XBTC]
    cooldown: 10s
    severity: critical
    actions:
      - action: reduce_position
        fraction: 0.5
`

// The in-process exchange replays reduce orders: without the guard XBTC
// is liquidated; with it, each halving moves the cross liquidation price
// away, XBTC survives smaller, and the report lists the reduce orders.
func TestBacktestReducePosition(t *testing.T) {
	t.Parallel()
	res := run(t, backtest.Options{Rules: parseRules(t, reduceXBTC), Baseline: parseRules(t, strings.Replace(reduceXBTC, "reduce_position\n        fraction: 0.5", "notify", 1))}, btcCrash())
	if len(res.Unguarded.Liquidations) != 1 || res.Unguarded.Liquidations[0].Symbol != "XBTC" {
		t.Fatalf("unguarded liquidations = %+v, want XBTC", res.Unguarded.Liquidations)
	}
	if len(res.Guarded.Liquidations) != 0 {
		t.Fatalf("guarded liquidations = %+v, want none", res.Guarded.Liquidations)
	}
	rs := res.Guarded.Rules[0]
	if rs.Actions < 1 || rs.Failed != 0 {
		t.Errorf("guarded rule stats = %+v, want reduce orders and no failure", rs)
	}
	var xbtc *backtest.PositionEnd
	for i, p := range res.Guarded.Positions {
		if p.Symbol == "XBTC" {
			xbtc = &res.Guarded.Positions[i]
		}
	}
	if xbtc == nil || xbtc.Liquidated || !xbtc.LiquidationPrice.IsPositive() || !xbtc.LiquidationPrice.LessThan(decimal.NewFromInt(33000)) {
		t.Errorf("guarded XBTC at the end = %+v, want open, liquidating under 33,000", xbtc)
	}
	// Reducing realises the loss on what it takes off; the equity is the
	// same as holding it at the index, and more than the liquidated run's.
	if !res.Guarded.RealizedPNL.IsNegative() || !res.Guarded.Equity.GreaterThan(res.Unguarded.Equity) {
		t.Errorf("guarded realised %s, equity %s; unguarded equity %s", res.Guarded.RealizedPNL, res.Guarded.Equity, res.Unguarded.Equity)
	}
	sum := backtest.Summary(res)
	for _, want := range []string{"liquidations the guard avoided:", "XBTC at", "only guarded   reduce_position XBTC (reduce-near-liquidation)"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
}

// An account rule cuts every cross position when the pool is running out:
// each target gets its own order, through the same decision.
func TestBacktestAccountRuleReduces(t *testing.T) {
	t.Parallel()
	const cut = `
rules:
  - name: cut-cross
    scope: account
    when: account.marginRatio > 0.5
    targets: cross
    cooldown: 10s
    severity: critical
    actions:
      - action: reduce_position
        fraction: 0.5
`
	res := run(t, backtest.Options{Rules: parseRules(t, cut), Baseline: parseRules(t, strings.Replace(cut, "reduce_position\n        fraction: 0.5", "notify", 1))}, btcCrash())
	if len(res.Unguarded.Liquidations) != 1 || len(res.Guarded.Liquidations) != 0 {
		t.Fatalf("liquidations without %+v, with %+v: want XBTC saved", res.Unguarded.Liquidations, res.Guarded.Liquidations)
	}
	if rs := res.Guarded.Rules[0]; rs.Actions < 1 || rs.Failed != 0 {
		t.Errorf("guarded rule stats = %+v", rs)
	}
	if sum := backtest.Summary(res); !strings.Contains(sum, "only guarded   reduce_position XBTC (cut-cross)") {
		t.Errorf("summary lacks the account rule's order:\n%s", sum)
	}
}
