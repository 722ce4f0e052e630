package margin

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/riskguard/riskguard/exchange"

	"github.com/shopspring/decimal"
)

// Survival is the account measure every decision is judged by: how far
// the indexes must move against the account before a position is
// liquidated.
//
//   - Together is the smallest adverse move of every index at once (each
//     against its position: down for a long, up for a short), as a
//     fraction of the index, at which a position is liquidated; First
//     names it ("cross pool" when the cross positions go together). The
//     cross pool's is (pool − Σ maintenance) / Σ q·index over the cross
//     positions, the pool being the free balance, the cross margins and
//     their PNL; an isolated position's is its own distance.
//   - Lost is the equity lost in that move: Together × Σ q·index over
//     every open position.
//   - Alone is, for each position, the smallest adverse move of its index
//     alone at which a position is liquidated (its own distance; a cross
//     position's takes the whole pool with it), weakest first.
//
// Moves are capped at 1 (a long cannot lose more than its index). Known
// is false when a position has no index price: "no data" is never judged
// better or worse.
type Survival struct {
	Known    bool
	Together decimal.Decimal
	First    string
	Lost     decimal.Decimal
	Alone    []Move
}

// Move is the smallest adverse move of one symbol's index alone at which
// a position is liquidated.
type Move struct {
	Symbol string
	Move   decimal.Decimal
}

// CrossPool names the cross positions liquidated together.
const CrossPool = "cross pool"

// survivalPlaces is the precision moves are compared at: a millionth of
// the index, far under a tick, so that rounding never reads as a change.
const survivalPlaces = 6

var one = decimal.NewFromInt(1)

// Survival is the account's measure over every position but skip (−1:
// every position): a skipped position still backs or draws on the cross
// pool, but its own liquidation does not count. Skipping the position an
// isolation ring-fences measures the rest of the account.
func (a Account) Survival(skip int) Survival { return a.survival(skip, nil) }

// SurvivalBoth is Survival(−1) and Survival(skip) of the same account,
// every position's liquidation price computed once for both (a
// prediction measures the whole account and the rest of it, before and
// after a call).
func (a Account) SurvivalBoth(skip int) (whole, rest Survival) {
	return a.SurvivalBothWith(skip, a.LiquidationPrices(), nil, nil)
}

// Notional is Σ q·index over the open positions, as the measure sums it
// (Lost is Together times it); ok is false when a position has no index
// price. A settings call does not change it.
func (a Account) Notional() (decimal.Decimal, bool) {
	c, ok := a.crossMove(-1, true)
	return c.notional, ok
}

// SurvivalBothWith is SurvivalBoth with every position's liquidation
// price given (liqs, as LiquidationPrices returns them) and, unless nil,
// every position's move (moves, as Moves returns them for liqs) and the
// account's Notional: a caller that measures several accounts differing
// in one position's settings prices and measures the others once.
func (a Account) SurvivalBothWith(skip int, liqs, moves []decimal.Decimal, notional *decimal.Decimal) (whole, rest Survival) {
	if moves == nil {
		moves = a.Moves(liqs)
	}
	c, ok := a.crossMove(-1, notional == nil)
	if !ok {
		return Survival{}, Survival{}
	}
	if notional != nil {
		c.notional = *notional
	}
	// Skipping a position changes the sums only in whether the pool
	// counts: not when skip is the one open cross position.
	cr := c
	if skip >= 0 && c.positions == 1 && a.Positions[skip].Cross && a.Positions[skip].Open() {
		cr.counted, cr.pooled, cr.move = false, false, decimal.Decimal{}
	}
	if whole, rest, ok := a.survivalBoth(skip, moves, c, cr); ok {
		return whole, rest
	}
	return a.survivalFrom(-1, liqs, moves, c), a.survivalFrom(skip, liqs, moves, cr)
}

