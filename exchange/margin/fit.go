package margin

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/riskguard/riskguard/exchange"
	"github.com/shopspring/decimal"
)

// DefaultFitTolerance is the worst relative error under which the model
// is said to fit the exchange's figures: 0.5% of a margin, of the index
// for a liquidation price, of the cross pool for the free balance. The
// model's own rounding (margins to 8 places, liquidation prices to a tick)
// stays far under it, and so does a move of the indexes between the
// exchange's figures and the guard's read of the index prices (a cross
// position's liquidation price follows the others' PNL); a fee netted from
// the margins at 20× (1% of the margin for 0.05% of the entry value) or a
// maintenance rate 1% off is caught.
const DefaultFitTolerance = 0.005

// Reported is what the exchange lists for a position: the figures the
// model is checked against.
type Reported struct {
	Margin, Liquidation decimal.Decimal
}

// PositionFit is how well the model reproduces one position's figures.
type PositionFit struct {
	Symbol string
	Cross  bool
	// MarginReported is the exchange's; MarginModelled entry value /
	// leverage.
	MarginReported, MarginModelled decimal.Decimal
	// LiquidationReported is the exchange's; LiquidationModelled the
	// model's from its own margins and, for a cross position, the free
	// balance inferred from the account's first cross position.
	LiquidationReported, LiquidationModelled decimal.Decimal
	// FreeInferred is the free balance this cross position's reported
	// liquidation price implies (HasFree), unclamped: a negative one says
	// the model leaves the pool short.
	FreeInferred decimal.Decimal
	HasFree      bool
	// Error is the worst relative error of the position's figures, What
	// the figure it is ("margin", "liquidation", or "read-back" when
	// Mismatch is set).
	Error float64
	What  string
	// Mismatch is the last settings call's read-back that the model did
	// not predict; "" when none is outstanding. A position with one does
	// not fit until a read-back matches again.
	Mismatch string

	// terms are an open position's index-free figures as checkFit
	// modelled them (hasTerms), and marginErr its margin's error: a later
	// check of the same position under another index takes them as they
	// are (CheckFitAfter).
	terms     fitTerms
	hasTerms  bool
	marginErr float64
}

// Fit is how well the model reproduces the exchange's own figures: per
// position, and across the cross positions whether the free balance each
// one's liquidation price implies agrees.
type Fit struct {
	Positions []PositionFit
	// Free is the free balance inferred from the first cross position
	// (FreeKnown), as the engine infers it.
	Free      decimal.Decimal
	FreeKnown bool
	// FreeSpread is the largest disagreement between the free balances
	// the cross positions imply, relative to the cross pool (the free
	// balance and the cross margins).
	FreeSpread float64
	// Worst is the worst relative error of all, of WorstSymbol's figure
	// WorstWhat ("free balance" for FreeSpread).
	Worst                  float64
	WorstSymbol, WorstWhat string
	Tolerance              float64
}

// CheckFit compares the model with the exchange's figures rep (one per
// position of a, in order) under tolerance (DefaultFitTolerance when not
// positive). The model recomputes every margin from the entry value and
// leverage, and every liquidation price from its own margins: a's Held
// and MM are ignored.
func CheckFit(a Account, rep []Reported, tolerance float64) Fit {
	return new(FitScratch).CheckFit(a, rep, tolerance)
}

