package margin

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/riskguard/riskguard/exchange"
	"github.com/shopspring/decimal"
)

// stressReference is the grid as first written: every move of every
// family evaluates every position (quadratic in the symbols). Stress must
// say the same. It reads the account as Stress does (stressBook); sigma,
// likely and liqs are Stress's.
func stressReference(a Account, sigma func(symbol string) float64, likely float64, liqs []decimal.Decimal) Stress {
	s := Stress{Likely: likely}
	b, ok := a.stressBook(sigma, liqs) // the account read as Stress reads it
	if !ok {
		return s
	}
	ps, syms := b.ps, b.syms
	s.Known, s.Sigma = true, syms
	if len(ps) == 0 {
		return s
	}
	g := refGrid{stressBook: b, factor: make([]float64, len(syms))}
	lost := make([]bool, len(ps))
	fatal := make([]FatalMove, len(ps))
	steps := int(math.Round(stressReach / stressStep))
	// The weights over the fine grid, normalised to 1.
	wsum := 0.0
	for n := -steps; n <= steps; n++ {
		wsum += stressWeight(float64(n) * stressStep)
	}
	for f := -1; f < len(syms); f++ { // -1: together
		family, share := StressTogether, 0.5
		if f >= 0 {
			family, share = syms[f].Symbol, 0.5/float64(len(syms))
		}
		if len(syms) == 1 && f == 0 {
			share = 0.5 // alone is together: both halves the same moves
		}
		for n := -steps; n <= steps; n++ {
			k := float64(n) * stressStep
			loss := g.at(f, k, lost)
			s.Expected += share * stressWeight(k) / wsum * loss
			if math.Abs(k) > likely+1e-9 {
				continue
			}
			for i, l := range lost {
				if l && (fatal[i].Family == "" || math.Abs(k) < math.Abs(fatal[i].K)) {
					fatal[i] = FatalMove{Symbol: b.symbol(i), Direction: b.dir(i), Family: family, K: k, Move: k * syms[ps[i].sym].Sigma}
				}
			}
		}
		for _, k := range StressShown {
			loss := g.at(f, k, lost)
			pt := StressPoint{Family: family, K: k, Loss: loss}
			for i, l := range lost {
				if l {
					pt.Lost = append(pt.Lost, b.name(i))
				}
			}
			s.Points = append(s.Points, pt)
		}
	}
	for _, fm := range fatal {
		if fm.Family != "" {
			s.Fatal = append(s.Fatal, fm)
		}
	}
	return s
}

// refGrid evaluates the account at the moves of the grid.
type refGrid struct {
	stressBook
	factor []float64 // each symbol's index factor at the move
}

// at is the loss at the move k σ of family f (−1: together; else the
// symbol f alone), marking the positions lost.
func (g *refGrid) at(f int, k float64, lost []bool) float64 {
	for j := range g.factor {
		g.factor[j] = 1
		if f < 0 || f == j {
			g.factor[j] = math.Max(0, 1+k*g.syms[j].Sigma)
		}
	}
	loss := 0.0
	poolAt := g.free
	for i := range g.ps {
		p := &g.ps[i]
		lost[i] = false
		ix := p.index * g.factor[p.sym]
		if p.cross {
			poolAt += p.margin + p.pnl(ix)
			continue
		}
		if p.liq > 0 && ((p.long && ix <= p.liq) || (!p.long && ix >= p.liq)) {
			lost[i] = true
			loss += math.Max(p.equity, 0)
		}
	}
	if g.anyCross && poolAt <= g.poolMM {
		for i := range g.ps {
			lost[i] = lost[i] || g.ps[i].cross
		}
		loss += math.Max(g.pool, 0)
	}
	return loss
}

// sameStress reports where got and want (stressReference's) differ: the
// figures within a relative 1e-9 (the sums run in another order), the
// fatal moves and the names lost the same.
func sameStress(got, want Stress) string {
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b))) }
	switch {
	case got.Known != want.Known:
		return fmt.Sprintf("known %v, want %v", got.Known, want.Known)
	case !near(got.Expected, want.Expected):
		return fmt.Sprintf("expected loss %v, want %v", got.Expected, want.Expected)
	case len(got.Fatal) != len(want.Fatal):
		return fmt.Sprintf("fatal %+v, want %+v", got.Fatal, want.Fatal)
	case len(got.Points) != len(want.Points):
		return fmt.Sprintf("%d points, want %d", len(got.Points), len(want.Points))
	}
	for i, f := range got.Fatal {
		w := want.Fatal[i]
		if f.Symbol != w.Symbol || f.Direction != w.Direction || f.Family != w.Family || f.K != w.K || !near(f.Move, w.Move) {
			return fmt.Sprintf("fatal %d: %+v, want %+v", i, f, w)
		}
	}
	var together []float64
	for _, p := range want.Points {
		if p.Family == StressTogether {
			together = append(together, p.Loss)
		}
	}
	if len(got.TogetherAt) != len(together) {
		return fmt.Sprintf("losses together %v, want %v", got.TogetherAt, together)
	}
	for i, l := range got.TogetherAt {
		if !near(l, together[i]) {
			return fmt.Sprintf("losses together %v, want %v", got.TogetherAt, together)
		}
	}
	for i, p := range got.Points {
		w := want.Points[i]
		if p.Family != w.Family || p.K != w.K || !near(p.Loss, w.Loss) || strings.Join(p.Lost, ",") != strings.Join(w.Lost, ",") {
			return fmt.Sprintf("point %d: %+v, want %+v", i, p, w)
		}
	}
	return ""
}

