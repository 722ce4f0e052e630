package act

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/shopspring/decimal"
)

// randomModel is a seeded account of one to five positions, isolated and
// cross, long and short, some on a tick, some closed or without a price.
func randomModel(r *rand.Rand) *Model {
	rl := exchange.RiskLimit{ID: 1, MaxLeverage: 20 + r.IntN(30), MaintenanceMarginRate: decimal.New(int64(3+r.IntN(8)), -3)}
	if r.IntN(3) == 0 {
		rl.RiskLimitBase, rl.RiskLimitStep, rl.MarginRateStep, rl.MaxRiskLimitSteps = decimal.NewFromInt(50_000), decimal.NewFromInt(25_000), decimal.New(5, -3), 4
	}
	m := &Model{At: map[string]int{}, FreeKnown: r.IntN(4) != 0}
	if !m.FreeKnown {
		m.FreeWhy = "no cross position"
	}
	if r.IntN(6) == 0 {
		m.Unfit = "XP0's margin"
	}
	m.Acct.Free = decimal.New(int64(r.IntN(2_000_000)), -2)
	for k := range 1 + r.IntN(5) {
		entry := decimal.New(int64(1_000+r.IntN(1_000_000)), -2)
		if r.IntN(2) == 0 {
			entry = decimal.NewFromInt(int64(10 + r.IntN(1000))) // a round entry: liquidation prices on a tick
		}
		p := margin.Position{Symbol: fmt.Sprintf("XP%d", k), Direction: exchange.Long, Quantity: decimal.New(int64(1+r.IntN(10_000)), -2),
			Entry: entry, Leverage: 1 + r.IntN(50), Cross: r.IntN(2) == 0, RiskLimit: rl, Scale: 2,
			Index: entry.Mul(decimal.NewFromFloat(0.8 + 0.4*r.Float64())).Round(2)}
		if r.IntN(2) == 0 {
			p.Direction = exchange.Short
		}
		switch r.IntN(10) {
		case 0:
			p.Quantity = decimal.Zero
		case 1:
			p.Index = decimal.Zero
		}
		m.At[p.Symbol] = k
		m.Acct.Positions = append(m.Acct.Positions, p)
	}
	return m
}

// describePrediction is everything a prediction says, as text.
func describePrediction(p *Prediction) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%s|%d|%t|%s|%+v|%+v|%+v|%+v|%+v|%+v|%v|%s|%s|%s", p.String(), p.Leverage, p.FreeKnown, p.Unverified, p.Effect,
		p.Before, p.After, p.RestBefore, p.RestAfter, p.Next, p.others, p.direction, p.index, p.Record().Account)
}

