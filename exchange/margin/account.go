package margin

import (
	"slices"

	"github.com/riskguard/riskguard/exchange"
	"github.com/shopspring/decimal"
)

// Position is a contract position as the model sees it.
type Position struct {
	Symbol    string
	Direction string // exchange.Long or exchange.Short
	Quantity  decimal.Decimal
	Entry     decimal.Decimal
	Leverage  int
	Cross     bool
	RiskLimit exchange.RiskLimit
	// Index is the position's index price now; zero when unknown, and its
	// PNL then counts as zero in the cross pool.
	Index decimal.Decimal
	// Scale is the quote scale liquidation prices are rounded to.
	Scale int32
	// Held is the margin the exchange holds for the position, when known
	// (it saves a division); zero means EntryValue/Leverage.
	Held decimal.Decimal
	// Value is the entry value q·P when the caller knows it (the
	// exchange lists it); zero means computing it.
	Value decimal.Decimal
	// MM is the maintenance margin when the caller knows it (it depends
	// only on the quantity, the entry price and the risk limit); zero
	// means computing it.
	MM decimal.Decimal
}

// PositionOf is p as the model sees it: the position on symbol, whose
// liquidation prices round to scale decimal places, with the margin and
// the entry value the exchange lists (Held and Value; zero when it lists
// none). The index price is the caller's to set.
//
// A leverage below 1 is modelled as 1, the leverage Margin charges: the
// exchange lists 0 for a position never set (an empty one), and the model
// compares and predicts with the leverage that is charged. The simulated
// exchange refuses a leverage below 1, so there the clamp changes nothing.
// This is the one conversion: the engine predicts, the backtest seeds and
// the simulated exchange simulates with the same model of a position.
func PositionOf(p *exchange.Position, symbol string, scale int32) Position {
	return Position{Symbol: symbol, Direction: p.Direction, Quantity: p.Quantity, Entry: p.EntryPrice,
		Leverage: max(p.Leverage, 1), Cross: p.Cross, RiskLimit: p.RiskLimit, Scale: scale, Held: p.Margin, Value: p.EntryValue}
}

// Open reports whether the position holds anything.
func (p Position) Open() bool { return p.Quantity.IsPositive() }

// EntryValue is q·P.
func (p Position) EntryValue() decimal.Decimal {
	if !p.Value.IsZero() {
		return p.Value
	}
	return p.Quantity.Mul(p.Entry)
}

// Margin is the margin held, or EntryValue/Leverage as Margin rounds it.
func (p Position) Margin() decimal.Decimal {
	if !p.Held.IsZero() {
		return p.Held
	}
	return Margin(p.EntryValue(), p.Leverage)
}

// Maintenance is the maintenance margin mmr·EV under the risk limit's steps.
func (p Position) Maintenance() decimal.Decimal {
	if !p.MM.IsZero() {
		return p.MM
	}
	ev := p.EntryValue()
	return MaintenanceRate(p.RiskLimit, ev).Mul(ev)
}

// PNL is the unrealised profit and loss at index: q·(index − P), negated
// for a short.
func (p Position) PNL(index decimal.Decimal) decimal.Decimal {
	return p.pnl(p.Quantity.Mul(index))
}

// pnl is the PNL at a notional q·index: q·index − EV, negated for a short.
func (p Position) pnl(notional decimal.Decimal) decimal.Decimal {
	if p.Direction == exchange.Short {
		return p.EntryValue().Sub(notional)
	}
	return notional.Sub(p.EntryValue())
}

// Account is the contract account: its free balance and its positions.
//
// Isolated positions are backed by their own margin. The cross positions
// share one collateral pool: the free balance, their margins and their
// unrealised PNL. They are liquidated together when the pool falls to
// their total maintenance margin, so each cross position's liquidation
// price is the index at which that happens with the other prices held; a
// lone cross position gets LiquidationPrice with its margin plus the free
// balance as collateral.
type Account struct {
	// Free is the collateral held as no position's margin.
	Free      decimal.Decimal
	Positions []Position
}

