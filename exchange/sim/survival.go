package sim

import (
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/shopspring/decimal"
)

// Together is the account measure's move together (margin.Survival's
// Together: the smallest adverse move of every index at once at which a
// position is liquidated) of the whole account at the current index
// prices, as this exchange's model sees it (its skew included). It reads
// the isolated positions' liquidation prices the exchange holds instead of
// pricing them again, so a backtest can sample it every tick. ok is false
// when a position's index has no price.
func (e *Exchange) Together() (move decimal.Decimal, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	acct, liqs := e.measureAccount()
	move, _, ok = acct.Together(liqs)
	return move, ok
}

// TogetherAtLeast reports whether Together is known to be at least bound
// (a Together seen before) without computing it (margin's
// Account.TogetherAtLeast): false means Together must tell.
func (e *Exchange) TogetherAtLeast(bound decimal.Decimal) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.crossOpen() == 0 {
		// Without a cross pool the measure reads of each position its own
		// index and liquidation price: read in place, as measureAccount
		// would list them (a backtest's every step).
		slots := e.slots
		return margin.TogetherAtLeastIsolated(e.balance, len(slots), func(ci int) (bool, string, decimal.Decimal, decimal.Decimal) {
			q := slots[ci]
			if q == nil || q.Empty || !q.Quantity.IsPositive() {
				return false, "", decimal.Decimal{}, decimal.Decimal{}
			}
			var index decimal.Decimal
			if ix, ok := e.indexOf(ci); ok {
				index = ix.price
			}
			return true, q.Direction, index, q.LiquidationPrice
		}, bound)
	}
	acct, liqs := e.measureAccount()
	return acct.TogetherAtLeast(liqs, bound)
}

// measureAccount is the account Together measures, and the isolated
// positions' liquidation prices. Call with e.mu held.
func (e *Exchange) measureAccount() (margin.Account, []decimal.Decimal) {
	acct := margin.Account{Free: e.balance, Positions: e.measure.positions[:0]}
	liqs := e.measure.liqs[:0]
	// Without a cross pool the measure reads of each position only its
	// own move, from its index and the liquidation price held: the skew,
	// which moves the pool's figures, is not applied.
	pooled := e.crossOpen() > 0
	for ci, q := range e.slots {
		if q == nil || q.Empty {
			continue
		}
		if pooled {
			acct.Positions = append(acct.Positions, e.modelPosition(ci, q))
		} else {
			c := &e.contracts[ci]
			mp := margin.PositionOf(q, c.Name, int32(c.QuoteScale))
			if ix, ok := e.indexOf(ci); ok {
				mp.Index = ix.price
			}
			acct.Positions = append(acct.Positions, mp)
		}
		liqs = append(liqs, q.LiquidationPrice)
	}
	e.measure.positions, e.measure.liqs = acct.Positions, liqs
	return acct, liqs
}

// measureScratch holds Together's account between two calls, so that a
// sample every tick allocates no account.
type measureScratch struct {
	positions []margin.Position
	liqs      []decimal.Decimal
}

// Stress is the whole account on the stress grid (margin.Account.Stress)
// at the current index prices, as this exchange's model sees it, from the
// liquidation prices it holds (as Together reads them): sigma gives each
// symbol's σ over the horizon, likely the likely range in σ. A backtest
// shows it for the account at its start and at its worst.
func (e *Exchange) Stress(sigma func(symbol string) float64, likely float64) margin.Stress {
	e.mu.Lock()
	defer e.mu.Unlock()
	acct, liqs := e.measureAccount()
	return acct.Stress(sigma, likely, liqs)
}