// stressAccount is an account of n positions on up to n symbols (some
// symbols hold a long and a short), each cross or isolated at any
// leverage, its index moved up to ±30% from the entry (so some isolated
// positions are past their liquidation price already), and a σ per
// symbol.
func stressAccount(r *rand.Rand, n int) (Account, func(string) float64) {
	sigma := map[string]float64{}
	a := Account{Free: decimal.NewFromInt(r.Int64N(50000))}
	for i := 0; i < n; i++ {
		sym := fmt.Sprintf("X%02d", r.IntN(n))
		if _, ok := sigma[sym]; !ok {
			sigma[sym] = 0.002 + r.Float64()*0.1
		}
		entry := decimal.NewFromInt(100 + r.Int64N(100000))
		move := 1 + (r.Float64()-0.5)*0.6
		dir := exchange.Long
		if r.IntN(2) == 0 {
			dir = exchange.Short
		}
		a.Positions = append(a.Positions, Position{Symbol: sym, Direction: dir, Quantity: decimal.NewFromInt(1 + r.Int64N(20)), Entry: entry,
			Leverage: 1 + r.IntN(50), Cross: r.IntN(2) == 0, RiskLimit: rl(50, "0.005"), Index: entry.Mul(decimal.NewFromFloat(move)).Round(2), Scale: 2})
	}
	return a, func(s string) float64 { return sigma[s] }
}

// The grid's alone families touch only the moved symbol's positions and
// the pool; they say what evaluating every position at every move says.
func TestStressMatchesReference(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(31, 1))
	for run := 0; run < 300; run++ {
		a, sigma := stressAccount(r, 1+r.IntN(24))
		likely := 1 + r.Float64()*4
		full := a.Stress(sigma, likely, nil)
		if d := sameStress(full, stressReference(a, sigma, likely, nil)); d != "" {
			t.Fatalf("run %d (%d positions): %s", run, len(a.Positions), d)
		}
		// Judged: the same figures and losses together, no points.
		judged := a.StressJudged(sigma, likely, nil)
		judged.Points = full.Points
		if d := sameStress(judged, stressReference(a, sigma, likely, nil)); d != "" || a.StressJudged(sigma, likely, nil).Points != nil {
			t.Fatalf("run %d judged: %s", run, d)
		}
	}
}

// BenchmarkStress judges an account of 10 and of 300 positions (mixed
// cross and isolated) on the grid: judged, as a settings call's
// prediction does for the account after it, and with the points shown,
// as riskguard check prints it.
func BenchmarkStress(b *testing.B) {
	for _, n := range []int{10, 300} {
		for _, shown := range []bool{false, true} {
			b.Run(fmt.Sprintf("%d/shown=%v", n, shown), func(b *testing.B) {
				r := rand.New(rand.NewPCG(7, uint64(n)))
				a, sigma := stressAccount(r, n)
				liqs := a.LiquidationPrices()
				b.ReportAllocs()
				for b.Loop() {
					a.stress(sigma, 3, liqs, shown)
				}
			})
		}
		// The engine's path (engine/model's Watch.Account, then engine/act
		// model.go's pricedBefore): the account as the engine's view lists
		// it (entry value, margin held and maintenance set; one position a
		// symbol), each position's σ worked out as Watch.Account works it
		// out a row at a time (volatility.sigmaAt: the index's entry kept
		// by the row's place, its name compared, a square root of its
		// variance: here vols), read from those and the floats the view
		// converted for the tick's rules (PricedFrom), judged; every index
		// and liquidation price moves at every call (two ticks in turn).
		// listed is the same account read afresh from its decimals, as
		// pricedBefore read it before.
		for _, fromFloats := range []bool{true, false} {
			name := "engine"
			if !fromFloats {
				name = "listed"
			}
			b.Run(fmt.Sprintf("%d/%s", n, name), func(b *testing.B) {
				r := rand.New(rand.NewPCG(7, uint64(n)))
				a, sigma := distinctAccount(r, n)
				a = listedAccount(a)
				next := listedAccount(movedIndexes(a, 1.001))
				accts := [2]Account{a, next}
				fs := [2]Floats{floatsOf(a, sigma, true), floatsOf(next, sigma, true)}
				vols := make([]*volEntry, n)
				for k, p := range a.Positions {
					sg := sigma(p.Symbol)
					vols[k] = &volEntry{name: p.Symbol, varPerSec: sg * sg / 3600, weight: 1}
				}
				liqs := [2][]decimal.Decimal{a.LiquidationPrices(), next.LiquidationPrices()}
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if fromFloats {
						a, f := accts[i&1], fs[i&1]
						f.Sigma = make([]float64, len(a.Positions))
						for k := range a.Positions {
							if v := vols[k]; v.name == a.Positions[k].Symbol && v.weight > 0 {
								f.Sigma[k] = math.Sqrt(v.varPerSec / v.weight * 3600)
							}
						}
						a.PricedFrom(f, sigma, liqs[i&1]).StressJudged(3)
					} else {
						accts[i&1].Priced(sigma, liqs[i&1]).StressJudged(3)
					}
					i++
				}
			})
		}
	}
}

