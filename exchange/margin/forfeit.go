package margin

import (
	"cmp"
	"math"
	"slices"

	"github.com/shopspring/decimal"
)

// Under a price without drift, holding a position is worth its mark: a
// loss that comes back is no loss, and a loss realised is the mark already
// counted. What a liquidation costs is what it forfeits at its liquidation
// point: the equity left there, which the exchange keeps (the model has no
// liquidation fee; a venue that charges one would add it here). For an
// isolated position that is its margin and its PNL at its liquidation
// price, margin moved into it included; for the cross pool, every cross
// position going together, the pool at the moved prices where it falls to
// their maintenance margin.
//
// A liquidation is a first passage: a wick that touches the point and comes
// back has still liquidated. Under the grid's law (Student's t, 3 degrees
// of freedom, unit variance) and the reflection principle, a move of k σ
// over the horizon is touched with probability min(1, 2·tail(|k|)).
//
// The families are the stress grid's (every index together, each index
// alone, weighted as Stress weighs them), the moves the same (an index at
// k σ is index·max(0, 1 + k·σ)).

// Forfeit is the account's expected loss to liquidations over the horizon,
// first passage.
type Forfeit struct {
	// Known is false when a position has no index price or its symbol no
	// σ: no data is never a number.
	Known bool
	// Expected is Σ Weight·Prob·Amount over the Parts, in the quote
	// currency.
	Expected float64
	// Parts are one per isolated position and one for the cross pool, per
	// family, with Prob > 0, nearest first (|K| ascending). A part already
	// past its point is lost whatever moves: it is listed once, with Family
	// "" and Weight 1.
	Parts []ForfeitPart
}

// ForfeitPart is what one isolated position, or the cross pool, forfeits
// if a family's move touches its liquidation point.
type ForfeitPart struct {
	Symbols   []string // the position's symbol, or every symbol of the cross pool
	Direction string   // LONG/SHORT, or "" for the pool
	// At is the position's index in Account.Positions; −1 for the pool.
	At int
	// Family names the family as StressPoint.Family does; "" for a part
	// already past its point (every family alike).
	Family string
	// Weight is the family's share of Expected (the grid's: ½ every index
	// together, ½ shared among the symbols alone); 1 for a part past its
	// point.
	Weight float64
	// K is the signed σ-move to its liquidation point (0 when already
	// past). For the pool, the nearer of its points below and above (the
	// one below on a tie), and KFar the other (0 when there is none).
	K, KFar float64
	// Prob is the probability of touching it within the horizon (for the
	// pool, of touching either of its points: the two summed, at most 1).
	Prob float64
	// Amount is what it forfeits there.
	Amount float64
}

// Touch is the probability that a driftless move touches k σ (either
// sign) within the horizon, under the grid's law: min(1, 2·tail(|k|)),
// tail the upper tail of Student's t with 3 degrees of freedom scaled to
// unit variance, whose density is (2/π)(1 + x²)⁻², so
// 2·tail(x) = 1 − (2/π)(atan x + x/(1 + x²)).
func Touch(k float64) float64 {
	x := math.Abs(k)
	switch {
	case math.IsNaN(x):
		return math.NaN()
	case x <= 1:
		return 1 - 2/math.Pi*(math.Atan(x)+x/(1+x*x))
	case x < 20:
		// atan x = π/2 − atan(1/x): the 1 cancels without losing the tail.
		u := 1 / x
		return 2 / math.Pi * (math.Atan(u) - u/(1+u*u))
	default:
		// The series of atan u − u/(1 + u²) = Σ (−1)^(m+1)·2m/(2m+1)·u^(2m+1),
		// u = 1/x: the two cancel to (2/3)u³ at first order.
		u := 1 / x
		u2 := u * u
		s, t := 0.0, u*u2
		for m := 1; m <= 6; m++ {
			c := float64(2*m) / float64(2*m+1)
			if m%2 == 0 {
				c = -c
			}
			s += c * t
			t *= u2
		}
		return 2 / math.Pi * s
	}
}

