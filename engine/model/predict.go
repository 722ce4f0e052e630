package model

import (
	"slices"
	"time"

	"github.com/riskguard/riskguard/engine/act"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// Why the free balance is unknown to the margin model.
const whyNoCross = "no cross position to infer it from"

// Account returns the tick's account view, building it from the tick's
// view tv at its first call in the tick: what the plans' steps predict
// with and move on (Moved).
func (m *Watch) Account(tv *market.View) *act.Model {
	if m.view != nil {
		return m.view
	}
	vps, rep := tv.Model()
	// The tick's own copy (its maintenance margins set here; the view's
	// is valid until its next join), in the watch's buffer: the last
	// tick's model is let go at Begin, and nothing the tick hands on
	// keeps these positions (bufs).
	b := &m.bufs
	ps := append(b.ps[:0], vps...)
	b.ps = ps
	// The positions' figures as the view converted them for the rules and
	// their σ, for the grid to read rather than work out again
	// (act.Model.UseFloats): the same floats, as both convert with
	// margin.Float, and the σ Sigma says.
	st := m.stress
	b.lines, b.sigma = slices.Grow(b.lines[:0], len(ps))[:len(ps)], slices.Grow(b.sigma[:0], len(ps))[:len(ps)]
	f := margin.Floats{Lines: b.lines, Sigma: b.sigma, Scratch: &b.grid}
	for i, k := 0, 0; i < len(tv.Rows); i++ {
		if r := &tv.Rows[i]; r.Open && r.Sym != nil {
			var mm float64
			ps[k].MM, mm = m.maintenance(tv, i, r, &ps[k])
			n := r.N
			f.Lines[k] = margin.Line{Short: ps[k].Direction == exchange.Short, Cross: ps[k].Cross, Quantity: n.Quantity, Index: r.IndexF,
				EntryValue: n.EntryValue, Margin: n.Margin, Maintenance: mm}
			f.Sigma[k] = m.vol.sigmaAt(i, r.IndexName, st.Horizon, st.Floor)
			k++
		}
	}
	// At is read only: the same rows, the same places.
	at := m.places.get(tv, func() map[string]int {
		at := make(map[string]int, len(ps))
		for i, mp := range ps {
			at[mp.Symbol] = i
		}
		return at
	})
	b.model = act.Model{At: at, Acct: margin.Account{Positions: ps}}
	v := &b.model
	liqs := b.liqs[:0]
	for i := range rep {
		liqs = append(liqs, rep[i].Liquidation)
	}
	b.liqs = liqs
	f.Distinct = len(v.At) == len(ps) // one position a symbol
	v.UseFloats(f)
	// Where the model does not reproduce the exchange's own figures, its
	// predictions are said but decide nothing.
	if w := &m.fit; w.known && !w.fit.Fits() {
		v.Unfit = w.whyUnfit()
	}
	// The free balance changes with the cross positions (their margins,
	// a settings call, a trade) and with transfers: it is inferred again
	// when a cross position changed, and at least every freeRefresh.
	switch free, known, sig, ok := m.cachedFree(tv); {
	case m.inFlight != "":
		// A call that may move the pool was in flight while the
		// positions were read: the snapshot may or may not show its
		// effect, so the free balance it implies is not relied on (the
		// exchange decides what is affordable), nor kept.
		v.FreeWhy = m.inFlight
	case ok:
		v.Acct.Free, v.FreeKnown = free, known
	case m.free.inputs.same(v.Acct.Positions, liqs):
		// Due again, on the very same figures (a quiet account whose
		// prices did not move): the inference would give what it gave.
		v.Acct.Free, v.FreeKnown = m.free.free, m.free.known
		m.free.sig, m.free.at = sig, m.now
	default:
		for i, mp := range v.Acct.Positions {
			if !mp.Cross {
				continue
			}
			if free, ok := v.Acct.InferFree(i, liqs[i]); ok {
				v.Acct.Free, v.FreeKnown = free, true
				break
			}
		}
		in := m.free.inputs
		in.keep(v.Acct.Positions, liqs)
		m.free = freeCache{sig: sig, at: m.now, free: v.Acct.Free, known: v.FreeKnown, inputs: in}
	}
	if !v.FreeKnown && v.FreeWhy == "" {
		v.FreeWhy = whyNoCross
	}
	// A view steady since the last tick's account lists the same
	// positions but for their indexes, in the same places: their prices
	// hold, each read by its place, and no symbol is gone to forget.
	held := m.liqsOf == tv && tv.Steady(m.liqsAt)
	m.liqsOf, m.liqsAt = tv, tv.Joins()
	if !held {
		m.liqs.Forget(v.At)
	}
	m.liqs.Hold(ps, held)
	v.Liqs = &m.liqs
	b.spare.Reset() // the last tick's model is let go (Begin)
	v.Spare = &b.spare
	fns := m.tickFuncs(tv)
	v.Sigma, v.Likely = fns.sigma, st.Likely
	v.Floor, v.Fast = fns.floor, fns.fast
	v.OrderCost, v.DustNotional, v.OrdersAsAsked = m.orders.Cost, m.dust.dec, m.orders.AsAsked
	m.view = v
	return v
}

// Sigma is each open position's symbol's σ over the stress horizon in
// view tv (its index's, volatility.sigma), under the stress settings st:
// the stress grid's input, for a check and a backtest's report
// (StressInputs); the tick's model's is the same, made once
// (tickFuncs.sigmaOf).
func (m *Watch) Sigma(tv *market.View, st Stress) func(symbol string) float64 {
	// The rows are looked up when first asked: the tick's grid reads the
	// σ of its own account from its floats (Account).
	var index map[string]string
	return func(symbol string) float64 {
		if index == nil {
			index = make(map[string]string, len(tv.Rows))
			for i := range tv.Rows {
				if r := &tv.Rows[i]; r.Open && r.Sym != nil {
					index[r.Sym.Name] = r.IndexName
				}
			}
		}
		return m.vol.sigma(index[symbol], st.Horizon, st.Floor)
	}
}

// tickFuncs are the tick's model's Sigma, Floor and Fast (act.Model):
// made once for the watch and set to each tick's view and settings at its
// account (set), where each tick made three closures and the maps they
// fill, since a model is the tick's alone (act.Host.Model). Each looks
// its rows up, and Floor its zones, when first asked in the tick, as
// Sigma, floorOf and fastOf say.
type tickFuncs struct {
	w    *Watch
	tv   *market.View
	st   Stress
	now  time.Time
	set  *rules.Set
	lane float64
	// The tick's maps, emptied at each set; made says they were filled
	// in the tick (sigmaMade, fastMade).
	sigmaIx             map[string]string
	zone                map[string]float64
	fastIx              map[string]fastIndex
	sigmaMade, fastMade bool
	sigma, floor        func(symbol string) float64
	fast                func(symbol string) string
}

// fastIndex is an open position's index and its price, as fastOf reads
// them.
type fastIndex struct {
	name  string
	price float64
}

// tickFuncs sets the watch's tickFuncs to view tv and its settings (the
// stress settings, the tick's time, the rules and the fast lane's
// distance, as Account reads them), made at the first.
func (m *Watch) tickFuncs(tv *market.View) *tickFuncs {
	f := &m.fns
	if f.w == nil {
		f.w = m
		f.sigma, f.floor, f.fast = f.sigmaOf, f.floorOf, f.fastOf
	}
	f.tv, f.st, f.now, f.set, f.lane = tv, m.stress, m.now, m.rules, m.fastDistance
	clear(f.sigmaIx)
	clear(f.zone)
	clear(f.fastIx)
	f.sigmaMade, f.fastMade = false, false
	return f
}

// sigmaOf is Sigma of the tick's view and stress settings.
func (f *tickFuncs) sigmaOf(symbol string) float64 {
	// The rows are looked up when first asked: the tick's grid reads the
	// σ of its own account from its floats (Account).
	if !f.sigmaMade {
		if f.sigmaIx == nil {
			f.sigmaIx = make(map[string]string, len(f.tv.Rows))
		}
		for i := range f.tv.Rows {
			if r := &f.tv.Rows[i]; r.Open && r.Sym != nil {
				f.sigmaIx[r.Sym.Name] = r.IndexName
			}
		}
		f.sigmaMade = true
	}
	return f.w.vol.sigma(f.sigmaIx[symbol], f.st.Horizon, f.st.Floor)
}

// floorOf is each symbol's floor for the tick's model (act.Model.Floor):
// the rules' cut zone or the fast lane's distance, the larger.
func (f *tickFuncs) floorOf(symbol string) float64 {
	z, ok := f.zone[symbol] // each symbol's, once asked: every candidate asks again
	if !ok {
		if f.zone == nil {
			f.zone = map[string]float64{}
		}
		z = max(f.set.CutZone(symbol), f.lane)
		f.zone[symbol] = z
	}
	return z
}

// fastOf says, for the tick's model (act.Model.Fast), how each open
// position's index is in a fast move (volatility.fast) at the tick's
// index price.
func (f *tickFuncs) fastOf(symbol string) string {
	// The rows are looked up when first asked: most ticks' models never
	// ask (only a call that moves a liquidation price closer does).
	if !f.fastMade {
		if f.fastIx == nil {
			f.fastIx = make(map[string]fastIndex, len(f.tv.Rows))
		}
		for i := range f.tv.Rows {
			if r := &f.tv.Rows[i]; r.Open && r.Sym != nil && r.HasIndex {
				f.fastIx[r.Sym.Name] = fastIndex{r.IndexName, r.IndexF}
			}
		}
		f.fastMade = true
	}
	x, ok := f.fastIx[symbol]
	if !ok {
		return ""
	}
	return f.w.vol.fast(x.name, f.now, x.price, f.st.FastWindow, f.st.FastMove)
}

// maintenance is the maintenance margin of r, the position at place i of
// the tick's view (mp its model position), kept while the position at
// that place and the figures it is worked out from are the same (the
// quantity, the entry price and value, the risk limit's rates; the spec
// gives the position's version no meaning, so it is no sign of a change),
// with its float64 for the account's figures. The exchange lists the
// positions in a stable order, so a steady account works none out again.
//
// A slot checked at a join of tv holds without comparing its figures while
// tv is steady since (market.View.Steady: every row's figures the same
// copies, the indexes aside).
func (m *Watch) maintenance(tv *market.View, i int, r *market.Row, mp *margin.Position) (decimal.Decimal, float64) {
	if i >= len(m.mm) {
		m.mm = append(m.mm, make([]mmSlot, i+1-len(m.mm))...)
	}
	x := &m.mm[i]
	if x.of == tv && tv.Steady(x.at) && x.key == r.Key && !x.mm.IsZero() {
		return x.mm, x.mmFloat
	}
	if in := mmInputsOf(r.P); x.key != r.Key || x.mm.IsZero() || !x.in.same(&in) {
		x.key, x.mm, x.in = r.Key, mp.Maintenance(), in
		x.mmFloat = market.ToFloat(x.mm)
	}
	if x.of != tv {
		x.of = tv
	}
	x.at = tv.Joins()
	return x.mm, x.mmFloat
}

// mmSlot is the maintenance margin of the position of key, and the
// figures it was worked out from.
type mmSlot struct {
	key     market.Key
	mm      decimal.Decimal
	mmFloat float64
	in      mmInputs
	// of and at are the view and its join the slot was last checked at.
	of *market.View
	at uint64
}

// mmInputs are the figures a maintenance margin is worked out from.
type mmInputs struct {
	qty, entry, ev, rate, step, base, limitStep decimal.Decimal
	maxSteps                                    int
}

func mmInputsOf(p *exchange.Position) mmInputs {
	rl := &p.RiskLimit
	return mmInputs{qty: p.Quantity, entry: p.EntryPrice, ev: p.EntryValue, rate: rl.MaintenanceMarginRate, step: rl.MarginRateStep,
		base: rl.RiskLimitBase, limitStep: rl.RiskLimitStep, maxSteps: rl.MaxRiskLimitSteps}
}

// same reports whether a and b are the same figures, in value.
func (a *mmInputs) same(b *mmInputs) bool {
	return a.maxSteps == b.maxSteps && equal(a.qty, b.qty) && equal(a.entry, b.entry) && equal(a.ev, b.ev) && equal(a.rate, b.rate) &&
		equal(a.step, b.step) && equal(a.base, b.base) && equal(a.limitStep, b.limitStep)
}

// equal is a.Equal(b), answered without comparing the coefficients for
// two copies of one decimal (a position read again that did not change).
func equal(a, b decimal.Decimal) bool { return a == b || a.Equal(b) }

// cachedFree is the free balance inferred for the same cross positions
// of the view within freeRefresh; ok is false when it must be inferred again, for the
// cross positions sig identifies.
func (m *Watch) cachedFree(v *market.View) (free decimal.Decimal, known bool, sig uint64, ok bool) {
	fc := &m.free
	sig = v.CrossSig()
	if fc.at.IsZero() || m.now.Before(fc.at) || m.now.Sub(fc.at) >= freeRefresh || fc.sig != sig {
		return decimal.Zero, false, sig, false
	}
	return fc.free, fc.known, sig, true
}

// freeRefresh is how often the free balance is inferred again while the
// cross positions stay as they are (a deposit or a withdrawal).
const freeRefresh = time.Minute

// freeCache is the last inferred free balance, and of which cross
// positions.
type freeCache struct {
	sig   uint64
	at    time.Time
	free  decimal.Decimal
	known bool
	// inputs is what it was inferred from.
	inputs freeInputs
}

// freeInputs is what an inference of the free balance read: the model's
// positions and the liquidation prices the exchange listed.
type freeInputs struct {
	ps   []margin.Position
	liqs []decimal.Decimal
	set  bool
}

// keep makes in a copy of ps and liqs.
func (in *freeInputs) keep(ps []margin.Position, liqs []decimal.Decimal) {
	in.ps, in.liqs, in.set = append(in.ps[:0], ps...), append(in.liqs[:0], liqs...), true
}

// same reports whether ps and liqs are the inputs kept, field for field,
// decimals in value and exponent: InferFree gives the same answer on them.
func (in *freeInputs) same(ps []margin.Position, liqs []decimal.Decimal) bool {
	if !in.set || len(ps) != len(in.ps) || len(liqs) != len(in.liqs) {
		return false
	}
	for i := range ps {
		p, q := &ps[i], &in.ps[i]
		if !margin.SameButIndex(p, q) || !margin.SameDec(p.Index, q.Index) || !margin.SameDec(p.Held, q.Held) ||
			!margin.SameDec(p.MM, q.MM) || !margin.SameDec(liqs[i], in.liqs[i]) {
			return false
		}
	}
	return true
}