// Unjudgeable says why the model cannot judge the open position p
// against the figures the exchange lists for it, "" when it can: a
// direction it does not know, a leverage, entry price or margin that is
// not positive, a liquidation price or entry value that is negative:
// nonsense a fit would compare with its own figures as if it were the
// exchange's. A liquidation price of 0 is a long the collateral covers
// all the way down (LiquidationPrice is at least 0), and an entry value
// of 0 one the listing leaves out (q·P stands for it). A figure beyond a float64's range (1e400) is
// refused too: every rule reads it as no data. The caller leaves such a
// position out of the fit and names it.
func Unjudgeable(p *exchange.Position) string {
	if p.Direction != exchange.Long && p.Direction != exchange.Short {
		return fmt.Sprintf("direction %q is neither %s nor %s", p.Direction, exchange.Long, exchange.Short)
	}
	if p.Leverage <= 0 {
		return fmt.Sprintf("leverage %d is not positive", p.Leverage)
	}
	for _, f := range [...]struct {
		name string
		d    decimal.Decimal
		zero bool // 0 is allowed
	}{
		{"entry price", p.EntryPrice, false},
		{"margin", p.Margin, false},
		{"liquidation price", p.LiquidationPrice, true},
		{"entry value", p.EntryValue, true},
		{"quantity", p.Quantity, false},
	} {
		switch x := f.d.InexactFloat64(); {
		case math.IsInf(x, 0):
			return fmt.Sprintf("%s %s is out of range (beyond a float64: no rule can read it)", f.name, shortDec(f.d))
		case f.d.IsNegative() || !f.zero && f.d.IsZero():
			what := "not positive"
			if f.zero {
				what = "negative"
			}
			return fmt.Sprintf("%s %s is %s", f.name, shortDec(f.d), what)
		}
	}
	return ""
}

// shortDec is d as text, in scientific notation when it is long: a
// decimal of hundreds of digits is said as 1e400.
func shortDec(d decimal.Decimal) string {
	s := d.String()
	if len(s) <= 24 {
		return s
	}
	c, sign := d.Coefficient().String(), ""
	if strings.HasPrefix(c, "-") {
		c, sign = c[1:], "-"
	}
	exp := int(d.Exponent()) + len(c) - 1
	c = strings.TrimRight(c, "0")
	m := c[:1]
	if len(c) > 1 {
		m += "." + c[1:min(len(c), 7)]
	}
	return fmt.Sprintf("%s%se%d", sign, m, exp)
}

// CheckFitAfter is CheckFit(a, rep, tolerance), computed with the help of
// prev: the fit CheckFit gave for prevA and prevRep (read-back mismatches
// marked on it or not). An isolated position whose inputs are the same as
// before but for its index keeps its modelled margin and liquidation price
// (neither depends on the index, which only scales the liquidation
// price's error), so a replay whose positions change only their index
// skips the liquidation price's solution. Cross positions share the pool,
// which follows every index: their liquidation prices and free balances
// are computed afresh, only their margins taken as before. The result is
// CheckFit's, field for field (fit_test.go checks it on seeded accounts).
func CheckFitAfter(prev Fit, prevA Account, prevRep []Reported, a Account, rep []Reported, tolerance float64) Fit {
	return new(FitScratch).CheckFitAfter(prev, prevA, prevRep, a, rep, tolerance)
}

// FitScratch is the memory of a caller's fit checks: the lists a check
// works in, and the positions of the fit before last, which the next
// check's result is built into instead of fresh ones. A Fit it returns is
// therefore overwritten by the call after next: the caller keeps at most
// the last two. The zero FitScratch is ready (CheckFit uses a fresh one
// for each check). Not safe for concurrent use.
type FitScratch struct {
	fits  [2][]PositionFit // the last two results' positions
	next  int              // the one the next result is built into
	terms []fitTerms
	olds  []*PositionFit
	kept  []bool
	errs  []float64
	base  []decimal.Decimal
}

// CheckFit is CheckFit, built into s.
func (s *FitScratch) CheckFit(a Account, rep []Reported, tolerance float64) Fit {
	return checkFit(s, a, rep, tolerance, nil)
}

// CheckFitAfter is CheckFitAfter, built into s.
func (s *FitScratch) CheckFitAfter(prev Fit, prevA Account, prevRep []Reported, a Account, rep []Reported, tolerance float64) Fit {
	if len(prev.Positions) != len(prevA.Positions) || len(prevRep) != len(prevA.Positions) {
		return checkFit(s, a, rep, tolerance, nil)
	}
	return checkFit(s, a, rep, tolerance, func(i int) (*PositionFit, bool) {
		if i >= len(prevA.Positions) || i >= len(rep) {
			return nil, false
		}
		p, q := &a.Positions[i], &prevA.Positions[i]
		if !SameButIndex(p, q) {
			return nil, false
		}
		return &prev.Positions[i], !p.Cross && SameReported(rep[i], prevRep[i])
	})
}