// Forfeit is the account's expected loss to liquidations over the horizon:
// sigma gives each symbol's σ over the horizon (a fraction of its index);
// liqs are the positions' liquidation prices as LiquidationPrices gives
// them (nil: computed). It takes time O(n log n) in the positions: each
// isolated position's point is solved from its liquidation price, the
// pool's from its equity, linear in the move between the indices' floors.
func (a Account) Forfeit(sigma func(symbol string) float64, liqs []decimal.Decimal) Forfeit {
	b, ok := a.stressBook(sigma, liqs)
	if !ok {
		return Forfeit{}
	}
	return b.forfeit()
}

// forfeit is Forfeit of the book's account.
func (b stressBook) forfeit() Forfeit {
	f, _ := b.forfeitIn(nil)
	return f
}

// forfeitIn is forfeit, its parts listed in s's list when set (kept there
// for the next), with each position's symbol as its parts list it
// (own[i]: own[i:i+1] are their Symbols; nil without parts). own is never
// written once made, and parts handed on share it: s keeps the last, and
// a book of the same symbols in the same order (a steady account) lists
// it again.
func (b stressBook) forfeitIn(s *Scratch) (f Forfeit, own []string) {
	if !b.finite() {
		return Forfeit{}, nil
	}
	out := Forfeit{Known: true}
	if len(b.ps) == 0 {
		return out, nil
	}
	// At most two parts per isolated position, one per family for the pool.
	n := 0
	for i := range b.ps {
		if !b.ps[i].cross {
			n += 2
		}
	}
	if b.anyCross {
		n += len(b.syms) + 1
	}
	if s != nil {
		out.Parts = slices.Grow(s.parts[:0], n)
		s.parts = out.Parts[:0]
		own = s.own
	}
	if !b.symbolsAre(own) {
		own = make([]string, len(b.ps)) // each position's symbol, for its parts
		for i := range own {
			own[i] = b.symbol(i)
		}
		if s != nil {
			s.own = own
		}
	}
	if s == nil {
		out.Parts = make([]ForfeitPart, 0, n)
	}
	for i := range b.ps {
		if !b.ps[i].cross {
			out.Parts = b.isoParts(out.Parts, i, own[i:i+1:i+1])
		}
	}
	out.Parts = b.poolParts(out.Parts)
	// Nearest first: the parts' keys sorted by |K|, ties in the order
	// they were found (a stable sort, written as one), then the parts laid
	// out in it in place, a cycle of the permutation at a time (sorting the
	// parts themselves moves 136 bytes a swap; a second list of them is
	// as many bytes again for the collector).
	var onStack [48]partKey // an account's few parts' keys, not on the heap
	keys := onStack[:0]
	if len(out.Parts) > len(onStack) {
		keys = make([]partKey, 0, len(out.Parts))
	}
	keys = keys[:len(out.Parts)]
	if s != nil && len(s.order) == len(keys) {
		// As many parts as the last forfeit read into s: laid out in its
		// order first, which an account whose indexes alone moved mostly
		// keeps, then sorted by |K| and found order, the same order from
		// any start (sortPartKeys).
		for d, j := range s.order {
			keys[d] = partKey{math.Abs(out.Parts[j].K), j}
		}
		sortPartKeys(keys)
	} else {
		for i := range keys {
			keys[i] = partKey{math.Abs(out.Parts[i].K), int32(i)}
		}
		sortPartKeys(keys)
	}
	if s != nil {
		s.order = slices.Grow(s.order[:0], len(keys))
		for _, k := range keys {
			s.order = append(s.order, k.i)
		}
	}
	permute(out.Parts, keys)
	for i := range out.Parts {
		p := &out.Parts[i]
		out.Expected += p.Weight * p.Prob * p.Amount
	}
	return out, own
}

// symbolsAre reports whether syms are the book's positions' symbols, in
// its order.
func (b *stressBook) symbolsAre(syms []string) bool {
	if len(syms) != len(b.ps) {
		return false
	}
	for i := range syms {
		if syms[i] != b.symbol(i) {
			return false
		}
	}
	return true
}