// LiquidationPrice returns position i's liquidation price, 0 for a
// position with no quantity (and for a long no positive price liquidates).
func (a Account) LiquidationPrice(i int) decimal.Decimal {
	p := &a.Positions[i]
	switch {
	case !p.Open():
		return decimal.Zero
	case !p.Cross:
		return p.liquidationPriceAt(p.Margin())
	}
	return p.liquidationPriceAt(a.Collateral(i))
}

func (a Account) liquidationPrice(i int, collateral decimal.Decimal) decimal.Decimal {
	p := &a.Positions[i]
	if !p.Open() {
		return decimal.Zero
	}
	return p.liquidationPriceAt(collateral)
}

// liquidationPriceAt is the open position p's liquidation price backed
// by collateral.
func (p *Position) liquidationPriceAt(collateral decimal.Decimal) decimal.Decimal {
	return LiquidationPrice(p.Direction, p.Quantity, p.Entry, collateral, MaintenanceRate(p.RiskLimit, p.EntryValue()), p.Scale)
}

// CrossLiquidationPrices returns every cross position's liquidation price
// (zero for the others), computing the cross pool once.
func (a Account) CrossLiquidationPrices() []decimal.Decimal {
	cs, ok := a.collateralsWide()
	if !ok {
		return a.CrossLiquidationPricesWith(a.Collaterals())
	}
	// Each price from its collateral read as a float64 where float64
	// proves the rounding (liquidationPriceFloats), the collateral made a
	// decimal only where it does not.
	out := make([]decimal.Decimal, len(a.Positions))
	for i := range a.Positions {
		p := &a.Positions[i]
		if !p.Cross || !p.Open() {
			continue
		}
		mmr := MaintenanceRate(p.RiskLimit, p.EntryValue())
		if p.Scale >= 0 && p.Scale <= 18 {
			if liq, ok := liquidationPriceFloats(p.Direction, floatOf(p.Quantity), floatOf(p.Entry), cs[i].float(), floatOf(mmr), p.Scale); ok {
				out[i] = liq
				continue
			}
		}
		out[i] = LiquidationPrice(p.Direction, p.Quantity, p.Entry, cs[i].dec(), mmr, p.Scale)
	}
	return out
}

// CrossLiquidationPricesWith is CrossLiquidationPrices with the cross
// positions' collaterals already computed (cs, as Collaterals returns them).
func (a Account) CrossLiquidationPricesWith(cs []decimal.Decimal) []decimal.Decimal {
	out := make([]decimal.Decimal, len(a.Positions))
	for i, p := range a.Positions {
		if p.Cross {
			out[i] = a.liquidationPrice(i, cs[i])
		}
	}
	return out
}

// Collateral is what backs position i against its own maintenance margin:
// its margin when isolated; when cross, the pool less every requirement
// but its own (the other cross positions' maintenance margin). Its equity
// is Collateral + PNL, as LiquidationPrice and RiskLevel weigh it.
func (a Account) Collateral(i int) decimal.Decimal {
	p := a.Positions[i]
	if !p.Cross {
		return p.Margin()
	}
	pool, others := a.crossPool(i)
	return pool.Sub(others)
}

// Collaterals is Collateral of every cross position (zero for the
// others), the cross pool summed once: the pool less the others'
// requirements is the whole pool, less i's own PNL, less every maintenance
// margin but i's.
func (a Account) Collaterals() []decimal.Decimal {
	out := make([]decimal.Decimal, len(a.Positions))
	// In 128-bit integers while every figure fits an int64: the same sums
	// in the same order, value and exponent (collateralsWide).
	if cs, ok := a.collateralsWide(); ok {
		for i := range a.Positions {
			if p := &a.Positions[i]; p.Cross && p.Open() {
				out[i] = cs[i].dec()
			}
		}
		return out
	}
	return a.collateralsDecimal(out)
}