// A model's memoised predictions are the predictions of a fresh model on
// the same account, field for field, and its measures the account's
// SurvivalBoth as defined: on seeded accounts, predicted again and in any
// order, after the account moved on to a prediction's Next (as the engine
// does after a call of the tick) or its inputs changed, and with the
// isolated liquidation prices remembered from the models before.
func TestPredictMemoMatchesFresh(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(18, 5))
	for n := range 300 {
		m := randomModel(r)
		m.Liqs = &margin.Liquidations{} // the fresh model below remembers none
		for step := range 40 {
			k := r.IntN(len(m.Acct.Positions))
			mp := m.Acct.Positions[k]
			pl := &Plan{Pos: &exchange.Position{Direction: mp.Direction, Cross: mp.Cross, Leverage: mp.Leverage},
				Sym: &exchange.ContractSymbol{SpotSymbol: exchange.SpotSymbol{Name: mp.Symbol}}}
			want := exchange.Settings{Leverage: 1 + r.IntN(60), Cross: r.IntN(2) == 0}
			got := m.Predict(pl, want)
			fresh := &Model{Acct: m.Acct, At: m.At, FreeKnown: m.FreeKnown, FreeWhy: m.FreeWhy, Unfit: m.Unfit}
			if g, w := describePrediction(got), describePrediction(fresh.Predict(pl, want)); g != w {
				t.Fatalf("account %d step %d: memoised\n%s\nfresh\n%s", n, step, g, w)
			}
			if got != nil {
				// The position's prices as defined, value and exponent.
				i := m.At[mp.Symbol]
				if b, a := m.Acct.LiquidationPrice(i), got.Next.LiquidationPrice(i); !margin.SameDec(got.LiquidationBefore, b) || !margin.SameDec(got.LiquidationAfter, a) {
					t.Fatalf("account %d step %d: liquidation %s → %s, LiquidationPrice %s → %s", n, step, got.LiquidationBefore, got.LiquidationAfter, b, a)
				}
			}
			if got != nil && got.Before.Known {
				// The measures as defined: the account and the one after,
				// each priced afresh.
				i := m.At[mp.Symbol]
				wb, wrb := m.Acct.SurvivalBoth(i)
				wa, wra := got.Next.SurvivalBoth(i)
				if g, w := fmt.Sprintf("%+v %+v %+v %+v", got.Before, got.RestBefore, got.After, got.RestAfter), fmt.Sprintf("%+v %+v %+v %+v", wb, wrb, wa, wra); g != w {
					t.Fatalf("account %d step %d: measures\n%s\nSurvivalBoth\n%s", n, step, g, w)
				}
			}
			if again := m.Predict(pl, want); again != got {
				t.Fatalf("account %d step %d: predicted again, not the same prediction", n, step)
			}
			switch r.IntN(6) {
			case 0:
				if got != nil {
					m.Acct = got.Next // a call sent
				}
			case 1:
				m.Acct.Free = m.Acct.Free.Add(decimal.NewFromInt(int64(r.IntN(100)))) // the free balance moved
			case 2:
				m.FreeKnown = !m.FreeKnown
			case 3:
				cp := *m // a copy shares the memo: afterReduce's
				cp.Acct = margin.Account{Free: m.Acct.Free, Positions: append([]margin.Position(nil), m.Acct.Positions...)}
				m = &cp
			case 4:
				// The next tick's model: the same positions built afresh,
				// one of them changed, the remembered prices kept.
				ps := append([]margin.Position(nil), m.Acct.Positions...)
				p := &ps[r.IntN(len(ps))]
				switch r.IntN(4) {
				case 0:
					p.Leverage = 1 + r.IntN(50)
				case 1:
					p.Quantity = p.Quantity.Add(decimal.New(1, -2))
				case 2:
					p.Held = decimal.New(int64(1+r.IntN(100000)), -2)
				case 3:
					p.Index = p.Index.Add(decimal.New(1, -2))
				}
				m = &Model{Acct: margin.Account{Free: m.Acct.Free, Positions: ps}, At: m.At, FreeKnown: m.FreeKnown, FreeWhy: m.FreeWhy, Unfit: m.Unfit, Liqs: m.Liqs}
			}
		}
	}
}

