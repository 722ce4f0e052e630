package margin

import (
	"slices"

	"github.com/riskguard/riskguard/exchange"
	"github.com/shopspring/decimal"
)

// Liquidations remembers isolated positions' liquidation prices from one
// account to the next. An isolated position's depends on its own fields
// alone — not its index, not the free balance — so a guard that builds
// its account afresh every tick prices a steady position once, not at
// every tick it predicts a call (a position on a tick takes the decimal
// path every time). A nil *Liquidations remembers nothing. It is not safe
// for concurrent use: its owner is the tick.
//
// Each position keeps its two latest distinct inputs: a prediction prices
// the position as it is and as a settings call would leave it, tick after
// tick while a rule keeps asking (a dry run, or a call the bounds hold
// back), and one slot would have the two evict each other every time.
type Liquidations struct {
	by map[liqKey]*[2]liqEntry // the latest first
	// held is the owner's account's positions while its places hold
	// (Hold), and place their prices by place, once priced: a position
	// of held is looked up by its place, not its symbol, nor compared.
	held  []Position
	place []heldLiq
}

// heldLiq is a place's liquidation price, once priced (set), and what a
// settings call that keeps its position isolated would do, by the
// leverage after (heldAfter: Account.IsolatedEffect), once worked out.
type heldLiq struct {
	liq   decimal.Decimal
	f     float64 // liq's float (toF), the grid's figure
	set   bool
	after []leverageLiq
}

// leverageLiq is a liquidation price after a call to leverage, and the
// margin the call moves and the free balance after it from free (once
// effK): IsolatedEffect's.
type leverageLiq struct {
	leverage               int
	liq                    decimal.Decimal
	free, moved, freeAfter decimal.Decimal
	effK                   bool
	// The position after's figures for the grid but for its index
	// (readStressPos's), read from liq and a maintenance margin of mm,
	// once figK.
	mm                       decimal.Decimal
	q, liqF, ev, margin, mmF float64
	figK                     bool
}

// readHeldAfter is readStressPos of np, position i of a after a call that
// keeps it isolated (IsolatedEffect's with l, its price after liq),
// reading its figures but for its index from what a held place remembers
// of that call, and remembering them there the first time.
func (l *Liquidations) readHeldAfter(sp *stressPos, a Account, np *Position, liq decimal.Decimal, i int) bool {
	var e *leverageLiq
	if !np.Cross && np.Held.IsZero() && l.holds(a) {
		for k := range l.place[i].after {
			if f := &l.place[i].after[k]; f.leverage == np.Leverage && f.effK && SameDec(f.liq, liq) {
				e = f
				break
			}
		}
	}
	if e == nil || !e.figK || !SameDec(e.mm, np.MM) {
		ok := readStressPos(sp, np, liq, sp.sym, i)
		if e != nil && ok {
			e.mm, e.q, e.liqF, e.ev, e.margin, e.mmF, e.figK = np.MM, sp.q, sp.liq, sp.ev, sp.margin, sp.mm, true
		}
		return ok
	}
	// readStressPos, the figures but the index's remembered.
	sp.long, sp.q, sp.index, sp.liq, sp.cross, sp.at = np.Direction != exchange.Short, e.q, toF(np.Index), e.liqF, false, i
	sp.ev, sp.margin, sp.mm = e.ev, e.margin, e.mmF
	sp.pnlNow = sp.pnl(sp.index)
	sp.equity = sp.margin + sp.pnlNow
	return finite(sp.q*0 + sp.index*0 + sp.liq*0 + sp.equity*0 + sp.mm*0)
}

// maxHeldAfter bounds the leverages a place remembers its prices after.
const maxHeldAfter = 16

// holds reports whether a is the held account (Hold).
func (l *Liquidations) holds(a Account) bool {
	return l != nil && l.held != nil && len(a.Positions) == len(l.held) && &a.Positions[0] == &l.held[0]
}