// listedAccount is a as the engine's view lists it: each position's entry
// value, margin held and maintenance set (margin.PositionOf, Watch.Account).
func listedAccount(a Account) Account {
	next := Account{Free: a.Free, Positions: slices.Clone(a.Positions)}
	for i := range next.Positions {
		p := &next.Positions[i]
		p.Value, p.Held, p.MM = p.EntryValue(), p.Margin(), p.Maintenance()
	}
	return next
}

// volEntry stands for an index's entry in the engine's volatility
// (engine/model's volIndex): σ over an hour is the square root of its
// variance a second times 3,600.
type volEntry struct {
	name              string
	varPerSec, weight float64
}

// floatsOf is a's positions' figures as the engine's view holds them
// (Float of each decimal), one line per position, with σ (sigma's) and
// distinct as given.
func floatsOf(a Account, sigma func(string) float64, distinct bool) Floats {
	f := Floats{Lines: make([]Line, len(a.Positions)), Sigma: make([]float64, len(a.Positions)), Distinct: distinct}
	for i, p := range a.Positions {
		f.Lines[i] = Line{Short: p.Direction == exchange.Short, Cross: p.Cross, Quantity: Float(p.Quantity), Index: Float(p.Index),
			EntryValue: Float(p.Value), Margin: Float(p.Held), Maintenance: Float(p.MM)}
		f.Sigma[i] = sigma(p.Symbol)
	}
	return f
}

// distinctAccount is stressAccount with every position on a symbol of its
// own (the engine's accounts: one position a symbol), each symbol's σ its
// position's symbol's in stressAccount.
func distinctAccount(r *rand.Rand, n int) (Account, func(string) float64) {
	a, sigma := stressAccount(r, n)
	of := map[string]float64{}
	for i := range a.Positions {
		p := &a.Positions[i]
		sym := fmt.Sprintf("D%03d", i)
		of[sym] = sigma(p.Symbol)
		p.Symbol = sym
	}
	return a, func(s string) float64 { return of[s] }
}

// movedIndexes is a with every index moved by the factor f (to cents), its
// other figures the same decimals.
func movedIndexes(a Account, f float64) Account {
	next := Account{Free: a.Free, Positions: slices.Clone(a.Positions)}
	for i := range next.Positions {
		next.Positions[i].Index = next.Positions[i].Index.Mul(decimal.NewFromFloat(f)).Round(2)
	}
	return next
}

// An index past float64's range (a print of 1e400) makes a position's
// equity infinite: the grid says what the walk says, an infinite equity
// counted only where a move loses it (no weight times infinity: the
// status page could not encode the NaN).
func TestStressIndexPastFloatRange(t *testing.T) {
	t.Parallel()
	for _, cross := range []bool{false, true} {
		sol := xsol(cross)
		sol.Index = dec("1e400")
		a := Account{Free: dec("3000"), Positions: []Position{xbtc(false), sol, xeth(true, "3000")}}
		got := a.Stress(sigmaOf(0.02), 3, nil)
		if d := sameStress(got, stressReference(a, sigmaOf(0.02), 3, nil)); d != "" || math.IsNaN(got.Expected) {
			t.Errorf("cross %v: %s (expected %v)", cross, d, got.Expected)
		}
		for i, l := range got.TogetherAt {
			if math.IsNaN(l) {
				t.Errorf("cross %v: loss at %gσ is NaN", cross, StressShown[i])
			}
		}
	}
}