// FitHolds reports whether CheckFit(a, rep, tolerance) is prev, the fit
// CheckFit gave for prevA and prevRep (before any read-back mismatch was
// marked on it), without computing it: every position is isolated, the
// same as before but for its index, with the same reported figures, and
// an open one's liquidation price was modelled exactly as reported. Its
// errors are then independent of the index (a liquidation price's error
// is relative to the index, and zero here), so a replay that moves only
// the indexes of exactly modelled isolated positions checks nothing
// again. fit_test.go checks it against CheckFit on seeded accounts.
func FitHolds(prev Fit, prevA Account, prevRep []Reported, a Account, rep []Reported, tolerance float64) bool {
	if !(tolerance > 0) {
		tolerance = DefaultFitTolerance
	}
	n := len(a.Positions)
	if tolerance != prev.Tolerance || len(prev.Positions) != n || len(prevA.Positions) != n || len(prevRep) != n || len(rep) != n {
		return false
	}
	for i := range a.Positions {
		if !PositionHolds(&prev.Positions[i], &prevA.Positions[i], prevRep[i], &a.Positions[i], rep[i]) {
			return false
		}
	}
	return true
}

// PositionHolds is FitHolds for one position: p (reported rep) is
// isolated, the same as prevP (reported prevRep, its fit prev) but for its
// index, and, when open, its liquidation price was modelled exactly as
// reported.
func PositionHolds(prev *PositionFit, prevP *Position, prevRep Reported, p *Position, rep Reported) bool {
	if p.Cross || prevP.Cross || !SameButIndex(p, prevP) || !SameReported(rep, prevRep) {
		return false
	}
	return !p.Open() || prev.LiquidationReported.Equal(prev.LiquidationModelled)
}

// SameReported reports whether CheckFit reads the same reported figures
// from a and b: decimals in value and exponent.
func SameReported(a, b Reported) bool {
	return SameDec(a.Margin, b.Margin) && SameDec(a.Liquidation, b.Liquidation)
}

// SameButIndex reports whether CheckFit reads the same figures from p and
// q but for the index: every field equal, decimals in value and exponent
// (Held and MM it ignores).
func SameButIndex(p, q *Position) bool {
	return p.Symbol == q.Symbol && p.Direction == q.Direction && p.Leverage == q.Leverage && p.Cross == q.Cross &&
		p.Scale == q.Scale && SameDec(p.Quantity, q.Quantity) && SameDec(p.Entry, q.Entry) && SameDec(p.Value, q.Value) &&
		SameRiskLimit(&p.RiskLimit, &q.RiskLimit)
}

// SameRiskLimit reports whether two risk limits are the same, field by
// field.
func SameRiskLimit(a, b *exchange.RiskLimit) bool {
	return a.ID == b.ID && a.MaxLeverage == b.MaxLeverage && a.MaxRiskLimitSteps == b.MaxRiskLimitSteps &&
		a.CreatedAt == b.CreatedAt && SameDec(a.InitialMarginRate, b.InitialMarginRate) &&
		SameDec(a.MaintenanceMarginRate, b.MaintenanceMarginRate) && SameDec(a.MarginRateStep, b.MarginRateStep) &&
		SameDec(a.RiskLimitBase, b.RiskLimitBase) && SameDec(a.RiskLimitStep, b.RiskLimitStep) &&
		SameDec(a.MaxQuantity, b.MaxQuantity)
}

// SameDec reports whether a and b are the same decimal: the same value
// written with the same exponent. Copies of one decimal (the same
// coefficient and exponent: a position read again that did not change)
// are answered without comparing the coefficients.
func SameDec(a, b decimal.Decimal) bool { return a == b || sameDecValue(a, b) }

// sameDecValue is SameDec for two different copies: apart from SameDec,
// which then stays small enough to be inlined, so that a copy costs a
// comparison and no call.
//
//go:noinline
func sameDecValue(a, b decimal.Decimal) bool { return a.Exponent() == b.Exponent() && a.Equal(b) }

