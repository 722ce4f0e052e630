package margin

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/riskguard/riskguard/exchange"
	"github.com/shopspring/decimal"
)

// Touch is 2·tail of the unit-variance t(3): 1 at 0; at 1σ
// 1 − (2/π)(π/4 + ½) = ½ − 1/π; far out (4/(3π))/x³; and it is the
// integral of the grid's density (2/π)(1 + x²)⁻² beyond ±k, continuous
// where its closed form changes (1σ, 20σ).
func TestTouch(t *testing.T) {
	t.Parallel()
	near := func(got, want, rel float64) bool { return math.Abs(got-want) <= rel*math.Abs(want) }
	tests := []struct{ k, want, rel float64 }{
		{0, 1, 1e-15},
		{1, 0.5 - 1/math.Pi, 1e-14},
		{-1, 0.5 - 1/math.Pi, 1e-14},
		{1e3, 4 / (3 * math.Pi) / 1e9, 1e-5},
		{1e6, 4 / (3 * math.Pi) / 1e18, 1e-11},
	}
	for _, tt := range tests {
		if got := Touch(tt.k); !near(got, tt.want, tt.rel) {
			t.Errorf("Touch(%g) = %.17g, want %.17g", tt.k, got, tt.want)
		}
	}
	// The density integrated by Simpson's rule from k to 2,000σ, plus
	// the far tail's first order.
	for _, k := range []float64{0.3, 1, 2.5, 3.0833, 7, 19.99, 20, 20.01, 60} {
		const n, top = 400000, 2000.0
		h := (top - k) / n
		f := func(x float64) float64 { d := 1 + x*x; return 2 / math.Pi / (d * d) }
		s := f(k) + f(top)
		for i := 1; i < n; i++ {
			c := 2.0
			if i%2 == 1 {
				c = 4
			}
			s += c * f(k+float64(i)*h)
		}
		want := 2 * (s*h/3 + 2/(3*math.Pi)/(top*top*top))
		if got := Touch(k); !near(got, want, 1e-7) {
			t.Errorf("Touch(%g) = %.12g, integral %.12g", k, got, want)
		}
	}
	for _, k := range []float64{1, 20} {
		if a, b := Touch(math.Nextafter(k, 0)), Touch(k); !near(a, b, 1e-12) {
			t.Errorf("Touch jumps at %g: %.17g → %.17g", k, a, b)
		}
	}
}