// survivalBoth is SurvivalBothWith's two measures from the sums c (every
// position) and cr (skip's), the moves compared as int64s at one
// exponent (moveKeys): the rest of the account is the whole but for
// skip's own move, so its moves are the whole's sorted ones with that one
// taken out, sorted once. ok is false when a move does not fit an int64
// there (survivalFrom decides).
func (a Account) survivalBoth(skip int, moves []decimal.Decimal, c, cr crossSum) (whole, rest Survival, ok bool) {
	// The moves listed, in Survival's order of positions, and the one
	// the rest leaves out (−1: none).
	at := make([]int32, 0, len(a.Positions))
	drop := -1
	for i := range a.Positions {
		p := &a.Positions[i]
		if !p.Open() || p.Cross && !c.counted {
			continue
		}
		if i == skip && (!p.Cross || !cr.counted) {
			drop = len(at)
		}
		at = append(at, int32(i))
	}
	ks, oneK, poolK, ok := moveKeys(moves, at, c)
	if !ok {
		return Survival{}, Survival{}, false
	}
	// Together: the least of 1, the pool's move and each isolated
	// position's, the first of equals (the pool before the positions).
	together := func(cs crossSum, leave int) Survival {
		s := Survival{Known: true, Together: one}
		best := oneK
		if cs.pooled && poolK < best {
			s.Together, s.First, best = cs.move, CrossPool, poolK
		}
		for n, k := range ks {
			i := at[n]
			if p := &a.Positions[i]; !p.Cross && n != leave && k < best {
				s.Together, s.First, best = moves[i], p.Symbol, k
			}
		}
		s.Lost = s.Together.Mul(c.notional).Round(2)
		return s
	}
	whole, rest = together(c, -1), together(cr, drop)
	// Sorted by move, the place breaking ties: the decimals' stable sort.
	order := make([]int32, len(ks))
	for n := range order {
		order[n] = int32(n)
	}
	slices.SortFunc(order, func(x, y int32) int {
		if c := cmp.Compare(ks[x], ks[y]); c != 0 {
			return c
		}
		return cmp.Compare(x, y)
	})
	whole.Alone = make([]Move, len(order))
	for j, n := range order {
		i := at[n]
		whole.Alone[j] = Move{Symbol: a.Positions[i].Symbol, Move: moves[i]}
	}
	rest.Alone = whole.Alone
	if drop >= 0 {
		rest.Alone = make([]Move, 0, len(order)-1)
		for j, n := range order {
			if int(n) != drop {
				rest.Alone = append(rest.Alone, whole.Alone[j])
			}
		}
	}
	return whole, rest, true
}

// moveKeys are the listed moves (moves[at[n]]), 1 and the cross pool's
// move as int64 coefficients at the least of their exponents, which
// order as the decimals do; ok is false when one does not fit.
func moveKeys(moves []decimal.Decimal, at []int32, c crossSum) (ks []int64, oneK, poolK int64, ok bool) {
	e := int32(0)
	for _, i := range at {
		e = min(e, moves[i].Exponent())
	}
	if c.pooled {
		e = min(e, c.move.Exponent())
	}
	key := func(d decimal.Decimal) (int64, bool) {
		f, ok := toFixed(d)
		if ok {
			f, ok = f.rescale(e)
		}
		return f.v, ok
	}
	if oneK, ok = key(one); !ok {
		return nil, 0, 0, false
	}
	if c.pooled {
		if poolK, ok = key(c.move); !ok {
			return nil, 0, 0, false
		}
	}
	ks = make([]int64, len(at))
	for n, i := range at {
		if ks[n], ok = key(moves[i]); !ok {
			return nil, 0, 0, false
		}
	}
	return ks, oneK, poolK, true
}