// checkFit is CheckFit; reuse, when not nil, gives for position i the fit
// of the same position under another index (nil when there is none), and
// whether its modelled figures are taken as they are (keep: an isolated
// position with the same reported figures). A cross one's modelled margin
// is taken from it (the margin does not depend on the index); its
// liquidation price, which follows the pool, is computed afresh.
func checkFit(s *FitScratch, a Account, rep []Reported, tolerance float64, reuse func(i int) (old *PositionFit, keep bool)) Fit {
	if !(tolerance > 0) {
		tolerance = DefaultFitTolerance
	}
	f := Fit{Tolerance: tolerance}
	ps := a.Positions
	f.Positions = s.positions(len(ps))
	fp := fitPass{s: s, ps: ps, rep: rep, f: &f}
	cross := fp.terms(reuse)
	// The cross pool is summed once (Collaterals, without the free balance
	// yet): every cross position's figures below are then O(1), the same
	// values as inferFree's and LiquidationPrice's sums over the others.
	// Without a cross position it is not needed.
	if cross {
		fp.base = crossBases(scratch(&s.base, len(ps)), ps, fp.t)
	}
	pool := fp.modelled()
	fp.judgeErrors(pool)
	f.rank()
	return f
}

// fitPass is one checkFit in progress: its inputs, the fit being filled
// (f) and what its steps share: each open position's index-free terms
// (t), the previous fits (olds, when reused), which positions keep theirs
// (kept) with the error kept (keptErr: −1 where it does not hold), and the
// cross pool's bases (base).
type fitPass struct {
	s       *FitScratch
	ps      []Position
	rep     []Reported
	f       *Fit
	t       []fitTerms
	olds    []*PositionFit
	kept    []bool
	keptErr []float64
	base    []decimal.Decimal
}

// terms works out each open position's index-free terms (entry value,
// modelled margin, maintenance rate and margin), as Margin,
// MaintenanceRate and Maintenance compute them with Held and MM zero,
// shared by the cross pool's sums, the free balance's inference and the
// liquidation price: the same decimals the model's methods would give
// each time. An isolated position whose fit is kept needs none of them,
// and a cross one the same but for its index takes its margin from the
// previous fit. It reports whether an open cross position is not kept.
func (fp *fitPass) terms(reuse func(i int) (old *PositionFit, keep bool)) bool {
	s, ps := fp.s, fp.ps
	fp.t = scratch(&s.terms, len(ps))
	if reuse != nil {
		fp.olds = scratch(&s.olds, len(ps))
	}
	t, olds := fp.t, fp.olds
	cross := false
	for i := range ps {
		p := &ps[i]
		if !p.Open() {
			continue
		}
		if reuse != nil {
			old, keep := reuse(i)
			fp.olds[i] = old
			if keep {
				if fp.kept == nil {
					fp.kept = scratch(&s.kept, len(ps))
				}
				fp.kept[i] = true
				continue
			}
		}
		tm := &t[i]
		if p.Cross {
			cross = true
		}
		if old := oldOf(olds, i); old != nil && old.hasTerms {
			// The same position but for its index: the same terms.
			*tm = old.terms
			continue
		}
		tm.ev = p.Value
		if tm.ev.IsZero() {
			tm.ev = p.Quantity.Mul(p.Entry)
		}
		if olds != nil && olds[i] != nil {
			tm.margin = olds[i].MarginModelled
		} else {
			tm.margin = Margin(tm.ev, p.Leverage)
		}
		tm.mmr = MaintenanceRate(p.RiskLimit, tm.ev)
		if p.Cross {
			tm.mm = tm.mmr.Mul(tm.ev)
		}
	}
	return cross
}

