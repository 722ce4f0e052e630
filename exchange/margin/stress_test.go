package margin

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/riskguard/riskguard/exchange"
	"github.com/shopspring/decimal"
)

func sigmaOf(s float64) func(string) float64 { return func(string) float64 { return s } }

// An isolated long 6.1667% from its liquidation price (XSOL: 140.75 at
// 150), σ 2%: the first move of the grid that liquidates it is −3.1σ
// (−6.2%). Within ±3σ nothing is fatal; within ±3.5σ that move is. The
// expected loss is half of it from the moves together and half from XSOL
// alone, the same moves here: its equity (margin 4,000, PNL 0) times the
// mass the grid's points from −3.1σ down weigh (Student's t, 3 degrees of
// freedom, at unit variance: 0.6408%), 25.63.
func TestStressIsolated(t *testing.T) {
	t.Parallel()
	a := Account{Free: dec("3000"), Positions: []Position{xsol(false)}}
	s := a.Stress(sigmaOf(0.02), 3, nil)
	if !s.Known || len(s.Fatal) != 0 {
		t.Fatalf("±3σ: %+v, want known and nothing fatal", s)
	}
	if math.Abs(s.Expected-25.63) > 0.01 {
		t.Errorf("expected loss %.3f, want 25.63", s.Expected)
	}
	s = a.Stress(sigmaOf(0.02), 3.5, nil)
	f, ok := s.FatalFor("XSOL", exchange.Long)
	if !ok || math.Abs(f.K+3.1) > 1e-9 || math.Abs(f.Move+0.062) > 1e-9 || f.Family != StressTogether {
		t.Errorf("±3.5σ: fatal %+v (%t), want −3.1σ, −6.2%%, together first", f, ok)
	}
	if got := f.String(); got != "−6.20% (-3.1σ, every index together) liquidates XSOL LONG" {
		t.Errorf("said %q", got)
	}
	// The shown points: −4σ and −5σ lose the equity, the others nothing.
	for _, p := range s.Points {
		want := 0.0
		if p.K <= -4 {
			want = 4000
		}
		if p.Loss != want {
			t.Errorf("%s %gσ: loss %v, want %v", p.Family, p.K, p.Loss, want)
		}
	}
}

// The thin cross account of issue 31: XBTC long 0.5 ×20 and XSOL long 200
// ×10 on cross, 3,000 free, BTC at 64,100. Together in one pool a likely
// move (σ 2%, ±3σ) liquidates nothing (XBTC 21% away); XBTC isolated at
// 20× sits 3.2% from its liquidation price (50,375 → 62,075), and a likely
// move of −1.6σ liquidates it: a move the account survived before made
// fatal, and the expected loss grows.
func TestStressThinCrossIsolation(t *testing.T) {
	t.Parallel()
	btc := Position{Symbol: "XBTC", Direction: exchange.Long, Quantity: dec("0.5"), Entry: dec("65000"), Leverage: 20,
		Cross: true, RiskLimit: rl(50, "0.005"), Index: dec("64100"), Scale: 2}
	sol := Position{Symbol: "XSOL", Direction: exchange.Long, Quantity: dec("200"), Entry: dec("150"), Leverage: 10,
		Cross: true, RiskLimit: rl(20, "0.005"), Index: dec("150"), Scale: 2}
	before := Account{Free: dec("3000"), Positions: []Position{btc, sol}}
	after, eff := before.Apply(0, 20, false)
	sb, sa := before.Stress(sigmaOf(0.02), 3, nil), after.Stress(sigmaOf(0.02), 3, nil)
	if len(sb.Fatal) != 0 {
		t.Fatalf("before: %s", sb.Summary())
	}
	nf := NewlyFatal(sb, sa, "")
	if len(nf) != 1 || nf[0].Symbol != "XBTC" || nf[0].K != -1.6 {
		t.Fatalf("newly fatal %+v (liquidation %s → %s); after: %s", nf, eff.LiquidationBefore, eff.LiquidationAfter, sa.Summary())
	}
	if !(sa.Expected > sb.Expected) {
		t.Errorf("expected loss %.2f → %.2f: want it to grow", sb.Expected, sa.Expected)
	}
	if len(NewlyFatal(sb, sa, "XBTC")) != 0 {
		t.Error("the ring-fenced position itself is not excepted")
	}
	if s := sa.Summary(); !strings.Contains(s, "liquidates XBTC LONG") || !strings.Contains(s, "σ XBTC 2.00%, XSOL 2.00%") {
		t.Errorf("summary %q", s)
	}
}