// The hand-worked accounts (account_test.go's positions, σ 2% unless said).
func TestForfeit(t *testing.T) {
	t.Parallel()
	type part struct {
		at     int
		family string
		k      float64
		kFar   float64
		amount float64
	}
	tests := []struct {
		name   string
		acct   Account
		sigma  func(string) float64
		parts  []part
		expect float64
	}{{
		// XSOL long 400 @ 150 ×15 isolated: liquidated at 140.75, where
		// its margin 4,000 and PNL 400·(140.75 − 150) = −3,700 leave 300
		// (its maintenance). k* = (140.75/150 − 1)/2% = −3.0833σ,
		// touched with probability 1 − (2/π)(atan 3.0833 + 3.0833/10.507)
		// = 1.2837%. One symbol: together and alone, ½ each, are the same
		// moves: 300 · 1.2837% = 3.851.
		name: "isolated", acct: Account{Free: dec("3000"), Positions: []Position{xsol(false)}}, sigma: sigmaOf(0.02),
		parts:  []part{{0, StressTogether, -3.083333333, 0, 300}, {0, "XSOL", -3.083333333, 0, 300}},
		expect: 3.8510,
	}, {
		// XSOL at 140.75 is on its liquidation price: past it, lost
		// whatever moves, with its equity now, 300.
		name: "isolated past", acct: Account{Free: dec("3000"), Positions: []Position{func() Position { p := xsol(false); p.Index = dec("140.75"); return p }()}},
		sigma: sigmaOf(0.02), parts: []part{{0, "", 0, 0, 300}}, expect: 300,
	}, {
		// XBTC long 0.5 @ 64,000 ×20 cross, 3,000 free: the pool is 3,000
		// + 1,600 = 4,600, its maintenance 160; each σ moves it by
		// 0.5·64,000·2% = 640, so it falls to 160 at −4,440/640 =
		// −6.9375σ (touched 0.12401%), forfeiting 160: 0.1984.
		name: "cross", acct: Account{Free: dec("3000"), Positions: []Position{xbtc(true)}}, sigma: sigmaOf(0.02),
		parts:  []part{{-1, StressTogether, -6.9375, 0, 160}, {-1, "XBTC", -6.9375, 0, 160}},
		expect: 0.19842,
	}, {
		// Both isolated XSOL and cross XBTC: two symbols, so together
		// weighs ½ and each alone ¼; XSOL alone does not move the pool,
		// XBTC alone not XSOL: each part counts ¾.
		// ¾·(300·1.28368% + 160·0.12401%) = 3.0371.
		name: "mixed", acct: Account{Free: dec("3000"), Positions: []Position{xsol(false), xbtc(true)}}, sigma: sigmaOf(0.02),
		parts: []part{{0, StressTogether, -3.083333333, 0, 300}, {0, "XSOL", -3.083333333, 0, 300},
			{-1, StressTogether, -6.9375, 0, 160}, {-1, "XBTC", -6.9375, 0, 160}},
		expect: 3.0371,
	}, {
		// XBTC long (σ 2%) and XETH short 10 @ 3,000 ×10 (σ 4%) both
		// cross, 3,000 free: pool 7,600, maintenance 310, 7,290 to lose.
		// Together each σ moves it by 640 − 10·3,000·4% = −560: up at
		// 13.0179σ; down it rises until XETH's floor (−25σ), then with
		// XETH at 0 (+30,000) it falls by 640 a σ but reaches XBTC's floor
		// (−50σ) at 5,600: no point below. XBTC alone: −7,290/640 =
		// −11.3906σ; XETH alone: 7,290/1,200 = +6.075σ. Each forfeits
		// 310: ½·310·0.019103% + ¼·310·(0.028454% + 0.18332%) = 0.19373.
		name: "cross both ways", acct: Account{Free: dec("3000"), Positions: []Position{xbtc(true), xeth(true, "3000")}},
		sigma:  func(s string) float64 { return map[string]float64{"XBTC": 0.02, "XETH": 0.04}[s] },
		parts:  []part{{-1, "XETH", 6.075, 0, 310}, {-1, "XBTC", -11.390625, 0, 310}, {-1, StressTogether, 13.017857143, 0, 310}},
		expect: 0.19373,
	}, {
		// The same with XETH at σ 1%: together each σ moves the pool by
		// 640 − 300 = 340, down to −7,290/340 = −21.441σ; up, never.
		// XETH alone: +7,290/300 = 24.3σ.
		name: "cross one way together", acct: Account{Free: dec("3000"), Positions: []Position{xbtc(true), xeth(true, "3000")}},
		sigma:  func(s string) float64 { return map[string]float64{"XBTC": 0.02, "XETH": 0.01}[s] },
		parts:  []part{{-1, "XBTC", -11.390625, 0, 310}, {-1, StressTogether, -21.441176471, 0, 310}, {-1, "XETH", 24.3, 0, 310}},
		expect: 310 * (0.5*Touch(21.441176471) + 0.25*Touch(11.390625) + 0.25*Touch(24.3)),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.acct.Forfeit(tt.sigma, nil)
			if !f.Known || len(f.Parts) != len(tt.parts) {
				t.Fatalf("got %+v, want known and %d parts", f, len(tt.parts))
			}
			for i, w := range tt.parts {
				g := f.Parts[i]
				if g.At != w.at || g.Family != w.family || math.Abs(g.K-w.k) > 1e-8 || math.Abs(g.KFar-w.kFar) > 1e-8 || math.Abs(g.Amount-w.amount) > 1e-9 {
					t.Errorf("part %d: %+v, want %+v", i, g, w)
				}
				if want := math.Min(1, Touch(g.K)+Touch(g.KFar)*b2f(g.KFar != 0)); g.Prob != want {
					t.Errorf("part %d: prob %v, want %v", i, g.Prob, want)
				}
			}
			if math.Abs(f.Expected-tt.expect) > 1e-4 {
				t.Errorf("expected %.6f, want %.6f", f.Expected, tt.expect)
			}
		})
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// A pool whose points are on both sides is touched on either: the two
// probabilities summed. XBTC short 2 @ 64,000 ×20 (σ 20%: its floor, the
// index at 0, is −5σ) and XETH long 400 @ 3,000 ×10 (σ 2%), both cross,
// 5,000 free: the pool is 5,000 + 6,400 + 120,000 = 131,400, its
// maintenance 640 + 6,000 = 6,640, so 124,760 to lose. Every index
// together, each σ moves it by −128,000·20% + 1,200,000·2% = −1,600
// above 0: up at 124,760/1,600 = 77.975σ. Below 0 it rises by 1,600 a σ
// to XBTC's floor (139,400 at −5σ), then XBTC stays at 0 and the long
// falls by 24,000 a σ: 132,760 more at −5 − 5.5317 = −10.5317σ. Both
// forfeit the maintenance, 6,640.
func TestForfeitPoolBothSides(t *testing.T) {
	t.Parallel()
	btc := xbtc(true)
	btc.Direction, btc.Quantity = exchange.Short, dec("2")
	eth := xeth(true, "3000")
	eth.Direction, eth.Quantity = exchange.Long, dec("400")
	a := Account{Free: dec("5000"), Positions: []Position{btc, eth}}
	sigma := func(s string) float64 { return map[string]float64{"XBTC": 0.2, "XETH": 0.02}[s] }
	var tog ForfeitPart
	for _, p := range a.Forfeit(sigma, nil).Parts {
		if p.Family == StressTogether {
			tog = p
		}
	}
	down, up := -5-132760.0/24000, 124760.0/1600
	if math.Abs(tog.K-down) > 1e-9 || math.Abs(tog.KFar-up) > 1e-9 || tog.Prob != Touch(down)+Touch(up) || tog.Amount != 6640 {
		t.Fatalf("together %+v, want K %v, KFar %v", tog, down, up)
	}
}

// Without an index price or a σ nothing is known: no figure.
func TestForfeitUnknown(t *testing.T) {
	t.Parallel()
	p := xsol(false)
	p.Index = dec("0")
	if f := (Account{Positions: []Position{p}}).Forfeit(sigmaOf(0.02), nil); f.Known || f.Expected != 0 || f.Parts != nil {
		t.Errorf("no index price: %+v", f)
	}
	if f := (Account{Positions: []Position{xsol(false)}}).Forfeit(sigmaOf(0), nil); f.Known {
		t.Errorf("no σ: %+v", f)
	}
	p.Index = dec("1e400") // past float64's range
	if f := (Account{Positions: []Position{xbtc(true), p}}).Forfeit(sigmaOf(0.02), nil); f.Known {
		t.Errorf("an index of 1e400: %+v", f)
	}
	if f := (Account{Free: dec("5")}).Forfeit(sigmaOf(0.02), nil); !f.Known || f.Expected != 0 || len(f.Parts) != 0 {
		t.Errorf("no position: %+v", f)
	}
}

// forfeitStep and forfeitReach are the reference's grid: it walks every
// family out from 0 by forfeitStep σ to ±forfeitReach σ.
const (
	forfeitStep  = 0.01
	forfeitReach = 30.0
)

// refPart is a part as forfeitReference finds it: on each side, the
// first grid move that loses it (lo: the move, hi: the one before, nearer
// 0; 0 when none within reach), and the amount between what the pool holds
// at those moves.
type refPart struct {
	at                     int
	family                 string
	weight                 float64
	past                   bool
	downLo, downHi         float64
	upLo, upHi             float64
	amountLo, amountHi     float64 // what it forfeits lies in between
	downFound, upFound     bool
	amountExact, amountSet bool
}

// forfeitReference walks each family's moves out from 0, evaluating every
// position at every move (the pool summed afresh from the free balance),
// to find each part's first move that liquidates it on each side.
func forfeitReference(a Account, sigma func(string) float64) ([]refPart, bool) {
	b, ok := a.stressBook(sigma, nil)
	if !ok {
		return nil, false
	}
	var out []refPart
	if len(b.ps) == 0 {
		return out, true
	}
	liqs := a.LiquidationPrices()
	factor := func(f, sym int, k float64) float64 {
		if f < 0 || f == sym {
			return math.Max(0, 1+k*b.syms[sym].Sigma)
		}
		return 1
	}
	poolAt := func(f int, k float64) float64 {
		pool := toF(a.Free)
		for _, p := range b.ps {
			if p.cross {
				pool += p.margin + p.pnl(p.index*factor(f, p.sym, k))
			}
		}
		return pool
	}
	steps := int(math.Round(forfeitReach / forfeitStep))
	walk := func(lost func(k float64) bool) (downLo, downHi, upLo, upHi float64, down, up bool) {
		for m := 1; m <= steps && !down; m++ {
			if k := -float64(m) * forfeitStep; lost(k) {
				downLo, downHi, down = k, -float64(m-1)*forfeitStep, true
			}
		}
		for m := 1; m <= steps && !up; m++ {
			if k := float64(m) * forfeitStep; lost(k) {
				upLo, upHi, up = k, float64(m-1)*forfeitStep, true
			}
		}
		return
	}
	for i, p := range b.ps {
		if p.cross || !(p.liq > 0) {
			continue
		}
		liq := toF(liqs[p.at])
		// Lost where the moved index reaches the liquidation price.
		lostAt := func(f int, k float64) bool {
			ix := p.index * factor(f, p.sym, k)
			return p.long && ix <= liq || !p.long && ix >= liq
		}
		pos := a.Positions[p.at]
		// The exchange keeps what is left, never more.
		amount := math.Max(0, toF(pos.Margin().Add(pos.PNL(liqs[p.at]))))
		if lostAt(-1, 0) {
			eq := math.Max(0, toF(pos.Margin().Add(pos.PNL(pos.Index))))
			out = append(out, refPart{at: p.at, past: true, weight: 1, amountLo: eq, amountHi: eq, amountExact: true})
			continue
		}
		for _, f := range []int{-1, p.sym} {
			r := refPart{at: p.at, family: StressTogether, weight: 0.5, amountLo: amount, amountHi: amount, amountExact: true}
			if f >= 0 {
				r.family, r.weight = b.syms[f].Symbol, 0.5/float64(len(b.syms))
			}
			r.downLo, r.downHi, r.upLo, r.upHi, r.downFound, r.upFound = walk(func(k float64) bool { return lostAt(f, k) })
			out = append(out, r)
		}
		_ = i
	}
	if !b.anyCross {
		return out, true
	}
	mm := b.poolMM
	if now := poolAt(-1, 0); now <= mm {
		now = math.Max(now, 0)
		return append(out, refPart{at: -1, past: true, weight: 1, amountLo: now, amountHi: now, amountExact: true}), true
	}
	for f := -1; f < len(b.syms); f++ {
		r := refPart{at: -1, family: StressTogether, weight: 0.5}
		if f >= 0 {
			r.family, r.weight = b.syms[f].Symbol, 0.5/float64(len(b.syms))
		}
		r.downLo, r.downHi, r.upLo, r.upHi, r.downFound, r.upFound = walk(func(k float64) bool { return poolAt(f, k) <= mm })
		// The pool at the point is between what it holds at the move
		// that loses it and at the one before.
		if r.downFound {
			r.amountLo, r.amountHi, r.amountSet = poolAt(f, r.downLo), poolAt(f, r.downHi), true
		}
		if r.upFound {
			lo, hi := poolAt(f, r.upLo), poolAt(f, r.upHi)
			if r.amountSet {
				lo, hi = math.Min(lo, r.amountLo), math.Max(hi, r.amountHi)
			}
			r.amountLo, r.amountHi, r.amountSet = lo, hi, true
		}
		out = append(out, r)
	}
	return out, true
}

// sameForfeit reports where got differs from the reference: its parts
// nearest first, every part the reference finds within reach is there, its points within the grid
// move that found them, its probability and amount in the bracket; every
// other part of got lies beyond the reference's reach; the expected loss
// between the brackets' sums.
func sameForfeit(got Forfeit, ref []refPart, known bool) string {
	if got.Known != known {
		return fmt.Sprintf("known %v, want %v", got.Known, known)
	}
	const eps = 1e-9
	type key struct {
		at     int
		family string
	}
	parts := map[key]ForfeitPart{}
	for i, p := range got.Parts {
		if i > 0 && math.Abs(p.K) < math.Abs(got.Parts[i-1].K) {
			return fmt.Sprintf("part %d (K %g) after one at K %g: not nearest first", i, p.K, got.Parts[i-1].K)
		}
		k := key{p.At, p.Family}
		if _, dup := parts[k]; dup {
			return fmt.Sprintf("part %+v twice", p)
		}
		if !(p.Prob > 0) || p.Prob > 1 || math.IsNaN(p.Amount) || p.Amount < 0 {
			return fmt.Sprintf("part %+v: prob or amount out of range", p)
		}
		parts[k] = p
	}
	in := func(x, lo, hi float64) bool {
		lo, hi = math.Min(lo, hi), math.Max(lo, hi)
		tol := eps * math.Max(1, math.Max(math.Abs(lo), math.Abs(hi)))
		return x >= lo-tol && x <= hi+tol
	}
	beyond := func(k float64) bool { return k == 0 || math.Abs(k) >= forfeitReach-forfeitStep }
	expLo, expHi := 0.0, 0.0
	for _, r := range ref {
		k := key{r.at, r.family}
		p, ok := parts[k]
		delete(parts, k)
		if r.past {
			if !ok || p.Prob != 1 || p.Weight != 1 || p.K != 0 || !in(p.Amount, r.amountLo, r.amountHi) {
				return fmt.Sprintf("past part %+v: got %+v (%v)", r, p, ok)
			}
			expLo += p.Amount
			expHi += p.Amount
			continue
		}
		if !r.downFound && !r.upFound {
			if ok && !(beyond(p.K) && beyond(p.KFar)) {
				return fmt.Sprintf("part %+v: none within ±%gσ, got %+v", r, forfeitReach, p)
			}
			if ok {
				expHi += p.Weight * p.Prob * p.Amount
			}
			continue
		}
		if !ok {
			return fmt.Sprintf("part %+v missing", r)
		}
		if p.Weight != r.weight {
			return fmt.Sprintf("part %+v: weight %v, want %v", p, p.Weight, r.weight)
		}
		down, up := p.K, p.KFar
		if p.K > 0 {
			down, up = p.KFar, p.K
		}
		if down > 0 || up < 0 {
			return fmt.Sprintf("part %+v: both points on one side", p)
		}
		// Each side: in the reference's bracket, or absent (beyond reach)
		// where it found none.
		check := func(got float64, found bool, lo, hi float64) bool {
			if found {
				return got != 0 && in(got, lo, hi)
			}
			return beyond(got)
		}
		if !check(down, r.downFound, r.downLo, r.downHi) || !check(up, r.upFound, r.upLo, r.upHi) {
			return fmt.Sprintf("part %+v: points not where the reference found them %+v", p, r)
		}
		if !in(p.Amount, r.amountLo, r.amountHi) {
			return fmt.Sprintf("part %+v: amount outside [%v, %v]", p, r.amountLo, r.amountHi)
		}
		// The probability between the brackets' ends.
		pLo, pHi := 0.0, 0.0
		if r.downFound {
			pLo, pHi = pLo+Touch(r.downLo), pHi+Touch(r.downHi)
		}
		if r.upFound {
			pLo, pHi = pLo+Touch(r.upLo), pHi+Touch(r.upHi)
		}
		if !r.downFound || !r.upFound { // the other side may be beyond reach
			pHi += Touch(forfeitReach - forfeitStep)
		}
		pLo, pHi = math.Min(1, pLo), math.Min(1, pHi)
		if !in(p.Prob, pLo, pHi) {
			return fmt.Sprintf("part %+v: prob outside [%v, %v]", p, pLo, pHi)
		}
		expLo += p.Weight * pLo * math.Min(r.amountLo, r.amountHi)
		expHi += p.Weight * pHi * math.Max(r.amountLo, r.amountHi)
	}
	for _, p := range parts {
		if !(beyond(p.K) && beyond(p.KFar)) {
			return fmt.Sprintf("part %+v: the reference has none", p)
		}
		expHi += p.Weight * p.Prob * p.Amount
	}
	if !in(got.Expected, expLo, expHi) {
		return fmt.Sprintf("expected %v outside [%v, %v]", got.Expected, expLo, expHi)
	}
	return ""
}

// Forfeit finds each part's point where walking a fine grid of every
// family finds it, on random accounts (stressAccount: cross and isolated
// at any leverage, some past their point already).
func TestForfeitMatchesReference(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(38, 1))
	runs := 200
	if testing.Short() {
		runs = 40
	}
	for run := 0; run < runs; run++ {
		a, sigma := stressAccount(r, 1+r.IntN(12))
		ref, known := forfeitReference(a, sigma)
		if d := sameForfeit(a.Forfeit(sigma, nil), ref, known); d != "" {
			t.Fatalf("run %d (%d positions): %s", run, len(a.Positions), d)
		}
	}
}