// modelled fills each position's modelled margin (and the kept fits'
// figures) and infers the free balance from the cross positions'
// reported liquidation prices; it returns the pool's modelled margins.
func (fp *fitPass) modelled() decimal.Decimal {
	s, ps, rep, f, t, olds, kept, base := fp.s, fp.ps, fp.rep, fp.f, fp.t, fp.olds, fp.kept, fp.base
	pool := decimal.Zero
	for i := range ps {
		p := &ps[i]
		pf := &f.Positions[i]
		pf.Symbol, pf.Cross = p.Symbol, p.Cross
		pf.MarginReported, pf.LiquidationReported = rep[i].Margin, rep[i].Liquidation
		if kept != nil && kept[i] {
			if old := olds[i]; old != nil {
				pf.MarginModelled, pf.LiquidationModelled = old.MarginModelled, old.LiquidationModelled
				pf.terms, pf.hasTerms, pf.marginErr = old.terms, old.hasTerms, old.marginErr
				// An exactly modelled liquidation price adds no error:
				// the old error is the margin's alone (a read-back
				// mismatch marked on it changes only What).
				if fp.keptErr == nil {
					fp.keptErr = scratch(&s.errs, len(ps))
				}
				fp.keptErr[i] = -1
				if pf.LiquidationReported.Equal(pf.LiquidationModelled) && old.LiquidationReported.Equal(old.LiquidationModelled) {
					fp.keptErr[i] = old.Error
				}
				continue
			}
		}
		if !p.Open() {
			pf.MarginModelled = p.withoutHeld().Margin()
			continue
		}
		pf.MarginModelled = t[i].margin
		pf.terms, pf.hasTerms = t[i], true
		if p.Cross {
			pool = pool.Add(pf.MarginModelled)
			if free, ok := inferFreeFrom(p, rep[i].Liquidation, base[i], t[i].mm); ok {
				pf.FreeInferred, pf.HasFree = free, true
				if !f.FreeKnown {
					f.Free, f.FreeKnown = free, true
				}
			}
		}
	}
	return pool
}

// judgeErrors works out each open position's error, the margin's or the
// liquidation price's (the larger), with the free balance inferred, and
// the spread of the cross positions' inferences (pool: the modelled
// margins, the free balance added here).
func (fp *fitPass) judgeErrors(pool decimal.Decimal) {
	ps, f, t, olds, kept, keptErr, base := fp.ps, fp.f, fp.t, fp.olds, fp.kept, fp.keptErr, fp.base
	free := decimal.Max(f.Free, decimal.Zero)
	pool = pool.Add(free)
	for i := range ps {
		p := &ps[i]
		pf := &f.Positions[i]
		if !p.Open() {
			continue
		}
		if kept != nil && kept[i] && keptErr[i] >= 0 {
			// The same margins as before, and a liquidation price
			// modelled exactly as reported: its error is 0 under any
			// index, the margin's what it was.
			pf.Error, pf.What = keptErr[i], "margin"
			continue
		}
		if old := oldOf(olds, i); old != nil && old.hasTerms && SameDec(old.MarginReported, pf.MarginReported) {
			pf.marginErr = old.marginErr // the same margins, reported and modelled
		} else {
			pf.marginErr = relErr(pf.MarginReported, pf.MarginModelled, pf.MarginModelled)
		}
		pf.Error, pf.What = pf.marginErr, "margin"
		if !p.Cross || f.FreeKnown {
			collateral := pf.MarginModelled
			if p.Cross {
				collateral = base[i].Add(free)
			}
			if kept == nil || !kept[i] {
				pf.LiquidationModelled = LiquidationPrice(p.Direction, p.Quantity, p.Entry, collateral, t[i].mmr, p.Scale)
			}
			scale := p.Index
			if !scale.IsPositive() {
				scale = decimal.Max(pf.LiquidationModelled, p.Entry)
			}
			if e := relErr(pf.LiquidationReported, pf.LiquidationModelled, scale); e > pf.Error {
				pf.Error, pf.What = e, "liquidation"
			}
		}
		if pf.HasFree && f.FreeKnown {
			if s := relErr(pf.FreeInferred, f.Free, decimal.Max(pool, decimal.New(1, 0))); s > f.FreeSpread {
				f.FreeSpread = s
			}
		}
	}
}

// positions is a list of n zero position fits for a result: the one of
// the fit before last.
func (s *FitScratch) positions(n int) []PositionFit {
	out := scratch(&s.fits[s.next], n)
	s.next ^= 1
	return out
}

// scratch is *buf resized to n zero values, grown when short and kept in
// *buf.
func scratch[T any](buf *[]T, n int) []T {
	if cap(*buf) < n {
		*buf = make([]T, n)
	}
	out := (*buf)[:n]
	clear(out)
	return out
}