// collateralsWide is Collaterals in wide arithmetic (each position's
// figures in an int64, the sums in 128 bits); false when a figure does
// not fit.
func (a Account) collateralsWide() ([]wide, bool) {
	pool, ok := wideFrom(a.Free)
	if !ok {
		return nil, false
	}
	n := len(a.Positions)
	buf := make([]wide, 3*n)
	out, pnl, mm := buf[:n], buf[n:2*n], buf[2*n:]
	var totalMM wide
	for i := range a.Positions {
		p := &a.Positions[i]
		if !p.Cross || !p.Open() {
			continue
		}
		margin, ok1 := wideFrom(p.Margin())
		m, ok2 := wideFrom(p.Maintenance())
		if !ok1 || !ok2 {
			return nil, false
		}
		mm[i] = m
		var ok bool
		if pool, ok = pool.add(margin); !ok {
			return nil, false
		}
		if totalMM, ok = totalMM.add(mm[i]); !ok {
			return nil, false
		}
		if p.Index.IsPositive() {
			q, ok1 := wideFrom(p.Quantity)
			x, ok2 := wideFrom(p.Index)
			ev, ok3 := wideFrom(p.EntryValue())
			if !ok1 || !ok2 || !ok3 {
				return nil, false
			}
			n, ok := q.mul(x)
			if ok && p.Direction == exchange.Short {
				pnl[i], ok = ev.sub(n)
			} else if ok {
				pnl[i], ok = n.sub(ev)
			}
			if !ok {
				return nil, false
			}
			if pool, ok = pool.add(pnl[i]); !ok {
				return nil, false
			}
		}
	}
	for i := range a.Positions {
		if p := &a.Positions[i]; p.Cross && p.Open() {
			x, ok1 := pool.sub(pnl[i])
			y, ok2 := totalMM.sub(mm[i])
			if !ok1 || !ok2 {
				return nil, false
			}
			c, ok := x.sub(y)
			if !ok {
				return nil, false
			}
			out[i] = c
		}
	}
	return out, true
}

// collateralsDecimal is Collaterals in decimals, into out.
func (a Account) collateralsDecimal(out []decimal.Decimal) []decimal.Decimal {
	pnl := make([]decimal.Decimal, len(a.Positions))
	mm := make([]decimal.Decimal, len(a.Positions))
	pool, totalMM := a.Free, decimal.Zero
	for i, p := range a.Positions {
		if !p.Cross || !p.Open() {
			continue
		}
		pool = pool.Add(p.Margin())
		mm[i] = p.Maintenance()
		totalMM = totalMM.Add(mm[i])
		if p.Index.IsPositive() {
			pnl[i] = p.PNL(p.Index)
			pool = pool.Add(pnl[i])
		}
	}
	for i, p := range a.Positions {
		if p.Cross && p.Open() {
			out[i] = pool.Sub(pnl[i]).Sub(totalMM.Sub(mm[i]))
		}
	}
	return out
}

// crossPool is the collateral backing cross position i (the free balance,
// every cross margin and the other cross positions' PNL) and the other
// cross positions' maintenance margin.
func (a Account) crossPool(i int) (pool, othersMaintenance decimal.Decimal) {
	pool = a.Free
	for j, o := range a.Positions {
		if !o.Cross || !o.Open() {
			continue
		}
		pool = pool.Add(o.Margin())
		if j == i {
			continue
		}
		othersMaintenance = othersMaintenance.Add(o.Maintenance())
		if o.Index.IsPositive() {
			pool = pool.Add(o.PNL(o.Index))
		}
	}
	return pool, othersMaintenance
}

// InferFree solves the model for the free balance behind cross position i
// from the liquidation price the exchange shows for it, the other
// positions as given. ok is false when i is not an open cross position or
// liq is not positive. The answer is exact up to the rounding of liq to
// the quote scale (a tick times the quantity), and never negative.
func (a Account) InferFree(i int, liq decimal.Decimal) (free decimal.Decimal, ok bool) {
	// long:  liq = P − (C − MM)/q  →  C = (P − liq)·q + MM, C the pool
	// short: liq = P + (C − MM)/q  →  C = (liq − P)·q + MM
	free, ok = a.inferFree(i, liq)
	if ok && free.IsNegative() {
		return decimal.Zero, true
	}
	return free, ok
}

// Distance is how far the index is from a liquidation price, as a fraction
// of the index: (index − liq)/index for a long, the mirror for a short;
// negative past it. ok is false without a positive index or liquidation
// price.
func Distance(direction string, index, liq decimal.Decimal) (d decimal.Decimal, ok bool) {
	if !index.IsPositive() || !liq.IsPositive() {
		return decimal.Zero, false
	}
	short := direction == exchange.Short
	if d, ok = distance16Signed(index, liq, short); ok {
		return d, true
	}
	d = index.Sub(liq).DivRound(index, 16)
	if short {
		d = d.Neg()
	}
	return d, true
}

