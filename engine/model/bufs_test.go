package model

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/act"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/shopspring/decimal"
)

// kept is what a tick hands on past itself from its account (Account): a
// settings call's prediction and a reduce's, which a call's Done reads in
// a later tick (their Next, the prices, what they say), and the account a
// call moved the model on to.
type kept struct {
	tick         int
	pred         *act.Prediction
	said, record string
	next         []margin.Position
	reduce       *act.ReducePrediction
	reduceSaid   string
	reduceNext   []margin.Position
	movedTo      margin.Account
	movedToCopy  []margin.Position
	// The prediction's forfeits and grids, said whole.
	forfeits, stresses string
	// A decision by cost on the position (DecideSettings: its
	// candidates' forfeits after worked out from the forfeit before),
	// which the step keeps, and all it said.
	dec     *act.Decision
	decSaid string
}

// forfeitsOf and stressesOf say every figure of a prediction's forfeits
// and grids, their lists' contents included.
func forfeitsOf(p *act.Prediction) string {
	return fmt.Sprintf("%+v|%+v", p.ForfeitBefore, p.ForfeitAfter)
}

func stressesOf(p *act.Prediction) string {
	return fmt.Sprintf("%+v|%+v|%t", p.StressBefore, p.StressAfter, p.Stressed)
}

// decisionOf says a decision, its predictions' forfeits and grids too.
func decisionOf(d *act.Decision) string {
	s := fmt.Sprintf("%+v|%t|%s", d.Want, d.Change, d.Stepped)
	if d.Pred != nil {
		s += "|" + d.Pred.String() + "|" + forfeitsOf(d.Pred) + "|" + stressesOf(d.Pred)
	}
	for _, sk := range d.Skips {
		s += fmt.Sprintf("|%t %+v %d %s", sk.Isolation, sk.Want, sk.Asked, sk.Why)
		if sk.Pred != nil {
			s += "|" + sk.Pred.String() + "|" + forfeitsOf(sk.Pred) + "|" + stressesOf(sk.Pred)
		}
	}
	return s
}