// Moves is each open position's smallest adverse move of its index alone
// at which it is liquidated, from its liquidation price liqs[i], capped
// at 1 (zero for a closed position): what Survival's Alone lists.
func (a Account) Moves(liqs []decimal.Decimal) []decimal.Decimal {
	moves := make([]decimal.Decimal, len(a.Positions))
	for i, p := range a.Positions {
		if p.Open() {
			moves[i] = cappedMove(p.Direction, p.Index, liqs[i])
		}
	}
	return moves
}

// LiquidationPrices is every position's liquidation price as the measure
// reads it: a cross one's from the pool summed once
// (CrossLiquidationPrices), an open isolated one's LiquidationPrice (it
// depends on that position alone, not on the free balance), zero for a
// closed one.
func (a Account) LiquidationPrices() []decimal.Decimal { return a.LiquidationPricesWith(nil) }

// LiquidationPricesWith is LiquidationPrices, the isolated positions'
// remembered in l.
func (a Account) LiquidationPricesWith(l *Liquidations) []decimal.Decimal {
	return a.liquidationPricesIn(nil, l)
}

// LiquidationPricesIn is LiquidationPricesWith, listed in s's list where
// the account holds no open cross position (the pool's prices are a list
// of their own): valid until the next LiquidationPricesIn with s, which
// lists its own in it. Their floats are listed with them, and a
// PricedFrom with s given that list reads them rather than convert the
// prices again (a held position's converted once: Liquidations.Hold). The
// zero Scratch is ready.
func (a Account) LiquidationPricesIn(s *Scratch, l *Liquidations) []decimal.Decimal {
	return a.liquidationPricesIn(s, l)
}

// liquidationPricesIn is LiquidationPricesIn, s nil: a list of its own.
func (a Account) liquidationPricesIn(s *Scratch, l *Liquidations) []decimal.Decimal {
	var liqs []decimal.Decimal
	switch {
	case a.HasOpenCross():
		liqs = a.CrossLiquidationPrices()
	case s != nil:
		// Every price is written below: zero for a closed position; and
		// its float with it (liqF: the grid reads it, stressBookFrom).
		liqs = slices.Grow(s.liqs[:0], len(a.Positions))[:len(a.Positions)]
		clear(liqs)
		s.liqs = liqs
		s.liqF = slices.Grow(s.liqF[:0], len(a.Positions))[:len(a.Positions)]
		clear(s.liqF)
		for i := range a.Positions {
			if p := &a.Positions[i]; p.Open() && !p.Cross {
				liqs[i], s.liqF[i] = l.ofFloat(a, i)
			}
		}
		return liqs
	default:
		liqs = make([]decimal.Decimal, len(a.Positions))
	}
	for i := range a.Positions {
		if p := &a.Positions[i]; p.Open() && !p.Cross {
			liqs[i] = l.Of(a, i)
		}
	}
	return liqs
}

// HasOpenCross reports whether the account holds an open cross position.
func (a Account) HasOpenCross() bool {
	return slices.ContainsFunc(a.Positions, func(p Position) bool { return p.Cross && p.Open() })
}

// survival is Survival with every position's liquidation price given
// (liqs, as CrossLiquidationPrices gives a cross one's and
// LiquidationPrice an isolated one's), or computed as needed (nil).
func (a Account) survival(skip int, given []decimal.Decimal) Survival {
	return a.survivalWith(skip, given, nil)
}

// survivalWith is survival with each position's move given (moves, from
// the given liquidation prices) or computed as needed (nil).
func (a Account) survivalWith(skip int, given, moves []decimal.Decimal) Survival {
	c, ok := a.crossMove(skip, true)
	if !ok {
		return Survival{}
	}
	return a.survivalFrom(skip, given, moves, c)
}