// oldOf is olds[i], nil when olds is.
func oldOf(olds []*PositionFit, i int) *PositionFit {
	if olds == nil {
		return nil
	}
	return olds[i]
}

// fitTerms are an open position's figures that do not depend on its
// index, as checkFit models them (Held and MM ignored): the entry value,
// the margin, the maintenance rate and, for a cross position, the
// maintenance margin.
type fitTerms struct {
	ev, margin, mmr, mm decimal.Decimal
}

// withoutHeld is p with Held and MM zero: the position CheckFit models.
func (p *Position) withoutHeld() Position {
	q := *p
	q.Held, q.MM = decimal.Zero, decimal.Zero
	return q
}

// crossBases is Collaterals of the positions ps with Held, MM and the free
// balance zero, from their terms t: the same sums in the same order, in
// int64 arithmetic while every figure fits one (crossBasesFixed), in
// decimals otherwise.
func crossBases(out []decimal.Decimal, ps []Position, t []fitTerms) []decimal.Decimal {
	if crossBasesFixed(ps, t, out) {
		return out
	}
	pnl := make([]decimal.Decimal, len(ps))
	pool, totalMM := decimal.Zero, decimal.Zero
	for i := range ps {
		p := &ps[i]
		if !p.Cross || !p.Open() {
			continue
		}
		pool = pool.Add(t[i].margin)
		totalMM = totalMM.Add(t[i].mm)
		if p.Index.IsPositive() {
			n := p.Quantity.Mul(p.Index)
			if p.Direction == exchange.Short {
				pnl[i] = t[i].ev.Sub(n)
			} else {
				pnl[i] = n.Sub(t[i].ev)
			}
			pool = pool.Add(pnl[i])
		}
	}
	for i := range ps {
		if p := &ps[i]; p.Cross && p.Open() {
			out[i] = pool.Sub(pnl[i]).Sub(totalMM.Sub(t[i].mm))
		}
	}
	return out
}

// crossBasesFixed is crossBases in fixed arithmetic, into out; false,
// out then unspecified, when a figure does not fit an int64.
func crossBasesFixed(ps []Position, t []fitTerms, out []decimal.Decimal) bool {
	return collateralsFixed(fixed{}, ps, t, out) // the pool from 0·10^0
}

// collateralsFixed is the cross pool's sums of Collaterals in fixed
// arithmetic, the pool starting at pool, the positions' margins, maintenance
// margins and entry values from t, into out; false, out then unspecified,
// when a figure does not fit an int64.
func collateralsFixed(pool fixed, ps []Position, t []fitTerms, out []decimal.Decimal) bool {
	var buf [32]fixed
	pnl, mm := buf[:16], buf[16:]
	if len(ps) > len(pnl) {
		pnl, mm = make([]fixed, len(ps)), make([]fixed, len(ps))
	}
	totalMM := fixed{}
	for i := range ps {
		p := &ps[i]
		if !p.Cross || !p.Open() {
			continue
		}
		margin, ok1 := toFixed(t[i].margin)
		m, ok2 := toFixed(t[i].mm)
		if !ok1 || !ok2 {
			return false
		}
		mm[i] = m
		var ok bool
		if pool, ok = pool.add(margin); !ok {
			return false
		}
		if totalMM, ok = totalMM.add(m); !ok {
			return false
		}
		if p.Index.IsPositive() {
			q, ok1 := toFixed(p.Quantity)
			x, ok2 := toFixed(p.Index)
			ev, ok3 := toFixed(t[i].ev)
			if !ok1 || !ok2 || !ok3 {
				return false
			}
			n, ok := q.mul(x)
			if !ok {
				return false
			}
			if p.Direction == exchange.Short {
				pnl[i], ok = ev.sub(n)
			} else {
				pnl[i], ok = n.sub(ev)
			}
			if !ok {
				return false
			}
			if pool, ok = pool.add(pnl[i]); !ok {
				return false
			}
		}
	}
	for i := range ps {
		if p := &ps[i]; p.Cross && p.Open() {
			a, ok1 := pool.sub(pnl[i])
			b, ok2 := totalMM.sub(mm[i])
			if !ok1 || !ok2 {
				return false
			}
			c, ok := a.sub(b)
			if !ok {
				return false
			}
			out[i] = c.dec()
		}
	}
	return true
}

