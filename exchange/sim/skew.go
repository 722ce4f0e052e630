package sim

import (
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/shopspring/decimal"
)

// ModelSkew makes the simulated exchange's own arithmetic differ from the
// margin model's (exchange/margin), as an independent exchange's may: the
// guard's model then does not reproduce the figures it lists. The zero
// value changes nothing.
type ModelSkew struct {
	// MaintenanceRate is added to every position's maintenance margin
	// rate in the exchange's own liquidation arithmetic (its liquidation
	// prices, its refusals and its liquidations), while the risk limits
	// it lists stay as they are.
	MaintenanceRate decimal.Decimal
	// MarginFee is a fraction of the entry value the margins are reported
	// net of: the exchange holds entry value / leverage, and lists that
	// less MarginFee × entry value.
	MarginFee decimal.Decimal
}

// SkewModel sets how the exchange's arithmetic differs from the margin
// model's from now on, and recomputes every liquidation price under it.
func (e *Exchange) SkewModel(s ModelSkew) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.skew = s
	e.cross = nil
	at := e.now()
	for _, p := range e.slots {
		if p == nil || p.Empty {
			continue
		}
		if liq := e.liquidationPrice(p, e.balance); !liq.Equal(p.LiquidationPrice) {
			p.LiquidationPrice = liq
			p.Version++
			p.UpdatedAt = at.UnixMilli()
		}
	}
}

// skewed is mp under the exchange's own maintenance rate. Call with e.mu
// held.
func (e *Exchange) skewed(mp margin.Position) margin.Position {
	if e.skew.MaintenanceRate.IsZero() {
		return mp
	}
	mp.RiskLimit.MaintenanceMarginRate = mp.RiskLimit.MaintenanceMarginRate.Add(e.skew.MaintenanceRate)
	return mp
}

// reported is p as the exchange lists it: its margin net of the skew's
// fee. Call with e.mu held.
func (e *Exchange) reported(p exchange.Position) exchange.Position {
	e.report(&p)
	return p
}

// report makes *p what reported returns, in place. Call with e.mu held.
func (e *Exchange) report(p *exchange.Position) {
	if !e.skew.MarginFee.IsZero() && !p.Empty {
		p.Margin = p.Margin.Sub(e.skew.MarginFee.Mul(p.EntryValue)).Round(8)
	}
}
