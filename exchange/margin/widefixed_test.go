package margin

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/shopspring/decimal"
)

// wide's add, sub and mul are decimal.Decimal's Add, Sub and Mul, value
// and exponent, wherever they say the result fits, and wideFrom reads
// every coefficient of up to 19 digits (past an int64 included); its
// float is within a few units of float64's rounding of the decimal. On
// seeded coefficients of every size (sums near and past 2^127 included)
// and exponents apart by up to 40 places.
func TestWideMatchesDecimal(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(38, 12))
	num := func(e int32) decimal.Decimal {
		var d decimal.Decimal
		if r.IntN(8) == 0 { // 19 digits, up to 10^19 − 1 (past 2^63)
			d = decimal.NewFromUint64(1e18 + r.Uint64N(9e18)).Shift(e)
		} else {
			d = decimal.New(r.Int64()>>r.IntN(63), e)
		}
		if r.IntN(2) == 0 {
			d = d.Neg()
		}
		return d
	}
	same := func(what string, got wide, ok bool, want decimal.Decimal) {
		t.Helper()
		if !ok {
			return
		}
		if d := got.dec(); !SameDec(d, want) {
			t.Fatalf("%s: %s (exponent %d), decimal %s (exponent %d)", what, d, d.Exponent(), want, want.Exponent())
		}
		f, w := got.float(), want.InexactFloat64()
		if math.Abs(f-w) > 1e-15*math.Abs(w) {
			t.Fatalf("%s: float %v, decimal %v", what, f, w)
		}
	}
	from := func(d decimal.Decimal) wide {
		t.Helper()
		w, ok := wideFrom(d)
		if !ok {
			t.Fatalf("wideFrom(%s) not ok", d)
		}
		same("wideFrom", w, ok, d)
		return w
	}
	fitted := 0
	for range 100000 {
		a, b := num(int32(r.IntN(21)-20)), num(int32(r.IntN(21)-20))
		p, okp := from(a).mul(from(b))
		same("product", p, okp, a.Mul(b))
		x, y := num(int32(r.IntN(11)-10)), num(0)
		q, okq := from(x).mul(from(y))
		same("product", q, okq, x.Mul(y))
		if !okp || !okq {
			continue
		}
		pd, qd := p.dec(), q.dec()
		s, oks := p.add(q)
		same("sum", s, oks, pd.Add(qd))
		d, okd := p.sub(q)
		same("difference", d, okd, pd.Sub(qd))
		if oks && okd {
			fitted++
		}
		if got := p.positive(); got != pd.IsPositive() {
			t.Fatalf("positive(%s) = %t", pd, got)
		}
		if got := p.negative(); got != pd.IsNegative() {
			t.Fatalf("negative(%s) = %t", pd, got)
		}
	}
	if fitted < 10000 {
		t.Fatalf("only %d sums fitted", fitted)
	}
	if _, ok := wideFrom(decimal.RequireFromString("10000000000000000000")); ok {
		t.Fatalf("20 digits read")
	}
	// Near the edge: 2^126 + 2^126 − 1 fits, one more does not.
	big := wide{hi: 1 << 62, e: 0}
	if _, ok := big.add(wide{hi: 1<<62 - 1, lo: math.MaxUint64}); !ok {
		t.Fatalf("2^127 − 1 does not fit")
	}
	if _, ok := big.add(big); ok {
		t.Fatalf("2^127 fits")
	}
}