// survivalFrom is survivalWith with the account's sums c as
// crossMove(skip, true) gives them.
func (a Account) survivalFrom(skip int, given, moves []decimal.Decimal, c crossSum) Survival {
	s := Survival{Known: true, Together: one}
	if c.pooled && c.move.LessThan(s.Together) {
		s.Together, s.First = c.move, CrossPool
	}
	liqs := given
	if liqs == nil && c.positions > 0 {
		liqs = a.CrossLiquidationPrices()
	}
	s.Alone = make([]Move, 0, len(a.Positions)) // every open position but skip's, at most
	for i, p := range a.Positions {
		if !p.Open() {
			continue
		}
		if p.Cross && !c.counted {
			continue // the only cross position, skipped: its pool backs nothing counted
		}
		if !p.Cross && i == skip {
			continue
		}
		var d decimal.Decimal
		if moves != nil {
			d = moves[i]
		} else {
			liq := decimal.Zero
			if p.Cross {
				liq = liqs[i]
			} else if given != nil {
				liq = given[i]
			} else {
				liq = a.LiquidationPrice(i)
			}
			d = cappedMove(p.Direction, p.Index, liq)
		}
		s.Alone = append(s.Alone, Move{Symbol: p.Symbol, Move: d})
		if !p.Cross && d.LessThan(s.Together) {
			s.Together, s.First = d, p.Symbol
		}
	}
	sortMoves(s.Alone)
	s.Lost = s.Together.Mul(c.notional).Round(2)
	return s
}

// Together is Survival(−1)'s Together and First alone, without the moves
// of each position alone (which price every cross position's liquidation
// again): what a backtest samples every tick. liqs[i] is isolated position
// i's liquidation price as LiquidationPrice(i) gives it, which the caller
// keeps (the simulated exchange holds it on the position); cross entries
// are not read. ok is false when a position has no index price.
func (a Account) Together(liqs []decimal.Decimal) (together decimal.Decimal, first string, ok bool) {
	c, ok := a.crossMove(-1, false)
	if !ok {
		return decimal.Zero, "", false
	}
	together = one
	if c.pooled && c.move.LessThan(together) {
		together, first = c.move, CrossPool
	}
	if at, ok := a.togetherFloat(liqs, together); ok {
		if at >= 0 {
			p := &a.Positions[at]
			n := p.Index.Sub(liqs[at])
			if p.Direction == exchange.Short {
				n = n.Neg()
			}
			together, first = n.DivRound(p.Index, 16), p.Symbol
		}
		return together, first, true
	}
	together, first = a.togetherExact(liqs, together, first)
	return together, first, true
}

// TogetherAtLeast reports whether Together(liqs) is known to be at least
// bound without computing it: every term of its minimum (1, the cross
// pool's move, each isolated position's) is compared with bound. The
// terms' numerators and denominators are summed exactly in 128 bits, and
// each quotient is compared in float64 with a margin a million times
// float64's error, so "at least" is never said of a Together below bound.
// false means Together must decide: below bound or too near it, a figure
// too large for an int64 (a sum too large for 128 bits), or no index
// price. A backtest that keeps the
// worst Together it has seen skips most samples this way. bound is a
// Together of some account (at most 16 places): since Together rounds its
// quotients to 16 places, an exact move at least bound rounds to at least
// bound.
func (a Account) TogetherAtLeast(liqs []decimal.Decimal, bound decimal.Decimal) bool {
	b, ok := boundOf(bound)
	if !ok {
		return false
	}
	s, ok, fits := a.crossSumsWide(-1, false)
	if !ok || !fits {
		return false
	}
	if s.counted && s.crossNotional.positive() {
		left := s.left.float()
		if s.left.negative() {
			left = 0 // max(pool − mm, 0)
		}
		if !quotientAtLeast(left, s.crossNotional.float(), b) {
			return false
		}
	}
	for i := range a.Positions {
		p := &a.Positions[i]
		if !p.Open() || p.Cross || !liqs[i].IsPositive() {
			continue
		}
		if !isolatedAtLeast(p.Direction, p.Index, liqs[i], b) {
			return false
		}
	}
	return true
}