// inferFreeFrom is inferFreeWith for the open cross position p of
// maintenance margin mm.
func inferFreeFrom(p *Position, liq, base, mm decimal.Decimal) (decimal.Decimal, bool) {
	if !liq.IsPositive() {
		return decimal.Zero, false
	}
	if free, ok := inferFreeFixed(p, liq, base, mm); ok {
		return free, true
	}
	move := p.Entry.Sub(liq)
	if p.Direction == exchange.Short {
		move = move.Neg()
	}
	return move.Mul(p.Quantity).Add(mm).Sub(base).Round(8), true
}

// relErr is |got − want| / scale; +Inf for a difference over a zero scale.
func relErr(got, want, scale decimal.Decimal) float64 {
	d := got.Sub(want).Abs()
	if d.IsZero() {
		return 0
	}
	if !scale.IsPositive() {
		return math.Inf(1)
	}
	return d.DivRound(scale, 16).InexactFloat64()
}

// rank sets Worst from the positions and the free balance's spread.
func (f *Fit) rank() {
	f.Worst, f.WorstSymbol, f.WorstWhat = 0, "", ""
	for _, p := range f.Positions {
		if p.Error > f.Worst || (p.Mismatch != "" && f.WorstWhat != "read-back") {
			f.Worst, f.WorstSymbol, f.WorstWhat = p.Error, p.Symbol, p.What
			if p.Mismatch != "" {
				f.WorstWhat = "read-back"
			}
		}
	}
	if f.FreeSpread > f.Worst && f.WorstWhat != "read-back" {
		f.Worst, f.WorstSymbol, f.WorstWhat = f.FreeSpread, "", "free balance"
	}
}

// MarkMismatch says that the last settings call on symbol read back a
// liquidation price the model did not predict (text): the position does
// not fit until a read-back matches again.
func (f *Fit) MarkMismatch(symbol, text string) {
	for i := range f.Positions {
		if f.Positions[i].Symbol == symbol {
			f.Positions[i].Mismatch, f.Positions[i].What = text, "read-back"
		}
	}
	f.rank()
}

// Fits reports whether the model reproduces every figure within the
// tolerance, and no read-back mismatch is outstanding.
func (f Fit) Fits() bool {
	for _, p := range f.Positions {
		if !p.Fits(f.Tolerance) {
			return false
		}
	}
	return f.FreeSpread <= f.Tolerance
}

// Fits reports whether the position's figures are within tolerance.
func (p PositionFit) Fits(tolerance float64) bool {
	return p.Mismatch == "" && p.Error <= tolerance
}

// Symbol returns the fit of the position on symbol.
func (f Fit) Symbol(symbol string) (PositionFit, bool) {
	for _, p := range f.Positions {
		if p.Symbol == symbol {
			return p, true
		}
	}
	return PositionFit{}, false
}

// Why says what does not fit, worst first: "XBTC (margin 100.5 reported,
// 6000 modelled)"; "" when the model fits.
func (f Fit) Why() string {
	if f.Fits() {
		return ""
	}
	var parts []string
	if f.FreeSpread > f.Tolerance {
		parts = append(parts, fmt.Sprintf("the cross positions imply free balances %s apart", f.freeRange()))
	}
	bad := slices.Clone(f.Positions)
	slices.SortStableFunc(bad, func(a, b PositionFit) int {
		switch {
		case (a.Mismatch != "") != (b.Mismatch != ""):
			if a.Mismatch != "" {
				return -1
			}
			return 1
		case a.Error > b.Error:
			return -1
		case a.Error < b.Error:
			return 1
		}
		return 0
	})
	for _, p := range bad {
		if !p.Fits(f.Tolerance) {
			parts = append(parts, p.String())
		}
	}
	return strings.Join(parts, "; ")
}