// A prediction's grid and forfeit after are those of its account after,
// worked out afresh: where a cross position's leverage changes and the
// pool stays the same decimal they are the account's before, reused (its
// total: the forfeit before's parts are the tick's); a candidate's
// (Model.candidate, without the account measure; made in a Spare let go
// with each model, or on its own) are the full prediction's. The floats
// may differ in their last bits (the pool summed from another free
// balance and margin), nothing more.
func TestPredictGridAfterMatchesFresh(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(38, 7))
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b))) }
	samePool, isolatedOnly := 0, 0
	var spare Spare // the candidates made in it, let go with each model
	for n := range 400 {
		m := randomModel(r)
		m.Unfit, m.FreeKnown = "", true
		m.Sigma, m.Likely = func(string) float64 { return 0.02 }, 3
		if n%2 == 0 {
			spare.Reset()
			m.Spare = &spare
		}
		k := r.IntN(len(m.Acct.Positions))
		mp := m.Acct.Positions[k]
		pl := &Plan{Pos: &exchange.Position{Direction: mp.Direction, Cross: mp.Cross, Leverage: mp.Leverage},
			Sym: &exchange.ContractSymbol{SpotSymbol: exchange.SpotSymbol{Name: mp.Symbol}}}
		want := exchange.Settings{Leverage: 1 + r.IntN(60), Cross: r.IntN(2) == 0}
		cand := m.candidate(pl, want)
		full := m.Predict(pl, want)
		if full == nil || cand == nil {
			if full != cand {
				t.Fatalf("account %d: candidate %v, prediction %v", n, cand, full)
			}
			continue
		}
		if mp.Cross && want.Cross && mp.Open() {
			samePool++
		}
		liqs := full.Next.LiquidationPrices()
		ws, wf := full.Next.StressJudged(m.Sigma, m.Likely, liqs), full.Next.Forfeit(m.Sigma, liqs)
		gridless := !mp.Cross && !want.Cross && !m.Acct.HasOpenCross()
		if gridless && full.Stressed {
			isolatedOnly++
		}
		if cand.Stressed == gridless && ws.Known {
			t.Fatalf("account %d (%+v on %s): candidate's grid %v, want it only where another position may move", n, want, mp.Symbol, cand.Stressed)
		}
		if gridless && full.Stressed {
			// What a gridless candidate rests on: nothing is newly fatal.
			if nf := margin.NewlyFatal(full.StressBefore, full.StressAfter, mp.Symbol); len(nf) > 0 {
				t.Fatalf("account %d (%+v on %s): an isolated call made %v newly fatal", n, want, mp.Symbol, nf)
			}
		}
		for _, p := range []*Prediction{cand, full} {
			if !(p == cand && gridless) && (p.StressAfter.Known != ws.Known || !near(p.StressAfter.Expected, ws.Expected) || fmt.Sprint(p.StressAfter.Fatal) != fmt.Sprint(ws.Fatal)) {
				t.Fatalf("account %d (%+v on %s): grid after %+v, afresh %+v", n, want, mp.Symbol, p.StressAfter, ws)
			}
			parts := wf.Parts // a gridless candidate lists its own position's alone
			if mp.Cross && want.Cross {
				parts = nil // every price as before: the before's total, no parts
			}
			if p == cand && gridless {
				parts = nil
				for _, fp := range wf.Parts {
					if fp.At == k {
						parts = append(parts, fp)
					}
				}
			}
			if p.ForfeitAfter.Known != wf.Known || !near(p.ForfeitAfter.Expected, wf.Expected) || len(p.ForfeitAfter.Parts) != len(parts) ||
				p == cand && gridless && len(parts) > 0 && fmt.Sprint(p.ForfeitAfter.Parts) != fmt.Sprint(parts) {
				t.Fatalf("account %d (%+v on %s): forfeit after %+v, afresh %+v", n, want, mp.Symbol, p.ForfeitAfter, wf)
			}
			if !margin.SameDec(p.LiquidationAfter, full.LiquidationAfter) || !p.MarginMoved.Equal(full.MarginMoved) || p.Affordable != full.Affordable {
				t.Fatalf("account %d: candidate's effect %+v, prediction's %+v", n, p.Effect, full.Effect)
			}
		}
	}
	if samePool == 0 {
		t.Fatal("no cross position's leverage changed: the reuse was not tested")
	}
	if isolatedOnly < 10 {
		t.Fatalf("%d isolated calls in accounts without a cross position: the gridless candidate was not tested", isolatedOnly)
	}
}

// A reduce's account after, read by patching the account before
// (Model.pricedAfter) while the reduce leaves the position open, has the
// grid and the forfeit of the account after read afresh, bit for bit:
// reduces of a part and of the whole, on seeded accounts, the account
// before read from its decimals or from the view's floats (UseFloats).
func TestReduceGridAfterMatchesFresh(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(38, 13))
	patched := 0
	for n := range 400 {
		m := randomModel(r)
		m.Unfit, m.FreeKnown = "", true
		m.Sigma, m.Likely = func(s string) float64 { return 0.01 + float64(len(s)%3)*0.01 }, 3
		m.Liqs = &margin.Liquidations{}
		if r.IntN(2) == 0 {
			// The engine's account: its figures listed, read from floats.
			f := margin.Floats{Distinct: true}
			for i := range m.Acct.Positions {
				p := &m.Acct.Positions[i]
				p.Value, p.Held, p.MM = p.EntryValue(), p.Margin(), p.Maintenance()
				f.Lines = append(f.Lines, margin.Line{Short: p.Direction == exchange.Short, Cross: p.Cross, Quantity: margin.Float(p.Quantity),
					Index: margin.Float(p.Index), EntryValue: margin.Float(p.Value), Margin: margin.Float(p.Held), Maintenance: margin.Float(p.MM)})
				f.Sigma = append(f.Sigma, m.Sigma(p.Symbol))
			}
			m.UseFloats(f)
		}
		k := r.IntN(len(m.Acct.Positions))
		mp := m.Acct.Positions[k]
		if !mp.Open() || !mp.Index.IsPositive() {
			continue
		}
		pl := &Plan{Pos: &exchange.Position{Direction: mp.Direction, Cross: mp.Cross, Leverage: mp.Leverage, Quantity: mp.Quantity},
			Sym: &exchange.ContractSymbol{SpotSymbol: exchange.SpotSymbol{Name: mp.Symbol}}}
		qty := mp.Quantity
		if r.IntN(4) > 0 {
			qty = mp.Quantity.Mul(decimal.New(int64(1+r.IntN(99)), -2)).Round(2)
		}
		if !qty.IsPositive() {
			continue
		}
		p := m.PredictReduce(pl, qty)
		if p == nil {
			continue
		}
		liqs := p.Next.LiquidationPricesWith(m.Liqs)
		want := p.Next.StressJudged(m.Sigma, m.Likely, liqs)
		if p.Next.Positions[k].Open() && want.Known {
			patched++
		}
		if got := p.StressAfter; !reflect.DeepEqual(got, want) {
			t.Fatalf("account %d (%s of %s %s): grid after\n%+v\nafresh\n%+v", n, qty, mp.Quantity, mp.Symbol, got, want)
		}
		f := m.filled(k, qty, mp.Index)
		if got, want := m.forfeitAfter(m.memoFor(), f), p.Next.Forfeit(m.Sigma, liqs); !reflect.DeepEqual(got, want) {
			t.Fatalf("account %d (%s of %s %s): forfeit after\n%+v\nafresh\n%+v", n, qty, mp.Quantity, mp.Symbol, got, want)
		}
	}
	if patched < 100 {
		t.Fatalf("%d reduces left their position open: the patched path was hardly tested", patched)
	}
}

