package margin

import (
	"errors"
	"fmt"

	"github.com/riskguard/riskguard/exchange"
	"github.com/shopspring/decimal"
)

// Reduction is what filling a reduce-only order is predicted to do to the
// account: the simulated exchange fills with it, the engine predicts with
// it.
type Reduction struct {
	// Quantity is what the order takes off the position; Price is the fill
	// price (the index).
	Quantity, Price decimal.Decimal
	// RealisedPNL is the reduced part's PNL at Price, paid into the free
	// balance: q·(Price − entry), negated for a short, rounded to 8
	// places.
	RealisedPNL decimal.Decimal
	// MarginReleased is the reduced part's share of the position's
	// margin, back into the free balance.
	MarginReleased decimal.Decimal
	// FreeBefore and FreeAfter are the free balance.
	FreeBefore, FreeAfter decimal.Decimal
	// PoolBefore and PoolAfter are the cross pool (free balance, cross
	// margins and cross PNL); zero without an open cross position.
	PoolBefore, PoolAfter decimal.Decimal
	// QuantityAfter is what is left of the position (zero: closed).
	QuantityAfter decimal.Decimal
	// Liquidations are the liquidation prices before and after of the
	// reduced position and of every open cross position, in the account's
	// order.
	Liquidations []LiquidationMove
}

// LiquidationMove is one position's liquidation price before and after a
// change.
type LiquidationMove struct {
	Symbol        string
	Direction     string
	Index         decimal.Decimal
	Before, After decimal.Decimal
	// Reduced marks the position the order reduced.
	Reduced bool
}

// ErrReduceGrows is the error of a reduction the model refuses because it
// would not reduce the position: a quantity that is not positive, or more
// than the position holds (a reduce-only order can only shrink a
// position; any remainder would open one the other way).
var ErrReduceGrows = errors.New("the order would not reduce the position")

// Reduce predicts filling a reduce-only order of qty on position i at
// price: the reduced part's PNL is realised into the free balance and its
// share of the margin (qty/quantity of it, rounded to 8 places; all of it
// when the position closes) released to it; the rest of the position keeps
// its entry price, its entry value becomes the quantity left times it. It
// returns the account after and the reduction. A cross position's pool is
// unchanged by a fill at the index (unrealised PNL becomes free balance);
// its maintenance margin falls, so every cross liquidation price moves
// away.
func (a Account) Reduce(i int, qty, price decimal.Decimal) (Account, Reduction, error) {
	p := a.Positions[i]
	switch {
	case !p.Open():
		return a, Reduction{}, fmt.Errorf("%w: %s holds nothing", ErrReduceGrows, p.Symbol)
	case !qty.IsPositive() || qty.GreaterThan(p.Quantity):
		return a, Reduction{}, fmt.Errorf("%w: %s of a position of %s", ErrReduceGrows, qty, p.Quantity)
	case !price.IsPositive():
		return a, Reduction{}, fmt.Errorf("reduce %s: fill price %s: must be positive", p.Symbol, price)
	}
	r := Reduction{Quantity: qty, Price: price, FreeBefore: a.Free, PoolBefore: a.CrossPool()}
	r.RealisedPNL = price.Sub(p.Entry).Mul(qty)
	if p.Direction == exchange.Short {
		r.RealisedPNL = r.RealisedPNL.Neg()
	}
	r.RealisedPNL = r.RealisedPNL.Round(8)
	held := p.Margin()
	r.QuantityAfter = p.Quantity.Sub(qty)
	if r.QuantityAfter.IsZero() {
		r.MarginReleased = held
	} else {
		r.MarginReleased = held.Mul(qty).DivRound(p.Quantity, 8)
	}
	next := Account{Free: a.Free.Add(r.MarginReleased).Add(r.RealisedPNL), Positions: append([]Position(nil), a.Positions...)}
	np := p
	np.Quantity = r.QuantityAfter
	np.Value = r.QuantityAfter.Mul(p.Entry)
	np.Held = held.Sub(r.MarginReleased)
	np.MM = decimal.Zero
	if r.QuantityAfter.IsZero() {
		np.Value, np.Held = decimal.Zero, decimal.Zero
	}
	next.Positions[i] = np
	r.FreeAfter, r.PoolAfter = next.Free, next.CrossPool()
	before, after := a.CrossLiquidationPrices(), next.CrossLiquidationPrices()
	for j, o := range a.Positions {
		if j != i && (!o.Cross || !o.Open()) {
			continue
		}
		m := LiquidationMove{Symbol: o.Symbol, Direction: o.Direction, Index: o.Index, Before: before[j], After: after[j], Reduced: j == i}
		if j == i && !o.Cross {
			m.Before, m.After = a.LiquidationPrice(i), next.LiquidationPrice(i)
		}
		r.Liquidations = append(r.Liquidations, m)
	}
	return next, r, nil
}

// CrossPool is the collateral of the cross positions together: the free
// balance, their margins and their unrealised PNL (at their index, where
// known); zero without an open cross position.
func (a Account) CrossPool() decimal.Decimal {
	pool, open := a.Free, false
	for _, p := range a.Positions {
		if !p.Cross || !p.Open() {
			continue
		}
		open = true
		pool = pool.Add(p.Margin())
		if p.Index.IsPositive() {
			pool = pool.Add(p.PNL(p.Index))
		}
	}
	if !open {
		return decimal.Zero
	}
	return pool
}
