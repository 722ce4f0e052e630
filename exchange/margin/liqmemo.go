package margin

import "github.com/shopspring/decimal"

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
