package model

import (
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/riskguard/riskguard/rules"
)

// pastLiquidation is the margin ratio of a cross pool that is not positive:
// at or past liquidation, read as a very large ratio.
const pastLiquidation = 1e12

// Reasons an account figure is no data.
const (
	whyPositionUnread = "a position could not be read: the account's totals are incomplete"
	whyIndexMissing   = "an open position has no index price: the account's totals are incomplete"
	whyFreeUnknown    = "the free balance cannot be inferred without an open cross position"
	whyEquityNotPos   = "the equity is not positive"
)

// AccountOf computes the tick's account of its view tv with the margin
// model, as the account rules read it: once per tick, before any action.
func (m *Watch) AccountOf(tv *market.View) rules.Account {
	var a rules.Account
	free, freeKnown, _, ok := m.cachedFree(tv)
	whyFree := whyFreeUnknown
	if !ok || m.inFlight != "" {
		v := m.Account(tv) // infers it, and caches it
		free, freeKnown = v.Acct.Free, v.FreeKnown
		if v.FreeWhy != whyNoCross {
			whyFree = "the free balance is not known: " + v.FreeWhy
		}
	}
	lines := m.lines[:0]
	a.MinLiquidationDistance = 1
	distances := true
	for i := range tv.Rows {
		r := &tv.Rows[i]
		if !r.Open {
			continue
		}
		p, sym := r.P, r.Sym
		if sym == nil {
			a.SetUnknown(rules.AccountAll, whyPositionUnread)
			continue
		}
		index := r.IndexF
		mp := margin.PositionOf(p, sym.Name, int32(sym.QuoteScale))
		_, mm := m.maintenance(tv, i, r, &mp)
		n := r.N
		lines = append(lines, margin.Line{Short: p.Direction == exchange.Short, Cross: p.Cross, Quantity: n.Quantity,
			Index: max(index, 0), EntryValue: n.EntryValue, Margin: n.Margin, Maintenance: mm})
		// The riskiest position, by the liquidation prices the exchange lists.
		d, ok := Distance(p.Direction, index, n.LiquidationPrice)
		if !ok {
			distances = false
			continue
		}
		if a.RiskiestSymbol == "" || d < a.MinLiquidationDistance {
			a.MinLiquidationDistance, a.RiskiestSymbol = d, sym.Name
		}
	}
	m.lines = lines
	f := margin.Totals(market.ToFloat(free), lines)
	a.Margin, a.UnrealizedPNL, a.Equity = f.Margin, f.UnrealizedPNL, f.Equity
	a.GrossNotional, a.NetNotional, a.Positions = f.GrossNotional, f.NetNotional, f.Positions
	a.FreeBalance = market.ToFloat(free)
	if r, ok := f.MarginRatio(); ok {
		a.MarginRatio = r
	} else {
		a.MarginRatio = pastLiquidation
	}
	if l, ok := f.Leverage(); ok {
		a.Leverage = l
	} else {
		a.SetUnknown(rules.AccountLeverage, whyEquityNotPos)
	}
	if !distances {
		a.SetUnknown(rules.AccountMinLiquidationDistance|rules.AccountRiskiestSymbol, whyIndexMissing)
	}
	for _, pe := range tv.Snap.Partial {
		if pe.What == "positions" {
			a.SetUnknown(rules.AccountAll, whyPositionUnread)
		}
	}
	if !f.Complete {
		a.SetUnknown(rules.AccountUnrealizedPNL|rules.AccountGrossNotional|rules.AccountNetNotional|rules.AccountEquity|
			rules.AccountLeverage|rules.AccountMarginRatio, whyIndexMissing)
	}
	if !freeKnown {
		fields := rules.AccountFreeBalance | rules.AccountEquity | rules.AccountLeverage
		if f.Cross > 0 {
			fields |= rules.AccountMarginRatio
		}
		a.SetUnknown(fields, whyFree)
	}
	return a
}

// Distance is a position's liquidationDistance as its rules see it; ok is
// false without a positive index or liquidation price.
func Distance(direction string, index, liq float64) (float64, bool) {
	if index <= 0 || liq <= 0 {
		return 0, false
	}
	return rules.LiquidationDistance(Side(direction), index, liq), true
}

// Side is +1 for a long, −1 for a short, as rules see position.side.
func Side(direction string) float64 {
	if direction == exchange.Short {
		return -1
	}
	return 1
}