// FuzzForfeit: on any account of the three positions (each cross or not,
// any leverage, any index) and any σ per symbol, Forfeit is the reference's
// and its expected loss is finite and at most what is at stake.
func FuzzForfeit(f *testing.F) {
	f.Add(int64(3000), int64(64000), int64(3100), int64(150), uint8(20), uint8(10), uint8(15), uint8(5), uint16(200), uint16(400), uint16(100))
	f.Add(int64(5000), int64(60000), int64(3000), int64(120), uint8(49), uint8(30), uint8(1), uint8(3), uint16(2000), uint16(200), uint16(4999))
	f.Fuzz(func(t *testing.T, free, btc, eth, sol int64, l1, l2, l3, mask uint8, s1, s2, s3 uint16) {
		if free < 0 || free > 1e9 || btc <= 0 || btc > 1e7 || eth <= 0 || eth > 1e6 || sol <= 0 || sol > 1e5 {
			return
		}
		sg := map[string]float64{"XBTC": float64(s1%5000+1) / 10000, "XETH": float64(s2%5000+1) / 10000, "XSOL": float64(s3%5000+1) / 10000}
		sigma := func(s string) float64 { return sg[s] }
		ps := []Position{xbtc(mask&1 != 0), xeth(mask&2 != 0, "3000"), xsol(mask&4 != 0)}
		ps[0].Index, ps[1].Index, ps[2].Index = decimal.NewFromInt(btc), decimal.NewFromInt(eth), decimal.NewFromInt(sol)
		if mask&8 != 0 {
			ps[1].Direction = exchange.Long
		}
		if mask&16 != 0 {
			ps[2].Direction = exchange.Short
		}
		for i, l := range []uint8{l1, l2, l3} {
			ps[i].Leverage = int(l%50) + 1
		}
		a := Account{Free: decimal.NewFromInt(free), Positions: ps}
		got := a.Forfeit(sigma, nil)
		ref, known := forfeitReference(a, sigma)
		if d := sameForfeit(got, ref, known); d != "" {
			t.Fatal(d)
		}
		stake := float64(free)
		for _, p := range ps {
			stake += math.Abs(p.Margin().InexactFloat64() + p.PNL(p.Index).InexactFloat64())
		}
		if math.IsNaN(got.Expected) || got.Expected < 0 || got.Expected > stake*(1+1e-9)+1e-6 {
			t.Errorf("expected %v, stake %v", got.Expected, stake)
		}
	})
}

