package act

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// Model is the tick's account as the margin model sees it, built at the
// first settings call of the tick and moved along by the predicted effect
// of each call sent (Acct = Prediction.Next), so that a later call in the
// same tick sees the free balance the earlier ones left.
type Model struct {
	Acct margin.Account
	At   map[string]int // symbol → index in Acct.Positions
	// FreeKnown: the free balance was inferred from a cross position's
	// liquidation price. Without a cross position it cannot be; the
	// isolated predictions do not need it, and affordability is then left
	// to the exchange. FreeWhy says why it is not known.
	FreeKnown bool
	FreeWhy   string
	// Unfit says where the model does not reproduce the exchange's own
	// figures ("" when it does): its predictions are then said as
	// unverified and decide nothing.
	Unfit string
	// Liqs, when set, remembers isolated liquidation prices across the
	// models of successive ticks (the engine's).
	Liqs *margin.Liquidations
	// Spare, when set, is room the candidates of its decisions by cost
	// are made in (Spare), reused across the models of successive ticks
	// (the engine's).
	Spare *Spare
	// Sigma is each symbol's σ over the stress horizon, a fraction of its
	// index, and Likely the likely range in σ (margin.Stress); nil Sigma:
	// no stress grid, and the decisions are the account measure's alone.
	Sigma  func(symbol string) float64
	Likely float64
	// Floor is each symbol's least distance to liquidation (a fraction
	// of its index) under which no settings call may leave a position it
	// moves closer: the account's own cut zone (rules.Set.CutZone) or the
	// fast lane's distance, the larger. A call that lands a position
	// there is undone by the next tick's cut, at a loss. nil: no floor.
	Floor func(symbol string) float64
	// Fast says how a symbol's index is in a fast move ("" when it is
	// not): no call moves a position closer to its liquidation price
	// then, whatever the estimates say (σ jumps in a wick and the likely
	// range stops binding). nil: never.
	Fast func(symbol string) string
	// OrderCost is what an order pays the market, a fraction of its
	// notional: the taker fee and half the spread (engine.order_cost). It
	// is what a reduce costs at mark to market (cost.go).
	OrderCost float64
	// DustNotional is the notional under which what a reduce would leave
	// of a position is dust: the order closes it whole instead, and a
	// position that is dust already is left (engine.dust_notional).
	DustNotional decimal.Decimal
	// OrdersAsAsked: a reduce goes out as its rules ask, not judged at
	// mark to market (engine.orders_as_asked); dust is still closed whole.
	OrdersAsAsked bool
	// floats are the figures of the positions of floatsOf (the account
	// UseFloats was given with) as the tick's view converted them: the
	// grid reads them while Acct is that account.
	floats   margin.Floats
	floatsOf []margin.Position
	// memo keeps the predictions made on Acct (nil until the first), in
	// firstMemo when it is the model's first: a tick's model mostly makes
	// one, and a copy shares it (memo) as it shares any.
	memo      *predictMemo
	firstMemo predictMemo
	// grids keeps the stress grids of the accounts the tick's predictions
	// left (their StressAfter): once a call is sent and the model moves on
	// to the account it left (Acct = Prediction.Next), that account's grid
	// is the one already worked out. Copies of the model share it.
	grids *gridCache
}

// gridCache is the stress grids of the last few accounts predicted, by
// account (sameAccount): a tick moves on to one of them at most once per
// call it sends.
type gridCache struct {
	entries [8]gridEntry
	next    int
}

type gridEntry struct {
	acct margin.Account
	s    margin.Stress
	set  bool
}

// put keeps s as acct's grid, in place of the oldest.
func (c *gridCache) put(acct margin.Account, s margin.Stress) {
	c.entries[c.next] = gridEntry{acct: acct, s: s, set: true}
	c.next = (c.next + 1) % len(c.entries)
}

// get is acct's grid, when kept.
func (c *gridCache) get(acct margin.Account) (margin.Stress, bool) {
	for i := range c.entries {
		if e := &c.entries[i]; e.set && sameAccount(e.acct, acct) {
			return e.s, true
		}
	}
	return margin.Stress{}, false
}

// predictMemo keeps the predictions made on one account. DecideSettings
// predicts the same call more than once (as asked, among the bounded
// cuts, as decided), and every prediction of a tick measures the same
// account before the call: each is computed once while the account stays
// the same. It holds for the account it was made on, compared by identity
// (the same positions slice, the same free balance in value and
// exponent) and for the model's other inputs; a model whose Acct moved on
// (Acct = Prediction.Next) starts a new one. Positions are never changed
// in place: Apply and Reduce return new ones.
type predictMemo struct {
	acct             margin.Account
	freeKnown        bool
	freeWhy, unfit   string
	liqs             []decimal.Decimal // acct.LiquidationPrices(); nil until needed
	moves            []decimal.Decimal // acct.Moves(liqs)
	notional         *decimal.Decimal  // acct.Notional(), when known (notionalK)
	notionalK        bool
	before           map[int][2]margin.Survival
	stress           margin.Stress  // the account before, on the stress grid (once stressK)
	forfeit          margin.Forfeit // the account before, first passage (forfeitBefore; once forfeitK)
	stressK          bool
	forfeitK         bool
	priced           *margin.Priced     // the account before read for both (pricedBefore)
	dists            []*decimal.Decimal // each position's distance before (distBefore), once known
	preds            predictions
	cands            predictions // without the account measure (Model.candidate)
	fills            []fill      // the reduces worked out (Model.filled)
	hasCross, crossK bool        // acct.HasOpenCross(), once known (crossK)
}

