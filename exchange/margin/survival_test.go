package margin

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/shopspring/decimal"
)

// The hand-worked measures (account_test.go's positions, free 3,000):
//
//	XBTC cross long 0.5 @ 64,000: pool 3,000 + 1,600 − 160 = 4,440 over a
//	  notional of 32,000: 13.875% together, and alone (liquidation 55,120)
//	XETH isolated short at 3,000: liquidation 3,285, 9.5%
//	XSOL isolated long at 150: liquidation 140.75, 6.1667%
func TestSurvival(t *testing.T) {
	t.Parallel()
	ethAt := func(cross bool, index string) Position { return xeth(cross, index) }
	tests := []struct {
		name      string
		acct      Account
		skip      int
		together  string
		first     string
		lost      string
		weakest   string
		weakMove  string
		aloneSeen int
	}{
		{"cross alone", Account{Free: dec("3000"), Positions: []Position{xbtc(true)}}, -1, "0.13875", CrossPool, "4440", "XBTC", "0.13875", 1},
		// every index against the account: XSOL's 6.1667% comes first;
		// the move loses 6.1667% of 122,000
		{"isolated first", Account{Free: dec("3000"), Positions: []Position{xbtc(true), xeth(false, "3000"), xsol(false)}}, -1,
			"0.0616666666666667", "XSOL", "7523.33", "XSOL", "0.0616666666666667", 3},
		{"skip the weakest", Account{Free: dec("3000"), Positions: []Position{xbtc(true), xeth(false, "3000"), xsol(false)}}, 2,
			"0.095", "XETH", "11590", "XETH", "0.095", 2},
		// XETH cross short losing 2,500 at 3,250, free 1,000: pool 1,000 +
		// 1,600 + 3,000 − 2,500 − 310 = 2,790 over 64,500
		{"two cross", Account{Free: dec("1000"), Positions: []Position{xbtc(true), ethAt(true, "3250")}}, -1,
			"0.0432558139534884", CrossPool, "2790", "XETH", "0.0858461538461538", 2},
		// (XETH alone: its collateral 5,440 → liquidation 3,529, 8.58% away)
		// the rest of that account once XETH is isolated: XBTC's pool
		// 1,000 + 1,600 − 160 = 2,440 over 32,000
		{"ring-fenced", Account{Free: dec("1000"), Positions: []Position{xbtc(true), ethAt(false, "3250")}}, 1,
			"0.07625", CrossPool, "4918.13", "XBTC", "0.07625", 1},
		{"nothing open", Account{Free: dec("1000")}, -1, "1", "", "0", "", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := tt.acct.Survival(tt.skip)
			if !s.Known {
				t.Fatal("unknown")
			}
			if !s.Together.Equal(dec(tt.together)) || s.First != tt.first || !s.Lost.Equal(dec(tt.lost)) {
				t.Errorf("together %s (%s first, %s lost), want %s (%s, %s)", s.Together, s.First, s.Lost, tt.together, tt.first, tt.lost)
			}
			if len(s.Alone) != tt.aloneSeen {
				t.Fatalf("alone %v, want %d moves", s.Alone, tt.aloneSeen)
			}
			if w, ok := s.Weakest(); ok && (w.Symbol != tt.weakest || !w.Move.Equal(dec(tt.weakMove))) {
				t.Errorf("weakest %v, want %s %s", w, tt.weakest, tt.weakMove)
			}
			for _, m := range s.Alone {
				if m.Move.Round(6).LessThan(s.Together.Round(6)) {
					t.Errorf("%s alone %s is less than together %s", m.Symbol, m.Move, s.Together)
				}
			}
		})
	}
}

// A measure is unknown without every index price, and an unknown measure
// is neither better nor worse.
func TestSurvivalUnknown(t *testing.T) {
	t.Parallel()
	p := xbtc(true)
	p.Index = decimal.Zero
	s := Account{Free: dec("3000"), Positions: []Position{p, xsol(false)}}.Survival(-1)
	if s.Known {
		t.Fatalf("known without an index: %+v", s)
	}
	k := Account{Free: dec("3000"), Positions: []Position{xsol(false)}}.Survival(-1)
	if s.Compare(k) != 0 || k.Compare(s) != 0 {
		t.Error("an unknown measure compared")
	}
}

