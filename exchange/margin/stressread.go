package margin

import (
	"github.com/riskguard/riskguard/exchange"
	"github.com/shopspring/decimal"
)

// The grid reads each position's entry value, margin and maintenance as
// float64s, the value the decimal figure (EntryValue, Margin,
// Maintenance) rounds to. Worked out in decimals they cost a
// multiplication and a division in math/big per position, most of the
// grid's time on a large account; here they are worked out on the
// coefficients (fixed, u128) where they fit, and converted as
// decimal.Decimal.Float64 converts (both round the exact value to the
// nearest float64, so the two agree), the decimal path kept for the rest.

// exactFloat is v·10^e as the nearest float64, ok false when it cannot
// be had from one correctly rounded operation on exact operands.
func exactFloat(v int64, e int32) (float64, bool) {
	if v < -1<<53 || v > 1<<53 {
		return 0, false
	}
	switch {
	case e <= 0 && -e < int32(len(pow10f)):
		return float64(v) / pow10f[-e], true
	case e > 0 && e < int32(len(pow10f)):
		return float64(v) * pow10f[e], true
	}
	return 0, false
}

// fixedFloat is f as a float64 through exactFloat; ok false when f is
// not known (!known) or exactFloat cannot say.
func fixedFloat(f fixed, known bool) (float64, bool) {
	if !known {
		return 0, false
	}
	return exactFloat(f.v, f.e)
}

// stressFigures are p's entry value, margin and maintenance as float64s:
// toF(p.EntryValue()), toF(p.Margin()), toF(p.Maintenance()); q, qOK are
// toFixed(p.Quantity).
func (p *Position) stressFigures(q fixed, qOK bool) (ev, margin, mm float64) {
	var evF fixed
	evOK := false
	if p.Value.IsZero() {
		e, ok := toFixed(p.Entry)
		if qOK && ok {
			evF, evOK = q.mul(e)
		}
	} else {
		evF, evOK = toFixed(p.Value)
	}
	var ok bool
	if ev, ok = fixedFloat(evF, evOK); !ok {
		ev = toF(p.EntryValue())
	}
	if !p.Held.IsZero() {
		margin = toF(p.Held)
	} else if margin, ok = fixedFloat(marginFixed(evF, evOK, p.Leverage)); !ok {
		margin = toF(p.Margin())
	}
	switch {
	case !p.MM.IsZero():
		mm = toF(p.MM)
	case evOK && !p.RiskLimit.RiskLimitStep.IsPositive():
		// A flat rate: MaintenanceRate is the risk limit's rate.
		r, ok := toFixed(p.RiskLimit.MaintenanceMarginRate)
		var m fixed
		if ok {
			m, ok = r.mul(evF)
		}
		if mm, ok = fixedFloat(m, ok); !ok {
			mm = toF(p.Maintenance())
		}
	default:
		mm = toF(p.Maintenance())
	}
	return ev, margin, mm
}

// marginFixed is Margin(ev, leverage) on the coefficients: ev/leverage
// rounded half away from zero to 8 places (DivRound's rounding), for a
// positive ev; ok false when it does not fit.
func marginFixed(ev fixed, ok bool, leverage int) (fixed, bool) {
	if !ok || ev.v <= 0 {
		return fixed{}, false
	}
	lev := uint64(max(leverage, 1))
	var n u128
	d := lev
	if k := int64(ev.e) + 8; k >= 0 {
		if n, ok = scaled(uint64(ev.v), k); !ok {
			return fixed{}, false
		}
	} else {
		// ev has more than 8 places: divide by leverage·10^(−k).
		if -k >= int64(len(pow10u)) {
			return fixed{}, false
		}
		p := pow10u[-k]
		if lev > ^uint64(0)/p {
			return fixed{}, false
		}
		n, d = u128{lo: uint64(ev.v)}, lev*p
	}
	q, ok := divRound(n, d)
	if !ok || q.hi != 0 || q.lo > 1<<62 {
		return fixed{}, false
	}
	return fixed{int64(q.lo), -8}, true
}

