package backtest_test

import (
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/backtest"
	"github.com/shopspring/decimal"
)

// pathSource steps BTC every 10 s through the points (seconds from t0,
// price), linear in between.
func pathSource(points ...[2]float64) *sliceSource {
	src := &sliceSource{}
	end := int(points[len(points)-1][0])
	for s := 0; s <= end; s += 10 {
		i := 1
		for points[i][0] < float64(s) {
			i++
		}
		a, b := points[i-1], points[i]
		p := a[1] + (b[1]-a[1])*(float64(s)-a[0])/(b[0]-a[0])
		src.steps = append(src.steps, backtest.Step{
			Time:   t0.Add(time.Duration(s) * time.Second),
			Prices: map[string]decimal.Decimal{"BTC": decimal.NewFromFloat(p).Round(2)},
		})
	}
	return src
}

const velocityRule = `
rules:
  - name: btc-falling-fast
    when: change(indexPrice, "5m") < -0.03
    symbols: [XBTC]
    cooldown: 1h
    actions:
      - action: cancel_orders
`

// A velocity rule fires on a fast drop and not on a slow one of the same
// size: 5% in two minutes, and 5% in two hours.
func TestVelocityRuleFastAndSlowDrop(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		src     *sliceSource
		firings int
	}{
		{"fast drop", pathSource([2]float64{0, 64000}, [2]float64{600, 64000}, [2]float64{720, 60800}, [2]float64{7800, 60800}), 1},
		{"slow drop", pathSource([2]float64{0, 64000}, [2]float64{600, 64000}, [2]float64{7800, 60800}), 0},
	} {
		res := run(t, backtest.Options{Rules: parseRules(t, velocityRule)}, tc.src)
		rs := res.Guarded.Rules[0]
		if rs.Firings != tc.firings || rs.Actions != tc.firings {
			t.Errorf("%s: %d firings, %d actions; want %d", tc.name, rs.Firings, rs.Actions, tc.firings)
		}
	}
}