func TestSurvivalCompareAndChange(t *testing.T) {
	t.Parallel()
	before := Account{Free: dec("3000"), Positions: []Position{xbtc(true), xeth(false, "3000"), xsol(false)}}
	// XSOL cut 15x → 10x moves 2,000 of the free balance into its margin:
	// XSOL 6.17% → 9.5% away, XBTC's pool 13.875% → 7.625%.
	after, _ := before.Apply(2, 10, false)
	b, a := before.Survival(-1), after.Survival(-1)
	if a.Compare(b) != 1 || b.Compare(a) != -1 || b.Compare(b) != 0 {
		t.Errorf("compare: after %v, before %v", a, b)
	}
	want := "survives 6.17% → 7.63% together (XSOL → cross pool first, 7523.33 → 9302.5 lost), weakest alone XSOL 6.17% → XBTC 7.63%"
	if got := Change(b, a); got != want {
		t.Errorf("change %q\nwant   %q", got, want)
	}
	if got := b.String(); got != "survives 6.17% together (XSOL first, 7523.33 lost), weakest alone XSOL 6.17%" {
		t.Errorf("string %q", got)
	}
}

// The move of every index together never exceeds any one index's alone
// (the pool falls faster when every cross position loses), up to a
// liquidation price's rounding to its tick, while no position is past its
// liquidation price; and Together, the backtest's cheap sample, is
// Survival's.
func FuzzSurvival(f *testing.F) {
	f.Add(int64(3000), int64(64000), int64(3100), int64(150), uint8(20), uint8(10), uint8(15), uint8(5))
	f.Fuzz(func(t *testing.T, free, btc, eth, sol int64, l1, l2, l3, mask uint8) {
		if free < 0 || free > 1e9 || btc <= 0 || btc > 1e7 || eth <= 0 || eth > 1e6 || sol <= 0 || sol > 1e5 {
			return
		}
		ps := []Position{xbtc(mask&1 != 0), xeth(mask&2 != 0, "3000"), xsol(mask&4 != 0)}
		ps[0].Index, ps[1].Index, ps[2].Index = decimal.NewFromInt(btc), decimal.NewFromInt(eth), decimal.NewFromInt(sol)
		for i, l := range []uint8{l1, l2, l3} {
			ps[i].Leverage = int(l%50) + 1
		}
		s := Account{Free: decimal.NewFromInt(free), Positions: ps}.Survival(-1)
		if !s.Known || len(s.Alone) != 3 {
			t.Fatalf("%+v", s)
		}
		a := Account{Free: decimal.NewFromInt(free), Positions: ps}
		liqs := make([]decimal.Decimal, len(ps))
		for i, p := range ps {
			if !p.Cross {
				liqs[i] = a.LiquidationPrice(i)
			}
		}
		if m, first, ok := a.Together(liqs); !ok || !m.Equal(s.Together) || first != s.First {
			t.Errorf("Together %s %q %v, Survival %s %q", m, first, ok, s.Together, s.First)
		}
		if w, _ := s.Weakest(); w.Move.IsNegative() {
			// A position already past its liquidation price (the exchange
			// has not liquidated it yet): its move is negative, the cross
			// pool's floored at 0, so the order below does not hold.
			return
		}
		tick := dec("0.0001") // a tick of 0.01 over an index of at least 100
		for _, m := range s.Alone {
			if m.Move.Add(tick).LessThan(s.Together) {
				t.Errorf("%s alone %s < together %s", m.Symbol, m.Move, s.Together)
			}
		}
		if s.Together.IsNegative() || s.Together.GreaterThan(one) {
			t.Errorf("together %s", s.Together)
		}
	})
}