// freeRange is the lowest and highest free balance the cross positions
// imply, "3389 … 20000".
func (f Fit) freeRange() string {
	var lo, hi decimal.Decimal
	first := true
	for _, p := range f.Positions {
		if !p.HasFree {
			continue
		}
		if first || p.FreeInferred.LessThan(lo) {
			lo = p.FreeInferred
		}
		if first || p.FreeInferred.GreaterThan(hi) {
			hi = p.FreeInferred
		}
		first = false
	}
	return fmt.Sprintf("(%s … %s)", lo.Round(2), hi.Round(2))
}

// String says the position's worst figure: "XBTC (margin 100.5 reported,
// 6000 modelled)".
func (p PositionFit) String() string {
	switch p.What {
	case "read-back":
		return fmt.Sprintf("%s (%s)", p.Symbol, p.Mismatch)
	case "liquidation":
		return fmt.Sprintf("%s (liquidation %s reported, %s modelled)", p.Symbol, p.LiquidationReported, p.LiquidationModelled)
	}
	return fmt.Sprintf("%s (margin %s reported, %s modelled)", p.Symbol, p.MarginReported, p.MarginModelled.Round(8))
}

// Summary is the fit in one line: "fits (worst 0.0012% on XBTC
// liquidation)" or "does not fit: XBTC (margin 100.5 reported, 6000
// modelled)".
func (f Fit) Summary() string {
	if f.Fits() {
		if f.WorstWhat == "" {
			return "fits (every figure exact)"
		}
		on := f.WorstWhat
		if f.WorstSymbol != "" {
			on = f.WorstSymbol + " " + on
		}
		return fmt.Sprintf("fits (worst %s on %s, tolerance %s)", pct(f.Worst), on, pct(f.Tolerance))
	}
	return "does not fit: " + f.Why()
}

// pct formats a fraction as a percentage with 4 places.
func pct(x float64) string {
	if math.IsInf(x, 1) {
		return "∞"
	}
	return decimal.NewFromFloat(x).Shift(2).StringFixed(4) + "%"
}

// inferFree is InferFree unclamped: the free balance, negative when the
// model needs less than nothing behind the reported liquidation price.
func (a Account) inferFree(i int, liq decimal.Decimal) (decimal.Decimal, bool) {
	p := a.Positions[i]
	if !p.Cross || !p.Open() || !liq.IsPositive() {
		return decimal.Zero, false
	}
	withoutFree := a
	withoutFree.Free = decimal.Zero
	poolWithoutFree, others := withoutFree.crossPool(i)
	return a.inferFreeWith(i, liq, poolWithoutFree.Sub(others))
}

// inferFreeWith is inferFree with position i's collateral without the
// free balance already summed (base: the pool without the free balance
// less the other cross positions' maintenance margin, as Collaterals
// gives it with Free zero).
func (a Account) inferFreeWith(i int, liq, base decimal.Decimal) (decimal.Decimal, bool) {
	p := a.Positions[i]
	if !p.Cross || !p.Open() || !liq.IsPositive() {
		return decimal.Zero, false
	}
	move := p.Entry.Sub(liq)
	if p.Direction == exchange.Short {
		move = move.Neg()
	}
	return move.Mul(p.Quantity).Add(p.Maintenance()).Sub(base).Round(8), true
}

// inferFreeFixed is inferFreeFrom in fixed arithmetic for a positive liq;
// false when a figure does not fit an int64.
func inferFreeFixed(p *Position, liq, base, mm decimal.Decimal) (decimal.Decimal, bool) {
	entry, ok1 := toFixed(p.Entry)
	l, ok2 := toFixed(liq)
	q, ok3 := toFixed(p.Quantity)
	m, ok4 := toFixed(mm)
	b, ok5 := toFixed(base)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		return decimal.Decimal{}, false
	}
	move, ok := entry.sub(l)
	if ok && p.Direction == exchange.Short {
		move, ok = move.neg()
	}
	if !ok {
		return decimal.Decimal{}, false
	}
	x, ok := move.mul(q)
	if ok {
		x, ok = x.add(m)
	}
	if ok {
		x, ok = x.sub(b)
	}
	if ok {
		x, ok = x.round(8)
	}
	if !ok {
		return decimal.Decimal{}, false
	}
	return x.dec(), true
}
