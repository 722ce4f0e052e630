package act

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// BenchmarkDecideSettings decides a leverage cut of a cross XBTC (25x to
// 10x, with a thin free balance, so the bounds search the cuts) on the
// stress grid, in an account of 10 and of 300 positions (the others on
// symbols of their own, alternately cross and isolated): every candidate
// leverage is predicted, each prediction judging the account after it on
// the grid. The others' margins are EV/leverage to 16 places, past the
// int64 paths ("300"); "-listed" has them to the 8 places the model
// rounds a margin to, as the exchange lists them; "-isolated" cuts an
// isolated XBTC, whose margin leaves the cross pool: the pool of every
// candidate is worked out again. The model is new at every decision, as
// at a tick: the account before is measured every time.
func BenchmarkDecideSettings(b *testing.B) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for _, n := range []int{10, 300} {
		for _, variant := range []string{"", "-listed", "-isolated"} {
			if n == 10 && variant != "" {
				continue
			}
			b.Run(fmt.Sprint(n)+variant, func(b *testing.B) {
				base, pl := xbtc(b, "3000", &rules.Rule{Name: "cut"}, rules.LowerLeverage)
				acct := base.Acct
				if variant == "-isolated" {
					acct.Positions = []margin.Position{acct.Positions[0]}
					acct.Positions[0].Cross, pl.Pos.Cross = false, false
				}
				at := map[string]int{"XBTC": 0}
				rl := exchange.RiskLimit{ID: 2, InitialMarginRate: dec("0.01"), MaintenanceMarginRate: dec("0.005"), MaxLeverage: 50, MaxQuantity: dec("1000")}
				for i := 1; i < n; i++ {
					p := margin.Position{Symbol: fmt.Sprintf("X%03d", i), Direction: exchange.Short, Quantity: dec("10"), Entry: dec("100"),
						Leverage: 10 + i%20, Cross: i%2 == 0, RiskLimit: rl, Scale: 2, Index: decimal.NewFromInt(int64(95 + i%10))}
					p.Value = p.Quantity.Mul(p.Entry)
					p.Held = p.Value.Div(decimal.NewFromInt(int64(p.Leverage)))
					if variant != "" {
						p.Held = margin.Margin(p.Value, p.Leverage)
					}
					p.MM = p.Maintenance()
					at[p.Symbol] = len(acct.Positions)
					acct.Positions = append(acct.Positions, p)
				}
				sigma := func(string) float64 { return 0.02 }
				b.ReportAllocs()
				for b.Loop() {
					m := &Model{Acct: acct, At: at, FreeKnown: true, Sigma: sigma, Likely: 3}
					d := DecideSettings(m, pl, settingsOf(pl), now)
					// The isolated cut is left out, every candidate judged
					// by its cost ("would not lower the expected loss …").
					if judged := d.Pred != nil && d.Pred.Stressed || variant == "-isolated" && len(d.Skips) == 1 && strings.Contains(d.Skips[0].Why, "expected loss"); !judged {
						b.Fatalf("not judged on the grid: %+v", d)
					}
				}
			})
		}
	}
}
