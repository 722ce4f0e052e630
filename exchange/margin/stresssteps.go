package margin

import (
	"cmp"
	"math"
	"slices"
)

// The loss a family of moves leaves is a step function of the move: an
// isolated position is lost from the move that takes its index to its
// liquidation price on, the cross pool where its equity at the moved prices
// falls to its maintenance. So the grid's expected loss is, for each part,
// what it loses times the weight of the grid's moves that lose it, and its
// fatal moves are the grid's moves nearest 0 that lose it: found from each
// part's point, in time O(n log n), where walking every move of every
// family visits each position 201 times.
//
// The grid's figures stay what walking it says, bit for bit at its edges:
// a part's point is solved in closed form, then the grid's moves next to
// it are decided by the walk's own arithmetic (stressGrid.at's), so a
// move that lands on a liquidation price loses the position here exactly
// when it does there.

// stressWeights are the grid's weights: w[n+steps] is stressWeight at the
// move n·stressStep, pre and suf their sums from each end, sum all of them
// (in the walk's order).
type stressWeights struct {
	steps     int
	w         []float64
	pre, suf  []float64
	sum       float64
	shownGrid []int // StressShown as moves of the grid (n), ascending
	// upTo[n+steps+1] is how many of shownGrid are ≤ n, for n from
	// −steps−1 to steps+1.
	upTo []int
}

// gridWeights are the grid's weights, worked out once: a table, never
// written after (as pow10f is a table), where every judgement worked out
// its 201 weights again.
var gridWeights = newStressWeights()

// newStressWeights works out the grid's weights.
func newStressWeights() stressWeights {
	steps := int(math.Round(stressReach / stressStep))
	m := 2*steps + 1
	buf := make([]float64, 3*m)
	sw := stressWeights{steps: steps, w: buf[:m], pre: buf[m : 2*m], suf: buf[2*m:]}
	for n := -steps; n <= steps; n++ {
		x := stressWeight(float64(n) * stressStep)
		sw.w[n+steps] = x
		sw.sum += x
		sw.pre[n+steps] = sw.sum
	}
	t := 0.0
	for i := m - 1; i >= 0; i-- {
		t += sw.w[i]
		sw.suf[i] = t
	}
	for _, k := range StressShown {
		sw.shownGrid = append(sw.shownGrid, int(math.Round(k/stressStep)))
	}
	for n := -steps - 1; n <= steps+1; n++ {
		c := 0
		for c < len(sw.shownGrid) && sw.shownGrid[c] <= n {
			c++
		}
		sw.upTo = append(sw.upTo, c)
	}
	return sw
}

// shownUpTo is how many of the shown moves are ≤ n: a long lost at the
// moves ≤ its edge e is lost at shownGrid[:shownUpTo(e)], a short lost at
// the moves ≥ e at shownGrid[shownUpTo(e−1):].
func (sw *stressWeights) shownUpTo(n int) int {
	return sw.upTo[min(max(n, -sw.steps-1), sw.steps+1)+sw.steps+1]
}

// below is the weight of the moves n ≤ hi, above of those n ≥ lo.
func (sw *stressWeights) below(hi int) float64 {
	if hi < -sw.steps {
		return 0
	}
	return sw.pre[min(hi, sw.steps)+sw.steps]
}

func (sw *stressWeights) above(lo int) float64 {
	if lo > sw.steps {
		return 0
	}
	return sw.suf[max(lo, -sw.steps)+sw.steps]
}

// stepTo is the last n in [lo, hi] where pred holds (lo − 1 when none),
// for a pred that holds on a prefix of it, stepping from n (a guess near
// it, in [lo − 1, hi]).
func stepTo(n, lo, hi int, pred func(int) bool) int {
	for n < hi && pred(n+1) {
		n++
	}
	for n >= lo && !pred(n) {
		n--
	}
	return n
}

// gridK is the move of the grid's point n, as the walk computes it.
func gridK(n int) float64 { return float64(n) * stressStep }

