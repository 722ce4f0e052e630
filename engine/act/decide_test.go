package act

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

// xbtc is a cross long of 1 at 100,000 and 25x with a free balance of
// free behind it, and the plan of rule r on it.
func xbtc(t testing.TB, free string, r *rules.Rule, kinds ...rules.ActionKind) (*Model, *Plan) {
	t.Helper()
	rl := exchange.RiskLimit{ID: 1, InitialMarginRate: dec("0.01"), MaintenanceMarginRate: dec("0.005"), MaxLeverage: 20, MaxQuantity: dec("100")}
	pos := &exchange.Position{ID: "1_1", SymbolID: 1, Direction: exchange.Long, Cross: true, Leverage: 25, Quantity: dec("1"),
		EntryPrice: dec("100000"), EntryValue: dec("100000"), Margin: dec("4000"), RiskLimit: rl}
	mp := margin.Position{Symbol: "XBTC", Direction: exchange.Long, Quantity: pos.Quantity, Entry: pos.EntryPrice, Leverage: 25, Cross: true,
		RiskLimit: rl, Scale: 2, Held: pos.Margin, Value: pos.EntryValue, Index: dec("100000")}
	mp.MM = mp.Maintenance()
	m := &Model{Acct: margin.Account{Free: dec(free), Positions: []margin.Position{mp}}, At: map[string]int{"XBTC": 0}, FreeKnown: true}
	pl := &Plan{Pos: pos, Sym: &exchange.ContractSymbol{SpotSymbol: exchange.SpotSymbol{ID: 1, Name: "XBTC"}}, Refused: &Refusal{}}
	for _, k := range kinds {
		r.Actions = append(r.Actions, rules.Action{Kind: k})
	}
	d := Due{Rule: r, St: &alert.RuleState{}}
	for i := range r.Actions {
		switch r.Actions[i].Kind {
		case rules.SetIsolated:
			setIsolated{}.Merge(pl, &d, &r.Actions[i], nil, nil)
		case rules.LowerLeverage:
			c := settingsOf(pl)
			c.lowerKind, c.Lower = rules.LowerLeverage, 10
			c.LowerRules = append(c.LowerRules, r.Name)
			d.Ask(c)
		}
	}
	pl.Due = append(pl.Due, d)
	return m, pl
}

func TestDecideSettings(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	t.Run("no model: the target as asked", func(t *testing.T) {
		_, pl := xbtc(t, "1000", &rules.Rule{Name: "r"}, rules.LowerLeverage)
		d := DecideSettings(nil, pl, settingsOf(pl), now)
		if !d.Change || d.Want.Leverage != 10 || d.Pred != nil || len(d.Skips) != 0 {
			t.Fatalf("%+v", d)
		}
	})
	t.Run("an isolation that moves the liquidation closer is left out unless allowed", func(t *testing.T) {
		m, pl := xbtc(t, "50000", &rules.Rule{Name: "iso"}, rules.SetIsolated)
		d := DecideSettings(m, pl, settingsOf(pl), now)
		// The leverage above the maximum is still brought down to it: the
		// exchange refuses a new leverage above it, and a call is made.
		if !d.Change || d.Want != (exchange.Settings{Leverage: 20, Cross: true}) || len(d.Skips) != 1 || !d.Skips[0].Isolation ||
			!strings.Contains(d.Skips[0].Why, "allow_closer_liquidation") {
			t.Fatalf("%+v", d)
		}
		m, pl = xbtc(t, "50000", &rules.Rule{Name: "iso", AllowCloserLiquidation: true}, rules.SetIsolated)
		if d := DecideSettings(m, pl, settingsOf(pl), now); !d.Change || d.Want.Cross || len(d.Skips) != 0 {
			t.Fatalf("allowed isolation: %+v", d)
		}
	})
	t.Run("a call refused for good from this leverage is tried halfway", func(t *testing.T) {
		_, pl := xbtc(t, "1000", &rules.Rule{Name: "r"}, rules.LowerLeverage)
		*pl.Refused = Refusal{Settings: exchange.Settings{Leverage: 10, Cross: true}, From: 25}
		d := DecideSettings(nil, pl, settingsOf(pl), now)
		if d.Want.Leverage != 18 || !strings.Contains(d.Stepped, "refused 10x from 25x before: trying 18x") {
			t.Fatalf("%+v", d)
		}
	})
}