// predictKey is what a prediction reads from its plan besides the model.
type predictKey struct {
	i         int
	want      exchange.Settings
	direction string
	cross     bool
}

// memoFor returns the memo of the model's current inputs.
func (v *Model) memoFor() *predictMemo {
	if m := v.memo; m != nil && sameAccount(m.acct, v.Acct) && m.freeKnown == v.FreeKnown && m.freeWhy == v.FreeWhy && m.unfit == v.Unfit {
		return m
	}
	if v.memo == nil {
		v.firstMemo = predictMemo{acct: v.Acct, freeKnown: v.FreeKnown, freeWhy: v.FreeWhy, unfit: v.Unfit}
		v.memo = &v.firstMemo
	} else {
		v.memo = &predictMemo{acct: v.Acct, freeKnown: v.FreeKnown, freeWhy: v.FreeWhy, unfit: v.Unfit}
	}
	return v.memo
}

// sameAccount reports whether a and b are the same account: the same
// positions slice and the same free balance, in value and exponent.
func sameAccount(a, b margin.Account) bool {
	return margin.SameDec(a.Free, b.Free) && samePositions(a.Positions, b.Positions)
}

// Prediction is what the margin model says a settings call will do to its
// position.
type Prediction struct {
	margin.Effect
	// others are the cross positions whose liquidation price the call
	// moves (a leverage cut takes free balance from their pool).
	others   []otherEffect
	Leverage int // the leverage predicted
	// FreeKnown: the free balance was inferred (freeWhy says why not).
	FreeKnown bool
	freeWhy   string
	// Next is the account after the call (a candidate of a decision by
	// cost, Model.candidate, that leaves the cross pool as it is, or
	// keeps an isolated position isolated in an account without an open
	// cross position, has none: Predict of the one chosen has it).
	Next margin.Account
	// Before and After are the account measure (margin.Survival) before
	// and after the call; RestBefore and RestAfter the same over every
	// position but this one, which an isolation ring-fences.
	Before, After, RestBefore, RestAfter margin.Survival
	// StressBefore and StressAfter are the account on the stress grid
	// before and after the call (margin.Stress); Stressed says they were
	// computed (the model knows σ and can measure the account; a
	// candidate that moves no other position has none: predict).
	StressBefore, StressAfter margin.Stress
	Stressed                  bool
	// ForfeitBefore and ForfeitAfter are the account's expected forfeit
	// to liquidations before and after the call, first passage
	// (margin.Forfeit; an isolated candidate's ForfeitAfter lists its own
	// position's parts alone, all its cost reads: ForfeitAfterAt); Scored
	// says both are known and decide (cost.go). ForfeitBefore lists no
	// parts (the model's forfeitBefore does, for the tick), nor does
	// ForfeitAfter where the call leaves every price as it is (a cross
	// position's leverage within its pool: the before's).
	ForfeitBefore, ForfeitAfter margin.Forfeit
	Scored                      bool
	// Unverified says why the prediction decides nothing: the model does
	// not fit the exchange ("" when it does).
	Unverified string
	direction  string
	index      decimal.Decimal
	// said is what String and Record share, worked out once: a plan's
	// prediction is said by both, and the account change is the costly
	// part (distances, fractions, formatting).
	said     sync.Once
	distB    decimal.Decimal
	distA    decimal.Decimal
	closer   bool   // Closer
	acctSaid string // margin.Change(Before, After), when both are known
}

// Predict predicts setting the plan's position to want; nil when the
// model does not know the position or its index price. The same call
// predicted again on the same account is the same prediction, not to be
// changed by the caller.
func (v *Model) Predict(pl *Plan, want exchange.Settings) *Prediction {
	return v.predictOf(pl, want, true)
}

// candidate is Predict as a decision by cost compares candidates: without
// the account measure (margin.Survival, Before … RestAfter left unknown),
// which only says the chosen one; Predict of the one chosen has it.
func (v *Model) candidate(pl *Plan, want exchange.Settings) *Prediction {
	return v.predictOf(pl, want, false)
}

// predictOf is Predict, with the account measure when full; a full
// prediction already made serves a candidate.
func (v *Model) predictOf(pl *Plan, want exchange.Settings, full bool) *Prediction {
	i, ok := v.At[pl.Sym.Name]
	if !ok || !v.Acct.Positions[i].Index.IsPositive() {
		return nil
	}
	memo := v.memoFor()
	key := predictKey{i: i, want: want, direction: pl.Pos.Direction, cross: pl.Pos.Cross}
	if p, ok := memo.preds.get(key); ok {
		return p
	}
	if p, ok := memo.cands.get(key); ok && !full {
		return p
	}
	p := v.predict(memo, i, pl, want, full)
	if full {
		memo.preds.put(key, p)
	} else {
		memo.cands.put(key, p)
	}
	return p
}