// No index price, or no σ, is no judgement.
func TestStressUnknown(t *testing.T) {
	t.Parallel()
	p := xsol(false)
	p.Index = dec("0")
	if s := (Account{Positions: []Position{p}}).Stress(sigmaOf(0.02), 3, nil); s.Known {
		t.Error("known without an index price")
	}
	if s := (Account{Positions: []Position{xsol(false)}}).Stress(sigmaOf(0), 3, nil); s.Known {
		t.Error("known without σ")
	}
	// An index a float cannot hold: no data, never a NaN (the status's
	// JSON cannot carry one).
	p = xsol(true)
	p.Index = dec("1e400")
	if s := (Account{Free: dec("3000"), Positions: []Position{p}}).Stress(sigmaOf(0.02), 3, nil); s.Known || math.IsNaN(s.Expected) {
		t.Errorf("an index of 1e400: known %t, expected loss %v", s.Known, s.Expected)
	}
	if f := (Account{Free: dec("3000"), Positions: []Position{p}}).Forfeit(sigmaOf(0.02), nil); f.Known || math.IsNaN(f.Expected) {
		t.Errorf("an index of 1e400: forfeit known %t, expected %v", f.Known, f.Expected)
	}
}

// FuzzStress: on any account of the three positions (each cross or not,
// any leverage, any index) and any σ, the grid is known, its expected
// loss is finite and between 0 and the equity at stake, every fatal move
// is within the likely range and names each position once, an account
// is never newly fatal against itself, and the grid is the reference's
// (stressReference).
func FuzzStress(f *testing.F) {
	f.Add(int64(3000), int64(64000), int64(3100), int64(150), uint8(20), uint8(10), uint8(15), uint8(5), uint16(200), uint8(30))
	f.Fuzz(func(t *testing.T, free, btc, eth, sol int64, l1, l2, l3, mask uint8, sigmaBP uint16, likelyTenths uint8) {
		if free < 0 || free > 1e9 || btc <= 0 || btc > 1e7 || eth <= 0 || eth > 1e6 || sol <= 0 || sol > 1e5 {
			return
		}
		sigma := float64(sigmaBP%5000+1) / 10000   // 0.01% … 50%
		likely := float64(likelyTenths%41+10) / 10 // 1 … 5
		ps := []Position{xbtc(mask&1 != 0), xeth(mask&2 != 0, "3000"), xsol(mask&4 != 0)}
		ps[0].Index, ps[1].Index, ps[2].Index = decimal.NewFromInt(btc), decimal.NewFromInt(eth), decimal.NewFromInt(sol)
		for i, l := range []uint8{l1, l2, l3} {
			ps[i].Leverage = int(l%50) + 1
		}
		a := Account{Free: decimal.NewFromInt(free), Positions: ps}
		s := a.Stress(sigmaOf(sigma), likely, nil)
		if !s.Known {
			t.Fatal("unknown")
		}
		stake := 0.0 // every position's equity now, and the free balance behind the cross ones
		anyCross := false
		for _, p := range ps {
			stake += math.Abs(p.Margin().InexactFloat64() + p.PNL(p.Index).InexactFloat64())
			anyCross = anyCross || p.Cross
		}
		if anyCross {
			stake += float64(free)
		}
		if math.IsNaN(s.Expected) || math.IsInf(s.Expected, 0) || s.Expected < 0 || s.Expected > stake*(1+1e-9)+1e-6 {
			t.Errorf("expected loss %v, stake %v", s.Expected, stake)
		}
		seen := map[string]bool{}
		for _, fm := range s.Fatal {
			if math.Abs(fm.K) > likely+1e-9 || seen[fm.Symbol+fm.Direction] {
				t.Errorf("fatal %+v (likely ±%g, seen %v)", fm, likely, seen)
			}
			seen[fm.Symbol+fm.Direction] = true
		}
		if d := sameStress(s, stressReference(a, sigmaOf(sigma), likely, nil)); d != "" {
			t.Errorf("not the reference grid: %s", d)
		}
		if nf := NewlyFatal(s, s, ""); len(nf) != 0 {
			t.Errorf("newly fatal against itself: %+v", nf)
		}
	})
}

