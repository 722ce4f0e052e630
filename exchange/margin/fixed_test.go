package margin

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/shopspring/decimal"
)

// fixed's add, sub, mul, neg and round are decimal.Decimal's, value and exponent,
// whenever they say ok; and they say ok on every figure a position has,
// failing only near the int64 bounds.
func TestFixedMatchesDecimal(t *testing.T) {
	const maxFixed = 999_999_999_999_999_999
	t.Parallel()
	r := rand.New(rand.NewPCG(18, 58))
	draw := func() decimal.Decimal {
		switch r.IntN(6) {
		case 0:
			return decimal.Decimal{}
		case 1: // up to 18 digits
			return decimal.New(r.Int64N(2*maxFixed+1)-maxFixed, int32(r.IntN(5)-2))
		case 2:
			return decimal.New(maxFixed*int64(1-2*r.IntN(2)), int32(r.IntN(3)-1))
		}
		return decimal.New(r.Int64N(2_000_000_000)-1_000_000_000, int32(r.IntN(19)-12))
	}
	ops := []struct {
		name string
		f    func(a, b fixed) (fixed, bool)
		d    func(a, b decimal.Decimal) decimal.Decimal
	}{
		{"add", fixed.add, decimal.Decimal.Add},
		{"sub", fixed.sub, decimal.Decimal.Sub},
		{"mul", fixed.mul, decimal.Decimal.Mul},
	}
	fitted, failed, rounded := 0, 0, 0
	for range 20000 {
		x, y := draw(), draw()
		a, ok1 := toFixed(x)
		b, ok2 := toFixed(y)
		if !ok1 || !ok2 {
			t.Fatalf("toFixed(%s, %s): not ok", x, y)
		}
		for _, op := range ops {
			got, ok := op.f(a, b)
			if !ok {
				failed++
				continue
			}
			fitted++
			if want := op.d(x, y); !SameDec(got.dec(), want) {
				t.Fatalf("%s(%s, %s) = %de%d, decimal %s (exponent %d)", op.name, x, y, got.v, got.e, want, want.Exponent())
			}
		}
		places := int32(r.IntN(24) - 4)
		if got, ok := a.round(places); ok {
			rounded++
			if want := x.Round(places); !SameDec(got.dec(), want) {
				t.Fatalf("round(%s (exponent %d), %d) = %de%d, decimal %s (exponent %d)", x, x.Exponent(), places, got.v, got.e, want, want.Exponent())
			}
		}
		if got, ok := a.neg(); !ok || !SameDec(got.dec(), x.Neg()) {
			t.Fatalf("neg(%s) = %de%d (%t)", x, got.v, got.e, ok)
		}
	}
	if fitted < 30000 || failed == 0 || rounded < 10000 {
		t.Fatalf("%d results fitted, %d did not, %d rounded: the draws miss a case", fitted, failed, rounded)
	}
	if _, ok := toFixed(decimal.RequireFromString("12345678901234567890")); ok {
		t.Fatal("toFixed took a coefficient of 20 digits")
	}
}

