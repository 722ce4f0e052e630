package margin

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/shopspring/decimal"
)

// floatOf is decimal.Decimal's own InexactFloat64, bit for bit: on
// seeded coefficients of every size and exponents from −25 to 25, and on
// exact ties between two float64s (m/10^k halfway, to be rounded to
// even).
func TestFloatOfMatchesDecimal(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(38, 11))
	check := func(d decimal.Decimal) {
		t.Helper()
		if got, want := floatOf(d), d.InexactFloat64(); math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("%s (%d·10^%d): %v (%x), want %v (%x)", d, d.CoefficientInt64(), d.Exponent(), got, math.Float64bits(got), want, math.Float64bits(want))
		}
	}
	for range 200000 {
		v := r.Int64() >> r.IntN(63)
		if r.IntN(2) == 0 {
			v = -v
		}
		check(decimal.New(v, int32(r.IntN(51)-25)))
	}
	// Ties: y·5^k/10^k = y/2^k, halfway between two float64s when y
	// has 54 significant bits and is odd.
	for k := 1; k <= 3; k++ {
		f := int64(math.Pow(5, float64(k)))
		for range 2000 {
			y := int64(1)<<53 | r.Int64N(1<<53) | 1
			for _, m := range []int64{y * f, y*f + 1, y*f - 1, -y * f} {
				check(decimal.New(m, -int32(k)))
			}
		}
	}
	for _, s := range []string{"90.9090909090909091", "0.0000000000000001", "9223372036854775807", "-9223372036854775807",
		"922337203685477580.7", "1e22", "1e-19", "123456789012345678e4", "1e30", "1e-30", "0"} {
		check(decimal.RequireFromString(s))
	}
}

// BenchmarkFloatOf converts a margin at 16 places, as the benchmarks'
// accounts hold them.
func BenchmarkFloatOf(b *testing.B) {
	d := decimal.RequireFromString("90.9090909090909091")
	for b.Loop() {
		_ = floatOf(d)
	}
}