// BenchmarkForfeit measures an account of 10 and of 300 positions (mixed
// cross and isolated, as BenchmarkStress).
func BenchmarkForfeit(b *testing.B) {
	for _, n := range []int{10, 300} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			r := rand.New(rand.NewPCG(7, uint64(n)))
			a, sigma := stressAccount(r, n)
			liqs := a.LiquidationPrices()
			b.ReportAllocs()
			for b.Loop() {
				a.Forfeit(sigma, liqs)
			}
		})
	}
}

// An account after a call on one position, read by patching the account
// before (Priced.After) and its forfeit merged from the before's
// (ForfeitAfter), is what reading it afresh says, part for part and bit
// for bit: leverage changes and mode changes, isolated and cross, on
// seeded accounts.
func TestPricedAfterMatchesFresh(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(38, 11))
	for run := 0; run < 400; run++ {
		a, sigma := stressAccount(r, 1+r.IntN(30))
		liqs := a.LiquidationPrices()
		before := a.Priced(sigma, liqs)
		i := r.IntN(len(a.Positions))
		next, _, after := a.ApplyPriced(i, 1+r.IntN(50), r.IntN(2) == 0, nil, liqs)
		pa := before.After(next, i, after)
		if got, want := pa.StressJudged(3), next.StressJudged(sigma, 3, after); !reflect.DeepEqual(got, want) {
			t.Fatalf("run %d: grid after\n%+v\nafresh\n%+v", run, got, want)
		}
		if got, want := before.ForfeitAfter(pa, i), next.Forfeit(sigma, after); !reflect.DeepEqual(got, want) {
			t.Fatalf("run %d (position %d): forfeit after\n%+v\nafresh\n%+v", run, i, got, want)
		}
	}
}