// SurvivalBoth(i) is Survival(−1) and Survival(i), field for field, on
// seeded accounts, for every i and for a position left out of a skip.
func TestSurvivalBothMatchesSurvival(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(18, 34))
	same := func(a, b Survival) bool {
		if a.Known != b.Known || a.First != b.First || !SameDec(a.Together, b.Together) || !SameDec(a.Lost, b.Lost) ||
			len(a.Alone) != len(b.Alone) || a.String() != b.String() {
			return false
		}
		for k := range a.Alone {
			if a.Alone[k].Symbol != b.Alone[k].Symbol || !SameDec(a.Alone[k].Move, b.Alone[k].Move) {
				return false
			}
		}
		return true
	}
	for n := range 500 {
		a := randomAccount(r)
		if r.IntN(5) == 0 {
			a.Positions[0].Index = decimal.Zero // no price: unknown
		}
		if r.IntN(5) == 0 {
			a.Positions[len(a.Positions)-1].Quantity = decimal.Zero // closed
		}
		for i := -1; i < len(a.Positions); i++ {
			whole, rest := a.SurvivalBoth(i)
			if w := a.Survival(-1); !same(whole, w) {
				t.Fatalf("account %d: whole %s, Survival(-1) %s", n, whole, w)
			}
			if w := a.Survival(i); !same(rest, w) {
				t.Fatalf("account %d, skip %d: rest %s, Survival %s", n, i, rest, w)
			}
		}
	}
}

// SurvivalBothWith, which sorts the whole account's moves once and takes
// the skipped position's out for the rest, is the two measures worked out
// apart (survivalFrom on crossMove's sums with and without skip), field
// for field: on seeded accounts of up to 12 positions with moves given
// that tie (the same value, at two exponents), are written at other
// exponents, or have more than 18 digits (the decimals decide).
func TestSurvivalBothWithMatchesApart(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(38, 21))
	same := func(a, b Survival) bool {
		if a.Known != b.Known || a.First != b.First || !SameDec(a.Together, b.Together) || !SameDec(a.Lost, b.Lost) || len(a.Alone) != len(b.Alone) {
			return false
		}
		for k := range a.Alone {
			if a.Alone[k].Symbol != b.Alone[k].Symbol || !SameDec(a.Alone[k].Move, b.Alone[k].Move) {
				return false
			}
		}
		return true
	}
	ties := []decimal.Decimal{decimal.RequireFromString("0.05"), decimal.RequireFromString("0.0500000000000000"),
		decimal.RequireFromString("0.0500000000000001"), decimal.RequireFromString("0.05000000000000000000001"), one}
	for n := range 400 {
		a := randomAccount(r)
		for len(a.Positions) < 3+r.IntN(10) {
			b := randomAccount(r)
			for _, p := range b.Positions {
				p.Symbol += fmt.Sprint(len(a.Positions))
				a.Positions = append(a.Positions, p)
			}
		}
		liqs := a.LiquidationPrices()
		moves := a.Moves(liqs)
		for i := range moves {
			if r.IntN(3) == 0 {
				moves[i] = ties[r.IntN(len(ties))]
			}
		}
		c, ok := a.crossMove(-1, true)
		for skip := -1; skip < len(a.Positions); skip++ {
			whole, rest := a.SurvivalBothWith(skip, liqs, moves, nil)
			if !ok {
				if whole.Known || rest.Known {
					t.Fatalf("account %d: known without an index price", n)
				}
				continue
			}
			cr, _ := a.crossMove(skip, false)
			cr.notional = c.notional
			if w := a.survivalFrom(-1, liqs, moves, c); !same(whole, w) {
				t.Fatalf("account %d, skip %d: whole %+v, apart %+v", n, skip, whole, w)
			}
			if w := a.survivalFrom(skip, liqs, moves, cr); !same(rest, w) {
				t.Fatalf("account %d, skip %d: rest %+v, apart %+v", n, skip, rest, w)
			}
		}
	}
}

