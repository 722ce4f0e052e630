package margin

import (
	"math"
	"math/bits"

	"github.com/shopspring/decimal"
)

// fixed is a decimal whose coefficient fits an int64: v·10^e. Its add,
// sub and mul give decimal.Decimal's Add, Sub and Mul, value and exponent
// (a sum takes the smaller exponent, a product the sum of both), without
// math/big; ok is false once a result would not fit, and the caller then
// computes in decimals.
type fixed struct {
	v int64
	e int32
}

// toFixed is d as a fixed, ok false when its coefficient has more than 18
// digits.
func toFixed(d decimal.Decimal) (fixed, bool) {
	if d.NumDigits() > 18 {
		return fixed{}, false
	}
	return fixed{d.CoefficientInt64(), d.Exponent()}, true
}

// float is f as a float64, within a few units of float64's rounding.
func (f fixed) float() float64 {
	x := float64(f.v)
	switch e := int(f.e); {
	case e > 0 && e < len(pow10f):
		return x * pow10f[e]
	case e < 0 && -e < len(pow10f):
		return x / pow10f[-e]
	default:
		return x * math.Pow(10, float64(e))
	}
}

// dec is f as a decimal.
func (f fixed) dec() decimal.Decimal { return decimal.New(f.v, f.e) }

// rescale is f written with the smaller exponent e.
func (f fixed) rescale(e int32) (fixed, bool) {
	if e > f.e || f.e-e > 18 {
		return fixed{}, false
	}
	for ; f.e > e; f.e-- {
		if f.v > math.MaxInt64/10 || f.v < math.MinInt64/10 {
			return fixed{}, false
		}
		f.v *= 10
	}
	return f, true
}

// add is a + b, as decimal.Decimal.Add gives it.
func (a fixed) add(b fixed) (fixed, bool) {
	var ok bool
	switch {
	case a.e < b.e:
		if b, ok = b.rescale(a.e); !ok {
			return fixed{}, false
		}
	case a.e > b.e:
		if a, ok = a.rescale(b.e); !ok {
			return fixed{}, false
		}
	}
	s := a.v + b.v
	if (a.v > 0 && b.v > 0 && s < 0) || (a.v < 0 && b.v < 0 && s >= 0) {
		return fixed{}, false
	}
	return fixed{s, a.e}, true
}

// sub is a − b, as decimal.Decimal.Sub gives it.
func (a fixed) sub(b fixed) (fixed, bool) {
	if b.v == math.MinInt64 {
		return fixed{}, false
	}
	return a.add(fixed{-b.v, b.e})
}

// neg is −f, as decimal.Decimal.Neg gives it (the same exponent).
func (f fixed) neg() (fixed, bool) {
	if f.v == math.MinInt64 {
		return fixed{}, false
	}
	return fixed{-f.v, f.e}, true
}

// mul is a·b, as decimal.Decimal.Mul gives it.
func (a fixed) mul(b fixed) (fixed, bool) {
	e := int64(a.e) + int64(b.e)
	if e > math.MaxInt32 || e < math.MinInt32 || a.v == math.MinInt64 || b.v == math.MinInt64 {
		return fixed{}, false
	}
	x, y := a.v, b.v
	neg := (x < 0) != (y < 0)
	if x < 0 {
		x = -x
	}
	if y < 0 {
		y = -y
	}
	hi, lo := bits.Mul64(uint64(x), uint64(y))
	if hi != 0 || lo > math.MaxInt64 {
		return fixed{}, false
	}
	p := int64(lo)
	if neg {
		p = -p
	}
	return fixed{p, int32(e)}, true
}

// round is f rounded half away from zero to places decimal places, as
// decimal.Decimal.Round gives it: truncated to places+1, ±5, truncated.
func (f fixed) round(places int32) (fixed, bool) {
	if f.e == -places {
		return f, true
	}
	e := -places - 1
	switch {
	case f.e > e:
		var ok bool
		if f, ok = f.rescale(e); !ok {
			return fixed{}, false
		}
	case f.e < e:
		k := int64(e) - int64(f.e)
		if k > 18 {
			f.v = 0 // |v| < 10^19 ≤ 10^k
		} else {
			f.v /= int64(pow10f[k])
		}
		f.e = e
	}
	if f.v < 0 {
		f.v -= 5
	} else {
		f.v += 5
	}
	return fixed{f.v / 10, -places}, true
}