// Spare is room the predictions a decision by cost compares are made in
// (Model.candidate, its candidates), reused from model to model: a
// decision hands none of them on (DecideSettings' predictions, and its
// skips', are Predict's), and they are let go with the model that made
// them and its memo. The engine's watch hands each tick's model the same
// Spare and lets go of the last tick's candidates (Reset) when it builds
// the next model, the last let go. Nil: each candidate is its own.
type Spare struct {
	chunks [][]Prediction // spareChunk each, never moved: candidates point into them
	n      int
	// parts is room for the candidates' forfeits' parts (partsRoom): a
	// list made anew when full, the candidates given room in the last
	// keeping theirs.
	parts []margin.ForfeitPart
}

// partsRoom is room for n parts of one candidate's forfeit.
func (s *Spare) partsRoom(n int) []margin.ForfeitPart {
	if cap(s.parts)-len(s.parts) < n {
		s.parts = make([]margin.ForfeitPart, 0, max(2*cap(s.parts), 8*n))
	}
	k := len(s.parts)
	s.parts = s.parts[:k+n]
	return s.parts[k : k : k+n]
}

// spareChunk is how many predictions a Spare makes room for at a time.
const spareChunk = 8

// next is room for one more prediction.
func (s *Spare) next() *Prediction {
	c, k := s.n/spareChunk, s.n%spareChunk
	if c == len(s.chunks) {
		s.chunks = append(s.chunks, make([]Prediction, spareChunk))
	}
	s.n++
	return &s.chunks[c][k]
}

// Reset lets go of the predictions made in s (their figures cleared): the
// models that made them are let go.
func (s *Spare) Reset() {
	for c := 0; c*spareChunk < s.n; c++ {
		clear(s.chunks[c])
	}
	clear(s.parts)
	s.n, s.parts = 0, s.parts[:0]
}

// predictions are a memo's predictions by key: the first few in a list
// (most memos hold one or two, and a map's first entry cost a table of
// eight), every one in a map past them.
type predictions struct {
	few  []predictEntry
	many map[predictKey]*Prediction
}

type predictEntry struct {
	key predictKey
	p   *Prediction
}

// fewPredictions is how many predictions the list holds.
const fewPredictions = 8

// get is the prediction of key, when made.
func (ps *predictions) get(key predictKey) (*Prediction, bool) {
	if ps.many != nil {
		p, ok := ps.many[key]
		return p, ok
	}
	for k := range ps.few {
		if e := &ps.few[k]; e.key == key {
			return e.p, true
		}
	}
	return nil, false
}

// put keeps p as the prediction of key, not yet made.
func (ps *predictions) put(key predictKey, p *Prediction) {
	switch {
	case ps.many != nil:
		ps.many[key] = p
	case len(ps.few) < fewPredictions:
		ps.few = append(ps.few, predictEntry{key, p})
	default:
		ps.many = make(map[predictKey]*Prediction, 2*fewPredictions)
		for _, e := range ps.few {
			ps.many[e.key] = e.p
		}
		ps.many[key] = p
		ps.few = nil
	}
}

// measured reports whether the model can measure the account of memo:
// its free balance is known, or no open cross pool needs it (whether one
// is open is worked out once per memo).
func (v *Model) measured(memo *predictMemo) bool {
	if !memo.crossK {
		memo.hasCross, memo.crossK = v.Acct.HasOpenCross(), true
	}
	return v.FreeKnown || !memo.hasCross
}

// stressBefore is the account before on the stress grid, worked out once
// per memo; ok is false without σ, or with cross positions whose free
// balance is not known (the pool cannot be measured).
func (v *Model) stressBefore() (margin.Stress, bool) {
	if v.Sigma == nil || !(v.Likely > 0) {
		return margin.Stress{}, false
	}
	memo := v.memoFor()
	if !v.measured(memo) {
		return margin.Stress{}, false
	}
	if !memo.stressK && v.grids != nil {
		memo.stress, memo.stressK = v.grids.get(v.Acct)
	}
	if !memo.stressK {
		memo.stress, memo.stressK = v.pricedBefore(memo).StressJudged(v.Likely), true
	}
	return memo.stress, true
}