// moreThanOne is GreaterThan(1) at every exponent, on either side of 1.
func TestMoreThanOne(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"1", "1.0000000000000000", "1.0000000000000001", "0.9999999999999999", "-2", "0", "2",
		"0.1000000000000000000", "1.00000000000000000000001", "10e3", "1e-19", "999999999999999999e-18", "1000000000000000001e-18"} {
		d := decimal.RequireFromString(s)
		if got, want := moreThanOne(d), d.GreaterThan(one); got != want {
			t.Errorf("moreThanOne(%s) = %t, want %t", s, got, want)
		}
	}
}

// Together is Survival(−1)'s Together and First on seeded accounts,
// among them isolated positions whose moves tie exactly or differ in the
// last places (where its float64 search must leave the decision to the
// decimal comparison).
func TestTogetherMatchesSurvival(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(18, 58))
	floatDecided := 0
	for n := range 2000 {
		a := randomAccount(r)
		if r.IntN(3) == 0 {
			// A twin of a position under another symbol: the same move,
			// exactly or a tick of the index away.
			p := a.Positions[r.IntN(len(a.Positions))]
			p.Symbol = "T"
			p.Cross = false
			if r.IntN(2) == 0 {
				p.Index = p.Index.Add(decimal.New(1, -8))
			}
			a.Positions = append(a.Positions, p)
		}
		liqs := make([]decimal.Decimal, len(a.Positions))
		for i, p := range a.Positions {
			if !p.Cross {
				liqs[i] = a.LiquidationPrice(i)
			}
		}
		s := a.Survival(-1)
		m, first, ok := a.Together(liqs)
		if ok != s.Known || (ok && (!m.Equal(s.Together) || first != s.First)) {
			t.Fatalf("account %d: Together %s %q %v, Survival %s %q %v", n, m, first, ok, s.Together, s.First, s.Known)
		}
		if _, ok := a.togetherFloat(liqs, one); ok {
			floatDecided++
		}
		if ok && a.crossPoolFree() {
			// Without a cross position Together starts from 1: the
			// float64 search gives the decimal one's answer, exponent
			// and all.
			wm, wf := a.togetherExact(liqs, one, "")
			if !SameDec(m, wm) || first != wf {
				t.Fatalf("account %d: Together %s %q, decimal search %s %q", n, m, first, wm, wf)
			}
		}
	}
	if floatDecided == 0 || floatDecided == 2000 {
		t.Fatalf("float64 decided %d of 2000: both paths must be exercised", floatDecided)
	}
}

// crossPoolFree reports whether no position is cross.
func (a Account) crossPoolFree() bool {
	return !slices.ContainsFunc(a.Positions, func(p Position) bool { return p.Cross })
}

// sortMoves orders as the decimals' stable sort does, near ties (the 16th
// place), equal values written apart (1.5 and 1.50) and coefficients past
// int64 included.
func TestSortMovesAsDecimals(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(38, 2))
	for run := 0; run < 200; run++ {
		var ms []Move
		for i := 0; i < 1+r.IntN(40); i++ {
			var d decimal.Decimal
			switch r.IntN(4) {
			case 0: // 16 places near a few values
				d = decimal.New(int64(r.IntN(3))*1e15+int64(r.IntN(3)), -16)
			case 1: // the same value at another exponent
				d = decimal.New(int64(r.IntN(3))*1e14, -15)
			case 2: // over 18 digits
				d = decimal.RequireFromString(fmt.Sprintf("0.%d%019d", r.IntN(3), r.IntN(3)))
			default:
				d = decimal.NewFromFloat(r.Float64()*2 - 1).Round(16)
			}
			ms = append(ms, Move{Symbol: fmt.Sprint(i), Move: d})
		}
		want := slices.Clone(ms)
		slices.SortStableFunc(want, func(x, y Move) int { return x.Move.Cmp(y.Move) })
		sortMoves(ms)
		for i := range ms {
			if ms[i].Symbol != want[i].Symbol {
				t.Fatalf("run %d: %v, want %v", run, ms, want)
			}
		}
	}
}