// TogetherAtLeastIsolated is TogetherAtLeast of an account with the free
// balance free and no open cross position, whose n positions are read
// one by one (at: whether it is open, its direction, index price and
// liquidation price), without the account being built: the same answer
// from the same figures (TestTogetherAtLeastIsolated).
func TogetherAtLeastIsolated(free decimal.Decimal, n int, at func(i int) (open bool, direction string, index, liq decimal.Decimal), bound decimal.Decimal) bool {
	b, ok := boundOf(bound)
	if !ok {
		return false
	}
	if _, fits := wideFrom(free); !fits {
		return false // crossSumsWide's first test
	}
	for i := range n {
		open, direction, index, liq := at(i)
		if !open {
			continue
		}
		if !index.IsPositive() {
			return false // crossSumsWide's: no index price
		}
		if liq.IsPositive() && !isolatedAtLeast(direction, index, liq, b) {
			return false
		}
	}
	return true
}

// boundOf is TogetherAtLeast's bound as a float64, ok false when it is
// above 1 (no Together is): decided by the float where it is clearly
// under 1 (floatOf is within a few units in the last place), without
// comparing decimals of two exponents.
func boundOf(bound decimal.Decimal) (float64, bool) {
	b := floatOf(bound)
	if !(b < 0.5) && bound.GreaterThan(one) {
		return 0, false
	}
	return b, true
}

// quotientAtLeast reports whether num/den (den > 0) is at least b with a
// margin a million times float64's error.
func quotientAtLeast(num, den, b float64) bool {
	q := num / den
	return q-b > 1e-10*(math.Abs(q)+math.Abs(b))+math.SmallestNonzeroFloat64
}

// isolatedAtLeast is TogetherAtLeast's term of an isolated position at
// index price index (positive) with liquidation price liq (positive):
// whether its move to liq, (index − liq)/index (negated for a short), is
// known at least b.
func isolatedAtLeast(direction string, index, liq decimal.Decimal, b float64) bool {
	x, ok1 := toFixed(index)
	l, ok2 := toFixed(liq)
	if !ok1 || !ok2 {
		return false
	}
	n, ok := x.sub(l)
	if ok && direction == exchange.Short {
		n, ok = n.neg()
	}
	return ok && quotientAtLeast(n.float(), x.float(), b)
}

// togetherExact is Together's search of the smallest isolated move in
// decimals, from the cross pool's (together, first).
func (a Account) togetherExact(liqs []decimal.Decimal, together decimal.Decimal, first string) (decimal.Decimal, string) {
	// The smallest isolated move, num/den = (index − liq)/index (negated
	// for a short), found by cross-multiplying: one division, for the
	// winner, instead of one a position.
	num, den, at := together, one, -1
	for i, p := range a.Positions {
		if !p.Open() || p.Cross || !liqs[i].IsPositive() {
			continue // no liquidation price: capped at 1, never below together
		}
		n := p.Index.Sub(liqs[i])
		if p.Direction == exchange.Short {
			n = n.Neg()
		}
		if n.Mul(den).LessThan(num.Mul(p.Index)) {
			num, den, at = n, p.Index, i
		}
	}
	if at >= 0 {
		together, first = num.DivRound(den, 16), a.Positions[at].Symbol
	}
	return together, first
}

// togetherFloat finds Together's smallest isolated move in float64: at
// is the position whose move is smallest (−1: none under together), ok
// false when the float64 error bound cannot prove it strictly smaller
// than every other candidate (a near tie), and the decimal comparison
// must decide.
func (a Account) togetherFloat(liqs []decimal.Decimal, together decimal.Decimal) (at int, ok bool) {
	const tol = 1e-12 // far above float64's error in (index − liq)/index from exact decimals
	best, second := floatOf(together), math.Inf(1)
	at = -1
	for i, p := range a.Positions {
		if !p.Open() || p.Cross || !liqs[i].IsPositive() {
			continue
		}
		x, l := floatOf(p.Index), floatOf(liqs[i])
		if !(x > 0) || !(math.Abs(x) < floatMaxInput) || !(math.Abs(l) < floatMaxInput) {
			return 0, false
		}
		m := (x - l) / x
		if p.Direction == exchange.Short {
			m = -m
		}
		switch {
		case m < best:
			best, second, at = m, best, i
		case m < second:
			second = m
		}
	}
	// Every candidate's error is under tol·(1 + |liq/index|); a margin
	// of 4·tol·(2 + |best| + |second|) covers both of the closest two.
	if second-best <= 4*tol*(2+math.Abs(best)+math.Abs(second)) {
		return 0, false
	}
	return at, true
}