// predict is Predict, the account before measured once per memo; the
// account measure (Survival) only when full.
//
// A leverage change of a cross position that stays cross moves margin
// between the free balance and the position, both in the pool: the pool
// is the same decimal, so every liquidation price, the account measure,
// the grid and the forfeit after are the account's before, reused rather
// than worked out again (samePool).
func (v *Model) predict(memo *predictMemo, i int, pl *Plan, want exchange.Settings, full bool) *Prediction {
	// Without the free balance a cross pool cannot be measured: the
	// measures stay unknown, neither better nor worse.
	measured := v.measured(memo)
	samePool := v.Acct.Positions[i].Cross && want.Cross
	// A candidate that keeps its position isolated, in an account with no
	// open cross position, moves no other position: no grid (below), and
	// no account after (its position after alone, np).
	isolated := !full && !v.Acct.Positions[i].Cross && !want.Cross && measured && !memo.hasCross
	var next margin.Account
	var np margin.Position
	var eff margin.Effect
	var liqsAfter []decimal.Decimal // every position's after the call, when measured (read only)
	if measured {
		if memo.liqs == nil {
			memo.liqs = v.liquidationPrices()
		}
		switch {
		case isolated:
			// Every other position's price is the one before; the
			// call's own is eff.LiquidationAfter.
			np, eff = v.Acct.IsolatedEffect(i, want.Leverage, v.Liqs, memo.liqs)
			liqsAfter = memo.liqs
		case samePool && !full:
			// A candidate's account after is only read when it is
			// chosen, and Predict of it has one: no copy of every
			// position here.
			eff = v.Acct.SamePoolEffect(i, want.Leverage, memo.liqs)
			liqsAfter = memo.liqs
		case samePool:
			next, eff = v.Acct.ApplySamePool(i, want.Leverage, memo.liqs)
			liqsAfter = memo.liqs
		default:
			next, eff, liqsAfter = v.Acct.ApplyPriced(i, want.Leverage, want.Cross, v.Liqs, memo.liqs)
		}
	} else {
		next, eff = v.Acct.ApplyWith(i, want.Leverage, want.Cross, v.Liqs)
	}
	var p *Prediction
	if full || v.Spare == nil {
		p = new(Prediction)
	} else {
		p = v.Spare.next() // a candidate: let go with the tick
	}
	*p = Prediction{Effect: eff, Leverage: want.Leverage, direction: pl.Pos.Direction, index: v.Acct.Positions[i].Index, FreeKnown: v.FreeKnown, freeWhy: v.FreeWhy, Next: next,
		Unverified: v.Unfit}
	if measured {
		if full {
			p.Before, p.RestBefore = v.survivalBefore(memo, i)
			if samePool {
				p.After, p.RestAfter = p.Before, p.RestBefore
			} else {
				p.After, p.RestAfter = next.SurvivalBothWith(i, liqsAfter, afterMoves(next, memo.liqs, liqsAfter, v.moves(memo)), v.notional(memo))
			}
		}
		// An isolated candidate's grid after differs from the before
		// only in the call's own position, which NewlyFatal excepts, so
		// its grid (read only by admissible's NewlyFatal) would find
		// nothing and is not worked out. A full prediction, which is
		// said, has it.
		var sb margin.Stress
		stressed := false
		if !isolated {
			sb, stressed = v.stressBefore()
		}
		scored := v.scored()
		if stressed {
			p.StressBefore, p.StressAfter = sb, sb
		}
		if scored {
			// Its total alone: the parts are the tick's account's,
			// read into the watch's scratch (margin.Floats.Scratch),
			// and a prediction outlives the tick.
			fb := v.forfeitBefore()
			p.ForfeitBefore = margin.Forfeit{Known: fb.Known, Expected: fb.Expected}
			p.ForfeitAfter = p.ForfeitBefore
		}
		switch {
		case isolated && scored:
			// No grid (above): its forfeit after, whose cost reads its
			// own position's parts alone, worked out from the before's
			// and its position after, without a book of the account
			// after (ForfeitAfterAt of AfterIsolated's, bit for bit).
			// A candidate's, let go with it: its parts listed in the
			// Spare it was made in.
			var room []margin.ForfeitPart
			if v.Spare != nil {
				room = v.Spare.partsRoom(2)
			}
			p.ForfeitAfter = v.pricedBefore(memo).ForfeitAfterIsolatedHeld(room, v.Liqs, &np, eff.FreeAfter, i, eff.LiquidationAfter)
		case !isolated && !samePool && (stressed || scored):
			// The account after read by patching the account before
			// (its other positions' figures are the same floats), its
			// forfeit from the before's: only the call's position and the
			// pool are worked out again.
			pb := v.pricedBefore(memo)
			pa := pb.After(next, i, liqsAfter)
			if stressed {
				p.StressAfter = pa.StressJudged(v.Likely)
			}
			if scored {
				p.ForfeitAfter = pb.ForfeitAfter(pa, i)
			}
		}
		if stressed {
			p.Stressed = p.StressBefore.Known && p.StressAfter.Known
			if full {
				// Only a full prediction can be the call sent, whose
				// account the model moves on to.
				if v.grids == nil {
					v.grids = &gridCache{}
				}
				v.grids.put(next, p.StressAfter)
			}
		}
		if scored {
			p.Scored = p.ForfeitBefore.Known && p.ForfeitAfter.Known
		}
	}
	if samePool {
		return p // no other position's price moves
	}
	if !eff.MarginMoved.IsZero() || want.Cross != pl.Pos.Cross {
		for j, o := range v.Acct.Positions {
			if j == i || !o.Cross || !o.Index.IsPositive() {
				continue
			}
			// The cross pool's prices as measured above (the pool summed
			// once, the same prices as LiquidationPrice's), or priced.
			var before, after decimal.Decimal
			if measured {
				before, after = memo.liqs[j], liqsAfter[j]
			} else {
				before, after = v.Acct.LiquidationPrice(j), next.LiquidationPrice(j)
			}
			if before.Equal(after) {
				continue
			}
			var db decimal.Decimal
			if measured {
				db = v.distBefore(memo, j) // every candidate's the same
			} else {
				db, _ = margin.Distance(o.Direction, o.Index, before)
			}
			da, _ := margin.Distance(o.Direction, o.Index, after)
			p.others = append(p.others, otherEffect{symbol: o.Symbol, before: before, after: after, distBefore: db, distAfter: da})
		}
	}
	return p
}