// A memo's predictions (a few in a list, then a map) are found as a map
// finds them: every key put is got with its prediction, every other is
// not, as memos fill past the list.
func TestPredictionsIsAMap(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(38, 30))
	for run := range 200 {
		var ps predictions
		want := map[predictKey]*Prediction{}
		n := r.IntN(3 * fewPredictions)
		for range 4 * n {
			key := predictKey{i: r.IntN(4), want: exchange.Settings{Leverage: 1 + r.IntN(n+1), Cross: r.IntN(2) == 0},
				direction: []string{exchange.Long, exchange.Short}[r.IntN(2)], cross: r.IntN(2) == 0}
			got, ok := ps.get(key)
			if w, wok := want[key]; ok != wok || got != w {
				t.Fatalf("run %d (%d kept): %+v got %p %t, want %p %t", run, len(want), key, got, ok, w, wok)
			}
			if !ok {
				p := &Prediction{Leverage: key.want.Leverage}
				ps.put(key, p)
				want[key] = p
			}
		}
		if len(want) > fewPredictions && ps.many == nil {
			t.Fatalf("run %d: %d kept in the list", run, len(want))
		}
	}
}

// The candidates a model makes in a Spare keep their own predictions,
// forfeits' parts included, however many it makes (their room made anew
// as it fills): each is the candidate a model without one makes for the
// same call, read after every other was made.
func TestSpareCandidatesKeepTheirOwn(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(38, 33))
	var spare Spare
	made := 0
	for n := range 60 {
		m := randomModel(r)
		m.Unfit, m.FreeKnown = "", true
		m.Sigma, m.Likely = func(string) float64 { return 0.05 }, 3
		spare.Reset()
		m.Spare = &spare
		fresh := *m
		fresh.Spare, fresh.memo, fresh.grids = nil, nil, nil
		type call struct {
			pl   *Plan
			want exchange.Settings
			p    *Prediction
		}
		var calls []call
		for _, mp := range m.Acct.Positions {
			pl := &Plan{Pos: &exchange.Position{Direction: mp.Direction, Cross: mp.Cross, Leverage: mp.Leverage},
				Sym: &exchange.ContractSymbol{SpotSymbol: exchange.SpotSymbol{Name: mp.Symbol}}}
			for lev := 1; lev <= 12; lev++ {
				want := exchange.Settings{Leverage: lev, Cross: mp.Cross}
				if p := m.candidate(pl, want); p != nil {
					calls = append(calls, call{pl, want, p})
				}
			}
		}
		for _, c := range calls {
			w := fresh.candidate(c.pl, c.want)
			if got, want := describePrediction(c.p)+fmt.Sprintf("%+v", c.p.ForfeitAfter), describePrediction(w)+fmt.Sprintf("%+v", w.ForfeitAfter); got != want {
				t.Fatalf("account %d, %+v on %s: in the spare\n%s\nits own\n%s", n, c.want, c.pl.Sym.Name, got, want)
			}
			if len(c.p.ForfeitAfter.Parts) > 0 {
				made++
			}
		}
	}
	if made < 2*spareChunk {
		t.Fatalf("%d candidates listed forfeit parts: the spare's rooms were not filled", made)
	}
}