// crossBases is Collaterals (free balance zero), value and exponent, on
// seeded accounts stepped with index moves and other exponents, through
// its int64 path and, for coefficients over 18 digits, its decimal one.
func TestCrossBasesMatchCollaterals(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(18, 59))
	viaFixed, viaDecimal := 0, 0
	for n := range 400 {
		a := randomAccount(r)
		rep := reportedBy(a)
		for step := range 20 {
			a, rep = stepped(r, a, rep, 12, func(p *Position) {
				p.Entry = p.Entry.Add(decimal.New(5, -1))
			})
			if r.IntN(10) == 0 {
				i := r.IntN(len(a.Positions))
				a.Positions[i].Index = a.Positions[i].Index.Add(decimal.New(1, -20))
			}
			m := Account{Positions: a.Positions}
			terms := make([]fitTerms, len(m.Positions))
			for i := range m.Positions {
				p := m.Positions[i].withoutHeld()
				m.Positions[i] = p
				if p.Open() {
					ev := p.EntryValue()
					terms[i] = fitTerms{ev: ev, margin: p.Margin(), mmr: MaintenanceRate(p.RiskLimit, ev), mm: p.Maintenance()}
				}
			}
			want := m.collateralsDecimal(make([]decimal.Decimal, len(m.Positions)))
			out := make([]decimal.Decimal, len(m.Positions))
			if crossBasesFixed(m.Positions, terms, out) {
				viaFixed++
			} else {
				viaDecimal++
			}
			got := crossBases(make([]decimal.Decimal, len(m.Positions)), m.Positions, terms)
			for i := range want {
				if !SameDec(got[i], want[i]) {
					t.Fatalf("account %d, step %d, position %d: %s (exponent %d), Collaterals %s (exponent %d)",
						n, step, i, got[i], got[i].Exponent(), want[i], want[i].Exponent())
				}
			}
		}
	}
	if viaFixed == 0 || viaDecimal == 0 {
		t.Fatalf("%d accounts through the int64 path, %d through decimals: a path untested", viaFixed, viaDecimal)
	}
}

// Collaterals in 128 bits is Collaterals in decimals, value and exponent,
// and CrossLiquidationPrices from them each position's LiquidationPrice,
// on seeded accounts stepped with index moves, held and maintenance
// margins set or not (held to 16 places: sums past an int64), free
// balances of several exponents, and figures too large for an int64 (the
// decimals then decide).
func TestCollateralsWideMatchesDecimal(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(23, 61))
	viaWide, viaDecimal, pastInt64 := 0, 0, 0
	free := func(r *rand.Rand) decimal.Decimal { return decimal.New(int64(r.IntN(1_000_000)), -int32(r.IntN(4))) }
	shortAccounts(r, 400, 20, free, func(n, step int, m Account) {
		for i := range m.Positions {
			p := &m.Positions[i]
			switch r.IntN(5) {
			case 0:
				p.Held, p.MM = decimal.Zero, decimal.Zero // the model's own
			case 1:
				p.MM = p.Maintenance()
			case 2:
				p.Held = p.Margin().Add(decimal.New(int64(r.IntN(100)), -2))
			case 3:
				p.Held = p.EntryValue().Div(decimal.NewFromInt(int64(p.Leverage))) // 16 places
			}
		}
		switch r.IntN(12) {
		case 0:
			m.Free = decimal.Zero
		case 1:
			m.Free = decimal.RequireFromString("123456789012345678901234.5") // past an int64
		case 2:
			i := r.IntN(len(m.Positions))
			m.Positions[i].Index = m.Positions[i].Index.Add(decimal.New(1, -20))
		}
		want := m.collateralsDecimal(make([]decimal.Decimal, len(m.Positions)))
		got := m.Collaterals()
		if cs, ok := m.collateralsWide(); ok {
			viaWide++
			if slices.ContainsFunc(cs, func(w wide) bool { return !w.fitsInt64() }) {
				pastInt64++
			}
		} else {
			viaDecimal++
		}
		liqs := m.CrossLiquidationPrices()
		for i := range want {
			if !SameDec(got[i], want[i]) {
				t.Fatalf("account %d, step %d, position %d: %s (exponent %d), in decimals %s (exponent %d)",
					n, step, i, got[i], got[i].Exponent(), want[i], want[i].Exponent())
			}
			if m.Positions[i].Cross && !SameDec(liqs[i], m.LiquidationPrice(i)) {
				t.Fatalf("account %d, step %d, position %d: liquidation %s, LiquidationPrice %s", n, step, i, liqs[i], m.LiquidationPrice(i))
			}
		}
	})
	if viaWide < viaDecimal || viaDecimal == 0 || pastInt64 == 0 {
		t.Fatalf("the paths were not all taken, most in 128 bits: %d in 128 bits (%d past an int64), %d in decimals", viaWide, pastInt64, viaDecimal)
	}
}