// UseFloats hands the model the figures of Acct's positions as the tick's
// view worked them out for the rules: f.Lines[i] is position i's quantity,
// index, entry value, margin held and maintenance, each margin.Float of
// the position's decimal (Quantity, Index, Value, Held, MM), f.Sigma[i]
// Sigma of its symbol. The grid reads them (margin.Account.PricedFrom)
// while Acct is the account they were given with, rather than converting
// its decimals again.
func (v *Model) UseFloats(f margin.Floats) { v.floats, v.floatsOf = f, v.Acct.Positions }

// Floats are the figures UseFloats gave, while Acct is the account they
// were given with; ok is false once it moved on (or none were given).
func (v *Model) Floats() (margin.Floats, bool) {
	if v.floats.Lines == nil || !samePositions(v.floatsOf, v.Acct.Positions) {
		return margin.Floats{}, false
	}
	return v.floats, true
}

// pricedBefore is the account read for the grid and the forfeit
// (margin.Priced), once per memo: the grid and the forfeit before, and
// every prediction's after, patched from it. The tick's own account is
// read from the view's floats (UseFloats); one a call moved it on to, from
// its decimals.
func (v *Model) pricedBefore(memo *predictMemo) *margin.Priced {
	if memo.priced == nil {
		liqs := memo.liqs
		if liqs == nil {
			// Not kept in the memo: predict fills liqs with the moves
			// that go with them.
			liqs = v.Acct.LiquidationPricesWith(v.Liqs)
		}
		if f, ok := v.Floats(); ok {
			memo.priced = v.Acct.PricedFrom(f, v.Sigma, liqs)
		} else {
			memo.priced = v.Acct.Priced(v.Sigma, liqs)
		}
	}
	return memo.priced
}

// liquidationPrices are the account's liquidation prices for its memo:
// the tick's own account's in the scratch its floats read the grid into
// (UseFloats: the memo is the tick's, made once), another's in a list of
// their own.
func (v *Model) liquidationPrices() []decimal.Decimal {
	if f, ok := v.Floats(); ok && f.Scratch != nil {
		return v.Acct.LiquidationPricesIn(f.Scratch, v.Liqs)
	}
	return v.Acct.LiquidationPricesWith(v.Liqs)
}

// samePositions reports whether a and b are the same positions slice.
func samePositions(a, b []margin.Position) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// distBefore is position j's distance to its liquidation price before
// any call (memo.liqs[j]), worked out once per memo.
func (v *Model) distBefore(memo *predictMemo, j int) decimal.Decimal {
	if memo.dists == nil {
		memo.dists = make([]*decimal.Decimal, len(v.Acct.Positions))
	}
	if d := memo.dists[j]; d != nil {
		return *d
	}
	o := v.Acct.Positions[j]
	d, _ := margin.Distance(o.Direction, o.Index, memo.liqs[j])
	memo.dists[j] = &d
	return d
}

// moves is the account's moves to liquidation (Account.Moves of
// memo.liqs), worked out once per memo and only for the account measure:
// a candidate does not need them.
func (v *Model) moves(memo *predictMemo) []decimal.Decimal {
	if memo.moves == nil {
		memo.moves = v.Acct.Moves(memo.liqs)
	}
	return memo.moves
}

// survivalBefore is the account measure before a call on position i,
// whole and without i, worked out once per memo and position.
func (v *Model) survivalBefore(memo *predictMemo, i int) (whole, rest margin.Survival) {
	b, ok := memo.before[i]
	if !ok {
		// Without the notional known, SurvivalBothWith sums it with the
		// pool, where Notional would sum the pool once more.
		b[0], b[1] = v.Acct.SurvivalBothWith(i, memo.liqs, v.moves(memo), memo.notional)
		if memo.before == nil {
			memo.before = map[int][2]margin.Survival{}
		}
		memo.before[i] = b
	}
	return b[0], b[1]
}

// fill is a reduce of qty on position i worked out on the memo's
// account: the account after and its liquidation prices, or the model's
// refusal (err).
type fill struct {
	i    int
	qty  decimal.Decimal
	next margin.Account
	r    margin.Reduction
	liqs []decimal.Decimal
	err  error
	// priced is next read for the grid and the forfeit (pricedAfter),
	// once needed.
	priced *margin.Priced
}

// pricedAfter is the account the fill f leaves (worked out on memo's
// account, without error) read for the grid and the forfeit, once per
// fill: patched from the account before (margin.Priced.After: the other
// positions' figures are the same floats, only the reduced position, the
// cross positions' prices and the pool read again) while the reduce
// leaves its position open; read afresh when it closes it (its symbol
// may leave the grid's list).
func (v *Model) pricedAfter(memo *predictMemo, f *fill) *margin.Priced {
	if f.priced == nil {
		if f.next.Positions[f.i].Open() {
			f.priced = v.pricedBefore(memo).After(f.next, f.i, f.liqs)
		} else {
			f.priced = f.next.Priced(v.Sigma, f.liqs)
		}
	}
	return f.priced
}