// permute lays parts out in the order of keys (parts[d] becomes the part
// at keys[d].i), in place; keys' i are spent (−1).
func permute(parts []ForfeitPart, keys []partKey) {
	for s := range keys {
		if keys[s].i < 0 || int(keys[s].i) == s {
			keys[s].i = -1
			continue
		}
		held := parts[s]
		d := s
		for {
			src := int(keys[d].i)
			keys[d].i = -1
			if src == s {
				parts[d] = held
				break
			}
			parts[d] = parts[src]
			d = src
		}
	}
}

// comparePartKeys orders two keys by k, then i (cmp.Compare's order of
// k: NaN first): the order both sorts of part keys give.
func comparePartKeys(x, y partKey) int {
	if c := cmp.Compare(x.k, y.k); c != 0 {
		return c
	}
	return cmp.Compare(x.i, y.i)
}

// partKey is a forfeit part's place in the order of its parts: |K|, then
// the order it was found in (i).
type partKey struct {
	k float64
	i int32
}

// sortPartKeys sorts keys, in any order, by k then i (cmp.Compare's
// order of k: NaN first). The order is total, so its result is the same
// from any start (TestSortPartKeysFromAnyOrder), and a start near it (the
// order of their i, or the last forfeit's) costs a few comparisons a
// key: an account's few parts are sorted by insertion, many by
// slices.SortFunc (TestSortPartKeys).
func sortPartKeys(keys []partKey) {
	if len(keys) > 48 {
		slices.SortFunc(keys, comparePartKeys)
		return
	}
	for a := 1; a < len(keys); a++ {
		x := keys[a]
		b := a
		for b > 0 && comparePartKeys(keys[b-1], x) > 0 {
			keys[b] = keys[b-1]
			b--
		}
		keys[b] = x
	}
}

// finite reports whether every figure the forfeit reads is a number: a
// figure past float64's range (an index of 1e400) is no data.
func (b stressBook) finite() bool {
	for i := range b.ps {
		if p := &b.ps[i]; !finite(p.index) || !finite(p.equity) || !finite(p.liq) || !finite(p.mm) {
			return false
		}
	}
	return true
}

// weights are the families' weights: ½ every index together, ½ shared
// among the symbols alone.
func (b stressBook) weights() (together, alone float64) {
	return 0.5, 0.5 / float64(len(b.syms))
}

// isoParts appends the parts of the book's isolated position i (syms its
// symbol, as the parts list it), in the order forfeit finds them: lost
// already, or every index together then its symbol alone.
func (b stressBook) isoParts(parts []ForfeitPart, i int, syms []string) []ForfeitPart {
	return b.isoPartsOf(parts, &b.ps[i], syms)
}

// isoPartsOf is isoParts of the isolated position p, read as the book
// reads its own (its at and sym the book's).
func (b *stressBook) isoPartsOf(parts []ForfeitPart, p *stressPos, syms []string) []ForfeitPart {
	if !(p.liq > 0) {
		return parts // no price liquidates it
	}
	together, alone := b.weights()
	add := func(fp ForfeitPart) {
		if fp.Prob > 0 {
			parts = append(parts, fp)
		}
	}
	dir := b.acct[p.at].Direction
	if p.lostAt(p.index) {
		add(ForfeitPart{Symbols: syms, Direction: dir, At: p.at, Weight: 1, Prob: 1, Amount: math.Max(p.equity, 0)})
		return parts
	}
	k := (p.liq/p.index - 1) / b.syms[p.sym].Sigma
	part := ForfeitPart{Symbols: syms, Direction: dir, At: p.at, Family: StressTogether, Weight: together, K: k, Prob: Touch(k),
		Amount: math.Max(p.margin+p.pnl(p.liq), 0)}
	add(part)
	part.Family, part.Weight = b.syms[p.sym].Symbol, alone
	add(part)
	return parts
}