// isoEdge is the grid's edge for the isolated position p: it is lost at
// the moves n ≤ edge for a long, n ≥ edge for a short (edge beyond the grid
// when at none). Its index at a move only rises with the move, so the
// walk's own test, tried next to the solved point, finds the edge.
func (g *stressGrid) isoEdge(p *stressPos, sw *stressWeights) int {
	s := sw.steps
	sg := g.syms[p.sym].Sigma
	// max is math.Max's value (and inlined), as everywhere in the grid.
	lost := func(n int) bool { return p.lostAt(p.index * max(0, 1+gridK(n)*sg)) }
	if !(p.liq > 0) {
		if p.long {
			return -s - 1
		}
		return s + 1
	}
	k := (p.liq/p.index - 1) / sg
	guess := func(f float64, lo, hi int) int {
		if math.IsNaN(f) {
			return 0
		}
		return int(max(float64(lo), min(float64(hi), f)))
	}
	if p.long {
		n := guess(math.Floor(k/stressStep), -s-1, s)
		for n < s && lost(n+1) {
			n++
		}
		for n >= -s && !lost(n) {
			n--
		}
		return n
	}
	n := guess(math.Ceil(k/stressStep), -s, s+1)
	for n > -s && lost(n-1) {
		n--
	}
	for n <= s && !lost(n) {
		n++
	}
	return n
}

// poolExact is the pool at the move n of the family that moves the cross
// positions moved, as stressGrid.at sums it: the same terms in the same
// order, so the same float.
func (g *stressGrid) poolExact(moved []int, n int) float64 {
	k := gridK(n)
	pool := g.pool
	for _, i := range moved {
		p := &g.ps[i]
		pool += p.pnl(p.index*max(0, 1+k*g.syms[p.sym].Sigma)) - p.pnlNow
	}
	return pool
}

// poolTol is how far the pool's closed form may stray from the walk's sum
// over moved: far more than rounding can, so a move the closed form
// decides by more is decided alike by both; the moves within it are
// summed as the walk sums them.
func (g *stressGrid) poolTol(moved []int) float64 {
	scale := math.Abs(g.pool) + math.Abs(g.poolMM)
	for _, i := range moved {
		p := &g.ps[i]
		scale += p.q*p.index*(2+stressReach*g.syms[p.sym].Sigma) + 2*math.Abs(p.ev)
	}
	return 1e-9 * scale
}

// poolSet is where the pool is lost on the grid under one family: a range
// of moves certainly lost (lo..hi, empty when lo > hi) and the moves next
// to its edge decided by the walk's sum (extra, each lost).
type poolSet struct {
	lo, hi int
	extra  []int
}

// weight is the set's weight on the grid.
func (ps *poolSet) weight(sw *stressWeights) float64 {
	w := 0.0
	switch {
	case ps.lo > ps.hi:
	case ps.lo <= -sw.steps:
		w = sw.below(ps.hi)
	case ps.hi >= sw.steps:
		w = sw.above(ps.lo)
	default:
		w = sw.pre[ps.hi+sw.steps] - sw.pre[ps.lo+sw.steps] + sw.w[ps.lo+sw.steps]
	}
	for _, n := range ps.extra {
		w += sw.w[n+sw.steps]
	}
	return w
}