// forfeitAfter is the forfeit of the account the fill f leaves
// (pricedAfter): merged from the account before's while the position
// stays open (margin.Priced.ForfeitAfter).
func (v *Model) forfeitAfter(memo *predictMemo, f *fill) margin.Forfeit {
	pa := v.pricedAfter(memo, f)
	if f.next.Positions[f.i].Open() {
		return v.pricedBefore(memo).ForfeitAfter(pa, f.i)
	}
	return pa.Forfeit()
}

// filled is the account after a reduce of qty on position i at index ix,
// with its liquidation prices, worked out once per memo: a reduce judged
// at mark to market (judgeReduce) and then predicted (PredictReduce) is
// the same fill.
func (v *Model) filled(i int, qty, ix decimal.Decimal) *fill {
	memo := v.memoFor()
	for k := range memo.fills {
		if f := &memo.fills[k]; f.i == i && f.qty.Equal(qty) {
			return f
		}
	}
	f := fill{i: i, qty: qty}
	f.next, f.r, f.err = v.Acct.Reduce(i, qty, ix)
	if f.err == nil {
		f.liqs = f.next.LiquidationPricesWith(v.Liqs)
	}
	memo.fills = append(memo.fills, f)
	return &memo.fills[len(memo.fills)-1]
}

// notional is the account's Notional, worked out once per memo (nil when
// a position has no index price): the same after any call, as Apply moves
// no quantity or index.
func (v *Model) notional(memo *predictMemo) *decimal.Decimal {
	if !memo.notionalK {
		if n, ok := v.Acct.Notional(); ok {
			memo.notional = &n
		}
		memo.notionalK = true
	}
	return memo.notional
}

// afterMoves is next.Moves(after) from the account's before (liqs,
// moves): Apply moves no index, so a position whose price did not change
// (in value and exponent) keeps its move.
func afterMoves(next margin.Account, liqs, after, moves []decimal.Decimal) []decimal.Decimal {
	out := slices.Clone(moves)
	for j, p := range next.Positions {
		switch {
		case !p.Open():
			out[j] = decimal.Zero
		case !margin.SameDec(after[j], liqs[j]):
			out[j] = margin.CappedMove(p.Direction, p.Index, after[j])
		}
	}
	return out
}

// otherEffect is a call's predicted effect on another position.
type otherEffect struct {
	symbol                string
	before, after         decimal.Decimal // liquidation prices
	distBefore, distAfter decimal.Decimal
}

func (o otherEffect) closer() bool { return o.distAfter.LessThan(o.distBefore) }

func (o otherEffect) String() string {
	return fmt.Sprintf("%s liquidation %s → %s (%s → %s away)", o.symbol, o.before, o.after,
		o.distBefore.Shift(2).StringFixed(2)+"%", o.distAfter.Shift(2).StringFixed(2)+"%")
}

// invariant is why a call predicted as p on the position of symbol
// breaks a bound no estimate lifts ("" when it does not): it leaves a
// position it moves closer to its liquidation price under that symbol's
// floor (Floor: the zone where the account's own rules cut it), or moves
// one closer while its index is in a fast move (Fast). It holds for the
// position the call is on and for every other one it moves (a cut that
// takes free balance from a cross pool).
func (v *Model) invariant(p *Prediction, symbol string) string {
	if p == nil {
		return ""
	}
	check := func(sym string, after decimal.Decimal) string {
		if v.Floor != nil {
			if f := v.Floor(sym); f > 0 && after.LessThan(decimal.NewFromFloat(f)) {
				return fmt.Sprintf("would leave %s %s%% from its liquidation price, inside the %s%% where the rules cut it", sym,
					after.Shift(2).StringFixed(2), decimal.NewFromFloat(f).Shift(2).StringFixed(2))
			}
		}
		if v.Fast != nil {
			if how := v.Fast(sym); how != "" {
				return fmt.Sprintf("would move %s's liquidation price closer (%s%% away after) during a fast move: %s", sym, after.Shift(2).StringFixed(2), how)
			}
		}
		return ""
	}
	if p.Closer() {
		_, after := p.Distances()
		if why := check(symbol, after); why != "" {
			return why
		}
	}
	for _, o := range p.others {
		if o.closer() {
			if why := check(o.symbol, o.distAfter); why != "" {
				return why
			}
		}
	}
	return ""
}

// OthersFloor is how far from liquidation another position must stay when
// a leverage cut takes free balance from that position's cross pool (or
// the rule's min_liquidation_distance, when higher).
const OthersFloor = 0.10