// An account after a reduce that leaves the position open, read by
// patching the account before (Priced.After, as the engine reads a
// reduce's candidates) and its forfeit merged from the before's, is what
// reading it afresh says, bit for bit: reduces of every size short of the
// whole position, isolated and cross, the account before read from its
// decimals or from the engine's floats (PricedFrom).
func TestPricedAfterReduceMatchesFresh(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(38, 12))
	for run := 0; run < 400; run++ {
		a, sigma := distinctAccount(r, 1+r.IntN(30))
		if r.IntN(2) == 0 {
			a = listedAccount(a)
		}
		liqs := a.LiquidationPrices()
		before := a.Priced(sigma, liqs)
		if r.IntN(2) == 0 {
			before = a.PricedFrom(floatsOf(a, sigma, true), sigma, liqs)
		}
		i := r.IntN(len(a.Positions))
		p := a.Positions[i]
		qty := p.Quantity.Mul(decimal.New(1+r.Int64N(99), -2)).Round(3)
		if !qty.IsPositive() || !qty.LessThan(p.Quantity) {
			continue
		}
		next, _, err := a.Reduce(i, qty, p.Index)
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		after := next.LiquidationPrices()
		pa := before.After(next, i, after)
		if got, want := pa.StressJudged(3), next.StressJudged(sigma, 3, after); !reflect.DeepEqual(got, want) {
			t.Fatalf("run %d: grid after\n%+v\nafresh\n%+v", run, got, want)
		}
		if got, want := before.ForfeitAfter(pa, i), next.Forfeit(sigma, after); !reflect.DeepEqual(got, want) {
			t.Fatalf("run %d (position %d): forfeit after\n%+v\nafresh\n%+v", run, i, got, want)
		}
	}
}

