package margin

import (
	"testing"

	"github.com/riskguard/riskguard/exchange"
	"github.com/shopspring/decimal"
)

// Hand-worked: 1,000 free; XBTC long 1 @ 60,000, 10x cross, index 57,000
// (margin 6,000, PNL −3,000, maintenance 0.5% × 60,000 = 300); XETH short
// 10 @ 3,000, 20x isolated, index 3,100 (margin 1,500, PNL −1,000).
func TestFigures(t *testing.T) {
	t.Parallel()
	xbtc := Position{Symbol: "XBTC", Direction: exchange.Long, Quantity: dec("1"), Entry: dec("60000"), Leverage: 10, Cross: true,
		RiskLimit: rl(100, "0.005"), Index: dec("57000")}
	xeth := Position{Symbol: "XETH", Direction: exchange.Short, Quantity: dec("10"), Entry: dec("3000"), Leverage: 20,
		RiskLimit: rl(100, "0.01"), Index: dec("3100")}
	empty := Position{Symbol: "XSOL", Direction: exchange.Long, Leverage: 5}
	for _, tc := range []struct {
		name string
		acct Account
		want Figures
		// ratio and leverage as strings, "" when not ok
		ratio, leverage string
	}{
		{"cross and isolated", Account{Free: dec("1000"), Positions: []Position{xbtc, xeth, empty}},
			Figures{Equity: dec("4500"), Margin: dec("7500"), UnrealizedPNL: dec("-4000"), GrossNotional: dec("88000"), NetNotional: dec("26000"),
				CrossMaintenance: dec("300"), CrossCollateral: dec("4000"), Cross: 1, Positions: 2, Complete: true},
			"0.075", "19.555555555556"},
		{"isolated only", Account{Free: dec("1000"), Positions: []Position{xeth}},
			Figures{Equity: dec("1500"), Margin: dec("1500"), UnrealizedPNL: dec("-1000"), GrossNotional: dec("31000"), NetNotional: dec("-31000"),
				CrossCollateral: dec("1000"), Positions: 1, Complete: true},
			"0", "20.666666666667"},
		{"an index missing", Account{Free: dec("1000"), Positions: []Position{xbtc, {Symbol: "XETH", Direction: exchange.Short, Quantity: dec("10"), Entry: dec("3000"), Leverage: 20, RiskLimit: rl(100, "0.01")}}},
			Figures{Equity: dec("5500"), Margin: dec("7500"), UnrealizedPNL: dec("-3000"), GrossNotional: dec("57000"), NetNotional: dec("57000"),
				CrossMaintenance: dec("300"), CrossCollateral: dec("4000"), Cross: 1, Positions: 2, Complete: false},
			"0.075", "10.363636363636"},
		{"past liquidation", Account{Free: dec("0"), Positions: []Position{{Symbol: "XBTC", Direction: exchange.Long, Quantity: dec("1"), Entry: dec("60000"), Leverage: 10, Cross: true, RiskLimit: rl(100, "0.005"), Index: dec("53000")}}},
			Figures{Equity: dec("-1000"), Margin: dec("6000"), UnrealizedPNL: dec("-7000"), GrossNotional: dec("53000"), NetNotional: dec("53000"),
				CrossMaintenance: dec("300"), CrossCollateral: dec("-1000"), Cross: 1, Positions: 1, Complete: true},
			"", ""},
	} {
		got := tc.acct.Figures()
		for _, c := range []struct {
			name      string
			got, want decimal.Decimal
		}{
			{"equity", got.Equity, tc.want.Equity}, {"margin", got.Margin, tc.want.Margin}, {"pnl", got.UnrealizedPNL, tc.want.UnrealizedPNL},
			{"gross", got.GrossNotional, tc.want.GrossNotional}, {"net", got.NetNotional, tc.want.NetNotional},
			{"cross maintenance", got.CrossMaintenance, tc.want.CrossMaintenance}, {"cross collateral", got.CrossCollateral, tc.want.CrossCollateral},
		} {
			if !c.got.Equal(c.want) {
				t.Errorf("%s: %s = %s, want %s", tc.name, c.name, c.got, c.want)
			}
		}
		if got.Cross != tc.want.Cross || got.Positions != tc.want.Positions || got.Complete != tc.want.Complete {
			t.Errorf("%s: cross %d positions %d complete %t, want %d %d %t", tc.name, got.Cross, got.Positions, got.Complete, tc.want.Cross, tc.want.Positions, tc.want.Complete)
		}
		check := func(what string, v decimal.Decimal, ok bool, want string) {
			switch {
			case want == "" && ok:
				t.Errorf("%s: %s = %s, want none", tc.name, what, v)
			case want != "" && (!ok || !v.Equal(dec(want))):
				t.Errorf("%s: %s = %s (%t), want %s", tc.name, what, v, ok, want)
			}
		}
		r, ok := got.MarginRatio()
		check("margin ratio", r, ok, tc.ratio)
		l, ok := got.Leverage()
		check("leverage", l, ok, tc.leverage)
	}
}

// The margin ratio is 1 where the model liquidates the cross positions:
// at the liquidation price of a lone cross position, the pool equals its
// maintenance margin.
func TestMarginRatioOneAtLiquidation(t *testing.T) {
	t.Parallel()
	p := Position{Symbol: "XBTC", Direction: exchange.Long, Quantity: dec("2"), Entry: dec("60000"), Leverage: 10, Cross: true, RiskLimit: rl(100, "0.005"), Scale: 8}
	a := Account{Free: dec("2500"), Positions: []Position{p}}
	a.Positions[0].Index = a.LiquidationPrice(0)
	r, ok := a.Figures().MarginRatio()
	if !ok || r.Sub(decimal.NewFromInt(1)).Abs().GreaterThan(dec("0.000001")) {
		t.Errorf("margin ratio at the liquidation price = %s (%t), want 1", r, ok)
	}
}