// Table lays the shown points out one row per move, the families in the
// grid's order, and Cell says each: a single-symbol account has two
// families (together, the symbol alone) with the same losses.
func TestStressTable(t *testing.T) {
	t.Parallel()
	a := Account{Free: dec("3000"), Positions: []Position{xsol(false)}}
	s := a.Stress(sigmaOf(0.02), 3, nil)
	families, rows := s.Table()
	if want := []string{StressTogether, "XSOL"}; strings.Join(families, "|") != strings.Join(want, "|") {
		t.Fatalf("families %q, want %q", families, want)
	}
	if len(rows) != len(StressShown) {
		t.Fatalf("%d rows, want %d", len(rows), len(StressShown))
	}
	tests := []struct {
		k    float64
		want string
	}{
		{-5, "4000.00 (XSOL LONG)"},
		{-4, "4000.00 (XSOL LONG)"},
		{-3, "0"},
		{1, "0"},
		{5, "0"},
	}
	for _, tt := range tests {
		i := slices.Index(StressShown, tt.k)
		r := rows[i]
		if r.K != tt.k || len(r.Points) != 2 {
			t.Fatalf("row %d: %+v, want %gσ with 2 points", i, r, tt.k)
		}
		for _, p := range r.Points {
			if got := p.Cell(); got != tt.want {
				t.Errorf("%s %gσ: cell %q, want %q", p.Family, tt.k, got, tt.want)
			}
		}
	}
	if f, r := (Stress{Known: true}).Table(); f != nil || r != nil {
		t.Errorf("no points: %q %v, want none", f, r)
	}
}

// NewlyFatal on long lists (looked up by position) says what the scan of
// FatalFor says, a symbol and direction listed twice included.
func TestNewlyFatalLongListsAsScanned(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(38, 2))
	scan := func(before, after Stress, except string) []FatalMove {
		var out []FatalMove
		for _, fa := range after.Fatal {
			if fa.Symbol == except {
				continue
			}
			if fb, ok := before.FatalFor(fa.Symbol, fa.Direction); ok && math.Abs(fa.K) >= math.Abs(fb.K)-stressStep/2 {
				continue
			}
			out = append(out, fa)
		}
		return out
	}
	moves := func(n int) []FatalMove {
		var fs []FatalMove
		for i := 0; i < n; i++ {
			dir := exchange.Long
			if r.IntN(2) == 0 {
				dir = exchange.Short
			}
			fs = append(fs, FatalMove{Symbol: fmt.Sprintf("X%d", r.IntN(12)), Direction: dir, Family: StressTogether, K: -float64(r.IntN(31)) / 10})
		}
		return fs
	}
	for run := 0; run < 500; run++ {
		before, after := Stress{Fatal: moves(r.IntN(30))}, Stress{Fatal: moves(r.IntN(30))}
		except := fmt.Sprintf("X%d", r.IntN(14))
		if got, want := NewlyFatal(before, after, except), scan(before, after, except); !slices.Equal(got, want) {
			t.Fatalf("run %d: got %v, want %v", run, got, want)
		}
	}
}