// accountBound judges a leverage cut by the account measure
// (margin.Survival): a cut that lets the account survive smaller moves
// than it does now worsens it and needs every asking rule's
// allow_closer_liquidation; any cut, allowed or not, keeps every other
// position it moves closer at least OthersFloor (or the rules' floor)
// away. A cut that improves the measure, or leaves it as it is, goes out.
func accountBound(pl *Plan, lowerKind rules.ActionKind) func(*Prediction) (bool, string) {
	allowed, _ := closerAllowed(pl, lowerKind)
	floor := decimal.Max(rulesFloor(pl, lowerKind), decimal.NewFromFloat(OthersFloor))
	return func(p *Prediction) (bool, string) {
		for _, o := range p.others {
			if o.closer() && o.distAfter.LessThan(floor) {
				return false, fmt.Sprintf("%dx would move %s, under %s%%", p.Leverage, o, floor.Shift(2).StringFixed(2))
			}
		}
		if p.After.Compare(p.Before) < 0 && !allowed {
			return false, fmt.Sprintf("%dx would leave the account worse off (%s); the rule does not allow it (allow_closer_liquidation)",
				p.Leverage, p.accountChange())
		}
		return true, ""
	}
}

// ringFences reports whether isolating the plan's cross position
// protects the rest of the account: every other position survives larger
// moves once it is ring-fenced, it stays at least floor away itself, and,
// on the stress grid, it was failing within the likely range anyway (a
// healthy position is not put at risk to protect the others from an
// unlikely move).
func (p *Prediction) ringFences(floor decimal.Decimal, symbol string) bool {
	_, after := p.Distances()
	if p.RestAfter.Compare(p.RestBefore) <= 0 || after.LessThan(floor) {
		return false
	}
	if p.Stressed {
		_, failing := p.StressBefore.FatalFor(symbol, p.direction)
		return failing
	}
	return true
}

// expectedLossTolerance is how much the stress grid's expected loss may
// grow, as a fraction of it (or a hundredth of a quote unit when it is
// near 0), before a call is judged to raise it: the grid's own rounding.
const expectedLossTolerance = 0.001

// gridVeto is why the stress grid refuses the call on the position on
// symbol ("" when it does not, or there is no grid): it makes a likely
// move fatal to a position sooner than now (one that survives every
// likely move now, or a smaller move), or, for an isolation, it raises
// the expected loss. An isolation of a position a likely move liquidates
// anyway may ring-fence it: its own fatal move coming sooner is not held
// against it, but the expected loss over the whole account must not grow.
// optedIn (the rules' allow_closer_liquidation) lifts the expected loss's
// condition, never the likely moves'.
func (p *Prediction) gridVeto(symbol string, isolation, optedIn bool) string {
	if !p.Stressed {
		return ""
	}
	except := ""
	_, failing := p.StressBefore.FatalFor(symbol, p.direction)
	if failing && isolation {
		except = symbol
	}
	if nf := margin.NewlyFatal(p.StressBefore, p.StressAfter, except); len(nf) > 0 {
		var fs []string
		for _, f := range nf {
			now := fmt.Sprintf("no move within ±%gσ does", p.StressAfter.Likely)
			if fb, ok := p.StressBefore.FatalFor(f.Symbol, f.Direction); ok {
				now = fmt.Sprintf("a move of %+.1fσ does", fb.K)
			}
			fs = append(fs, fmt.Sprintf("%s (now %s)", f, now))
		}
		return "would make a likely move fatal: " + strings.Join(fs, "; ") + " (stress grid)"
	}
	b, a := p.StressBefore.Expected, p.StressAfter.Expected
	if isolation && !optedIn && a > b+math.Max(b*expectedLossTolerance, 0.01) {
		return fmt.Sprintf("would raise the expected loss on the stress grid from %.2f to %.2f", b, a)
	}
	return ""
}

// Index is the index price the prediction was made at.
func (p *Prediction) Index() decimal.Decimal { return p.index }

// Closer reports whether the call moves the liquidation price closer to
// the index (margin.Effect.Closer, on the distances describe works out
// once).
func (p *Prediction) Closer() bool {
	p.describe()
	return p.closer
}

// Distances are the position's distances to liquidation before and after,
// fractions of the index (0 when there is no liquidation price).
func (p *Prediction) Distances() (before, after decimal.Decimal) {
	p.describe()
	return p.distB, p.distA
}

// accountChange is margin.Change(p.Before, p.After), worked out once.
func (p *Prediction) accountChange() string {
	if !p.Before.Known || !p.After.Known {
		return margin.Change(p.Before, p.After)
	}
	p.describe()
	return p.acctSaid
}

// describe works out once what String, Record, Distances and Closer say.
func (p *Prediction) describe() {
	p.said.Do(func() {
		var okB, okA bool
		p.distB, okB = margin.Distance(p.direction, p.index, p.LiquidationBefore)
		p.distA, okA = margin.Distance(p.direction, p.index, p.LiquidationAfter)
		p.closer = p.Effect.CloserFrom(p.distB, okB, p.distA, okA)
		if p.Before.Known && p.After.Known {
			p.acctSaid = margin.Change(p.Before, p.After)
		}
	})
}