// heldAfter is what the held place i of a remembers of a call to
// leverage that keeps its open isolated position isolated, made when
// there is room; nil when a is not held or there is none.
func (l *Liquidations) heldAfter(a Account, i, leverage int) *leverageLiq {
	if !l.holds(a) {
		return nil
	}
	pl := &l.place[i]
	for k := range pl.after {
		if e := &pl.after[k]; e.leverage == leverage {
			return e
		}
	}
	if len(pl.after) == maxHeldAfter {
		return nil
	}
	pl.after = append(pl.after, leverageLiq{leverage: leverage})
	return &pl.after[len(pl.after)-1]
}

type liqKey struct{ symbol, direction string }

type liqEntry struct {
	p   Position // the inputs it was priced from
	liq decimal.Decimal
	set bool
}

// Of is a.LiquidationPrice(i), remembered for an open isolated position:
// the same position (every field the price reads equal, decimals in value
// and exponent, its index aside) is not priced again.
func (l *Liquidations) Of(a Account, i int) decimal.Decimal {
	p := &a.Positions[i]
	if l == nil || p.Cross || !p.Open() {
		return a.LiquidationPrice(i)
	}
	held := l.holds(a)
	if held && l.place[i].set {
		return l.place[i].liq
	}
	liq := l.of(a, i, p)
	if held {
		l.place[i].liq, l.place[i].f, l.place[i].set = liq, toF(liq), true
	}
	return liq
}

// ofFloat is Of of the open isolated position i and its float (toF):
// a held place's, remembered with it.
func (l *Liquidations) ofFloat(a Account, i int) (decimal.Decimal, float64) {
	liq := l.Of(a, i)
	if l.holds(a) && l.place[i].set {
		return liq, l.place[i].f
	}
	return liq, toF(liq)
}

// of is Of of the open isolated position p = &a.Positions[i], by its
// symbol and direction.
func (l *Liquidations) of(a Account, i int, p *Position) decimal.Decimal {
	k := liqKey{p.Symbol, p.Direction}
	es := l.by[k]
	if es != nil {
		for j := range es {
			if e := &es[j]; e.set && SameButIndex(&e.p, p) && SameDec(e.p.Held, p.Held) {
				if j == 1 {
					es[0], es[1] = es[1], es[0]
				}
				return es[0].liq
			}
		}
	}
	liq := a.LiquidationPrice(i)
	if es == nil {
		if l.by == nil {
			l.by = map[liqKey]*[2]liqEntry{}
		}
		es = new([2]liqEntry)
		l.by[k] = es
	}
	es[1], es[0] = es[0], liqEntry{p: *p, liq: liq, set: true}
	return liq
}

// Hold tells l that the owner's account, whose positions are ps, is the
// last Hold's with every position the same but for its index (same: the
// same places, each every field the price reads the same copy, as a view
// steady since says them, market.View.Steady): the prices of its places
// remembered then hold, each read by its place. Otherwise (same false, or
// ps another list) they are let go, and ps's places remembered from
// here. ps must not be written until the next Hold but through it: a
// list reused from tick to tick is handed to Hold each time it is
// written again.
func (l *Liquidations) Hold(ps []Position, same bool) {
	if l == nil {
		return
	}
	if !same || len(ps) != len(l.held) || len(ps) > 0 && &ps[0] != &l.held[0] {
		l.place = slices.Grow(l.place[:0], len(ps))[:len(ps)]
		for k := range l.place {
			l.place[k] = heldLiq{after: l.place[k].after[:0]} // its list's array kept
		}
	}
	l.held = ps
	if len(ps) == 0 {
		l.held = nil
	}
}

// Forget drops what is remembered of the positions not in keep (by
// symbol), so that the memory stays as large as the account.
func (l *Liquidations) Forget(keep map[string]int) {
	if l == nil {
		return
	}
	for k := range l.by {
		if _, ok := keep[k.symbol]; !ok {
			delete(l.by, k)
		}
	}
}