// A leverage change of an isolated position in an account without an open
// cross position, read without the account after (IsolatedEffect,
// Priced.AfterIsolated: a candidate compared by its cost), is what
// ApplyPriced and After say, bit for bit: the position after, the effect,
// the book, the grid and the forfeit after; the account before read from
// its decimals or from the engine's floats. With an open cross position
// AfterIsolated says it cannot.
func TestAfterIsolatedIsAfter(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(38, 14))
	crossRefused := 0
	for run := 0; run < 600; run++ {
		a, sigma := distinctAccount(r, 1+r.IntN(30))
		anyCross := r.IntN(5) == 0
		for k := range a.Positions {
			a.Positions[k].Cross = anyCross && r.IntN(2) == 0
		}
		if r.IntN(2) == 0 {
			a = listedAccount(a)
		}
		liqs := a.LiquidationPrices()
		before := a.Priced(sigma, liqs)
		if r.IntN(2) == 0 {
			before = a.PricedFrom(floatsOf(a, sigma, true), sigma, liqs)
		}
		i := r.IntN(len(a.Positions))
		if a.Positions[i].Cross {
			continue
		}
		lev := 1 + r.IntN(50)
		var l1, l2 Liquidations
		np, eff := a.IsolatedEffect(i, lev, &l1, liqs)
		next, want, after := a.ApplyPriced(i, lev, false, &l2, liqs)
		if !reflect.DeepEqual(np, next.Positions[i]) || !reflect.DeepEqual(eff, want) {
			t.Fatalf("run %d: effect %+v, ApplyPriced's %+v", run, eff, want)
		}
		got := before.AfterIsolated(&np, eff.FreeAfter, i, eff.LiquidationAfter)
		if a.HasOpenCross() {
			if got.ok {
				t.Fatalf("run %d: an account with an open cross position read without its pool", run)
			}
			crossRefused++
			continue
		}
		pa := before.After(next, i, after)
		if got.ok != pa.ok || !slices.Equal(got.b.ps, pa.b.ps) || got.b.pool != pa.b.pool || got.b.poolMM != pa.b.poolMM || got.b.free != pa.b.free {
			t.Fatalf("run %d: AfterIsolated read another book than After", run)
		}
		if g, w := got.StressJudged(3), pa.StressJudged(3); !reflect.DeepEqual(g, w) {
			t.Fatalf("run %d: grid after\n%+v\nAfter's\n%+v", run, g, w)
		}
		if g, w := before.ForfeitAfter(got, i), before.ForfeitAfter(pa, i); !reflect.DeepEqual(g, w) {
			t.Fatalf("run %d: forfeit after\n%+v\nAfter's\n%+v", run, g, w)
		}
	}
	if crossRefused == 0 {
		t.Fatal("no account with an open cross position was tried")
	}
}