// The book reads each position's figures as the decimals round to
// float64 (toF of the decimal figure), whichever path reads them: from
// the coefficients, through math/big for a coefficient past 18 digits or
// an exponent past float64's exact powers of ten, the listed margin,
// entry value and maintenance, and a risk limit with steps.
func TestStressBookReadsAsDecimals(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(38, 5))
	num := func() decimal.Decimal {
		switch r.IntN(6) {
		case 0: // past 18 digits
			return dec("123456789012345678901.2345").Mul(decimal.New(1+r.Int64N(9), int32(-r.IntN(3))))
		case 1: // a positive exponent
			return decimal.New(1+r.Int64N(999), int32(1+r.IntN(25)))
		case 2: // many places
			return decimal.New(1+r.Int64N(1<<60), int32(-10-r.IntN(20)))
		default:
			return decimal.New(1+r.Int64N(10_000_000), int32(-r.IntN(9)))
		}
	}
	maybe := func() decimal.Decimal {
		if r.IntN(3) == 0 {
			return num()
		}
		return decimal.Decimal{}
	}
	for run := 0; run < 2000; run++ {
		lim := rl(100, "0.005")
		if r.IntN(4) == 0 {
			lim.RiskLimitBase, lim.RiskLimitStep = dec("1000"), dec("500")
		}
		if r.IntN(4) == 0 {
			lim.MaintenanceMarginRate = num()
		}
		dir := exchange.Long
		if r.IntN(2) == 0 {
			dir = exchange.Short
		}
		p := Position{Symbol: "X", Direction: dir, Quantity: num(), Entry: num(), Leverage: r.IntN(60), Cross: r.IntN(2) == 0,
			RiskLimit: lim, Index: num(), Scale: 2, Held: maybe(), Value: maybe(), MM: maybe()}
		liq := num()
		var sp stressPos
		ok := readStressPos(&sp, &p, liq, 0, 0)
		want := stressPos{long: dir == exchange.Long, q: toF(p.Quantity), ev: toF(p.EntryValue()), index: toF(p.Index), liq: toF(liq),
			margin: toF(p.Margin()), mm: toF(p.Maintenance()), cross: p.Cross}
		want.pnlNow = want.pnl(want.index)
		want.equity = want.margin + want.pnlNow
		if !ok {
			if finite(want.q*0 + want.index*0 + want.liq*0 + want.equity*0 + want.mm*0) {
				t.Fatalf("run %d: %+v not read, the decimals give %+v", run, p, want)
			}
			continue
		}
		if sp != want {
			t.Fatalf("run %d: %+v read as\n%+v, the decimals give\n%+v", run, p, sp, want)
		}
	}
}

// An account read from the caller's floats (PricedFrom, the engine's path)
// is the account read from its decimals, bit for bit: the same book, the
// same grid and forfeit, over accounts whose figures are listed or not
// (the grid works out what is not), with coefficients past 2^53 and 18
// digits, positive exponents, figures so small their floats are 0, closed
// positions and indexes missing; σ given or asked; symbols shared, or each
// position's own and said so.
func TestPricedFromMatchesPriced(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(38, 11))
	num := func(d decimal.Decimal) decimal.Decimal {
		switch r.IntN(8) {
		case 0: // a coefficient past 2^53, as many places
			return d.Add(decimal.New(1+r.Int64N(1<<20), -12))
		case 1: // past 18 digits
			return d.Add(decimal.New(1+r.Int64N(1<<40), -20))
		case 2: // a positive exponent
			return decimal.New(d.Round(-2).Shift(-2).IntPart(), 2)
		case 3:
			if r.IntN(4) == 0 { // not 0, its float 0
				return decimal.New(1+r.Int64N(9), -400)
			}
		}
		return d
	}
	for run := 0; run < 1000; run++ {
		distinct := r.IntN(2) == 0
		var a Account
		var sigma func(string) float64
		if distinct {
			a, sigma = distinctAccount(r, 1+r.IntN(40))
		} else {
			a, sigma = stressAccount(r, 1+r.IntN(40))
		}
		for i := range a.Positions {
			p := &a.Positions[i]
			if r.IntN(5) > 0 {
				p.Value = num(p.EntryValue())
			}
			if r.IntN(5) > 0 {
				p.Held = num(p.Margin())
			}
			if r.IntN(5) > 0 {
				p.MM = num(p.Maintenance())
			}
			switch r.IntN(30) {
			case 0:
				p.Quantity = decimal.Zero
			case 1:
				p.Index = decimal.Zero
			case 2:
				p.Quantity = decimal.New(1, -400) // open, its float 0
			}
			p.Index = num(p.Index)
		}
		liqs := a.LiquidationPrices()
		f := floatsOf(a, sigma, distinct)
		if r.IntN(3) == 0 {
			f.Sigma = nil
		}
		got, want := a.PricedFrom(f, sigma, liqs), a.Priced(sigma, liqs)
		if got.ok != want.ok || !slices.Equal(got.b.ps, want.b.ps) || !slices.Equal(got.b.syms, want.b.syms) ||
			got.b.pool != want.b.pool || got.b.poolMM != want.b.poolMM || got.b.free != want.b.free || got.b.anyCross != want.b.anyCross {
			t.Fatalf("run %d: read from the floats\n%+v, from the decimals\n%+v", run, got.b, want.b)
		}
		if g, w := got.StressJudged(3), want.StressJudged(3); !reflect.DeepEqual(g, w) {
			t.Fatalf("run %d: judged %+v, from the decimals %+v", run, g, w)
		}
		if g, w := got.Forfeit(), want.Forfeit(); !reflect.DeepEqual(g, w) {
			t.Fatalf("run %d: forfeit %+v, from the decimals %+v", run, g, w)
		}
	}
}

