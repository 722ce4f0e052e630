package backtest

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// TestTallyCountsWhatTheDryRunSays: the run without the guard only counts
// its actions (engine.Deps.Tally); the result is the same, field for
// field, as when it says each one in full as a dry-run daemon does: its
// actions, its skips by reason and its rule counts.
func TestTallyCountsWhatTheDryRunSays(t *testing.T) {
	d := decimal.RequireFromString
	// ETH falls 8%: isolating XBTC would take its margin out of the pool
	// XETH needs, which the rule does not allow (skipped as harmful).
	weak := sim.DefaultScenario()
	weak.Balance, weak.OpenOrders = d("500"), nil
	weak.Positions = []sim.PositionSpec{
		{Symbol: "XBTC", Direction: "LONG", Quantity: d("0.5"), EntryPrice: d("65000"), Leverage: 12, Cross: true},
		{Symbol: "XETH", Direction: "LONG", Quantity: d("10"), EntryPrice: d("3010"), Leverage: 20, Cross: true},
	}
	var ethFall []Step
	for s := 0; s <= 60; s++ {
		ethFall = append(ethFall, Step{Time: lanesT0.Add(time.Duration(s) * time.Second),
			Prices: map[string]decimal.Decimal{"BTC": d("65000"), "ETH": decimal.NewFromFloat(3010 - 240*float64(s)/60).Round(2)}})
	}
	cases := []struct {
		name     string
		rules    string
		scenario *sim.Scenario
		steps    []Step
		baseline bool
	}{
		{"actions of every kind", poisonRules, sim.DefaultScenario(), walkSteps(400), true},
		{"an isolation skipped as harmful", `
rules:
  - name: isolate-xbtc
    symbols: [XBTC]
    when: position.cross && liquidationDistance < 0.07
    cooldown: 10s
    actions:
      - action: set_isolated
`, weak, ethFall, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			set, err := rules.Parse("tally.yaml", []byte(tc.rules))
			if err != nil {
				t.Fatal(err)
			}
			opt := Options{Rules: set, Scenario: tc.scenario}
			if tc.baseline {
				opt.Baseline = lanesSet(t)
			}
			tallied, err := Run(context.Background(), &memSource{steps: tc.steps}, opt)
			if err != nil {
				t.Fatal(err)
			}
			opt.told = true
			told, err := Run(context.Background(), &memSource{steps: tc.steps}, opt)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(tallied, told) {
				t.Errorf("tallying changed the result:\ntallied: %s\ntold:    %s", Summary(tallied), Summary(told))
			}
			counted := 0
			for _, rs := range told.Unguarded.Rules {
				counted += rs.Actions + rs.Bounded + rs.Harmful
			}
			if counted == 0 {
				t.Errorf("the run without the guard took and skipped no action: the data does not exercise the tally (%s)", Summary(told))
			}
		})
	}
}
