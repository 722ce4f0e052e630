package margin

import (
	"math"
	"math/bits"

	"github.com/shopspring/decimal"
)

// Float is d as a float64: the nearest one (ties to even), as
// d.InexactFloat64() gives it, at a fraction of its cost. It is the one
// conversion of the model's decimals to floats: the engine's view converts
// a position's figures with it, so the floats it holds are the ones the
// grid would work out from the same decimals (Account.PricedFrom reads
// them), bit for bit.
func Float(d decimal.Decimal) float64 { return floatOf(d) }

// floatOf is d.InexactFloat64(), the nearest float64 to d (ties to even),
// worked out on its coefficient where it fits an int64 (nearestFloat):
// decimal.Decimal converts through math/big's Rat, a few allocations and
// a division in math/big per figure, and the margin arithmetic reads
// hundreds of figures a prediction.
func floatOf(d decimal.Decimal) float64 {
	if d.NumDigits() > 18 {
		return d.InexactFloat64()
	}
	v, e := d.CoefficientInt64(), d.Exponent()
	if e <= 0 && e > -int32(len(pow10f)) && v >= -1<<53 && v <= 1<<53 {
		return float64(v) / pow10f[-e] // both exact: one correctly rounded division
	}
	if f, ok := nearestFloat(v, e); ok {
		return f
	}
	return d.InexactFloat64()
}

// nearestFloat is v·10^e rounded to the nearest float64, ties to even, as
// math/big rounds it; ok is false when it is not worked out here (an
// exponent out of −19..22, a product over an int64).
func nearestFloat(v int64, e int32) (float64, bool) {
	switch {
	case v == 0:
		return 0, true
	case v == math.MinInt64:
		return 0, false
	case e == 0:
		return float64(v), true // one correctly rounded conversion
	case v >= -1<<53 && v <= 1<<53 && e < 0 && -e < int32(len(pow10f)):
		// Both exact: one correctly rounded division.
		return float64(v) / pow10f[-e], true
	case v >= -1<<53 && v <= 1<<53 && e > 0 && e < int32(len(pow10f)):
		return float64(v) * pow10f[e], true
	case e > 0:
		if e >= int32(len(pow10u)) {
			return 0, false
		}
		hi, lo := bits.Mul64(magnitude(v), pow10u[e])
		if hi != 0 || lo > math.MaxInt64 {
			return 0, false
		}
		if v < 0 {
			return -float64(int64(lo)), true
		}
		return float64(int64(lo)), true
	case -e >= int32(len(pow10u)):
		return 0, false
	}
	f := quotientFloat(magnitude(v), pow10u[-e])
	if v < 0 {
		f = -f
	}
	return f, true
}

// quotientFloat is m/d rounded to the nearest float64, ties to even, for
// m > 0 and d > 1: the quotient is taken to 62–64 bits in one 128-bit
// division, and its last bits and the remainder decide the rounding.
func quotientFloat(m, d uint64) float64 {
	// n = m·2^s, with s such that 2^62 ≤ n/d < 2^64 (so n's high word is
	// under d, as bits.Div64 needs).
	s := uint(63 - bits.Len64(m) + bits.Len64(d))
	var hi, lo uint64
	if s >= 64 {
		hi = m << (s - 64)
	} else {
		hi, lo = m>>(64-s), m<<s
	}
	q, r := bits.Div64(hi, lo, d)
	shift := uint(bits.Len64(q) - 53) // 10 or 11 bits below the 53 kept
	mant, rest := q>>shift, q&(1<<shift-1)
	half := uint64(1) << (shift - 1)
	if rest > half || rest == half && (r != 0 || mant&1 == 1) {
		mant++ // 2^53 at most: still exact
	}
	return math.Ldexp(float64(mant), int(shift)-int(s))
}