// crossMove's sums in 128 bits are its sums in decimals: move and
// notional in value and exponent, the counts and flags, for every skip,
// with and without the isolated positions' notional; among the accounts,
// margins held to 16 places (EV/leverage), whose sums outgrow an int64.
func TestCrossMoveWideMatchesDecimal(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(29, 3))
	viaWide, viaDecimal, pastInt64 := 0, 0, 0
	free := func(r *rand.Rand) decimal.Decimal {
		return decimal.New(int64(r.IntN(1_000_000)-200_000), -int32(r.IntN(4)))
	}
	shortAccounts(r, 300, 15, free, func(n, step int, m Account) {
		sixteen := r.IntN(3) == 0
		for i := range m.Positions {
			p := &m.Positions[i]
			switch {
			case sixteen:
				p.Held, p.MM = p.EntryValue().Div(decimal.NewFromInt(int64(p.Leverage))), p.Maintenance()
			case r.IntN(3) == 0:
				p.Held, p.MM = p.Margin().Add(decimal.New(int64(r.IntN(100)), -2)), p.Maintenance()
			}
			if r.IntN(40) == 0 {
				p.Index = decimal.Zero // no price: not known
			}
		}
		if r.IntN(15) == 0 {
			m.Free = decimal.RequireFromString("123456789012345678901234.5") // past an int64
		}
		for skip := -1; skip < len(m.Positions); skip++ {
			for _, withNotional := range []bool{false, true} {
				want, wantOK := m.crossMoveDecimal(skip, withNotional)
				got, gotOK, fits := m.crossMoveWide(skip, withNotional)
				if !fits {
					viaDecimal++
					continue
				}
				viaWide++
				if s, ok, _ := m.crossSumsWide(skip, withNotional); ok && (!s.left.fitsInt64() || !s.notional.fitsInt64()) {
					pastInt64++
				}
				if gotOK != wantOK || got.counted != want.counted || got.pooled != want.pooled || got.positions != want.positions ||
					!SameDec(got.move, want.move) || !SameDec(got.notional, want.notional) {
					t.Fatalf("account %d, step %d, skip %d, notional %t: %+v %t, in decimals %+v %t", n, step, skip, withNotional, got, gotOK, want, wantOK)
				}
			}
		}
	})
	if viaWide < viaDecimal || viaDecimal == 0 || pastInt64 == 0 {
		t.Fatalf("the paths were not all taken, most in 128 bits: %d in 128 bits (%d past an int64), %d in decimals", viaWide, pastInt64, viaDecimal)
	}
}

// TogetherAtLeast never says "at least" of a Together below the bound: on
// seeded accounts (cross and isolated, longs and shorts), against bounds
// below, at and above their Together, and it says so of most accounts
// well above it, which is what it is for.
func TestTogetherAtLeastNeverAboveTogether(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(31, 7))
	said, above := 0, 0
	free := func(r *rand.Rand) decimal.Decimal { return decimal.New(int64(r.IntN(100_000)), -int32(r.IntN(3))) }
	shortAccounts(r, 400, 15, free, func(n, step int, m Account) {
		liqs := make([]decimal.Decimal, len(m.Positions))
		for i, p := range m.Positions {
			if p.Open() && !p.Cross {
				liqs[i] = m.LiquidationPrice(i)
			}
		}
		together, _, ok := m.Together(liqs)
		if !ok {
			return
		}
		for _, bound := range []decimal.Decimal{
			together, together.Sub(decimal.New(1, -16)), together.Add(decimal.New(1, -16)),
			together.Mul(decimal.NewFromFloat(0.9)).Round(16), together.Mul(decimal.NewFromFloat(1.1)).Round(16),
			decimal.Zero, decimal.New(1, 0), decimal.New(11, -1),
		} {
			got := m.TogetherAtLeast(liqs, bound)
			if got && together.LessThan(bound) {
				t.Fatalf("account %d, step %d: at least %s said, Together is %s", n, step, bound, together)
			}
			if got {
				said++
			}
			if together.GreaterThan(bound) {
				above++
			}
		}
	})
	if said < above/2 {
		t.Fatalf("at least said %d times of %d bounds under Together: it skips little", said, above)
	}
}