// nearest is the set's move nearest 0 (the fall on a tie); ok false when
// it is empty.
func (ps *poolSet) nearest() (n int, ok bool) {
	better := func(m int) {
		if !ok || abs(m) < abs(n) || abs(m) == abs(n) && m < n {
			n, ok = m, true
		}
	}
	if ps.lo <= ps.hi {
		switch {
		case ps.lo > 0:
			better(ps.lo)
		case ps.hi < 0:
			better(ps.hi)
		default:
			better(0)
		}
	}
	for _, m := range ps.extra {
		better(m)
	}
	return n, ok
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// alonePool is where the pool is lost on the grid when the symbol f moves
// alone: its cross positions add net·(max(0, 1 + kσ) − 1) to it, net
// their notional (newStressGrid's netOn): monotone in the move.
func (g *stressGrid) alonePool(f int, sw *stressWeights) poolSet {
	return g.monotonePool(f, g.netOn[f], g.syms[f].Sigma, 1e-9*g.scaleOn[f], sw)
}

// monotonePool is where the pool is lost on the grid when its closed form
// is monotone in the move: pool + net·(max(0, 1 + kσ) − 1) for one symbol
// (sg > 0), pool + k·net for every symbol when no index reaches its floor
// on the grid (sg = 0). The moves where the closed form is within tol
// (poolTol) of the maintenance are summed as the walk sums them.
// f is the family (−1: together), whose cross positions the walk's sums
// read.
func (g *stressGrid) monotonePool(f int, net, sg, tol float64, sw *stressWeights) poolSet {
	s := sw.steps
	// gap at n: the closed form's pool minus the maintenance; non-decreasing
	// in n when net ≥ 0 (lost on the falls), else mirrored.
	dir := 1
	if net < 0 {
		dir = -1
	}
	slope := math.Abs(net)       // gap's slope in m·step, above any floor
	gap := func(m int) float64 { // m = n·dir
		if sg == 0 {
			return g.pool + gridK(m*dir)*net - g.poolMM
		}
		return g.pool + net*(max(0, 1+gridK(m*dir)*sg)-1) - g.poolMM
	}
	if gap(-s) > tol {
		// Clear of the maintenance even at the grid's worst move (each
		// step of gap rounds monotonically): lost at none, as stepping
		// from the guesses finds.
		return poolSet{lo: 1, hi: 0}
	}
	if sg > 0 {
		slope *= sg
	}
	// Solved above its floor (gap = pool − mm + slope·m·step), then
	// stepped to the edge.
	guess := func(target float64) int {
		k := (target - g.pool + g.poolMM) / slope
		if math.IsNaN(k) || math.IsInf(k, 0) {
			return 0
		}
		return int(max(float64(-s-1), min(float64(s), math.Floor(k/stressStep))))
	}
	sure := stepTo(guess(-tol), -s, s, func(m int) bool { return gap(m) <= -tol })
	maybe := stepTo(guess(tol), -s, s, func(m int) bool { return gap(m) <= tol })
	var out poolSet
	if dir > 0 {
		out.lo, out.hi = -s, sure
	} else {
		out.lo, out.hi = -sure, s
	}
	for m := sure + 1; m <= maybe; m++ {
		if n := m * dir; g.poolExact(g.crossMoved(f), n) <= g.poolMM {
			out.extra = append(out.extra, n)
		}
	}
	return out
}

// togetherPool is where the pool is lost on the grid when every index
// moves: linear in the move while no index reaches its floor on the grid
// (monotonePool); else piecewise linear (each cross position's term is
// flat below its index's floor, k = −1/σ), so walked point by point in its
// closed form, the moves within poolTol of the maintenance summed as the
// walk sums them.
func (g *stressGrid) togetherPool(moved []int, sw *stressWeights) poolSet {
	type term struct{ sa, sigma float64 }
	var ts []term // the terms with a floor on the grid
	off := 0.0    // the terms below their floor: −s·a each
	slope := 0.0  // those above it: s·a·σ each
	k0 := gridK(-sw.steps)
	for _, i := range moved {
		p := &g.ps[i]
		sa := p.signed()
		sg := g.syms[p.sym].Sigma
		if 1+k0*sg > 0 { // above its floor over the whole grid
			slope += sa * sg
			continue
		}
		ts = append(ts, term{sa, sg})
		off -= sa
	}
	if len(ts) == 0 {
		return g.monotonePool(-1, slope, 0, g.poolTol(moved), sw)
	}
	// A term leaves its floor as the move rises past −1/σ: the smallest σ
	// first.
	slices.SortFunc(ts, func(x, y term) int { return cmp.Compare(x.sigma, y.sigma) })
	tol := g.poolTol(moved)
	out := poolSet{lo: 1, hi: 0} // the lost moves all listed
	// Between two floors the closed form is linear in the move: a stretch
	// whose two ends are clear of the maintenance by more than tol is
	// clear all along (the walk's sums stray from it by far less than
	// tol), and is not walked.
	gap := func(n int) float64 { return g.pool + gridK(n)*slope + off - g.poolMM }
	j := 0
	for n := -sw.steps; n <= sw.steps; {
		for j < len(ts) && 1+gridK(n)*ts[j].sigma > 0 {
			slope += ts[j].sa * ts[j].sigma
			off += ts[j].sa
			j++
		}
		end := sw.steps // the stretch's last move: before the next floor is left
		if j < len(ts) {
			end = n
			for end < sw.steps && !(1+gridK(end+1)*ts[j].sigma > 0) {
				end++
			}
		}
		if gap(n) > tol && gap(end) > tol {
			n = end + 1
			continue
		}
		for ; n <= end; n++ {
			if gp := gap(n); gp <= -tol || gp <= tol && g.poolExact(moved, n) <= g.poolMM {
				out.extra = append(out.extra, n)
			}
		}
	}
	return out
}

// has reports whether the move n is in the set.
func (ps *poolSet) has(n int) bool {
	if ps.lo <= n && n <= ps.hi {
		return true
	}
	return slices.Contains(ps.extra, n)
}

// judge is the grid's expected loss, its fatal moves within ±likely
// σ, and the losses at the shown moves every index together, from each
// part's edge on the grid: the figures the walk over every move gives.
func (g *stressGrid) judge(s *Stress, likely float64) {
	sw := &gridWeights
	steps := sw.steps
	ps, syms := g.ps, g.syms
	together, alone := 0.5, 0.5/float64(len(syms))
	within := func(n int) bool { return math.Abs(gridK(n)) <= likely+1e-9 }
	s.TogetherAt = make([]float64, 0, len(sw.shownGrid))
	// Each isolated position's edge on the grid, and its lost move
	// nearest 0 within ±likely (together: alone it is lost at the same
	// moves, never sooner), none when there is none.
	// Their losses at the shown moves together are summed as the walk
	// sums them: the lost isolated positions in order (here), then the
	// pool.
	none := -steps - 1
	fatal := make([]int, len(ps))
	nf := 0 // the positions with a fatal move
	var at [16]float64
	shown := at[:len(sw.shownGrid)]
	for i := range ps {
		p := &ps[i]
		if p.cross {
			continue
		}
		e := g.isoEdge(p, sw)
		eq := max(p.equity, 0)
		lo, hi := 0, sw.shownUpTo(e) // the shown moves it is lost at
		if !p.long {
			lo, hi = sw.shownUpTo(e-1), len(shown)
		}
		for j := lo; j < hi; j++ {
			shown[j] += eq
		}
		var w float64
		var near int // the lost move nearest 0
		if p.long {
			w, near = sw.below(e), min(e, 0)
			if e < -steps {
				near = -steps - 1
			}
		} else {
			w, near = sw.above(e), max(e, 0)
			if e > steps {
				near = steps + 1
			}
		}
		if w > 0 { // as the walk, which adds a loss only where it is lost (an infinite equity times no weight is no number)
			s.Expected += eq * w * (together + alone) / sw.sum
		}
		fatal[i] = none
		if near >= -steps && near <= steps && within(near) {
			fatal[i] = near
			nf++
		}
	}
	// The isolated positions past their price already are lost at every
	// move of the families that leave their index still.
	for f := range syms {
		s.Expected += alone * (g.baseLoss - g.baseLossOn[f])
	}
	var poolFatal FatalMove
	poolLoss := max(g.pool, 0)
	var setT poolSet // the pool's lost moves together
	if g.anyCross {
		mark := func(family string, n int, ok bool) {
			if ok && within(n) && (poolFatal.Family == "" || math.Abs(gridK(n)) < math.Abs(poolFatal.K)) {
				poolFatal = FatalMove{Family: family, K: gridK(n)}
			}
		}
		setT = g.togetherPool(g.crossAll, sw)
		if w := setT.weight(sw); w > 0 {
			s.Expected += together * poolLoss * w / sw.sum
		}
		nearT, okT := setT.nearest()
		mark(StressTogether, nearT, okT)
		still := g.pool <= g.poolMM // the pool a family leaves still
		for f := range syms {
			if g.crossOn[f] == 0 {
				if still {
					s.Expected += alone * poolLoss
					mark(syms[f].Symbol, 0, true)
				}
				continue
			}
			set := g.alonePool(f, sw)
			if set.lo > set.hi && len(set.extra) == 0 {
				continue // lost at no move
			}
			if w := set.weight(sw); w > 0 {
				s.Expected += alone * poolLoss * w / sw.sum
			}
			n, ok := set.nearest()
			mark(syms[f].Symbol, n, ok)
		}
	}
	for j, n := range sw.shownGrid {
		if g.anyCross && setT.has(n) {
			shown[j] += poolLoss
		}
	}
	s.TogetherAt = append(s.TogetherAt, shown...)
	if poolFatal.Family != "" {
		nf += len(g.crossAll)
	}
	if nf == 0 {
		return
	}
	s.Fatal = make([]FatalMove, nf)
	k := 0 // each written in place: a FatalMove is 72 bytes
	for i := range ps {
		p := &ps[i]
		var family string
		var km float64
		switch {
		case p.cross && poolFatal.Family != "":
			family, km = poolFatal.Family, poolFatal.K
		case !p.cross && fatal[i] != none:
			family, km = StressTogether, gridK(fatal[i])
		default:
			continue
		}
		q, fm := &g.acct[p.at], &s.Fatal[k]
		fm.Symbol, fm.Direction, fm.Family, fm.K, fm.Move = q.Symbol, q.Direction, family, km, km*syms[p.sym].Sigma
		k++
	}
}
