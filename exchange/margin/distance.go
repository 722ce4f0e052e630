package margin

import (
	"math"
	"math/bits"

	"github.com/shopspring/decimal"
)

// pow10u holds the powers of ten that fit a uint64.
var pow10u = [...]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19}

// distance16 is index.Sub(liq).DivRound(index, 16) for a positive index,
// computed on the coefficients in 128-bit integer arithmetic when they and
// the quotient fit (every price a guard sees): the same value and
// exponent, rounded half away from zero as DivRound rounds, without
// math/big. ok is false when they do not fit.
func distance16(index, liq decimal.Decimal) (decimal.Decimal, bool) {
	return distance16Signed(index, liq, false)
}

// distance16Signed is distance16, negated when neg (Neg's value and
// exponent: a short's distance), without a second decimal.
func distance16Signed(index, liq decimal.Decimal, neg bool) (decimal.Decimal, bool) {
	if index.NumDigits() > 18 || liq.NumDigits() > 18 {
		return decimal.Decimal{}, false
	}
	ei, el := index.Exponent(), liq.Exponent()
	ci, cl := index.CoefficientInt64(), liq.CoefficientInt64()
	if ci <= 0 {
		return decimal.Decimal{}, false
	}
	// Both on the smaller exponent e, each under 2^62 so that their
	// difference fits.
	e := min(ei, el)
	si, ok1 := scaleUp(ci, ei-e)
	sl, ok2 := scaleUp(cl, el-e)
	if !ok1 || !ok2 {
		return decimal.Decimal{}, false
	}
	n := si - sl
	// (index − liq)/index · 10^16 = n·10^(16 + e − ei) / ci.
	k := 16 + int(e) - int(ei)
	if k < 0 || k > 19 {
		return decimal.Decimal{}, false
	}
	un, _ := scaled(magnitude(n), int64(k)) // under 2^62 · 10^19: it fits
	q, ok := divRound(un, uint64(ci))       // half away from zero, as DivRound
	if !ok || q.hi != 0 || q.lo > math.MaxInt64 {
		return decimal.Decimal{}, false // the quotient would not fit
	}
	c := int64(q.lo)
	if (n < 0) != neg {
		c = -c
	}
	return decimal.New(c, -16), true
}

// scaleUp is c·10^k when it stays under 2^62 in magnitude.
func scaleUp(c int64, k int32) (int64, bool) {
	if k < 0 || k > 18 {
		return 0, false
	}
	u := uint64(c)
	if c < 0 {
		u = uint64(-c)
	}
	hi, lo := bits.Mul64(u, pow10u[k])
	if hi != 0 || lo >= 1<<62 {
		return 0, false
	}
	if c < 0 {
		return -int64(lo), true
	}
	return int64(lo), true
}