// ForfeitAfterAt is ForfeitAfter with position i's parts alone: the same
// Known and Expected, bit for bit, and ForfeitAfter's parts of position i
// in its order; settings calls and reduces, isolated and cross, the
// account before read from its decimals or from the engine's floats.
func TestForfeitAfterAtIsForfeitAfter(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(38, 16))
	for run := 0; run < 600; run++ {
		a, sigma := distinctAccount(r, 1+r.IntN(30))
		liqs := a.LiquidationPrices()
		before := a.Priced(sigma, liqs)
		if r.IntN(2) == 0 {
			before = a.PricedFrom(floatsOf(a, sigma, true), sigma, liqs)
		}
		i := r.IntN(len(a.Positions))
		var pa *Priced
		if r.IntN(3) == 0 {
			p := a.Positions[i]
			qty := p.Quantity.Mul(decimal.New(1+r.Int64N(99), -2)).Round(3)
			if !qty.IsPositive() || !qty.LessThan(p.Quantity) {
				continue
			}
			next, _, err := a.Reduce(i, qty, p.Index)
			if err != nil {
				t.Fatalf("run %d: %v", run, err)
			}
			pa = before.After(next, i, next.LiquidationPrices())
		} else {
			next, _, after := a.ApplyPriced(i, 1+r.IntN(50), r.IntN(2) == 0, nil, liqs)
			pa = before.After(next, i, after)
		}
		full, at := before.ForfeitAfter(pa, i), before.ForfeitAfterAt(pa, i)
		if at.Known != full.Known || math.Float64bits(at.Expected) != math.Float64bits(full.Expected) {
			t.Fatalf("run %d: %v %v, ForfeitAfter's %v %v", run, at.Known, at.Expected, full.Known, full.Expected)
		}
		want := partsAt(full.Parts, i)
		if len(at.Parts) != len(want) || len(want) > 0 && !reflect.DeepEqual(at.Parts, want) {
			t.Fatalf("run %d: parts at %d %+v, ForfeitAfter's %+v", run, i, at.Parts, want)
		}
	}
}