// StressMemo keeps the grid's reading of an account's positions from one
// read to the next, by place in the account: each position's figures as
// float64s with the decimals they came from. A decimal is an immutable
// value, so one that is the same as the memo's (==: the same coefficient,
// by pointer, and exponent) has the same float64, and a position whose
// decimals are all the same ones is not converted again; one whose index
// or liquidation price alone moved converts those two. The memo holds the
// decimals, so their coefficients cannot be reused for other numbers
// while it compares with them. It pays where an account is read again
// with the same decimals (the simulated exchange's positions in a replay,
// a candidate's account after a call, which shares all but one position
// with the account before); a freshly decoded answer costs a comparison
// per figure more than reading it afresh. One owner reads one account at
// a time through it; the zero value is ready.
type StressMemo struct {
	at  []memoPos
	gen uint64 // the reads begun
}

// memoPos is one place's reading and what it was read from.
type memoPos struct {
	quantity, entry, value, held, mm decimal.Decimal
	rl                               exchange.RiskLimit // compared on the fields MaintenanceRate reads
	leverage                         int
	index, liq                       decimal.Decimal
	ok                               bool // a reading is kept
	// symbol is the position's symbol and sym its place in the book's
	// symbols at read gen.
	symbol               string
	sym                  int
	gen                  uint64
	q, ev, margin, maint float64
	indexF, liqF         float64
}

// Priced reads the account for the grid and the forfeit as Account.Priced
// does, through the memo: the same floats as reading it afresh.
func (m *StressMemo) Priced(a Account, sigma func(symbol string) float64, liqs []decimal.Decimal) *Priced {
	if liqs == nil {
		liqs = a.LiquidationPrices()
	}
	b, ok := a.stressBookWith(m, sigma, liqs)
	return &Priced{b: b, ok: ok}
}

// begin begins a read through the memo; false for none.
func (m *StressMemo) begin() bool {
	if m == nil {
		return false
	}
	m.gen++
	return true
}

// sameAt reports whether place i is as it was at the memo's last read:
// open and on symbol then as now, or closed (not read) then as now.
func (m *StressMemo) sameAt(i int, open bool, symbol string) bool {
	if i >= len(m.at) {
		return !open
	}
	e := &m.at[i]
	if wasRead := e.ok && e.gen == m.gen-1; wasRead != open {
		return false
	}
	return !open || e.symbol == symbol
}

// read is readStressPos through the memo.
func (m *StressMemo) read(sp *stressPos, p *Position, liq decimal.Decimal, j, i int) bool {
	if i >= len(m.at) {
		m.at = append(m.at, make([]memoPos, i+1-len(m.at))...)
	}
	e := &m.at[i]
	rl := &p.RiskLimit // the fields MaintenanceRate reads
	if !e.ok || e.quantity != p.Quantity || e.entry != p.Entry || e.value != p.Value || e.held != p.Held ||
		e.mm != p.MM || e.leverage != p.Leverage || e.rl.MaintenanceMarginRate != rl.MaintenanceMarginRate ||
		e.rl.RiskLimitStep != rl.RiskLimitStep || e.rl.RiskLimitBase != rl.RiskLimitBase ||
		e.rl.MarginRateStep != rl.MarginRateStep || e.rl.MaxRiskLimitSteps != rl.MaxRiskLimitSteps {
		if !readStressPos(sp, p, liq, j, i) {
			e.ok = false
			return false
		}
		*e = memoPos{quantity: p.Quantity, entry: p.Entry, value: p.Value, held: p.Held, mm: p.MM, rl: *rl,
			leverage: p.Leverage, index: p.Index, liq: liq, ok: true, symbol: p.Symbol, sym: j, gen: m.gen,
			q: sp.q, ev: sp.ev, margin: sp.margin, maint: sp.mm, indexF: sp.index, liqF: sp.liq}
		return true
	}
	e.symbol, e.sym, e.gen = p.Symbol, j, m.gen
	if e.index != p.Index {
		e.index, e.indexF = p.Index, toF(p.Index)
	}
	if e.liq != liq {
		e.liq, e.liqF = liq, toF(liq)
	}
	sp.long, sp.q, sp.index, sp.liq, sp.cross, sp.sym, sp.at = p.Direction != exchange.Short, e.q, e.indexF, e.liqF, p.Cross, j, i
	sp.ev, sp.margin, sp.mm = e.ev, e.margin, e.maint
	sp.pnlNow = sp.pnl(sp.index)
	sp.equity = sp.margin + sp.pnlNow
	return finite(sp.q*0 + sp.index*0 + sp.liq*0 + sp.equity*0 + sp.mm*0)
}
