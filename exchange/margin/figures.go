package margin

import (
	"github.com/riskguard/riskguard/exchange"
	"github.com/shopspring/decimal"
)

// Figures are the account's totals at its positions' index prices: what
// a rule sees as `account`.
type Figures struct {
	// Equity is the free balance plus every margin and unrealised PNL.
	Equity decimal.Decimal
	// Margin is every open position's margin.
	Margin decimal.Decimal
	// UnrealizedPNL is every open position's PNL at its index.
	UnrealizedPNL decimal.Decimal
	// GrossNotional is Σ quantity·index; NetNotional the same, shorts
	// negative.
	GrossNotional, NetNotional decimal.Decimal
	// CrossMaintenance is the cross positions' maintenance margin and
	// CrossCollateral their pool: the free balance, their margins and PNL.
	CrossMaintenance, CrossCollateral decimal.Decimal
	// Cross is the number of open cross positions, Positions of all open
	// ones.
	Cross, Positions int
	// Complete is false when an open position has no index price: its PNL
	// and notional are missing from the totals.
	Complete bool
}

// Figures totals the account.
func (a Account) Figures() Figures {
	f := Figures{Complete: true, CrossCollateral: a.Free}
	for _, p := range a.Positions {
		if !p.Open() {
			continue
		}
		f.Positions++
		m := p.Margin()
		f.Margin = f.Margin.Add(m)
		var pnl decimal.Decimal
		if p.Index.IsPositive() {
			notional := p.Quantity.Mul(p.Index)
			pnl = p.pnl(notional)
			f.GrossNotional = f.GrossNotional.Add(notional)
			if p.Direction == exchange.Short {
				f.NetNotional = f.NetNotional.Sub(notional)
			} else {
				f.NetNotional = f.NetNotional.Add(notional)
			}
		} else {
			f.Complete = false
		}
		f.UnrealizedPNL = f.UnrealizedPNL.Add(pnl)
		if p.Cross {
			f.Cross++
			f.CrossMaintenance = f.CrossMaintenance.Add(p.Maintenance())
			f.CrossCollateral = f.CrossCollateral.Add(m).Add(pnl)
		}
	}
	f.Equity = a.Free.Add(f.Margin).Add(f.UnrealizedPNL)
	return f
}

// MarginRatio is CrossMaintenance / CrossCollateral: 1 when the cross
// positions are liquidated together, 0 without any. ok is false when the
// pool is not positive (past liquidation).
func (f Figures) MarginRatio() (decimal.Decimal, bool) {
	if f.Cross == 0 {
		return decimal.Zero, true
	}
	if !f.CrossCollateral.IsPositive() {
		return decimal.Zero, false
	}
	return f.CrossMaintenance.DivRound(f.CrossCollateral, 12), true
}

// Leverage is GrossNotional / Equity; ok is false when the equity is not
// positive.
func (f Figures) Leverage() (decimal.Decimal, bool) {
	if !f.Equity.IsPositive() {
		return decimal.Zero, false
	}
	return f.GrossNotional.DivRound(f.Equity, 12), true
}
