package margin

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/riskguard/riskguard/exchange"
	"github.com/shopspring/decimal"
)

// The stress grid weighs an account's risk by what is likely, the way
// portfolio margining and SPAN's scenarios do: each index moves by
// multiples of its own volatility σ over a horizon, alone and all together,
// and the account is judged at each move by what the move would leave
// behind if it came back — the equity of the positions it liquidates.
// A move that liquidates nothing costs nothing: an ordinary wick that
// comes back is an ordinary day; one that crosses a liquidation price
// realises the loss at its worst.
//
// The figures are statistics (σ, the weights), computed in float64
// from the model's decimal figures; the liquidation of an isolated position
// is its model liquidation price crossed, that of the cross positions the
// pool at the moved prices falling to their maintenance margin (they go
// together, as the model has them).

// StressTogether is the family of the moves of every index together; the
// other families are one symbol's index alone, named by the symbol.
const StressTogether = "every index together"

// stressStep is the fine grid the expected loss and the fatal moves are
// computed on, in σ; stressReach is how far it goes.
const (
	stressStep  = 0.1
	stressReach = 10.0
)

// stressWeight is the likelihood of a move of k σ: Student's t with 3
// degrees of freedom scaled to a standard deviation of 1, (1 + k²)⁻²
// up to a constant. Crypto returns have fat tails: on the grid a fall of
// 5σ or more is about one in 700 (the normal says one in 3.5 million), so a
// position an ordinary-looking 10% wick liquidates is not weighed as
// safe.
func stressWeight(k float64) float64 {
	d := 1 + k*k
	return 1 / (d * d)
}

// StressShown are the moves, in σ, that StressPoints lists for display.
var StressShown = []float64{-5, -4, -3, -2, -1, 1, 2, 3, 4, 5}

// Stress is an account judged on the stress grid.
type Stress struct {
	// Known is false when a position has no index price or no σ.
	Known bool
	// Likely is the likely range, in σ (a move within ±Likely σ is likely).
	Likely float64
	// Sigma is each symbol's σ over the horizon, as a fraction of its
	// index, in the account's position order (one per symbol).
	Sigma []SymbolSigma
	// Expected is the expected loss: the mean over the moves weighted by
	// their likelihood (stressWeight), half of it from every index
	// together and half from each symbol alone (shared equally). In the
	// quote currency.
	Expected float64
	// Fatal is, for each position a likely move liquidates, the smallest
	// such move; positions no likely move liquidates are not listed.
	Fatal []FatalMove
	// Points are the moves of StressShown, together and alone, with what
	// each liquidates (Stress; StressJudged leaves them out).
	Points []StressPoint
	// TogetherAt is the loss at each move of StressShown, every index
	// together: always worked out, for the audit record.
	TogetherAt []float64
}

// SymbolSigma is one symbol's σ over the horizon, as a fraction.
type SymbolSigma struct {
	Symbol string
	Sigma  float64
}

// FatalMove is the smallest move of a family that liquidates a position.
type FatalMove struct {
	Symbol    string // the position's symbol
	Direction string
	// Family is StressTogether or the symbol that moves alone.
	Family string
	// K is the move in σ (negative: down); Move the same as a fraction of
	// the position's index.
	K, Move float64
}

// StressPoint is the account at one move of one family.
type StressPoint struct {
	Family string
	K      float64
	// Loss is the equity the liquidated positions held (their margin and
	// PNL now; for the cross positions the whole pool).
	Loss float64
	// Lost names the positions liquidated ("XBTC LONG").
	Lost []string
}

// stressPos is a position's figures as the grid uses them (no pointers:
// the account's hundreds of them are allocated without being scanned; its
// symbol and direction are the account's, at).
type stressPos struct {
	long, cross bool    // side by side: 88 bytes in all, not 96
	q, ev       float64 // quantity, entry value
	index, liq  float64
	pnlNow      float64 // PNL at the index now
	equity      float64 // margin + PNL now
	margin, mm  float64
	sym         int // index into the symbols
	at          int // index into the account's positions
}

// signed is the position's notional at its index, signed by its side
// (s·q·index: + long, − short), its term in a cross pool's move.
func (p *stressPos) signed() float64 {
	if p.long {
		return p.q * p.index
	}
	return -(p.q * p.index)
}