// Effect is what a settings change is predicted to do.
type Effect struct {
	// LiquidationBefore and LiquidationAfter are the position's
	// liquidation prices.
	LiquidationBefore, LiquidationAfter decimal.Decimal
	// MarginMoved is what moves from the free balance into the position's
	// margin; negative when margin is released to it.
	MarginMoved decimal.Decimal
	// FreeAfter is the free balance after the change.
	FreeAfter decimal.Decimal
	// Affordable is false when the free balance cannot fund MarginMoved:
	// the exchange refuses such a change.
	Affordable bool
}

// Closer reports whether the change moves the liquidation price towards
// index: the position would be liquidated by a smaller move.
func (e Effect) Closer(direction string, index decimal.Decimal) bool {
	before, okBefore := Distance(direction, index, e.LiquidationBefore)
	after, okAfter := Distance(direction, index, e.LiquidationAfter)
	return e.CloserFrom(before, okBefore, after, okAfter)
}

// CloserFrom is Closer from the distances before and after, as Distance
// gives them with its ok, where the caller worked them out already.
func (e Effect) CloserFrom(before decimal.Decimal, okBefore bool, after decimal.Decimal, okAfter bool) bool {
	if !okBefore || !okAfter {
		// A long with no liquidation price (0) cannot be liquidated: one
		// gaining a price moves closer.
		return !e.LiquidationBefore.IsPositive() && e.LiquidationAfter.IsPositive()
	}
	return after.LessThan(before)
}

// Apply predicts setting position i to leverage and cross (isolated when
// false): the account after, and the effect on the position. A leverage
// change moves the margin difference between the free balance and the
// position; switching margin mode moves none.
func (a Account) Apply(i, leverage int, cross bool) (Account, Effect) {
	return a.ApplyWith(i, leverage, cross, nil)
}

// ApplyWith is Apply, isolated liquidation prices remembered in l.
func (a Account) ApplyWith(i, leverage int, cross bool, l *Liquidations) (Account, Effect) {
	next, eff := a.apply(i, leverage, cross, l.Of(a, i))
	eff.LiquidationAfter = l.Of(next, i)
	return next, eff
}

// ApplyPriced is ApplyWith on an account whose liquidation prices are
// known (liqs, as LiquidationPrices gives them), which also returns the
// account after's: position i's price before is read from liqs, and only
// the prices that can move are computed — position i's and the cross
// pool's, which the free balance moves; another isolated position's
// depends on that position alone.
func (a Account) ApplyPriced(i, leverage int, cross bool, l *Liquidations, liqs []decimal.Decimal) (Account, Effect, []decimal.Decimal) {
	next, eff := a.apply(i, leverage, cross, liqs[i])
	after := slices.Clone(liqs)
	if next.HasOpenCross() {
		for j, liq := range next.CrossLiquidationPrices() {
			if next.Positions[j].Cross {
				after[j] = liq
			}
		}
	}
	switch p := &next.Positions[i]; {
	case !p.Open():
		after[i] = decimal.Zero
	case !p.Cross:
		after[i] = l.Of(next, i)
	}
	eff.LiquidationAfter = after[i]
	return next, eff, after
}