// ForfeitAfterIsolated is ForfeitAfterAt of AfterIsolated's book, bit for
// bit: accounts read from their decimals or from the engine's floats, with
// and without an open cross position, positions closed, and an index past
// float64's range on the call's position or another (the forfeit before
// unknown).
func TestForfeitAfterIsolatedIsAfterIsolated(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(38, 28))
	tried := map[string]int{}
	for run := 0; run < 800; run++ {
		a, sigma := distinctAccount(r, 1+r.IntN(30))
		anyCross := r.IntN(5) == 0
		for k := range a.Positions {
			a.Positions[k].Cross = anyCross && r.IntN(2) == 0
		}
		if r.IntN(2) == 0 {
			a = listedAccount(a)
		}
		i := r.IntN(len(a.Positions))
		switch r.IntN(12) {
		case 0:
			a.Positions[r.IntN(len(a.Positions))].Index = decimal.RequireFromString("1e400")
		case 1:
			a.Positions[i].Quantity = decimal.Zero
		}
		liqs := a.LiquidationPrices()
		before := a.Priced(sigma, liqs)
		if r.IntN(2) == 0 {
			before = a.PricedFrom(floatsOf(a, sigma, true), sigma, liqs)
		}
		if a.Positions[i].Cross {
			continue
		}
		np, eff := a.IsolatedEffect(i, 1+r.IntN(50), nil, liqs)
		got := before.ForfeitAfterIsolated(&np, eff.FreeAfter, i, eff.LiquidationAfter)
		want := before.ForfeitAfterAt(before.AfterIsolated(&np, eff.FreeAfter, i, eff.LiquidationAfter), i)
		if !reflect.DeepEqual(got, want) || math.Float64bits(got.Expected) != math.Float64bits(want.Expected) {
			t.Fatalf("run %d: forfeit after\n%+v\nAfterIsolated's\n%+v", run, got, want)
		}
		// Its parts listed in the room given, the same.
		room := make([]ForfeitPart, 0, 2)
		in := before.ForfeitAfterIsolatedIn(room, &np, eff.FreeAfter, i, eff.LiquidationAfter)
		if !reflect.DeepEqual(in, want) || math.Float64bits(in.Expected) != math.Float64bits(want.Expected) {
			t.Fatalf("run %d: forfeit after in a room\n%+v\nAfterIsolated's\n%+v", run, in, want)
		}
		if len(in.Parts) > 0 && !a.HasOpenCross() && before.Forfeit().Known && &in.Parts[0] != &room[:1][0] {
			t.Fatalf("run %d: the parts not listed in the room given", run)
		}
		switch {
		case !before.Forfeit().Known:
			tried["unknown before"]++
		case a.HasOpenCross():
			tried["cross"]++
		case len(got.Parts) > 0:
			tried["parts"]++
		default:
			tried["none"]++
		}
	}
	for _, k := range []string{"unknown before", "cross", "parts"} {
		if tried[k] == 0 {
			t.Fatalf("no account of %q tried (%v)", k, tried)
		}
	}
}