// Stress judges the account on the grid: sigma gives each symbol's σ over
// the horizon (a fraction of its index), likely the likely range in σ.
// liqs are the positions' liquidation prices as LiquidationPrices gives
// them (nil: computed).
func (a Account) Stress(sigma func(symbol string) float64, likely float64, liqs []decimal.Decimal) Stress {
	return a.stress(sigma, likely, liqs, true)
}

// StressJudged is Stress without the Points shown: the expected loss and
// the fatal moves a decision reads, at less cost (no names listed at the
// shown moves).
func (a Account) StressJudged(sigma func(symbol string) float64, likely float64, liqs []decimal.Decimal) Stress {
	return a.stress(sigma, likely, liqs, false)
}

// stress is Stress, with the Points when points is set.
func (a Account) stress(sigma func(symbol string) float64, likely float64, liqs []decimal.Decimal, points bool) Stress {
	b, ok := a.stressBook(sigma, liqs)
	if !ok {
		return Stress{Likely: likely}
	}
	return b.stress(likely, points)
}

// stress is the book judged on the grid, with the Points when points is
// set.
func (b stressBook) stress(likely float64, points bool) Stress {
	s := Stress{Likely: likely}
	ps, syms := b.ps, b.syms
	s.Known, s.Sigma = true, syms
	if b.borrowed {
		s.Sigma = slices.Clone(syms) // the grid outlives the scratch's next read
	}
	if len(ps) == 0 {
		return s
	}
	g := newStressGrid(b)
	g.judge(&s, likely)
	if !points {
		return s
	}
	// The shown moves, each family's, with what each liquidates.
	lost := make([]bool, len(ps))
	names := make([]string, len(ps))
	for i := range ps {
		names[i] = b.name(i)
	}
	for f := -1; f < len(syms); f++ { // -1: together
		family := StressTogether
		if f >= 0 {
			family = syms[f].Symbol
		}
		for _, k := range StressShown {
			loss, poolLost := g.at(f, k, lost)
			pt := StressPoint{Family: family, K: k, Loss: loss}
			for i, p := range ps {
				isoLost := lost[i] // together, or alone on f
				if f >= 0 && p.sym != f {
					isoLost = g.baseLost[i]
				}
				if p.cross && poolLost || !p.cross && isoLost {
					pt.Lost = append(pt.Lost, names[i])
				}
			}
			s.Points = append(s.Points, pt)
		}
	}
	return s
}

// stressBook is the account's open positions as the grid reads them, in
// the account's order, their symbols' σ, and the cross pool: the free
// balance, the pool now (free balance, the cross positions' margin and
// PNL) and its maintenance.
type stressBook struct {
	acct []Position // the account's positions
	ps   []stressPos
	syms []SymbolSigma
	// borrowed says syms are a Scratch's (PricedFrom): a grid lists a
	// copy of them.
	borrowed     bool
	free         float64
	pool, poolMM float64
	anyCross     bool
}

// stressBook reads the account for the grid; ok is false when an open
// position has no index price or its symbol no σ (the grid is unknown).
// Its positions are read in place (a stressPos is 88 bytes: appending
// one by value copied it twice), their symbols looked up in the list while
// it is short and in a table of the book's own past it (symbolTable: a map
// cost an assignment and a lookup a position, an eighth of the read).
func (a Account) stressBook(sigma func(symbol string) float64, liqs []decimal.Decimal) (stressBook, bool) {
	b := stressBook{acct: a.Positions, ps: make([]stressPos, len(a.Positions)), syms: make([]SymbolSigma, 0, len(a.Positions))}
	const shortList = 16
	var table symbolTable
	b.free = toF(a.Free)
	b.pool = b.free
	if liqs == nil {
		liqs = a.LiquidationPrices()
	}
	n := 0
	for i := range a.Positions {
		p := &a.Positions[i]
		if !p.Quantity.IsPositive() { // p.Open(), without copying p
			continue
		}
		if !p.Index.IsPositive() {
			return stressBook{}, false
		}
		j := -1
		switch {
		case table.slots != nil:
			j = table.find(b.syms, p.Symbol)
		case len(b.syms) > shortList:
			table = newSymbolTable(len(a.Positions))
			for k := range b.syms {
				table.add(b.syms, k)
			}
			j = table.find(b.syms, p.Symbol)
		default:
			for k := range b.syms {
				if b.syms[k].Symbol == p.Symbol {
					j = k
					break
				}
			}
		}
		if j < 0 {
			sg := sigma(p.Symbol)
			if !(sg > 0) || math.IsInf(sg, 0) {
				return stressBook{}, false
			}
			j = len(b.syms)
			b.syms = append(b.syms, SymbolSigma{Symbol: p.Symbol, Sigma: sg})
			if table.slots != nil {
				table.add(b.syms, j)
			}
		}
		sp := &b.ps[n]
		if !readStressPos(sp, p, liqs[i], j, i) {
			return stressBook{}, false
		}
		if sp.cross {
			b.anyCross = true
			b.pool += sp.equity
			b.poolMM += sp.mm
		}
		n++
	}
	b.ps = b.ps[:n]
	return b, true
}

