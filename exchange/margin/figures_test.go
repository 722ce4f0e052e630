package margin

import (
	"testing"

	"math"

	"github.com/riskguard/riskguard/exchange"
)

// line is the position as the engine gives it to Totals.
func line(p Position) Line {
	l := Line{Short: p.Direction == "SHORT", Cross: p.Cross, Quantity: p.Quantity.InexactFloat64(), EntryValue: p.EntryValue().InexactFloat64(),
		Margin: p.Margin().InexactFloat64(), Maintenance: p.Maintenance().InexactFloat64()}
	if p.Index.IsPositive() {
		l.Index = p.Index.InexactFloat64()
	}
	return l
}

func lines(a Account) (float64, []Line) {
	var out []Line
	for _, p := range a.Positions {
		if p.Open() {
			out = append(out, line(p))
		}
	}
	return a.Free.InexactFloat64(), out
}

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
			Figures{Equity: 4500, Margin: 7500, UnrealizedPNL: -4000, GrossNotional: 88000, NetNotional: 26000,
				CrossMaintenance: 300, CrossCollateral: 4000, Cross: 1, Positions: 2, Complete: true},
			"0.075", "19.555555555556"},
		{"isolated only", Account{Free: dec("1000"), Positions: []Position{xeth}},
			Figures{Equity: 1500, Margin: 1500, UnrealizedPNL: -1000, GrossNotional: 31000, NetNotional: -31000,
				CrossCollateral: 1000, Positions: 1, Complete: true},
			"0", "20.666666666667"},
		{"an index missing", Account{Free: dec("1000"), Positions: []Position{xbtc, {Symbol: "XETH", Direction: exchange.Short, Quantity: dec("10"), Entry: dec("3000"), Leverage: 20, RiskLimit: rl(100, "0.01")}}},
			Figures{Equity: 5500, Margin: 7500, UnrealizedPNL: -3000, GrossNotional: 57000, NetNotional: 57000,
				CrossMaintenance: 300, CrossCollateral: 4000, Cross: 1, Positions: 2, Complete: false},
			"0.075", "10.363636363636"},
		{"past liquidation", Account{Free: dec("0"), Positions: []Position{{Symbol: "XBTC", Direction: exchange.Long, Quantity: dec("1"), Entry: dec("60000"), Leverage: 10, Cross: true, RiskLimit: rl(100, "0.005"), Index: dec("53000")}}},
			Figures{Equity: -1000, Margin: 6000, UnrealizedPNL: -7000, GrossNotional: 53000, NetNotional: 53000,
				CrossMaintenance: 300, CrossCollateral: -1000, Cross: 1, Positions: 1, Complete: true},
			"", ""},
	} {
		got := Totals(lines(tc.acct))
		for _, c := range []struct {
			name      string
			got, want float64
		}{
			{"equity", got.Equity, tc.want.Equity}, {"margin", got.Margin, tc.want.Margin}, {"pnl", got.UnrealizedPNL, tc.want.UnrealizedPNL},
			{"gross", got.GrossNotional, tc.want.GrossNotional}, {"net", got.NetNotional, tc.want.NetNotional},
			{"cross maintenance", got.CrossMaintenance, tc.want.CrossMaintenance}, {"cross collateral", got.CrossCollateral, tc.want.CrossCollateral},
		} {
			if math.Abs(c.got-c.want) > 1e-9 {
				t.Errorf("%s: %s = %g, want %g", tc.name, c.name, c.got, c.want)
			}
		}
		if got.Cross != tc.want.Cross || got.Positions != tc.want.Positions || got.Complete != tc.want.Complete {
			t.Errorf("%s: cross %d positions %d complete %t, want %d %d %t", tc.name, got.Cross, got.Positions, got.Complete, tc.want.Cross, tc.want.Positions, tc.want.Complete)
		}
		check := func(what string, v float64, ok bool, want string) {
			switch {
			case want == "" && ok:
				t.Errorf("%s: %s = %g, want none", tc.name, what, v)
			case want != "" && (!ok || math.Abs(v-dec(want).InexactFloat64()) > 1e-9):
				t.Errorf("%s: %s = %g (%t), want %s", tc.name, what, v, ok, want)
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
	r, ok := Totals(lines(a)).MarginRatio()
	if !ok || math.Abs(r-1) > 1e-6 {
		t.Errorf("margin ratio at the liquidation price = %g (%t), want 1", r, ok)
	}
}