// The tick's account lists (accountBufs) are the watch's, written again at
// the next tick: nothing a tick hands on keeps them. A prediction of a
// settings call and of a reduce made at one tick, and the account a call
// moved the model on to, say the same and hold the same positions after
// the next tick built its account on positions that opened, closed,
// turned and changed leverage and mode; and each tick's account holds the
// positions of the view read afresh, their maintenance margins set, and
// the floats of them (TestAccountFloatsAreTheDecimals).
func TestAccountBuffersOutliveNothing(t *testing.T) {
	t.Parallel()
	two := 2
	sc := &sim.Scenario{Currencies: []string{"USDT"}, Balance: decimal.NewFromInt(1_000_000)}
	for i := range 6 {
		base, sym := fmt.Sprintf("C%d", i), fmt.Sprintf("X%d", i)
		sc.Currencies = append(sc.Currencies, base)
		sc.Contracts = append(sc.Contracts, sim.ContractSpec{
			SymbolSpec: sim.SymbolSpec{Name: sym, Base: base, Quote: "USDT", BaseScale: 2, QuoteScale: 2},
			RiskLimit:  sim.RiskLimitSpec{MaxLeverage: 20, MaintenanceMarginRate: decimal.RequireFromString("0.005")}})
		if i < 5 {
			dir := exchange.Long
			if i%2 == 1 {
				dir = exchange.Short
			}
			sc.Positions = append(sc.Positions, sim.PositionSpec{Symbol: sym, Direction: dir, Cross: i%3 != 0,
				Quantity: decimal.NewFromInt(int64(50 + 10*i)), EntryPrice: decimal.NewFromInt(100), Leverage: 4 + i})
		}
		sc.Indexes = append(sc.Indexes, sim.IndexSpec{Name: base, Scale: &two, Points: []sim.PricePoint{{Price: decimal.NewFromInt(100)}}})
	}
	t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	now := t0
	ex, err := sim.New(sim.Config{Key: "k", Secret: "s", Scenario: sc, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	put := func(sym, dir string, qty int64, lev int, cross bool) {
		t.Helper()
		if err := ex.PutPosition(sim.PositionSpec{Symbol: sym, Direction: dir, Quantity: decimal.NewFromInt(qty),
			EntryPrice: decimal.NewFromInt(100), Leverage: lev, Cross: cross, Empty: qty == 0}); err != nil {
			t.Fatal(err)
		}
	}
	snaps := market.NewSnapshotReader(ex.Local(), 10*time.Minute, nil)
	w := New(nil, nil)
	ctx := context.Background()
	st := Stress{Horizon: time.Hour, Floor: 0.08, Likely: 3} // σ high enough that a decision by cost may send nothing
	var view market.View
	var was []kept
	scored, decided, none := 0, 0, 0
	for s := range 40 {
		now = t0.Add(time.Duration(s) * time.Minute)
		switch s {
		case 8:
			put("X5", exchange.Long, 40, 6, true) // a position opens
		case 16:
			put("X0", exchange.Long, 0, 4, false) // one closes
		case 24:
			put("X1", exchange.Long, 70, 3, false) // one turns, isolated
		case 32:
			put("X2", exchange.Long, 60, 9, false) // another leaves the pool
		}
		prices := map[string]decimal.Decimal{}
		for i := range 6 {
			prices[fmt.Sprintf("C%d", i)] = decimal.New(int64(10000+(s*37+i*113)%1500-700), -2)
		}
		ex.SetIndexPrices(prices)
		ex.Step(now)
		snap, err := snaps.Read(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		view.Join(snap, snaps, nil)
		w.Begin(now, "")
		w.Observe(now, &view, Settings{Stress: st})
		v := w.Account(&view)

		// The account is the view's positions read afresh.
		var fresh market.View
		fresh.Join(snap, snaps, nil)
		ps, _ := fresh.Model()
		for i := range ps {
			ps[i].MM = ps[i].Maintenance()
		}
		if !reflect.DeepEqual(v.Acct.Positions, ps) {
			t.Fatalf("tick %d: account %+v, the view read afresh %+v", s, v.Acct.Positions, ps)
		}
		if f, ok := v.Floats(); !ok || len(f.Lines) != len(ps) || len(f.Sigma) != len(ps) {
			t.Fatalf("tick %d: floats %+v (%t) for %d positions", s, f, ok, len(ps))
		}

		// What the last ticks handed on is as it was.
		for _, k := range was {
			if got := k.pred.String(); got != k.said {
				t.Fatalf("tick %d: tick %d's prediction says %q, said %q", s, k.tick, got, k.said)
			}
			if got := fmt.Sprintf("%+v", *k.pred.Record()); got != k.record {
				t.Fatalf("tick %d: tick %d's prediction records %s, recorded %s", s, k.tick, got, k.record)
			}
			if !reflect.DeepEqual(k.pred.Next.Positions, k.next) {
				t.Fatalf("tick %d: tick %d's prediction's account after %+v, was %+v", s, k.tick, k.pred.Next.Positions, k.next)
			}
			if k.reduce != nil {
				if got := k.reduce.String(); got != k.reduceSaid {
					t.Fatalf("tick %d: tick %d's reduce says %q, said %q", s, k.tick, got, k.reduceSaid)
				}
				if !reflect.DeepEqual(k.reduce.Next.Positions, k.reduceNext) {
					t.Fatalf("tick %d: tick %d's reduce's account after %+v, was %+v", s, k.tick, k.reduce.Next.Positions, k.reduceNext)
				}
			}
			if got := forfeitsOf(k.pred); got != k.forfeits {
				t.Fatalf("tick %d: tick %d's prediction's forfeits %s, were %s", s, k.tick, got, k.forfeits)
			}
			if got := stressesOf(k.pred); got != k.stresses {
				t.Fatalf("tick %d: tick %d's prediction's grids %s, were %s", s, k.tick, got, k.stresses)
			}
			if got := decisionOf(k.dec); got != k.decSaid {
				t.Fatalf("tick %d: tick %d's decision\n%s\nwas\n%s", s, k.tick, got, k.decSaid)
			}
			if !reflect.DeepEqual(k.movedTo.Positions, k.movedToCopy) {
				t.Fatalf("tick %d: the account tick %d's model moved on to %+v, was %+v", s, k.tick, k.movedTo.Positions, k.movedToCopy)
			}
		}

		// This tick's predictions, on every position: a leverage cut
		// decided by cost (its candidates made first, in the model's
		// Spare), an isolation, and a reduce of half; the model moved on
		// by the cut.
		for i := range v.Acct.Positions {
			r := view.ModelRow(i)
			pl := &act.Plan{Pos: r.P, Sym: r.Sym}
			d := act.DecideSettings(v, pl, &act.SettingsStep{Lower: max(1, r.P.Leverage-1)}, now)
			if d.Pred != nil || len(d.Skips) > 0 {
				decided++
			}
			if !d.Change && len(d.Skips) > 0 {
				none++
			}
			want := exchange.Settings{Leverage: max(1, r.P.Leverage-1), Cross: false}
			p := v.Predict(pl, want)
			if p == nil {
				continue
			}
			k := kept{tick: s, pred: p, said: p.String(), record: fmt.Sprintf("%+v", *p.Record()), next: slices.Clone(p.Next.Positions),
				forfeits: forfeitsOf(p), stresses: stressesOf(p), dec: &d, decSaid: decisionOf(&d)}
			if p.Scored && len(p.ForfeitAfter.Parts) > 0 {
				scored++
			}
			if rp := v.PredictReduce(pl, r.P.Quantity.Div(decimal.NewFromInt(2)).Round(2)); rp != nil {
				k.reduce, k.reduceSaid, k.reduceNext = rp, rp.String(), slices.Clone(rp.Next.Positions)
			}
			k.movedTo, k.movedToCopy = p.Next, slices.Clone(p.Next.Positions)
			was = append(was, k)
		}
		if len(was) == 0 {
			t.Fatalf("tick %d: no prediction made", s)
		}
		w.Moved(now, was[len(was)-1].pred.Next)
		if len(was) > 40 {
			was = was[len(was)-40:]
		}
	}
	if scored == 0 || decided == 0 || none == 0 {
		t.Fatalf("%d predictions scored with parts, %d decisions, %d sending nothing: the forfeits were not tried", scored, decided, none)
	}
}
