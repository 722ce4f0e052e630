package margin

import (
	"math/rand/v2"
	"testing"

	"github.com/shopspring/decimal"
)

// Sum is the decimal sum, value and exponent, of balances, margins and
// unrealised PNLs of every size (added one by one, or a position's from
// its terms converted once: AddPosition): in int64 while they fit,
// moving to decimals (and staying exact) when one does not.
func TestSumMatchesDecimal(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 31))
	draw := func() decimal.Decimal {
		switch r.IntN(8) {
		case 0:
			return decimal.Decimal{}
		case 1: // a coefficient over 18 digits: the decimal path
			return decimal.RequireFromString("98765432109876543210.5").Mul(decimal.New(1, int32(r.IntN(5)-2)))
		case 2: // near the int64 bound: a product or a sum overflows
			return decimal.New(900_000_000_000_000_000+r.Int64N(1e17), int32(r.IntN(3)-1))
		}
		return decimal.New(r.Int64N(2_000_000_000)-1_000_000_000, int32(r.IntN(13)-8))
	}
	fixedOnly, moved := 0, 0
	for range 5000 {
		start := draw()
		s := NewSum(start)
		want := start
		for range r.IntN(12) {
			if r.IntN(3) == 0 {
				d := draw()
				s.Add(d)
				want = want.Add(d)
				continue
			}
			if r.IntN(3) == 0 {
				// A position's terms, converted once and summed with its
				// index: AddPosition is Add and AddPNL.
				m, ix, entry, qty, short := draw(), draw(), draw(), draw(), r.IntN(2) == 0
				terms := TermsOf(m, entry, qty)
				if !terms.Same(m, entry, qty) {
					t.Fatalf("terms of %s %s %s are not the same", m, entry, qty)
				}
				s.AddPosition(&terms, ix, short)
				u := ix.Sub(entry).Mul(qty)
				if short {
					u = u.Neg()
				}
				want = want.Add(m).Add(u)
				continue
			}
			ix, entry, qty, short := draw(), draw(), draw(), r.IntN(2) == 0
			s.AddPNL(ix, entry, qty, short)
			u := ix.Sub(entry).Mul(qty)
			if short {
				u = u.Neg()
			}
			want = want.Add(u)
		}
		if got := s.Decimal(); !SameDec(got, want) {
			t.Fatalf("sum %s (exponent %d), decimal %s (exponent %d)", got, got.Exponent(), want, want.Exponent())
		}
		if s.big {
			moved++
		} else {
			fixedOnly++
		}
	}
	if fixedOnly < 500 || moved < 500 {
		t.Fatalf("%d sums stayed in int64, %d moved to decimals: the draws miss a path", fixedOnly, moved)
	}
	if got := (Sum{}).Decimal(); !SameDec(got, decimal.Zero) {
		t.Fatalf("the zero Sum is %s (exponent %d)", got, got.Exponent())
	}
}

// cmpRounded orders two decimals as their decimal roundings to
// survivalPlaces do, through int64 and, past 18 digits, decimals.
func TestCmpRoundedMatchesDecimal(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 55))
	draw := func() decimal.Decimal {
		switch r.IntN(5) {
		case 0: // a coefficient over 18 digits
			return decimal.RequireFromString("0.12345678901234567890123").Add(decimal.New(r.Int64N(3), -7))
		case 1: // a tie at the seventh place
			return decimal.New(r.Int64N(2_000_000)*10+5-10_000_000, -7)
		}
		return decimal.New(r.Int64N(2_000_000_000)-1_000_000_000, int32(r.IntN(14)-12))
	}
	equal, fixedBoth := 0, 0
	for range 20000 {
		a, b := draw(), draw()
		if r.IntN(4) == 0 {
			b = a.Add(decimal.New(r.Int64N(11)-5, -7)) // close: equal once rounded, or a unit apart
		}
		want := a.Round(survivalPlaces).Cmp(b.Round(survivalPlaces))
		if got := cmpRounded(a, b); got != want {
			t.Fatalf("cmpRounded(%s, %s) = %d, decimal %d", a, b, got, want)
		}
		if want == 0 {
			equal++
		}
		if a.NumDigits() <= 18 && b.NumDigits() <= 18 {
			fixedBoth++
		}
	}
	if equal < 500 || fixedBoth > 19000 || fixedBoth < 10000 {
		t.Fatalf("%d equal once rounded, %d pairs in int64: the draws miss a case", equal, fixedBoth)
	}
}
