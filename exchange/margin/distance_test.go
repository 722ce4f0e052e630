package margin

import (
	"math/rand/v2"
	"testing"

	"github.com/shopspring/decimal"
)

// distance16 is index.Sub(liq).DivRound(index, 16), value and exponent,
// and distance16Signed its Neg, wherever it answers: seeded prices of every scale, liquidation prices
// above and below, exact halves, and coefficients near the limits, where
// it must leave the answer to the decimal division.
func TestDistance16MatchesDivRound(t *testing.T) {
	t.Parallel()
	check := func(index, liq decimal.Decimal) bool {
		t.Helper()
		got, ok := distance16(index, liq)
		if !ok {
			return false
		}
		want := index.Sub(liq).DivRound(index, 16)
		if !SameDec(got, want) {
			t.Fatalf("distance16(%s, %s) = %s, DivRound %s", index, liq, got, want)
		}
		if neg, ok := distance16Signed(index, liq, true); !ok || !SameDec(neg, want.Neg()) {
			t.Fatalf("distance16Signed(%s, %s, true) = %s %t, Neg %s", index, liq, neg, ok, want.Neg())
		}
		return true
	}
	r := rand.New(rand.NewPCG(18, 59))
	answered := 0
	for range 200_000 {
		coef := func() int64 {
			switch r.IntN(4) {
			case 0:
				return int64(r.IntN(20)) // small: halves and exact quotients
			case 1:
				return r.Int64N(1 << 62)
			}
			return r.Int64N(10_000_000)
		}
		index := decimal.New(max(coef(), 1), -int32(r.IntN(12)))
		liq := decimal.New(coef(), -int32(r.IntN(12)))
		if r.IntN(3) == 0 {
			liq = index.Mul(decimal.NewFromFloat(0.5 + r.Float64())).Round(int32(r.IntN(8)))
		}
		if check(index, liq) {
			answered++
		}
	}
	// Exact halves: 10^16·n/2^17 leaves half for odd n.
	for n := int64(1); n < 200; n += 2 {
		if !check(decimal.NewFromInt(131072), decimal.NewFromInt(131072-n)) {
			t.Fatalf("half %d not answered", n)
		}
	}
	if answered < 100_000 {
		t.Fatalf("answered %d of 200,000", answered)
	}
}
