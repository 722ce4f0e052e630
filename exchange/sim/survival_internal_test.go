package sim

import (
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/shopspring/decimal"
)

// Together, which reads the liquidation prices the exchange holds, is the
// whole account's margin.Survival (which prices every position again), for
// the default account (a cross long, an isolated short and long) as its
// indexes fall and rise, with the exchange's own model skewed and not, and
// with a free balance small enough that the cross pool goes first.
func TestTogetherIsSurvivals(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 15, 12, 0, 0, 0, time.UTC)
	skews := []ModelSkew{{}, {MaintenanceRate: decimal.RequireFromString("0.004"), MarginFee: decimal.RequireFromString("0.001")}}
	for i := range 4 {
		skew, balance := skews[i%2], decimal.NewFromInt(20000)
		if i >= 2 {
			balance = decimal.NewFromInt(300) // the cross pool goes first
		}
		ex, err := New(Config{Key: "k", Secret: "s", Now: func() time.Time { return at }})
		if err != nil {
			t.Fatal(err)
		}
		ex.SetBalance(balance)
		ex.SkewModel(skew)
		if i == 1 {
			// Every position isolated: no cross pool.
			for _, p := range ex.Positions() {
				if p.Cross && !p.Empty {
					name := ex.slotName(p.SymbolID)
					if err := ex.PutPosition(PositionSpec{Symbol: name, Direction: p.Direction, Quantity: p.Quantity, EntryPrice: p.EntryPrice, Leverage: p.Leverage}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if ex.crossOpen() != 0 {
				t.Fatal("a cross position is left")
			}
		}
		for _, k := range []string{"1", "0.97", "0.94", "1.03", "1.06"} {
			f := decimal.RequireFromString(k)
			ex.SetIndexPrices(map[string]decimal.Decimal{"BTC": f.Mul(decimal.NewFromInt(65000)), "ETH": f.Mul(decimal.NewFromInt(3010)),
				"SOL": f.Mul(decimal.NewFromInt(150)), "DOGE": decimal.RequireFromString("0.16")})
			ex.Step(at)
			got, ok := ex.Together()
			ex.mu.Lock()
			acct := margin.Account{Free: ex.balance}
			for ci, q := range ex.slots {
				if q != nil && !q.Empty {
					acct.Positions = append(acct.Positions, ex.modelPosition(ci, q))
				}
			}
			ex.mu.Unlock()
			want := acct.Survival(-1)
			if !ok || !want.Known || !got.Equal(want.Together) {
				t.Errorf("skew %+v, indexes ×%s: Together = %s (%v), Survival's %s (%s first)", skew, k, got, ok, want.Together, want.First)
			}
			t.Logf("skew %v, free %s, ×%s: %s", !skew.MaintenanceRate.IsZero(), balance, k, want)
			if len(ex.Liquidations()) > 0 {
				break // the account changed under the next factors
			}
		}
	}
}

// slotName is the contract symbol of id.
func (e *Exchange) slotName(id int64) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.contracts[e.contractByID[id]].Name
}