// IsolatedEffect is ApplyPriced's effect for a leverage change of the
// isolated position i that leaves it isolated, with its position after,
// and without the account after (a copy of every position): what a
// candidate compared by its cost reads (liqs as LiquidationPrices gives
// them, read only; the price after remembered in l as ApplyPriced
// remembers it). An isolated position's liquidation price is its own.
//
// While a is held in l (Liquidations.Hold), its positions the same but
// for their indexes, a call to the same leverage leaves the open isolated
// position the same position after but for its index, at the same
// liquidation price, and moves the same margin from the same free balance
// (the same decimal): its place remembers them by the leverage after.
func (a Account) IsolatedEffect(i, leverage int, l *Liquidations, liqs []decimal.Decimal) (Position, Effect) {
	var e *leverageLiq
	if p := &a.Positions[i]; p.Open() && !p.Cross {
		e = l.heldAfter(a, i, max(leverage, 1))
	}
	if e != nil && e.effK && SameDec(e.free, a.Free) {
		// effect's position after, and its effect as remembered.
		np := a.Positions[i]
		np.Leverage, np.Cross, np.Held = max(leverage, 1), false, decimal.Zero
		return np, Effect{LiquidationBefore: liqs[i], LiquidationAfter: e.liq, MarginMoved: e.moved, FreeAfter: e.freeAfter,
			Affordable: !e.freeAfter.IsNegative()}
	}
	np, eff := a.effect(i, leverage, false, liqs[i])
	switch {
	case !np.Open():
		eff.LiquidationAfter = decimal.Zero
	case e != nil && e.effK:
		eff.LiquidationAfter = e.liq // another free balance: the same price
	default:
		eff.LiquidationAfter = l.Of(Account{Positions: []Position{np}}, 0)
	}
	if e != nil {
		e.liq, e.free, e.moved, e.freeAfter, e.effK = eff.LiquidationAfter, a.Free, eff.MarginMoved, eff.FreeAfter, true
	}
	return np, eff
}

// ApplySamePool is ApplyPriced for a leverage change of the cross
// position i that leaves it cross: the margin moved leaves the free
// balance for the position's margin, both in the cross pool, so the pool
// is the same decimal and so is every liquidation price (liqs, as
// LiquidationPrices gives them, read only): none is worked out again.
func (a Account) ApplySamePool(i, leverage int, liqs []decimal.Decimal) (Account, Effect) {
	next, eff := a.apply(i, leverage, true, liqs[i])
	if !next.Positions[i].Open() {
		eff.LiquidationAfter = decimal.Zero
	} else {
		eff.LiquidationAfter = liqs[i]
	}
	return next, eff
}

// apply is Apply but for the liquidation price after, with position i's
// before given.
func (a Account) apply(i, leverage int, cross bool, before decimal.Decimal) (Account, Effect) {
	np, eff := a.effect(i, leverage, cross, before)
	next := Account{Free: eff.FreeAfter, Positions: append([]Position(nil), a.Positions...)}
	next.Positions[i] = np
	return next, eff
}

// effect is apply's position i after and its effect, without the account
// after.
func (a Account) effect(i, leverage int, cross bool, before decimal.Decimal) (Position, Effect) {
	p := a.Positions[i]
	eff := Effect{LiquidationBefore: before}
	np := p
	np.Leverage, np.Cross, np.Held = max(leverage, 1), cross, decimal.Zero
	if p.Open() {
		eff.MarginMoved, eff.FreeAfter = marginMoved(&np, &p, a.Free)
	} else {
		eff.FreeAfter = a.Free.Sub(eff.MarginMoved)
	}
	eff.Affordable = !eff.FreeAfter.IsNegative()
	return np, eff
}

// marginMoved is np.Margin().Sub(p.Margin()), the margin a settings call
// moves from the free balance into the open position p (np after it, its
// margin not held: Margin of its entry value), and free less it, in value
// and exponent: on the coefficients where they fit (fixed, marginFixed:
// DivRound's rounding), where each decimal step made big integers; in
// decimals where they do not (TestMarginMovedIsTheDecimals).
func marginMoved(np, p *Position, free decimal.Decimal) (moved, after decimal.Decimal) {
	if ev, ok := toFixed(np.EntryValue()); ok {
		if m, ok := marginFixed(ev, true, np.Leverage); ok {
			if pm, ok := toFixed(p.Margin()); ok {
				if d, ok := m.sub(pm); ok {
					moved = d.dec()
					if f, ok := toFixed(free); ok {
						if fa, ok := f.sub(d); ok {
							return moved, fa.dec()
						}
					}
					return moved, free.Sub(moved)
				}
			}
		}
	}
	moved = np.Margin().Sub(p.Margin())
	return moved, free.Sub(moved)
}

// SamePoolEffect is ApplySamePool's effect alone, without the account
// after (a copy of every position): what a candidate compared by its
// cost needs.
func (a Account) SamePoolEffect(i, leverage int, liqs []decimal.Decimal) Effect {
	np, eff := a.effect(i, leverage, true, liqs[i])
	if np.Open() {
		eff.LiquidationAfter = liqs[i]
	}
	return eff
}