// A read into a Scratch reused from read to read is the read into lists of
// its own: the same book, grid and forfeit, and the same forfeits after
// (a call's, an isolated candidate's), on accounts larger and smaller than
// the last, positions closed and without a price; and what a read hands
// on (a forfeit after, a grid) is as it was after the next read reused
// the scratch.
func TestPricedFromScratchIsPricedFrom(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(38, 29))
	var s Scratch
	var kept []string
	var keptWas []func() string
	isolated, steady := 0, 0
	var last Account
	var lastSigma func(string) float64
	var lastOwn []string
	lastDistinct := false
	for run := 0; run < 600; run++ {
		distinct := r.IntN(2) == 0
		var a Account
		var sigma func(string) float64
		switch {
		case run%3 == 2 && len(last.Positions) > 0:
			// A steady account: the last, its indexes moved.
			a, sigma, distinct = movedIndexes(last, 0.97+0.06*r.Float64()), lastSigma, lastDistinct
		case distinct:
			a, sigma = distinctAccount(r, 1+r.IntN(40))
		default:
			a, sigma = stressAccount(r, 1+r.IntN(40))
		}
		last, lastSigma, lastDistinct = a, sigma, distinct
		if r.IntN(2) == 0 && run%3 != 2 {
			a = listedAccount(a)
		}
		for i := range a.Positions {
			if run%3 == 2 {
				break // as the last
			}
			switch r.IntN(40) {
			case 0:
				a.Positions[i].Quantity = decimal.Zero
			case 1:
				a.Positions[i].Index = decimal.Zero
			}
			if run%50 == 0 { // none open, at the scratch's first read too
				a.Positions[i].Quantity = decimal.Zero
			}
		}
		liqs := a.LiquidationPrices()
		f := floatsOf(a, sigma, distinct)
		fs := f
		fs.Scratch = &s
		got, want := a.PricedFrom(fs, sigma, liqs), a.PricedFrom(f, sigma, liqs)
		if got.ok != want.ok || !slices.Equal(got.b.ps, want.b.ps) || !slices.Equal(got.b.syms, want.b.syms) ||
			got.b.pool != want.b.pool || got.b.poolMM != want.b.poolMM || got.b.free != want.b.free || got.b.anyCross != want.b.anyCross {
			t.Fatalf("run %d: read into the scratch\n%+v, into its own\n%+v", run, got.b, want.b)
		}
		gj, wj := got.StressJudged(3), want.StressJudged(3)
		if !reflect.DeepEqual(gj, wj) {
			t.Fatalf("run %d: judged %+v, into its own %+v", run, gj, wj)
		}
		if g, w := got.Forfeit(), want.Forfeit(); !reflect.DeepEqual(g, w) {
			t.Fatalf("run %d: forfeit %+v, into its own %+v", run, g, w)
		}
		if len(got.own) > 0 && len(lastOwn) > 0 && &got.own[0] == &lastOwn[0] {
			steady++ // the symbols of the last forfeit listed again
		}
		lastOwn = got.own
		// What the last read handed on is as it was, its scratch read
		// into again (the book, its symbols and the forfeit's parts).
		for k, was := range kept {
			if now := keptWas[k](); now != was {
				t.Fatalf("run %d: a forfeit after of an earlier read\n%s\nwas\n%s", run, now, was)
			}
		}
		kept, keptWas = kept[:0], keptWas[:0]
		i := r.IntN(len(a.Positions))
		next, _, after := a.ApplyPriced(i, 1+r.IntN(50), r.IntN(2) == 0, nil, liqs)
		ga, wa := got.After(next, i, after), want.After(next, i, after)
		gf, wf := got.ForfeitAfter(ga, i), want.ForfeitAfter(wa, i)
		if !reflect.DeepEqual(gf, wf) {
			t.Fatalf("run %d: forfeit after %+v, into its own %+v", run, gf, wf)
		}
		gs := ga.StressJudged(3)
		kept = append(kept, fmt.Sprintf("%+v|%+v|%+v", gf, gs, gj))
		keptWas = append(keptWas, func() string { return fmt.Sprintf("%+v|%+v|%+v", gf, gs, gj) })
		if !a.Positions[i].Cross {
			np, eff := a.IsolatedEffect(i, 1+r.IntN(50), nil, liqs)
			gi := got.ForfeitAfterIsolated(&np, eff.FreeAfter, i, eff.LiquidationAfter)
			if wi := want.ForfeitAfterIsolated(&np, eff.FreeAfter, i, eff.LiquidationAfter); !reflect.DeepEqual(gi, wi) {
				t.Fatalf("run %d: isolated forfeit after %+v, into its own %+v", run, gi, wi)
			}
			if len(gi.Parts) > 0 {
				isolated++
			}
			kept = append(kept, fmt.Sprintf("%+v", gi))
			keptWas = append(keptWas, func() string { return fmt.Sprintf("%+v", gi) })
		}
	}
	if isolated == 0 || steady == 0 {
		t.Fatalf("%d isolated candidates' forfeits after listed a part, %d steady accounts' forfeits listed the last symbols", isolated, steady)
	}
}

