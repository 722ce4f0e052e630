package margin

import (
	"math"
	"math/bits"

	"github.com/riskguard/riskguard/exchange"
	"github.com/shopspring/decimal"
)

// u128 is an unsigned 128-bit integer: what liquidationPriceWide and
// distance16 need to hold a price at 16 decimal places.
type u128 struct{ hi, lo uint64 }

// mul is x·m, ok false when it does not fit.
func (x u128) mul(m uint64) (u128, bool) {
	h1, l1 := bits.Mul64(x.lo, m)
	h2, l2 := bits.Mul64(x.hi, m)
	hi, c := bits.Add64(h1, l2, 0)
	return u128{hi, l1}, h2 == 0 && c == 0
}

// add is x + y, ok false when it does not fit.
func (x u128) add(y u128) (u128, bool) {
	lo, c := bits.Add64(x.lo, y.lo, 0)
	hi, c2 := bits.Add64(x.hi, y.hi, c)
	return u128{hi, lo}, c2 == 0
}

// sub is x − y for x ≥ y.
func (x u128) sub(y u128) u128 {
	lo, b := bits.Sub64(x.lo, y.lo, 0)
	hi, _ := bits.Sub64(x.hi, y.hi, b)
	return u128{hi, lo}
}

// less reports whether x < y.
func (x u128) less(y u128) bool { return x.hi < y.hi || x.hi == y.hi && x.lo < y.lo }

// divmod is x / d and x mod d, for d > 0.
func (x u128) divmod(d uint64) (u128, uint64) {
	qh, r := x.hi/d, x.hi%d
	ql, rem := bits.Div64(r, x.lo, d)
	return u128{qh, ql}, rem
}

// scaled is v·10^k, ok false when it does not fit.
func scaled(v uint64, k int64) (u128, bool) {
	x := u128{lo: v}
	for k > 0 {
		step := min(k, 19)
		var ok bool
		if x, ok = x.mul(pow10u[step]); !ok {
			return u128{}, false
		}
		k -= step
	}
	return x, true
}

// magnitude is |v| as a uint64.
func magnitude(v int64) uint64 {
	if v < 0 {
		return uint64(-(v + 1)) + 1
	}
	return uint64(v)
}

// divRound is the magnitude of n/d rounded half away from zero to an
// integer, for d > 0 (decimal.Decimal.DivRound's rounding).
func divRound(n u128, d uint64) (u128, bool) {
	q, r := n.divmod(d)
	if r >= d-r {
		return q.add(u128{lo: 1})
	}
	return q, true
}

// liquidationPriceWide is LiquidationPrice in integers, for the prices
// float64 cannot decide (on a tick or next to one, where the decimal
// formula would otherwise run): the same figures as liquidationPriceExact,
// value and exponent, computed at its 16 decimal places in 128 bits; ok is
// false when a figure does not fit (a coefficient over 18 digits, an entry
// price with more than 16 places, a scale over 16).
func liquidationPriceWide(direction string, q, entry, collateral, mmr decimal.Decimal, scale int32) (decimal.Decimal, bool) {
	if scale < 0 || scale > 16 {
		return decimal.Decimal{}, false
	}
	qf, ok1 := toFixed(q)
	ef, ok2 := toFixed(entry)
	cf, ok3 := toFixed(collateral)
	mf, ok4 := toFixed(mmr)
	if !ok1 || !ok2 || !ok3 || !ok4 || qf.v <= 0 || ef.e < -16 {
		return decimal.Decimal{}, false
	}
	ev, ok := qf.mul(ef)
	var need, num fixed
	if ok {
		need, ok = mf.mul(ev)
	}
	if ok {
		num, ok = cf.sub(need)
	}
	if !ok {
		return decimal.Decimal{}, false
	}
	// The buffer num/q rounded half away from zero to 16 places, as
	// DivRound gives it: b·10⁻¹⁶, negative when num is.
	var b u128
	switch k := int64(num.e) - int64(qf.e) + 16; {
	case k >= 0:
		n, ok := scaled(magnitude(num.v), k)
		if !ok {
			return decimal.Decimal{}, false
		}
		if b, ok = divRound(n, uint64(qf.v)); !ok {
			return decimal.Decimal{}, false
		}
	default:
		d, ok := scaled(uint64(qf.v), -k)
		if !ok || d.hi != 0 {
			return decimal.Decimal{}, false
		}
		if b, ok = divRound(u128{lo: magnitude(num.v)}, d.lo); !ok {
			return decimal.Decimal{}, false
		}
	}
	bNeg := num.v < 0
	// The entry price at 16 places, and the price entry ∓ buffer there.
	e, ok := scaled(magnitude(ef.v), int64(ef.e)+16)
	if !ok {
		return decimal.Decimal{}, false
	}
	eNeg := ef.v < 0
	// A long's price is entry − buffer, a short's entry + buffer: add e
	// and ±b in sign and magnitude.
	if direction != exchange.Short {
		bNeg = !bNeg
	}
	var l u128
	var lNeg bool
	switch {
	case eNeg == bNeg:
		if l, ok = e.add(b); !ok {
			return decimal.Decimal{}, false
		}
		lNeg = eNeg
	case b.less(e):
		l, lNeg = e.sub(b), eNeg
	default:
		l, lNeg = b.sub(e), bNeg
	}
	// Rounded to scale places towards the entry price: a long's up
	// (RoundCeil), a short's down (RoundFloor).
	t, rem := l.divmod(pow10u[16-scale])
	if t.hi != 0 || t.lo > math.MaxInt64 {
		return decimal.Decimal{}, false
	}
	n := int64(t.lo)
	if lNeg {
		n = -n
	}
	if rem != 0 {
		switch {
		case direction != exchange.Short && !lNeg:
			n++
		case direction == exchange.Short && lNeg:
			n--
		}
	}
	if n < 0 {
		return decimal.Zero, true
	}
	return decimal.New(n, -scale), true
}