// shortAccounts calls each with accounts seeded accounts stepped steps
// times (index moves, and now and then another leverage, quantity, mode,
// entry or reported figure), each with the free balance free draws and its
// quantities written short, as an exchange writes them: randomAccount's
// are quotients of 16 places, which no int64 holds times an index.
func shortAccounts(r *rand.Rand, accounts, steps int, free func(*rand.Rand) decimal.Decimal, each func(n, step int, m Account)) {
	for n := range accounts {
		a := randomAccount(r)
		rep := reportedBy(a)
		for step := range steps {
			a, rep = stepped(r, a, rep, 12, func(p *Position) {
				p.Entry = p.Entry.Add(decimal.New(5, -1))
			})
			m := Account{Free: free(r), Positions: slices.Clone(a.Positions)}
			for i := range m.Positions {
				m.Positions[i].Quantity = m.Positions[i].Quantity.Round(2)
			}
			each(n, step, m)
		}
	}
}

// TogetherAtLeastIsolated, reading the positions one by one, answers as
// TogetherAtLeast of the same account built, on seeded accounts made
// isolated (their cross positions isolated or emptied), some positions
// without an index price or a liquidation price, some with nothing held,
// some free balances past 128 bits, against bounds below, at and above
// their Together.
func TestTogetherAtLeastIsolated(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(37, 11))
	compared, said := 0, 0
	free := func(r *rand.Rand) decimal.Decimal { return decimal.New(int64(r.IntN(100_000)), -int32(r.IntN(3))) }
	shortAccounts(r, 300, 10, free, func(n, step int, m Account) {
		if r.IntN(20) == 0 {
			m.Free = decimal.RequireFromString("1234567890123456789012345678901234567890.5") // past 128 bits
		}
		liqs := make([]decimal.Decimal, len(m.Positions))
		for i := range m.Positions {
			p := &m.Positions[i]
			p.Cross = false
			if r.IntN(12) == 0 {
				p.Quantity = decimal.Zero // nothing held
			}
			if r.IntN(12) == 0 {
				p.Index = decimal.Zero // no index price
			}
			if p.Open() && r.IntN(6) != 0 { // else no liquidation price
				liqs[i] = m.LiquidationPrice(i)
			}
		}
		bounds := []decimal.Decimal{decimal.Zero, decimal.New(1, 0), decimal.New(11, -1), decimal.New(5, -2)}
		if together, _, ok := m.Together(liqs); ok {
			bounds = append(bounds, together, together.Sub(decimal.New(1, -16)), together.Add(decimal.New(1, -16)),
				together.Mul(decimal.NewFromFloat(0.9)).Round(16), together.Mul(decimal.NewFromFloat(1.1)).Round(16))
		}
		at := func(i int) (bool, string, decimal.Decimal, decimal.Decimal) {
			p := &m.Positions[i]
			return p.Open(), p.Direction, p.Index, liqs[i]
		}
		for _, bound := range bounds {
			want := m.TogetherAtLeast(liqs, bound)
			if got := TogetherAtLeastIsolated(m.Free, len(m.Positions), at, bound); got != want {
				t.Fatalf("account %d, step %d, bound %s: %t, TogetherAtLeast of the account %t", n, step, bound, got, want)
			}
			compared++
			if want {
				said++
			}
		}
	})
	if said < compared/10 || said == compared {
		t.Fatalf("at least said %d times of %d: the two answers are hardly both taken", said, compared)
	}
}
