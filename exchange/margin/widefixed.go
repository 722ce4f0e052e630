package margin

import (
	"math"
	"math/big"
	"math/bits"

	"github.com/shopspring/decimal"
)

// wide is fixed with a 128-bit coefficient, (hi·2^64 + lo)·10^e in two's
// complement: the sums of an account's figures where they outgrow an
// int64. Margins held to 16 places (EV/leverage, as a caller computes
// them) are coefficients near 10^18 each, and a pool of a hundred of them
// sums past int64; in 128 bits it sums as decimal.Decimal's Add, Sub and
// Mul give it, value and exponent, without math/big. ok is false once a
// result would not fit, and the caller then computes in decimals.
type wide struct {
	hi int64
	lo uint64
	e  int32
}

// negative reports whether w is below 0.
func (w wide) negative() bool { return w.hi < 0 }

// magnitude is |w|, for w above the least 128-bit integer.
func (w wide) magnitude() u128 {
	if !w.negative() {
		return u128{uint64(w.hi), w.lo}
	}
	lo, b := bits.Sub64(0, w.lo, 0)
	hi, _ := bits.Sub64(0, uint64(w.hi), b)
	return u128{hi, lo}
}

// signed is the wide of magnitude m, negated when neg; ok false when it
// does not fit.
func signed(m u128, neg bool, e int32) (wide, bool) {
	if m.hi > math.MaxInt64 {
		return wide{}, false
	}
	w := wide{hi: int64(m.hi), lo: m.lo, e: e}
	if neg {
		lo, b := bits.Sub64(0, m.lo, 0)
		hi, _ := bits.Sub64(0, m.hi, b)
		w.hi, w.lo = int64(hi), lo
	}
	return w, true
}

// rescale is w written with the smaller exponent e.
func (w wide) rescale(e int32) (wide, bool) {
	if e > w.e {
		return wide{}, false
	}
	m := w.magnitude()
	for k := int64(w.e) - int64(e); k > 0; {
		step := min(k, 19)
		var ok bool
		if m, ok = m.mul(pow10u[step]); !ok {
			return wide{}, false
		}
		k -= step
	}
	return signed(m, w.negative(), e)
}

// add is a + b, as decimal.Decimal.Add gives it.
func (a wide) add(b wide) (wide, bool) {
	var ok bool
	switch {
	case a.e < b.e:
		if b, ok = b.rescale(a.e); !ok {
			return wide{}, false
		}
	case a.e > b.e:
		if a, ok = a.rescale(b.e); !ok {
			return wide{}, false
		}
	}
	lo, c := bits.Add64(a.lo, b.lo, 0)
	hi := a.hi + b.hi + int64(c)
	if a.negative() == b.negative() && (hi < 0) != a.negative() {
		return wide{}, false
	}
	return wide{hi, lo, a.e}, true
}

// sub is a − b, as decimal.Decimal.Sub gives it.
func (a wide) sub(b wide) (wide, bool) {
	nb, ok := signed(b.magnitude(), !b.negative(), b.e)
	if !ok {
		return wide{}, false
	}
	return a.add(nb)
}

// wideFrom is d as a wide, ok false when its coefficient has more than
// 19 digits. A coefficient under 10^19 is under 2^64, so its low word
// (decimal.Decimal.CoefficientInt64, negated for a negative d) is all of
// it: 19 digits fit where fixed stops at 18 (100 held to 16 places is
// 10^18·10^-16, 19 digits).
func wideFrom(d decimal.Decimal) (wide, bool) {
	n := d.NumDigits()
	if n > 19 {
		return wide{}, false
	}
	v := d.CoefficientInt64()
	if n <= 18 { // an int64: its own sign
		w := wide{lo: uint64(v), e: d.Exponent()}
		if v < 0 {
			w.hi = -1
		}
		return w, true
	}
	neg := d.IsNegative()
	m := uint64(v)
	if neg {
		m = uint64(-v)
	}
	return signed(u128{lo: m}, neg, d.Exponent())
}

// mul is a·b, as decimal.Decimal.Mul gives it, for a and b whose
// magnitudes fit 64 bits (as wideFrom gives them).
func (a wide) mul(b wide) (wide, bool) {
	e := int64(a.e) + int64(b.e)
	ma, mb := a.magnitude(), b.magnitude()
	if e > math.MaxInt32 || e < math.MinInt32 || ma.hi != 0 || mb.hi != 0 {
		return wide{}, false
	}
	hi, lo := bits.Mul64(ma.lo, mb.lo)
	return signed(u128{hi, lo}, a.negative() != b.negative(), int32(e))
}

// dec is w as a decimal.
func (w wide) dec() decimal.Decimal {
	if w.fitsInt64() {
		return decimal.New(int64(w.lo), w.e)
	}
	m := w.magnitude()
	b := new(big.Int).SetUint64(m.hi)
	b.Lsh(b, 64).Or(b, new(big.Int).SetUint64(m.lo))
	if w.negative() {
		b.Neg(b)
	}
	return decimal.NewFromBigInt(b, w.e)
}

// float is w as a float64, within a few units of float64's rounding.
func (w wide) float() float64 {
	m := w.magnitude()
	x := float64(m.hi)*0x1p64 + float64(m.lo)
	if w.negative() {
		x = -x
	}
	switch e := int(w.e); {
	case e >= 0 && e < len(pow10f):
		return x * pow10f[e]
	case e < 0 && -e < len(pow10f):
		return x / pow10f[-e]
	default:
		return x * math.Pow(10, float64(e))
	}
}

// positive reports whether w is above 0.
func (w wide) positive() bool { return w.hi > 0 || w.hi == 0 && w.lo != 0 }

// fitsInt64 reports whether w's coefficient fits an int64 (w is a fixed).
func (w wide) fitsInt64() bool {
	return w.hi == 0 && w.lo <= math.MaxInt64 || w.hi == -1 && w.lo > math.MaxInt64
}