// crossSum is what Survival and Together sum over the open positions.
type crossSum struct {
	// move is the cross pool's move together: (pool − Σ maintenance) /
	// Σ q·index over the cross positions, at least 0, when pooled;
	// counted is false when no cross position but skip is open.
	move            decimal.Decimal
	counted, pooled bool
	// positions counts the open cross positions, skip included.
	positions int
	// notional is Σ q·index over every open position (the cross ones
	// only when not asked for).
	notional decimal.Decimal
}

// crossMove sums the open positions, their notional only when asked; ok
// is false when one has no index price.
func (a Account) crossMove(skip int, withNotional bool) (c crossSum, ok bool) {
	// In 128-bit integers while every figure fits an int64 and every sum
	// 128 bits: the same sums in the same order, value and exponent, and
	// one decimal division.
	if c, ok, fits := a.crossMoveWide(skip, withNotional); fits {
		return c, ok
	}
	return a.crossMoveDecimal(skip, withNotional)
}

// crossMoveWide is crossMove with its sums in wide arithmetic; fits is
// false when a figure does not fit (crossMoveDecimal decides).
func (a Account) crossMoveWide(skip int, withNotional bool) (c crossSum, ok, fits bool) {
	s, ok, fits := a.crossSumsWide(skip, withNotional)
	if !ok || !fits {
		return crossSum{}, ok, fits
	}
	c = crossSum{counted: s.counted, positions: s.positions, notional: s.notional.dec()}
	if c.counted && s.crossNotional.positive() {
		c.move, c.pooled = decimal.Max(s.left.dec(), decimal.Zero).DivRound(s.crossNotional.dec(), 16), true
	}
	return c, true, true
}

// wideSums are crossMove's sums before its division: left is the pool
// less the maintenance margins (pool − Σ mm).
type wideSums struct {
	left, crossNotional, notional wide
	positions                     int
	counted                       bool
}

// crossSumsWide is crossMove's sums in wide arithmetic: each position's
// figures in an int64 (fixed), their products and the sums in 128 bits
// (margins held to 16 places sum past an int64 over a few positions).
func (a Account) crossSumsWide(skip int, withNotional bool) (c wideSums, ok, fits bool) {
	pool, fits := wideFrom(a.Free)
	if !fits {
		return wideSums{}, false, false
	}
	var mm, crossNotional, notional wide // decimal.Zero: 0·10^0
	add := func(sum *wide, x wide) bool {
		var ok bool
		*sum, ok = sum.add(x)
		return ok
	}
	for i := range a.Positions {
		p := &a.Positions[i]
		if !p.Open() {
			continue
		}
		if !p.Index.IsPositive() {
			return wideSums{}, false, true
		}
		if !p.Cross && !withNotional {
			continue
		}
		q, ok1 := wideFrom(p.Quantity)
		x, ok2 := wideFrom(p.Index)
		if !ok1 || !ok2 {
			return wideSums{}, false, false
		}
		n, ok := q.mul(x)
		if !ok || !add(&notional, n) {
			return wideSums{}, false, false
		}
		if !p.Cross {
			continue
		}
		c.positions++
		c.counted = c.counted || i != skip
		ev, ok1 := wideFrom(p.EntryValue())
		m, ok2 := wideFrom(p.Margin())
		mnt, ok3 := wideFrom(p.Maintenance())
		if !ok1 || !ok2 || !ok3 {
			return wideSums{}, false, false
		}
		var pnl wide
		if p.Direction == exchange.Short {
			pnl, ok = ev.sub(n)
		} else {
			pnl, ok = n.sub(ev)
		}
		if !ok || !add(&m, pnl) || !add(&pool, m) || !add(&mm, mnt) || !add(&crossNotional, n) {
			return wideSums{}, false, false
		}
	}
	left, ok := pool.sub(mm)
	if !ok {
		return wideSums{}, false, false
	}
	c.left, c.crossNotional, c.notional = left, crossNotional, notional
	return c, true, true
}