// String is the prediction as the log, the audit log and the
// notifications say it: "liquidation 55120 → 61120 (13.88% → 4.50% away),
// +0 margin, free 3000 after; account survives …", prefixed with
// "unverified: model does not fit …" where the model does not fit.
func (p *Prediction) String() string {
	before, after := p.Distances()
	s := ""
	if p.Unverified != "" {
		s = "unverified: model does not fit " + p.Unverified + "; "
	}
	s += fmt.Sprintf("liquidation %s → %s (%s → %s away)", p.LiquidationBefore, p.LiquidationAfter,
		before.Shift(2).StringFixed(2)+"%", after.Shift(2).StringFixed(2)+"%")
	if !p.MarginMoved.IsZero() {
		sign := "+"
		if p.MarginMoved.IsNegative() {
			sign = ""
		}
		s += fmt.Sprintf(", %s%s margin", sign, p.MarginMoved.Round(2))
	}
	if p.FreeKnown {
		s += fmt.Sprintf(", free balance %s after", p.FreeAfter.Round(2))
	} else {
		s += ", free balance unknown (" + p.freeWhy + ")"
	}
	for _, o := range p.others {
		s += "; " + o.String()
	}
	if p.Before.Known && p.After.Known {
		s += "; account " + p.acctSaid
	}
	if p.Stressed {
		s += "; " + p.stressSaid()
	}
	return s
}

// stressSaid is the stress grid's verdict as the log says it: the
// expected loss before → after and the likely moves that are fatal after.
func (p *Prediction) stressSaid() string {
	return fmt.Sprintf("stress: expected loss %.2f → %.2f; after: %s", p.StressBefore.Expected, p.StressAfter.Expected, p.StressAfter.Summary())
}

// Record is the prediction as an audit record carries it.
func (p *Prediction) Record() *journal.Prediction {
	before, after := p.Distances()
	r := &journal.Prediction{LiquidationBefore: p.LiquidationBefore, LiquidationAfter: p.LiquidationAfter,
		DistanceBefore: before, DistanceAfter: after, MarginMoved: p.MarginMoved}
	if p.FreeKnown {
		free := p.FreeAfter
		r.FreeAfter = &free
	}
	if p.Before.Known && p.After.Known {
		tb, ta := p.Before.Together, p.After.Together
		r.SurvivalBefore, r.SurvivalAfter = &tb, &ta
		r.Account = p.acctSaid
	}
	if p.Stressed {
		stressRecord(r, p.StressBefore, p.StressAfter)
	}
	r.Unverified = p.Unverified
	return r
}

// stressRecord puts the stress grid before and after an action into its
// audit record: the expected loss, the grid after in a line, and the loss
// at each shown move together.
func stressRecord(r *journal.Prediction, before, after margin.Stress) {
	eb, ea := decimal.NewFromFloat(before.Expected).Round(2), decimal.NewFromFloat(after.Expected).Round(2)
	r.ExpectedLossBefore, r.ExpectedLossAfter, r.Stress = &eb, &ea, after.Summary()
	r.StressLossBefore, r.StressLossAfter = roundedLosses(before.TogetherAt), roundedLosses(after.TogetherAt)
}

// roundedLosses are the grid's losses as money, to the cent.
func roundedLosses(fs []float64) []decimal.Decimal {
	out := make([]decimal.Decimal, len(fs))
	for i, f := range fs {
		out[i] = decimal.NewFromFloat(f).Round(2)
	}
	return out
}

// rulesFloor is the highest min_liquidation_distance of the rules asking
// the plan for an action of kind.
func rulesFloor(pl *Plan, kind rules.ActionKind) decimal.Decimal {
	floor := decimal.Zero
	for _, d := range pl.Due {
		if d.Rule.HasAction(kind) {
			floor = decimal.Max(floor, decimal.NewFromFloat(d.Rule.MinLiquidationDistance))
		}
	}
	return floor
}

// closerAllowed reports whether the plan's actions of kind may move a
// liquidation price closer: every rule asking for one opts in, and the
// floor is the highest of theirs.
func closerAllowed(pl *Plan, kind rules.ActionKind) (bool, decimal.Decimal) {
	floor := decimal.Zero
	asked := false
	for _, d := range pl.Due {
		for _, a := range d.Rule.Actions {
			if a.Kind != kind {
				continue
			}
			asked = true
			if !d.Rule.AllowCloserLiquidation {
				return false, floor
			}
			floor = decimal.Max(floor, decimal.NewFromFloat(d.Rule.MinLiquidationDistance))
		}
	}
	return asked, floor
}

// MoneySig identifies the account's money as the model has it: each
// position's quantity, leverage, mode and margin (sig), and the free
// balance (free, when inferred: ok). A rule whose call was skipped as
// unfunded, bounded or harmful decides again when either changes (money
// added, a position closed by hand), not only after its cooldown. ok is
// false when the free balance is unknown: then nothing tells that money
// was added.
func (v *Model) MoneySig() (sig uint64, free float64, ok bool) {
	if v == nil || !v.FreeKnown {
		return 0, 0, false
	}
	h := fnv.New64a()
	for _, p := range v.Acct.Positions {
		fmt.Fprintf(h, "|%s %s %s %d %t %s", p.Symbol, p.Direction, p.Quantity, p.Leverage, p.Cross, p.Margin().Round(2))
	}
	return h.Sum64(), v.Acct.Free.InexactFloat64(), true
}

// MoneyMoved reports whether the free balance moved from was to now by
// more than the inference's noise: 1% of it, and at least one unit.
func MoneyMoved(was, now float64) bool {
	return math.Abs(now-was) > math.Max(0.01*math.Abs(was), 1)
}
