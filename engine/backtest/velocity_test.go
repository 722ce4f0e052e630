package backtest_test

import (
	"strings"
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

// A backtest reports an account rule like the others: its firings, its
// actions on its targets, its notifications.
func TestBacktestReportsAccountRules(t *testing.T) {
	t.Parallel()
	set := parseRules(t, `
rules:
  - name: btc-long-exposure
    scope: account
    when: change(account.netNotional, "5m") < -0.03
    cooldown: 1h
    targets: {symbols: [XBTC]}
    actions:
      - action: cancel_orders
      - action: notify
`)
	res := run(t, backtest.Options{Rules: set}, pathSource([2]float64{0, 64000}, [2]float64{600, 64000}, [2]float64{720, 60800}, [2]float64{1800, 60800}))
	var rs *backtest.RuleStats
	for i := range res.Guarded.Rules {
		if res.Guarded.Rules[i].Rule == "btc-long-exposure" {
			rs = &res.Guarded.Rules[i]
		}
	}
	if rs == nil || rs.Firings != 1 || rs.Actions != 1 || rs.Notifications != 1 {
		t.Fatalf("account rule stats %+v, want one firing, one cancel, one notification", rs)
	}
	if sum := backtest.Summary(res); !strings.Contains(sum, "btc-long-exposure") {
		t.Errorf("the summary does not name the account rule:\n%s", sum)
	}
}