// crossMoveDecimal is crossMove in decimals.
func (a Account) crossMoveDecimal(skip int, withNotional bool) (c crossSum, ok bool) {
	pool, mm, crossNotional := a.Free, decimal.Zero, decimal.Zero
	c.notional = decimal.Zero
	for i, p := range a.Positions {
		if !p.Open() {
			continue
		}
		if !p.Index.IsPositive() {
			return crossSum{}, false
		}
		if !p.Cross {
			if withNotional {
				c.notional = c.notional.Add(p.Quantity.Mul(p.Index))
			}
			continue
		}
		n := p.Quantity.Mul(p.Index)
		c.notional = c.notional.Add(n)
		c.positions++
		c.counted = c.counted || i != skip
		pool = pool.Add(p.Margin()).Add(p.PNL(p.Index))
		mm = mm.Add(p.Maintenance())
		crossNotional = crossNotional.Add(n)
	}
	if c.counted && crossNotional.IsPositive() {
		c.move, c.pooled = decimal.Max(pool.Sub(mm), decimal.Zero).DivRound(crossNotional, 16), true
	}
	return c, true
}

// CappedMove is a position's distance from liq as a move of its index,
// capped at 1 (also when there is no liquidation price): one entry of
// Moves.
func CappedMove(direction string, index, liq decimal.Decimal) decimal.Decimal {
	return cappedMove(direction, index, liq)
}

// cappedMove is CappedMove.
func cappedMove(direction string, index, liq decimal.Decimal) decimal.Decimal {
	d, ok := Distance(direction, index, liq)
	if !ok || moreThanOne(d) {
		return one
	}
	return d
}

// moreThanOne is d.GreaterThan(one), on the coefficient where it fits an
// int64 (comparing with one rescales both in math/big).
func moreThanOne(d decimal.Decimal) bool {
	if f, ok := toFixed(d); ok && f.e <= 0 && f.e >= -18 {
		return f.v > int64(pow10u[-f.e])
	}
	return d.GreaterThan(one)
}

// Compare orders two measures: +1 when s lets the account survive larger
// moves than t (Together first, then each position's Alone, weakest
// first), −1 when smaller, 0 when the same or either is unknown.
func (s Survival) Compare(t Survival) int {
	if !s.Known || !t.Known {
		return 0
	}
	if c := cmpRounded(s.Together, t.Together); c != 0 {
		return c
	}
	for i := range min(len(s.Alone), len(t.Alone)) {
		if c := cmpRounded(s.Alone[i].Move, t.Alone[i].Move); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(t.Alone), len(s.Alone))
}

// cmpRounded compares a and b rounded to survivalPlaces: in int64 when
// both fit (rounded, both have the exponent −survivalPlaces), else as
// decimals.
func cmpRounded(a, b decimal.Decimal) int {
	if x, ok := toFixed(a); ok {
		if y, ok := toFixed(b); ok {
			if x, ok := x.round(survivalPlaces); ok {
				if y, ok := y.round(survivalPlaces); ok {
					return cmp.Compare(x.v, y.v)
				}
			}
		}
	}
	return a.Round(survivalPlaces).Cmp(b.Round(survivalPlaces))
}