// poolParts appends the cross pool's parts, in the order forfeit finds
// them: lost already, or every index together then each symbol alone in
// the book's order.
func (b stressBook) poolParts(parts []ForfeitPart) []ForfeitPart {
	if !b.anyCross {
		return parts
	}
	together, alone := b.weights()
	add := func(fp ForfeitPart) {
		if fp.Prob > 0 {
			parts = append(parts, fp)
		}
	}
	var poolSyms []string
	seen := make([]bool, len(b.syms))
	cross := make([]int, 0, len(b.ps))
	for i := range b.ps {
		if p := &b.ps[i]; p.cross {
			if !seen[p.sym] {
				seen[p.sym] = true
				poolSyms = append(poolSyms, b.symbol(i))
			}
			cross = append(cross, i)
		}
	}
	if b.pool <= b.poolMM {
		add(ForfeitPart{Symbols: poolSyms, At: -1, Weight: 1, Prob: 1, Amount: math.Max(b.pool, 0)})
		return parts
	}
	amount := math.Max(b.poolMM, 0)
	var buf []poolTerm // poolPoints' terms, reused
	pool := func(family string, weight float64, moved []int) {
		down, up := b.poolPoints(moved, &buf)
		part := ForfeitPart{Symbols: poolSyms, At: -1, Family: family, Weight: weight, Amount: amount}
		switch {
		case down < 0 && up > 0:
			part.K, part.KFar = down, up
			if up < -down {
				part.K, part.KFar = up, down
			}
			part.Prob = math.Min(1, Touch(down)+Touch(up))
		case down < 0:
			part.K, part.Prob = down, Touch(down)
		case up > 0:
			part.K, part.Prob = up, Touch(up)
		}
		add(part)
	}
	pool(StressTogether, together, cross)
	bySym := b.groups(true) // the cross positions on each symbol, in the account's order
	for j := range b.syms {
		if on := bySym.of(j); len(on) > 0 {
			pool(b.syms[j].Symbol, alone, on)
		}
	}
	return parts
}

// ForfeitAfter is after's Forfeit, where after is p's account after a
// call on position i (After): the other isolated positions' parts are
// p's own, so only position i's and the pool's are worked out, and merged
// into p's in the order Forfeit lays them out (|K|, then the order it
// finds them: the isolated positions in the account's order, each's
// family together then alone, then the pool's). The same parts and the
// same sum, in time linear in the parts.
func (p *Priced) ForfeitAfter(after *Priced, i int) Forfeit {
	return p.forfeitAfter(after, i, false)
}

// ForfeitAfterAt is ForfeitAfter with position i's parts alone listed (in
// ForfeitAfter's order; Known and Expected its own, bit for bit): what a
// candidate's cost reads, without a list of every part of the account
// (TestForfeitAfterAtIsForfeitAfter).
func (p *Priced) ForfeitAfterAt(after *Priced, i int) Forfeit {
	return p.forfeitAfter(after, i, true)
}

// forfeitAfter is ForfeitAfter, position i's parts alone listed when at.
func (p *Priced) forfeitAfter(after *Priced, i int, at bool) Forfeit {
	if !after.ok || !after.b.finite() {
		return Forfeit{}
	}
	before := p.Forfeit()
	if !before.Known || len(after.b.ps) != len(p.b.ps) || len(after.b.syms) != len(p.b.syms) {
		f := after.Forfeit()
		if at {
			f.Parts = partsAt(f.Parts, i)
		}
		return f
	}
	b := &after.b
	var fresh []ForfeitPart
	for k := range b.ps {
		if sp := &b.ps[k]; sp.at == i && !sp.cross {
			fresh = b.isoParts(fresh, k, []string{b.symbol(k)})
		}
	}
	nIso := len(fresh)
	fresh = b.poolParts(fresh)
	return mergeAfter(before, fresh, nIso, i, at, len(b.ps))
}

// ForfeitAfterIsolated is ForfeitAfterAt of AfterIsolated(np, free, i,
// liq), bit for bit (TestForfeitAfterIsolatedIsAfterIsolated), without
// the account after read into a book of its own: in an account without
// an open cross position only position i's parts are worked out again,
// from its figures after, and no other position's figures are copied (a
// decision by cost prices an isolated candidate at every leverage).
func (p *Priced) ForfeitAfterIsolated(np *Position, free decimal.Decimal, i int, liq decimal.Decimal) Forfeit {
	return p.ForfeitAfterIsolatedIn(nil, np, free, i, liq)
}