// LiquidationPricesIn lists LiquidationPricesWith's prices, decimals in
// value and exponent, in the scratch's list reused from account to
// account (larger and smaller, positions closed, with and without an open
// cross position: then a list of their own).
func TestLiquidationPricesInIsWith(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(38, 32))
	var s Scratch
	var l1, l2 Liquidations
	reused := 0
	for run := range 400 {
		a, _ := distinctAccount(r, 1+r.IntN(30))
		anyCross := r.IntN(4) == 0
		for k := range a.Positions {
			a.Positions[k].Cross = anyCross && r.IntN(2) == 0
			if r.IntN(8) == 0 {
				a.Positions[k].Quantity = decimal.Zero
			}
		}
		got, want := a.LiquidationPricesIn(&s, &l1), a.LiquidationPricesWith(&l2)
		if len(got) != len(want) {
			t.Fatalf("run %d: %d prices, want %d", run, len(got), len(want))
		}
		for i := range got {
			if !SameDec(got[i], want[i]) {
				t.Fatalf("run %d: position %d's price %s, want %s", run, i, got[i], want[i])
			}
		}
		if len(got) > 0 && len(s.liqs) > 0 && &got[0] == &s.liqs[0] {
			reused++
		}
	}
	if reused == 0 {
		t.Fatal("the scratch's list was never used")
	}
}
