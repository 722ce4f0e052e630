package backtest_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/backtest"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/shopspring/decimal"
)

// The account measure at its worst, on a cross XBTC alone: without the
// guard XBTC is liquidated
// in the crash (its worst is 0); with reduce orders it survives, and its
// worst is above 0 and below the measure on the flat start. On a flat
// path nothing moves, so the worst is the start's in both runs, the same
// figure. The verdict says both, as text and as JSON.
func TestBacktestWorstAccountMeasure(t *testing.T) {
	t.Parallel()
	flat := &sliceSource{}
	for s := 0; s <= 30; s++ {
		flat.steps = append(flat.steps, backtest.Step{Time: t0.Add(time.Duration(s) * time.Second),
			Prices: map[string]decimal.Decimal{"BTC": decimal.NewFromInt(65000)}})
	}
	// The default account with its cross XBTC alone, so that the cross
	// pool is what falls.
	onlyXBTC := func() *sim.Scenario {
		sc := sim.DefaultScenario()
		sc.Positions = slices.DeleteFunc(sc.Positions, func(p sim.PositionSpec) bool { return p.Symbol != "XBTC" })
		return sc
	}
	calm := run(t, backtest.Options{Rules: parseRules(t, reduceXBTC), Interval: 500 * time.Millisecond, Scenario: onlyXBTC()}, flat)
	startW, startU := calm.Guarded.WorstAccountMeasure, calm.Unguarded.WorstAccountMeasure
	if startW == nil || startU == nil || *startW != *startU || *startW <= 0 || *startW >= 1 {
		t.Fatalf("flat path: worst measure with %v, without %v: want the same figure in (0, 1)", startW, startU)
	}

	res := run(t, backtest.Options{Rules: parseRules(t, reduceXBTC), Scenario: onlyXBTC()}, btcCrash())
	without, with := res.Unguarded.WorstAccountMeasure, res.Guarded.WorstAccountMeasure
	if without == nil || *without != 0 {
		t.Errorf("without the guard (XBTC liquidated): worst measure %v, want 0", without)
	}
	if with == nil || *with <= 0 || *with >= *startW {
		t.Errorf("with the guard (XBTC kept): worst measure %v, want in (0, %v)", *with, *startW)
	}
	v := backtest.VerdictOf(res)
	if v.WorstMeasureWithout != without || v.WorstMeasureWith != with {
		t.Errorf("verdict measures %v, %v; runs' %v, %v", v.WorstMeasureWithout, v.WorstMeasureWith, without, with)
	}
	if want := "account measure at its worst 0.00% without, "; !strings.Contains(v.String(), want) {
		t.Errorf("verdict %q lacks %q", v.String(), want)
	}
	if sum := backtest.Summary(res); !strings.Contains(sum, "account measure at worst") || strings.Contains(sum, "n/a") {
		t.Errorf("summary's measure row:\n%s", sum)
	}
}