// The bounds no estimate lifts: an isolation its rules allow still never
// lands the position inside the zone where the account's own rules cut it,
// nor moves it closer while its index is in a fast move; a leverage cut,
// which moves the position away, still goes out in a fast move.
func TestDecideSettingsInvariants(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	allowed := func() *rules.Rule { return &rules.Rule{Name: "iso", AllowCloserLiquidation: true} }
	for _, scored := range []bool{false, true} {
		for _, tc := range []struct {
			name  string
			floor float64
			fast  string
			kind  rules.ActionKind
			why   string // "" when the call goes out as asked
		}{
			{name: "allowed, no floor", kind: rules.SetIsolated},
			{name: "allowed, above the cut zone", floor: 0.03, kind: rules.SetIsolated},
			// Isolated at 20x the long is 4.50% from its liquidation price.
			{name: "into the cut zone", floor: 0.05, kind: rules.SetIsolated, why: "would leave XBTC 4.50% from its liquidation price, inside the 5.00% where the rules cut it"},
			{name: "in a fast move", fast: "BTC moved 4.20% within 5m (100000 → 95800)", kind: rules.SetIsolated,
				why: "would move XBTC's liquidation price closer (4.50% away after) during a fast move: BTC moved 4.20% within 5m"},
			{name: "a cut in a fast move", fast: "BTC moved 4.20% within 5m (100000 → 95800)", kind: rules.LowerLeverage},
		} {
			t.Run(fmt.Sprintf("%s, scored %t", tc.name, scored), func(t *testing.T) {
				m, pl := xbtc(t, "50000", allowed(), tc.kind)
				if scored {
					// σ 0.5%: the isolation is then as cheap as holding
					// (its point 4.5% away is 9σ), and the bounds alone
					// leave it out.
					m.Sigma, m.Likely = func(string) float64 { return 0.005 }, 3
				}
				m.Floor = func(string) float64 { return tc.floor }
				m.Fast = func(string) string { return tc.fast }
				d := DecideSettings(m, pl, settingsOf(pl), now)
				why := tc.why
				if scored && why == "" && tc.kind == rules.SetIsolated {
					// Scored, the healthy position's isolation (53.50%
					// → 4.50% away) costs more than holding.
					why = "costs more in expectation"
				}
				if why == "" {
					if !d.Change || len(d.Skips) != 0 {
						t.Fatalf("want the call as asked, got %+v", d)
					}
					return
				}
				if d.Want.Cross != true || len(d.Skips) == 0 || !strings.Contains(d.Skips[0].Why, why) {
					t.Fatalf("want the isolation left out (%s), got %+v", why, d)
				}
			})
		}
	}
}

// The issue 38 budget case: on a tight mixed account a cut of an isolated
// short from 20x to the 10x its rule asks needs 1,500 of the 3,000 free.
// The default margin budget (5% of the free balance a firing) left one
// leverage step a firing, and the short was liquidated at 18x; a scored
// decision counts what the pool loses instead, and the whole step goes out
// in one call when the free balance funds it.
func TestScoredCutTakesTheWholeStep(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	rl := exchange.RiskLimit{ID: 1, InitialMarginRate: dec("0.01"), MaintenanceMarginRate: dec("0.005"), MaxLeverage: 50, MaxQuantity: dec("1000")}
	// XBTC: a cross long of 0.1 at 100,000 and 25x, far from its
	// liquidation price (the pool is 3,400).
	btc := margin.Position{Symbol: "XBTC", Direction: exchange.Long, Quantity: dec("0.1"), Entry: dec("100000"), Leverage: 25, Cross: true,
		RiskLimit: rl, Scale: 2, Held: dec("400"), Value: dec("10000"), Index: dec("100000")}
	// XETH: an isolated short of 10 at 3,000 and 20x, the index at 3,050:
	// its liquidation price 3,135 is 2.79% away.
	ethPos := &exchange.Position{ID: "2_1", SymbolID: 2, Direction: exchange.Short, Cross: false, Leverage: 20, Quantity: dec("10"),
		EntryPrice: dec("3000"), EntryValue: dec("30000"), Margin: dec("1500"), RiskLimit: rl}
	eth := margin.Position{Symbol: "XETH", Direction: exchange.Short, Quantity: dec("10"), Entry: dec("3000"), Leverage: 20, Cross: false,
		RiskLimit: rl, Scale: 2, Held: dec("1500"), Value: dec("30000"), Index: dec("3050")}
	btc.MM, eth.MM = btc.Maintenance(), eth.Maintenance()
	newModel := func(sigma bool) *Model {
		m := &Model{Acct: margin.Account{Free: dec("3000"), Positions: []margin.Position{btc, eth}}, At: map[string]int{"XBTC": 0, "XETH": 1}, FreeKnown: true}
		if sigma {
			m.Sigma, m.Likely = func(string) float64 { return 0.02 }, 3
		}
		return m
	}
	plan := func() *Plan {
		pl := &Plan{Pos: ethPos, Sym: &exchange.ContractSymbol{SpotSymbol: exchange.SpotSymbol{ID: 2, Name: "XETH"}}, Refused: &Refusal{}}
		r := &rules.Rule{Name: "cut", MarginBudget: rules.DefaultMarginBudget, BudgetFraction: true, Actions: []rules.Action{{Kind: rules.LowerLeverage}}}
		d := Due{Rule: r, St: &alert.RuleState{}}
		c := settingsOf(pl)
		c.lowerKind, c.Lower = rules.LowerLeverage, 10
		c.LowerRules = append(c.LowerRules, r.Name)
		d.Ask(c)
		pl.Due = append(pl.Due, d)
		return pl
	}
	// Without σ the decision is the stack of bounds: the default budget
	// binds (150 of 3,000), one step.
	pl := plan()
	if d := DecideSettings(newModel(false), pl, settingsOf(pl), now); d.Want.Leverage != 19 || !strings.Contains(d.Stepped, "margin budget") {
		t.Fatalf("unscored: want 19x within the default budget, got %dx (%s)", d.Want.Leverage, d.Stepped)
	}
	pl = plan()
	d := DecideSettings(newModel(true), pl, settingsOf(pl), now)
	if !d.Change || d.Want != (exchange.Settings{Leverage: 10, Cross: false}) || d.Pred == nil || !d.Pred.Scored {
		t.Fatalf("scored: want 10x in one call, got %+v (%s; skips %+v)", d.Want, d.Stepped, d.Skips)
	}
	if b, a := d.Pred.ForfeitBefore.Expected, d.Pred.ForfeitAfter.Expected; !(a < b) {
		t.Errorf("the cut should lower the expected forfeit: %.2f → %.2f", b, a)
	}
}