// symbolTable finds a book's symbols by name past the short list: open
// addressing over the symbols' places (+1; 0 is empty), FNV-1a of the
// name, at most half full.
type symbolTable struct {
	slots []int32
	mask  uint32
}

// newSymbolTable is a table for up to n symbols.
func newSymbolTable(n int) symbolTable {
	size := 64
	for size < 2*n {
		size *= 2
	}
	return symbolTable{slots: make([]int32, size), mask: uint32(size - 1)}
}

// symbolHash is FNV-1a of s.
func symbolHash(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// find is the place of sym in syms, −1 when it is not there.
func (t *symbolTable) find(syms []SymbolSigma, sym string) int {
	for h := symbolHash(sym) & t.mask; ; h = (h + 1) & t.mask {
		k := t.slots[h]
		if k == 0 {
			return -1
		}
		if syms[k-1].Symbol == sym {
			return int(k - 1)
		}
	}
}

// add enters syms[j], not yet in the table.
func (t *symbolTable) add(syms []SymbolSigma, j int) {
	h := symbolHash(syms[j].Symbol) & t.mask
	for t.slots[h] != 0 {
		h = (h + 1) & t.mask
	}
	t.slots[h] = int32(j + 1)
}

// readStressPos reads the open position p, account position i on the
// book's symbol j, into sp as the grid reads it; false for a figure a
// float cannot hold (an index of 1e400): no data, never a NaN in the
// expected loss.
func readStressPos(sp *stressPos, p *Position, liq decimal.Decimal, j, i int) bool {
	// The quantity from its coefficients, which the entry value needs too
	// (exactFloat gives the float that decimal's Float64 gives); the index and
	// the liquidation price through Float64 (fewer instructions for a
	// lone value).
	qF, qOK := toFixed(p.Quantity)
	q, ok := fixedFloat(qF, qOK)
	if !ok {
		q = toF(p.Quantity)
	}
	index, lq := toF(p.Index), toF(liq)
	// Every field written (no literal: it would zero the 88 bytes first).
	sp.long, sp.q, sp.index, sp.liq, sp.cross, sp.sym, sp.at = p.Direction != exchange.Short, q, index, lq, p.Cross, j, i
	sp.ev, sp.margin, sp.mm = p.stressFigures(qF, qOK)
	sp.pnlNow = sp.pnl(sp.index)
	sp.equity = sp.margin + sp.pnlNow
	// x·0 is 0 for a finite x, NaN for an infinite one or a NaN.
	return finite(sp.q*0 + sp.index*0 + sp.liq*0 + sp.equity*0 + sp.mm*0)
}

// Priced is an account read for the grid and the forfeit once (its
// positions' figures as float64s), so that the accounts a call on one of
// its positions leaves are read by patching it (After) and their forfeit
// worked out from its own (ForfeitAfter): a decision compares dozens of
// them. Money stays decimal up to here; the grid and the forfeit are
// estimates in float64, the same floats whichever way they are read.
type Priced struct {
	b        stressBook
	ok       bool
	forfeit  Forfeit // once forfeitK
	forfeitK bool
	// own is each position's symbol as the forfeit's parts list it (their
	// Symbols), once worked out: a forfeit after lists them too.
	own []string
	// scratch, when set, holds its forfeit's parts (Floats.Scratch).
	scratch *Scratch
}

// Scratch holds what PricedFrom reads an account into — the Priced, its
// positions' figures and symbols and its forfeit's parts — reused from
// one read to the next, where each read made its own: a caller that reads
// one account for the grid at a time, and keeps neither the Priced nor
// its forfeit's parts past the next read, hands the same Scratch to each
// read (Floats.Scratch). What a Priced hands on holds none of it: a
// forfeit after lists parts of its own (ForfeitAfter copies the
// before's), an account after is read into a book of its own (After), and
// a grid (StressJudged) reads the figures into its own and lists a copy
// of the symbols. The zero Scratch is ready; it is not safe for
// concurrent use. LiquidationPricesIn lists an account's liquidation
// prices in it too, as long.
type Scratch struct {
	priced Priced
	ps     []stressPos
	syms   []SymbolSigma
	parts  []ForfeitPart
	own    []string          // the last forfeit's symbols (forfeitIn)
	liqs   []decimal.Decimal // LiquidationPricesIn's
	liqF   []float64         // liqs' floats (toF), written with them
	order  []int32           // the last forfeit's parts' found order, nearest first (forfeitIn)
}

// Priced reads the account for the grid and the forfeit (sigma and liqs
// as Stress takes them).
func (a Account) Priced(sigma func(symbol string) float64, liqs []decimal.Decimal) *Priced {
	if liqs == nil {
		liqs = a.LiquidationPrices()
	}
	b, ok := a.stressBook(sigma, liqs)
	return &Priced{b: b, ok: ok}
}

// Floats are an account's positions' figures as a caller converted them
// already, for the grid to read rather than convert them again
// (PricedFrom): the engine's view converts every position's decimals once
// per value for the rules, and works out each symbol's σ.
type Floats struct {
	// Lines are the positions' figures, Lines[i] position i's: its
	// Quantity, Index, EntryValue, Margin and Maintenance Float of the
	// position's Quantity, Index, Value, Held and MM, its Short and Cross
	// the position's.
	Lines []Line
	// Sigma is each position's symbol's σ over the horizon, Sigma[i]
	// position i's, as the sigma PricedFrom is given says it (nil: sigma
	// is asked).
	Sigma []float64
	// Distinct says no two positions are on one symbol (the engine's
	// account holds one a symbol): the grid does not look them up.
	Distinct bool
	// Scratch, when set, is where PricedFrom reads the account into: the
	// Priced it returns, and its Forfeit's Parts, are valid until the
	// next PricedFrom with the same Scratch (nil: their own).
	Scratch *Scratch
}

// PricedFrom is Priced, the positions' figures and σ read from f where the
// position lists them (Value, Held and MM set; the engine's positions do),
// the rest worked out from its decimals as Priced works them out; f not of
// the account (not a line a position) is not read. The same floats as
// Priced, bit for bit (TestPricedFromMatchesPriced), for the conversion of
// the liquidation prices alone.
func (a Account) PricedFrom(f Floats, sigma func(symbol string) float64, liqs []decimal.Decimal) *Priced {
	n := len(a.Positions)
	if len(f.Lines) != n || f.Sigma != nil && len(f.Sigma) != n {
		return a.Priced(sigma, liqs)
	}
	if liqs == nil {
		liqs = a.LiquidationPrices()
	}
	b, ok := a.stressBookFrom(f, sigma, liqs)
	if s := f.Scratch; s != nil {
		s.ps, s.syms = b.ps[:0], b.syms[:0]
		s.priced = Priced{b: b, ok: ok, scratch: s}
		return &s.priced
	}
	return &Priced{b: b, ok: ok}
}

// stressBookFrom is stressBook, each position read from f (PricedFrom).
func (a Account) stressBookFrom(f Floats, sigma func(symbol string) float64, liqs []decimal.Decimal) (stressBook, bool) {
	var ps []stressPos
	if s := f.Scratch; s != nil {
		// Every field of a position read is written (readStressPos, and
		// below): nothing of the last read is left in it.
		ps = slices.Grow(s.ps[:0], len(a.Positions))[:len(a.Positions)]
	} else {
		ps = make([]stressPos, len(a.Positions))
	}
	// The symbols a scratch's (kept there for the next read), a new list
	// at its first: a grid's list is never nil.
	b := stressBook{acct: a.Positions, ps: ps, borrowed: f.Scratch != nil}
	if s := f.Scratch; s != nil && s.syms != nil {
		b.syms = s.syms[:0]
	} else {
		b.syms = make([]SymbolSigma, 0, len(a.Positions))
	}
	b.free = toF(a.Free)
	b.pool = b.free
	var table symbolTable
	n := 0
	// The liquidation prices' floats, where liqs is the list
	// LiquidationPricesIn listed in the scratch with them (the held ones
	// converted once: Liquidations.Hold).
	var liqF []float64
	if s := f.Scratch; s != nil && len(liqs) > 0 && len(s.liqF) == len(liqs) && len(s.liqs) == len(liqs) && &s.liqs[0] == &liqs[0] {
		liqF = s.liqF
	}
	// A line's figure is its decimal's float: one that is positive (or not
	// 0) says the decimal is, and the decimals are read only where it
	// does not (a decimal so small its float is 0).
	for i := range a.Positions {
		p, l := &a.Positions[i], &f.Lines[i]
		if !(l.Quantity > 0) && !p.Quantity.IsPositive() {
			continue
		}
		if !(l.Index > 0) && !p.Index.IsPositive() {
			return stressBook{}, false
		}
		j := -1
		switch {
		case f.Distinct:
		case table.slots == nil:
			table = newSymbolTable(len(a.Positions))
			fallthrough
		default:
			j = table.find(b.syms, p.Symbol)
		}
		if j < 0 {
			var sg float64
			if f.Sigma != nil {
				sg = f.Sigma[i]
			} else {
				sg = sigma(p.Symbol)
			}
			if !(sg > 0) || math.IsInf(sg, 0) {
				return stressBook{}, false
			}
			j = len(b.syms)
			b.syms = append(b.syms, SymbolSigma{Symbol: p.Symbol, Sigma: sg})
			if table.slots != nil {
				table.add(b.syms, j)
			}
		}
		// readStressPos, the figures read from the line where p lists
		// them (the conversion of its liquidation price alone), inline.
		sp := &b.ps[n]
		if (l.EntryValue == 0 || l.Margin == 0 || l.Maintenance == 0) && (p.Value.IsZero() || p.Held.IsZero() || p.MM.IsZero()) {
			if !readStressPos(sp, p, liqs[i], j, i) {
				return stressBook{}, false
			}
		} else {
			if liqF != nil {
				sp.liq = liqF[i]
			} else {
				sp.liq = toF(liqs[i])
			}
			sp.long, sp.q, sp.index, sp.cross, sp.sym, sp.at = !l.Short, l.Quantity, l.Index, l.Cross, j, i
			sp.ev, sp.margin, sp.mm = l.EntryValue, l.Margin, l.Maintenance
			sp.pnlNow = sp.pnl(sp.index)
			sp.equity = sp.margin + sp.pnlNow
			if !finite(sp.q*0 + sp.index*0 + sp.liq*0 + sp.equity*0 + sp.mm*0) {
				return stressBook{}, false
			}
		}
		if sp.cross {
			b.anyCross = true
			b.pool += sp.equity
			b.poolMM += sp.mm
		}
		n++
	}
	b.ps = b.ps[:n]
	return b, true
}

// StressJudged is the account's StressJudged.
func (p *Priced) StressJudged(likely float64) Stress {
	if !p.ok {
		return Stress{Likely: likely}
	}
	return p.b.stress(likely, false)
}

// Forfeit is the account's Forfeit, worked out once.
func (p *Priced) Forfeit() Forfeit {
	if !p.forfeitK {
		if p.ok {
			p.forfeit, p.own = p.b.forfeitIn(p.scratch)
		}
		p.forfeitK = true
	}
	return p.forfeit
}

// After is next read as Priced reads it, where next is the account after a
// call on position i that changes that position's settings and the free
// balance alone (Apply), or a reduce that leaves it open (Reduce): the
// other positions' figures are the account's,
// the cross ones' liquidation prices read from liqs (next's, as
// LiquidationPrices gives them), the pool summed again in the same order:
// the same floats as reading next afresh.
func (p *Priced) After(next Account, i int, liqs []decimal.Decimal) *Priced {
	if !p.ok || len(next.Positions) != len(p.b.acct) {
		return &Priced{}
	}
	b := p.b
	b.acct = next.Positions
	b.ps = slices.Clone(p.b.ps)
	b.free = toF(next.Free)
	b.pool, b.poolMM, b.anyCross = b.free, 0, false
	for k := range b.ps {
		sp := &b.ps[k]
		switch {
		case sp.at == i:
			if !readStressPos(sp, &next.Positions[i], liqs[i], sp.sym, i) {
				return &Priced{}
			}
		case sp.cross:
			if sp.liq = toF(liqs[sp.at]); !finite(sp.liq) {
				return &Priced{}
			}
		}
		if sp.cross {
			b.anyCross = true
			b.pool += sp.equity
			b.poolMM += sp.mm
		}
	}
	return &Priced{b: b, ok: true}
}

// AfterIsolated is After for a call that changes the isolated position i
// alone, to np (isolated; liq its liquidation price), and the free balance,
// to free, in an account without an open cross position: nothing else
// moves and no pool is summed, and no account after is needed (the
// positions' names are the account's). ok is false where the account has
// an open cross position (After reads it). The same floats as After
// (TestAfterIsolatedIsAfter).
func (p *Priced) AfterIsolated(np *Position, free decimal.Decimal, i int, liq decimal.Decimal) *Priced {
	if !p.ok || p.b.anyCross || np.Cross {
		return &Priced{}
	}
	b := p.b
	b.ps = slices.Clone(p.b.ps)
	b.free = toF(free)
	b.pool, b.poolMM = b.free, 0
	for k := range b.ps {
		if sp := &b.ps[k]; sp.at == i && !readStressPos(sp, np, liq, sp.sym, i) {
			return &Priced{}
		}
	}
	return &Priced{b: b, ok: true}
}

// symbol and dir are the symbol and the direction of the book's position i.
func (b *stressBook) symbol(i int) string { return b.acct[b.ps[i].at].Symbol }
func (b *stressBook) dir(i int) string    { return b.acct[b.ps[i].at].Direction }

// name is the book's position i as the grid's points name it: "XBTC LONG".
func (b *stressBook) name(i int) string { return b.symbol(i) + " " + b.dir(i) }

// stressGrid evaluates the account at the moves of the grid. A move of
// one index alone touches only the positions on its symbol and the cross
// pool, so it costs those positions, not the account's: an account of
// hundreds of symbols is judged in time linear in its positions per
// family, not quadratic.
type stressGrid struct {
	stressBook
	factor []float64 // each moved symbol's index factor at the move
	// all lists every position (the moves together move them all), on
	// the positions on each symbol and cross the cross ones on each
	// (the account's order within each);
	// baseLost marks the isolated positions past their liquidation price
	// already (lost at every move that leaves their index still),
	// baseLoss their equity over the account and baseLossOn over each
	// symbol. The cross groups are listed only where a pool's move is
	// summed as the walk sums it (crossMoved).
	all        []int
	crossAll   []int // the cross positions, in the account's order
	on, cross  symGroups
	baseLost   []bool
	baseLoss   float64
	baseLossOn []float64
	// Of each symbol's cross positions: how many (crossOn), their net
	// notional (a long's q·index +, a short's −) and the scale of poolTol
	// over them, summed in the account's order as alone they are.
	crossOn        []int
	netOn, scaleOn []float64
}

// symGroups are positions grouped by symbol, each group in the account's
// order: the group of symbol j is pos[start[j]:start[j+1]].
type symGroups struct {
	start, pos []int
}

// of is the group of symbol j.
func (s symGroups) of(j int) []int { return s.pos[s.start[j]:s.start[j+1]] }

// groups are the book's positions (the cross ones only, when cross) by
// symbol, counted then placed: linear in the positions.
func (b *stressBook) groups(cross bool) symGroups {
	g := symGroups{start: make([]int, len(b.syms)+1)}
	n := 0
	for i := range b.ps {
		if !cross || b.ps[i].cross {
			g.start[b.ps[i].sym+1]++
			n++
		}
	}
	for j := range b.syms {
		g.start[j+1] += g.start[j]
	}
	g.pos = make([]int, n)
	next := make([]int, len(b.syms))
	copy(next, g.start)
	for i := range b.ps {
		if !cross || b.ps[i].cross {
			j := b.ps[i].sym
			g.pos[next[j]] = i
			next[j]++
		}
	}
	return g
}

// newStressGrid prepares the grid of the book b, in one pass over its
// positions.
func newStressGrid(b stressBook) *stressGrid {
	m := len(b.syms)
	fs := make([]float64, 3*m)
	g := &stressGrid{stressBook: b, baseLost: make([]bool, len(b.ps)), crossAll: make([]int, 0, len(b.ps)),
		baseLossOn: fs[:m], netOn: fs[m : 2*m], scaleOn: fs[2*m:], crossOn: make([]int, m)}
	base := math.Abs(b.pool) + math.Abs(b.poolMM) // poolTol's start
	for i := range b.ps {
		p := &b.ps[i]
		if p.cross {
			g.crossAll = append(g.crossAll, i)
			j := p.sym
			if g.crossOn[j] == 0 {
				g.scaleOn[j] = base
			}
			g.crossOn[j]++
			a := p.q * p.index
			if p.long {
				g.netOn[j] += a
			} else {
				g.netOn[j] -= a
			}
			g.scaleOn[j] += a*(2+stressReach*b.syms[j].Sigma) + 2*math.Abs(p.ev)
			continue
		}
		if p.lostAt(p.index) {
			g.baseLost[i] = true
			g.baseLoss += max(p.equity, 0)
			g.baseLossOn[p.sym] += max(p.equity, 0)
		}
	}
	return g
}

// crossMoved lists the cross positions family f moves: every one
// together (f < 0), those on the symbol f alone.
func (g *stressGrid) crossMoved(f int) []int {
	if f < 0 {
		return g.crossAll
	}
	if g.cross.start == nil {
		g.cross = g.groups(true)
	}
	return g.cross.of(f)
}

// at is the loss at the move k σ of family f (−1: together; else the
// symbol f alone) and whether it liquidates the cross pool. Only the
// positions the move moves are visited — every one together, those on f
// alone: the isolated ones elsewhere stay as baseLost says, and the pool
// moves by the PNL of the cross positions moved. It marks in lost the
// isolated positions the move liquidates among those it moves.
func (g *stressGrid) at(f int, k float64, lost []bool) (float64, bool) {
	loss := 0.0
	moved := g.moved(f)
	if f < 0 {
		for j := range g.factor {
			g.factor[j] = max(0, 1+k*g.syms[j].Sigma)
		}
	} else {
		g.factor[f] = max(0, 1+k*g.syms[f].Sigma) // the others are not read
		loss = g.baseLoss - g.baseLossOn[f]
	}
	poolAt := g.pool
	for _, i := range moved {
		p := &g.ps[i]
		lost[i] = false
		ix := p.index * g.factor[p.sym]
		if p.cross {
			poolAt += p.pnl(ix) - p.pnlNow
			continue
		}
		if p.lostAt(ix) {
			lost[i] = true
			loss += max(p.equity, 0)
		}
	}
	poolLost := g.anyCross && poolAt <= g.poolMM
	if poolLost {
		loss += max(g.pool, 0)
	}
	return loss, poolLost
}

// moved lists the positions family f moves: every one together (f < 0),
// those on the symbol f alone. The walk (at) needs them; the judgement
// does not, so they are listed at the first walk.
func (g *stressGrid) moved(f int) []int {
	if g.all == nil {
		g.factor = make([]float64, len(g.syms))
		g.all = make([]int, len(g.ps))
		for i := range g.all {
			g.all[i] = i
		}
		g.on = g.groups(false)
	}
	if f < 0 {
		return g.all
	}
	return g.on.of(f)
}

// lostAt reports whether an isolated position is liquidated at index ix.
func (p *stressPos) lostAt(ix float64) bool {
	return p.liq > 0 && ((p.long && ix <= p.liq) || (!p.long && ix >= p.liq))
}

// pnl is the position's PNL at index ix.
func (p *stressPos) pnl(ix float64) float64 {
	if p.long {
		return p.q*ix - p.ev
	}
	return p.ev - p.q*ix
}

// NewlyFatal is the likely moves after's account makes fatal to a
// position sooner than before's did: one no likely move liquidated before,
// or one a smaller move now liquidates (by more than a step of the grid),
// skipping the position except ("" none: an isolation's own position when
// it was failing anyway).
func NewlyFatal(before, after Stress, except string) []FatalMove {
	if len(after.Fatal) > 0 && len(after.Fatal) == len(before.Fatal) && &after.Fatal[0] == &before.Fatal[0] {
		return nil // the same grid (a call that leaves the pool as it is): nothing is sooner
	}
	var out []FatalMove
	// before's moves by position, the first of each as FatalFor finds it:
	// an account of hundreds of failing positions is compared in linear
	// time, not quadratic.
	var by map[[2]string]FatalMove
	if len(before.Fatal) > 8 && len(after.Fatal) > 8 {
		by = make(map[[2]string]FatalMove, len(before.Fatal))
		for _, fb := range slices.Backward(before.Fatal) {
			by[[2]string{fb.Symbol, fb.Direction}] = fb
		}
	}
	for _, fa := range after.Fatal {
		if fa.Symbol == except {
			continue
		}
		var fb FatalMove
		var ok bool
		if by != nil {
			fb, ok = by[[2]string{fa.Symbol, fa.Direction}]
		} else {
			fb, ok = before.FatalFor(fa.Symbol, fa.Direction)
		}
		if ok && math.Abs(fa.K) >= math.Abs(fb.K)-stressStep/2 {
			continue
		}
		out = append(out, fa)
	}
	return out
}

// FatalFor is the likely move that liquidates the position on symbol in
// direction; ok is false when none does.
func (s Stress) FatalFor(symbol, direction string) (FatalMove, bool) {
	for _, f := range s.Fatal {
		if f.Symbol == symbol && f.Direction == direction {
			return f, true
		}
	}
	return FatalMove{}, false
}

// String says a fatal move: "−6.00% (−3.0σ, every index together) liquidates XBTC LONG".
func (f FatalMove) String() string {
	return fmt.Sprintf("%s (%+.1fσ, %s) liquidates %s %s", signedPct(f.Move), f.K, f.Family, f.Symbol, f.Direction)
}

// Summary says the grid in one line: the expected loss and the likely
// moves that liquidate, e.g. "expected loss 12.30 over ±3σ moves (σ XBTC
// 2.00%, XSOL 2.00%); a likely move liquidates XSOL LONG: −4.6% …".
func (s Stress) Summary() string {
	if !s.Known {
		return "stress grid unknown (a position without an index price)"
	}
	var sig []string
	for _, sg := range s.Sigma {
		sig = append(sig, fmt.Sprintf("%s %.2f%%", sg.Symbol, sg.Sigma*100))
	}
	out := fmt.Sprintf("expected loss %.2f (σ %s)", s.Expected, strings.Join(sig, ", "))
	if len(s.Fatal) == 0 {
		return out + fmt.Sprintf("; no move within ±%gσ liquidates a position", s.Likely)
	}
	var fs []string
	for _, f := range s.Fatal {
		fs = append(fs, f.String())
	}
	return out + "; within ±" + fmt.Sprint(s.Likely) + "σ: " + strings.Join(fs, "; ")
}

// StressRow is one shown move of the grid as a table lays it out: the
// point of each family at K, in the order Table gives the families.
type StressRow struct {
	K      float64
	Points []StressPoint
}

// Table lays the Points out as a table, for every display of the grid to
// read the same: the families in the grid's order (StressTogether first,
// then each symbol alone) and one row per move of StressShown. A family
// without a point at a move has a zero point there (no loss).
func (s Stress) Table() (families []string, rows []StressRow) {
	at := map[string]map[float64]StressPoint{}
	for _, p := range s.Points {
		if at[p.Family] == nil {
			families = append(families, p.Family)
			at[p.Family] = map[float64]StressPoint{}
		}
		at[p.Family][p.K] = p
	}
	if len(families) == 0 {
		return nil, nil
	}
	for _, k := range StressShown {
		r := StressRow{K: k}
		for _, f := range families {
			p, ok := at[f][k]
			if !ok {
				p = StressPoint{Family: f, K: k}
			}
			r.Points = append(r.Points, p)
		}
		rows = append(rows, r)
	}
	return families, rows
}

// Cell says the point as a table cell: "0" when the move liquidates
// nothing, else the loss and what it liquidates, "12.30 (XBTC LONG)".
func (p StressPoint) Cell() string {
	if !(p.Loss > 0) {
		return "0"
	}
	return fmt.Sprintf("%.2f (%s)", p.Loss, strings.Join(p.Lost, ", "))
}

// signedPct is a fraction as a signed percentage, two decimals, with a
// minus sign for a fall.
func signedPct(f float64) string {
	if f < 0 {
		return fmt.Sprintf("−%.2f%%", -f*100)
	}
	return fmt.Sprintf("+%.2f%%", f*100)
}

// toF is d as a float64 (money leaves decimal here: the grid is a
// statistic): InexactFloat64's, bit for bit, on the coefficient (floatOf).
func toF(d decimal.Decimal) float64 { return floatOf(d) }