// Weakest is the position a move of its index alone liquidates soonest.
func (s Survival) Weakest() (Move, bool) {
	if len(s.Alone) == 0 {
		return Move{}, false
	}
	return s.Alone[0], true
}

// String is the measure as predictions say it: "survives 3.40% together
// (XSOL first, 2311.2 lost), weakest alone XSOL 3.40%".
func (s Survival) String() string {
	if !s.Known {
		return "survival unknown (an index price is missing)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "survives %s together", fraction(s.Together))
	if s.First != "" {
		fmt.Fprintf(&b, " (%s first, %s lost)", s.First, s.Lost)
	} else {
		b.WriteString(" (no liquidation within 100%)")
	}
	if w, ok := s.Weakest(); ok {
		fmt.Fprintf(&b, ", weakest alone %s %s", w.Symbol, fraction(w.Move))
	}
	return b.String()
}

// Change says a measure before and after: "survives 1.00% → 4.12%
// together (XETH → cross pool first, 1234.5 → 5080.2 lost), weakest alone
// XETH 1.00% → XSOL 3.40%".
func Change(before, after Survival) string {
	if !before.Known || !after.Known {
		return after.String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "survives %s → %s together", fraction(before.Together), fraction(after.Together))
	first := func(s Survival) string { return cmp.Or(s.First, "none") }
	if before.First == after.First {
		fmt.Fprintf(&b, " (%s first, %s → %s lost)", first(after), before.Lost, after.Lost)
	} else {
		fmt.Fprintf(&b, " (%s → %s first, %s → %s lost)", first(before), first(after), before.Lost, after.Lost)
	}
	wb, okb := before.Weakest()
	wa, oka := after.Weakest()
	if okb && oka {
		if wb.Symbol == wa.Symbol {
			fmt.Fprintf(&b, ", weakest alone %s %s → %s", wa.Symbol, fraction(wb.Move), fraction(wa.Move))
		} else {
			fmt.Fprintf(&b, ", weakest alone %s %s → %s %s", wb.Symbol, fraction(wb.Move), wa.Symbol, fraction(wa.Move))
		}
	}
	return b.String()
}

// fraction formats a fraction as a percentage with 2 places.
func fraction(d decimal.Decimal) string { return d.Shift(2).StringFixed(2) + "%" }

// sortMoves sorts moves by Move, stably, as comparing the decimals does:
// each move's value is first approximated in float64 (movesKey), which
// orders two moves whose keys differ by more than their error; the
// decimals decide the rest. Comparing hundreds of decimals of 16 places
// rescaled them in math/big at every comparison.
func sortMoves(ms []Move) {
	if len(ms) < 2 {
		return
	}
	// The keys sorted with each move's place, the place breaking ties: the
	// order the stable sort of the moves gives (the comparison is the
	// decimals' order, a total preorder), without moving 40-byte moves
	// in a merge sort.
	type keyed struct {
		k float64
		i int32
	}
	ks := make([]keyed, len(ms))
	for i, m := range ms {
		ks[i] = keyed{moveKey(m.Move), int32(i)}
	}
	slices.SortFunc(ks, func(x, y keyed) int {
		if d := x.k - y.k; math.Abs(d) > 1e-12*math.Max(math.Abs(x.k), math.Abs(y.k)) {
			if d < 0 {
				return -1
			}
			return 1
		}
		if c := ms[x.i].Move.Cmp(ms[y.i].Move); c != 0 {
			return c
		}
		return cmp.Compare(x.i, y.i)
	})
	sorted := make([]Move, len(ms))
	for j, k := range ks {
		sorted[j] = ms[k.i]
	}
	copy(ms, sorted)
}

// moveKey is d in float64 within a few units of its rounding (NaN when
// its coefficient does not fit an int64: every comparison then goes to
// the decimals).
func moveKey(d decimal.Decimal) float64 {
	f, ok := toFixed(d)
	if !ok {
		return math.NaN()
	}
	return f.float()
}