// ForfeitAfterIsolatedIn is ForfeitAfterIsolated, its parts listed in
// room's (its capacity, at least two: a position's parts; nil: a list of
// their own) where the account holds no open cross position: a caller
// that lets go of the forfeit with a list of its own, as a decision's
// candidates are let go, lists them in it.
func (p *Priced) ForfeitAfterIsolatedIn(room []ForfeitPart, np *Position, free decimal.Decimal, i int, liq decimal.Decimal) Forfeit {
	return p.ForfeitAfterIsolatedHeld(room, nil, np, free, i, liq)
}

// ForfeitAfterIsolatedHeld is ForfeitAfterIsolatedIn where np and liq are
// IsolatedEffect's of p's account's position i with l: while l holds the
// account (Liquidations.Hold), position i's figures after but for its
// index (its quantity, entry value, margin, maintenance and liquidation
// price as floats) are remembered with that effect, by the leverage
// after, and read rather than converted again. The same forfeit, bit for
// bit.
func (p *Priced) ForfeitAfterIsolatedHeld(room []ForfeitPart, l *Liquidations, np *Position, free decimal.Decimal, i int, liq decimal.Decimal) Forfeit {
	if !p.ok || p.b.anyCross || np.Cross {
		return p.ForfeitAfterAt(p.AfterIsolated(np, free, i, liq), i)
	}
	before := p.Forfeit()
	if !before.Known {
		// Position i's figures after may be numbers where its figures
		// before were not: the account after is worked out whole.
		return p.ForfeitAfterAt(p.AfterIsolated(np, free, i, liq), i)
	}
	// The book after is the book before (its figures numbers: before is
	// known) but for position i's, read as AfterIsolated reads it. Its
	// parts (at most two) are copied into the forfeit's own list.
	var onStack [2]ForfeitPart
	fresh := onStack[:0]
	for k := range p.b.ps {
		if p.b.ps[k].at != i {
			continue
		}
		sp := p.b.ps[k]
		if !l.readHeldAfter(&sp, Account{Positions: p.b.acct}, np, liq, i) || !finite(sp.index) || !finite(sp.equity) || !finite(sp.liq) || !finite(sp.mm) {
			return Forfeit{}
		}
		if !sp.cross {
			// The symbol as the parts before list it (the same string).
			fresh = p.b.isoPartsOf(fresh, &sp, p.own[k:k+1:k+1])
		}
	}
	return mergeAfterIn(room, before, fresh, len(fresh), i, true, len(p.b.ps))
}

// mergeAfter is forfeitAfter's forfeit of the account after a call on
// position i, from the forfeit before and the parts worked out again
// (fresh: position i's nIso isolated parts, then the pool's), the account
// after holding nPos positions in its book; position i's parts alone
// listed when at.
func mergeAfter(before Forfeit, fresh []ForfeitPart, nIso, i int, at bool, nPos int) Forfeit {
	return mergeAfterIn(nil, before, fresh, nIso, i, at, nPos)
}

// mergeAfterIn is mergeAfter, the parts listed in room's capacity where
// it holds them (nil: a list of their own).
func mergeAfterIn(room []ForfeitPart, before Forfeit, fresh []ForfeitPart, nIso, i int, at bool, nPos int) Forfeit {
	// The order Forfeit finds a part in, among parts of equal |K|: an
	// isolated one by its position, then its family (together, or lost,
	// first); the pool's after every isolated one, in the order found.
	type found struct {
		pool     bool
		at, rank int
	}
	foundOf := func(fp *ForfeitPart, poolRank int) found {
		if fp.At < 0 {
			return found{pool: true, rank: poolRank}
		}
		r := 0
		if fp.Family != StressTogether && fp.Family != "" {
			r = 1
		}
		return found{at: fp.At, rank: r}
	}
	less := func(x, y found) bool {
		if x.pool != y.pool {
			return !x.pool
		}
		if x.at != y.at {
			return x.at < y.at
		}
		return x.rank < y.rank
	}
	type key struct {
		k float64
		f found
		n int // index in fresh
	}
	var onStack [8]key // the few parts worked out again, not on the heap
	keys := onStack[:0]
	if len(fresh) > len(onStack) {
		keys = make([]key, 0, len(fresh))
	}
	keys = keys[:len(fresh)]
	for n := range fresh {
		keys[n] = key{math.Abs(fresh[n].K), foundOf(&fresh[n], n-nIso), n}
	}
	slices.SortFunc(keys, func(x, y key) int {
		if c := cmp.Compare(x.k, y.k); c != 0 {
			return c
		}
		if less(x.f, y.f) {
			return -1
		}
		if less(y.f, x.f) {
			return 1
		}
		return 0
	})
	size := len(before.Parts) + len(fresh)
	if at {
		size = nIso
	}
	out := Forfeit{Known: true}
	if cap(room) >= size && size > 0 {
		out.Parts = room[:0:size]
	} else {
		out.Parts = make([]ForfeitPart, 0, size)
	}
	emit := func(fp ForfeitPart) {
		if !at || fp.At == i {
			out.Parts = append(out.Parts, fp)
		}
		out.Expected += fp.Weight * fp.Prob * fp.Amount
	}
	n := 0
	for m := range before.Parts {
		bp := &before.Parts[m]
		if bp.At == i || bp.At < 0 {
			continue // worked out again
		}
		bk, bf := math.Abs(bp.K), foundOf(bp, 0)
		for n < len(keys) {
			fk := keys[n]
			if c := cmp.Compare(fk.k, bk); c < 0 || c == 0 && less(fk.f, bf) {
				emit(fresh[fk.n])
				n++
				continue
			}
			break
		}
		emit(*bp)
	}
	for ; n < len(keys); n++ {
		emit(fresh[keys[n].n])
	}
	if len(out.Parts) == 0 {
		out.Parts = nil
		if nPos > 0 {
			out.Parts = []ForfeitPart{}
		}
	}
	return out
}

// partsAt is the parts of position i among parts, in their order.
func partsAt(parts []ForfeitPart, i int) []ForfeitPart {
	var out []ForfeitPart
	for _, fp := range parts {
		if fp.At == i {
			out = append(out, fp)
		}
	}
	return out
}

// poolTerm is a moved cross position's term of the pool: s·a and σ.
type poolTerm struct{ sa, sigma float64 }

// poolPoints are the nearest moves below and above 0 (in σ) at which the
// cross pool, the positions moved by the move (moved, every cross one or
// those on one symbol), falls to its maintenance margin; 0 where none does.
// The pool is piecewise linear in the move: each moved position adds
// s·a·(max(0, 1 + kσ) − 1) to it (a = q·index, s = +1 long, −1 short), so
// above 0 its slope is Σ s·a·σ, and below it loses a position's term at
// each index's floor (k = −1/σ), nearest floor first. The pool must be
// above its maintenance now.
func (b *stressBook) poolPoints(moved []int, buf *[]poolTerm) (down, up float64) {
	ts := (*buf)[:0]
	defer func() { *buf = ts }()
	slope := 0.0
	for _, i := range moved {
		p := &b.ps[i]
		sa := p.signed()
		sg := b.syms[p.sym].Sigma
		ts = append(ts, poolTerm{sa, sg})
		slope += sa * sg
	}
	gap := b.poolMM - b.pool // < 0: the pool must fall by −gap
	if slope < 0 {
		up = gap / slope
	}
	// Below 0: pool(k) = pool + k·slope + off, off the terms already at
	// their floor (−s·a each); the floors nearest 0 are the largest σ.
	bySigma := func(x, y poolTerm) int { return cmp.Compare(y.sigma, x.sigma) }
	if !slices.IsSortedFunc(ts, bySigma) { // one symbol's are
		slices.SortFunc(ts, bySigma)
	}
	off, from := 0.0, 0.0
	for j := 0; j <= len(ts); j++ {
		to := math.Inf(-1)
		if j < len(ts) {
			to = -1 / ts[j].sigma
		}
		// On [to, from] the pool is b.pool + k·slope + off; it starts above
		// the maintenance at from.
		if j == len(ts) {
			// Every index at its floor: the pool stays as it is there
			// (its slope is 0 but for rounding).
			if off <= gap {
				return from, up
			}
			break
		}
		if slope > 0 {
			k := (gap - off) / slope
			if k >= to && k <= from {
				return k, up
			}
		}
		slope -= ts[j].sa * ts[j].sigma
		off -= ts[j].sa
		from = to
	}
	return 0, up
}

// finite reports whether x is a number and not infinite.
func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
