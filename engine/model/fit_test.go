package model

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/shopspring/decimal"
)

// discard says nothing.
type discard struct{}

func (discard) Emit(context.Context, *journal.Report, journal.Event) {}

// On an account of isolated positions whose liquidation prices the model
// reproduces exactly (a replay's), a fit check that falls due because the
// indexes moved keeps the fit without computing it again (fresh false),
// the kept positions following the indexes, and it equals CheckFit of the
// tick's figures; a position whose leverage changes is checked afresh.
// The watch on its own, over the simulated exchange's own reads.
func TestFitHoldsWhileOnlyIndexesMove(t *testing.T) {
	t.Parallel()
	two := 2
	sc := &sim.Scenario{Currencies: []string{"USDT"}, Balance: decimal.NewFromInt(1_000_000)}
	for i := range 4 {
		base, sym := fmt.Sprintf("C%d", i), fmt.Sprintf("X%d", i)
		sc.Currencies = append(sc.Currencies, base)
		sc.Contracts = append(sc.Contracts, sim.ContractSpec{
			SymbolSpec: sim.SymbolSpec{Name: sym, Base: base, Quote: "USDT", BaseScale: 2, QuoteScale: 2},
			RiskLimit:  sim.RiskLimitSpec{MaxLeverage: 20, MaintenanceMarginRate: decimal.RequireFromString("0.005")}})
		sc.Positions = append(sc.Positions, sim.PositionSpec{Symbol: sym, Direction: exchange.Long,
			Quantity: decimal.NewFromInt(100), EntryPrice: decimal.NewFromInt(100), Leverage: 5})
		sc.Indexes = append(sc.Indexes, sim.IndexSpec{Name: base, Scale: &two, Points: []sim.PricePoint{{Price: decimal.NewFromInt(100)}}})
	}
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	now := t0
	ex, err := sim.New(sim.Config{Key: "k", Secret: "s", Scenario: sc, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	snaps := market.NewSnapshotReader(ex.Local(), 10*time.Minute, nil)
	w := New(nil, nil)
	ctx := context.Background()
	tol := margin.DefaultFitTolerance
	// checks counts the fits computed afresh: what the engine counts and
	// publishes.
	var view market.View
	checks := 0
	fresh := func() ([]margin.Position, []margin.Reported, margin.Fit) {
		snap, err := snaps.Read(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		var v market.View
		v.Join(snap, snaps, nil)
		ps, rep := v.Model()
		return ps, rep, margin.CheckFit(margin.Account{Positions: ps}, rep, tol)
	}
	step := func(s int) {
		t.Helper()
		now = t0.Add(time.Duration(s) * time.Minute)
		prices := map[string]decimal.Decimal{}
		for i := range 4 {
			prices[fmt.Sprintf("C%d", i)] = decimal.New(int64(10000+(s*37+i*11)%900), -2)
		}
		ex.SetIndexPrices(prices)
		ex.Step(now)
		snap, err := snaps.Read(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		view.Join(snap, snaps, nil)
		w.Begin(now, "")
		w.Observe(now, &view, Settings{})
		if _, fresh := w.CheckFit(ctx, now, &view, tol, discard{}); fresh {
			checks++
		}
	}
	step(0)
	first := checks
	if first != 1 {
		t.Fatalf("%d fits computed at the first step, want 1", first)
	}
	for s := 1; s <= 5; s++ {
		step(s)
	}
	if got := checks; got != first {
		t.Errorf("the fit was computed again while only the indexes moved: %d fits", got)
	}
	ps, rep, want := fresh()
	if got := w.fit.fit; got.Summary() != want.Summary() || got.Worst != want.Worst {
		t.Errorf("kept fit %q, CheckFit now %q", got.Summary(), want.Summary())
	}
	if !sameFitInputs(w.fit.ps, w.fit.rep, ps, rep) {
		t.Error("the kept positions did not follow the indexes")
	}
	if err := ex.PutPosition(sim.PositionSpec{Symbol: "X1", Direction: exchange.Long, Quantity: decimal.NewFromInt(100),
		EntryPrice: decimal.NewFromInt(100), Leverage: 4}); err != nil {
		t.Fatal(err)
	}
	step(6)
	if got := checks; got == first {
		t.Error("the fit was not checked again after a leverage changed")
	}
	if _, _, want := fresh(); w.fit.fit.Summary() != want.Summary() {
		t.Errorf("fit %q, CheckFit now %q", w.fit.fit.Summary(), want.Summary())
	}
}

// A fit check through one view, steady while only the indexes move (the
// fit's comparisons then skipped: market.View.Steady), gives at every
// step the fit, and says it fresh, as the same check through a view
// joined afresh at each step, which compares every position; and the fit
// is CheckFit of the step's figures. Over isolated positions the model
// prices exactly, a cross one, a leverage changed, the exchange's
// arithmetic skewed (no position then holds its fit) and steps where
// nothing moved.
func TestFitThroughASteadyViewIsTheFreshCheck(t *testing.T) {
	t.Parallel()
	two := 2
	sc := &sim.Scenario{Currencies: []string{"USDT"}, Balance: decimal.NewFromInt(1_000_000)}
	for i := range 4 {
		base, sym := fmt.Sprintf("C%d", i), fmt.Sprintf("X%d", i)
		sc.Currencies = append(sc.Currencies, base)
		sc.Contracts = append(sc.Contracts, sim.ContractSpec{
			SymbolSpec: sim.SymbolSpec{Name: sym, Base: base, Quote: "USDT", BaseScale: 2, QuoteScale: 2},
			RiskLimit:  sim.RiskLimitSpec{MaxLeverage: 20, MaintenanceMarginRate: decimal.RequireFromString("0.005")}})
		sc.Positions = append(sc.Positions, sim.PositionSpec{Symbol: sym, Direction: exchange.Long,
			Quantity: decimal.NewFromInt(100), EntryPrice: decimal.NewFromInt(100), Leverage: 5, Cross: i == 3})
		sc.Indexes = append(sc.Indexes, sim.IndexSpec{Name: base, Scale: &two, Points: []sim.PricePoint{{Price: decimal.NewFromInt(100)}}})
	}
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	now := t0
	ex, err := sim.New(sim.Config{Key: "k", Secret: "s", Scenario: sc, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	snaps := market.NewSnapshotReader(ex.Local(), 10*time.Minute, nil)
	ctx := context.Background()
	tol := margin.DefaultFitTolerance
	steady, afresh := New(nil, nil), New(nil, nil)
	var view market.View
	check := func(w *Watch, v *market.View) (margin.Fit, bool) {
		w.Begin(now, "")
		w.Observe(now, v, Settings{})
		return w.CheckFit(ctx, now, v, tol, discard{})
	}
	steps, steadySteps := 0, 0
	for s := range 40 {
		now = t0.Add(time.Duration(s) * time.Minute)
		switch {
		case s == 12:
			if err := ex.PutPosition(sim.PositionSpec{Symbol: "X1", Direction: exchange.Long, Quantity: decimal.NewFromInt(100),
				EntryPrice: decimal.NewFromInt(100), Leverage: 4}); err != nil {
				t.Fatal(err)
			}
		case s == 24:
			ex.SkewModel(sim.ModelSkew{MaintenanceRate: decimal.RequireFromString("0.001")})
		case s%7 == 3: // nothing moves
		default:
			prices := map[string]decimal.Decimal{}
			for i := range 3 { // the cross position's index stays
				prices[fmt.Sprintf("C%d", i)] = decimal.New(int64(10000+(s*37+i*11)%900), -2)
			}
			ex.SetIndexPrices(prices)
		}
		ex.Step(now)
		snap, err := snaps.Read(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		at := view.Joins()
		view.Join(snap, snaps, nil)
		if view.Steady(at) {
			steadySteps++
		}
		var fresh market.View
		fresh.Join(snap, snaps, nil)
		got, gotFresh := check(steady, &view)
		want, wantFresh := check(afresh, &fresh)
		if gotFresh != wantFresh || !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d: fit %+v (fresh %v), through a fresh view %+v (fresh %v)", s, got, gotFresh, want, wantFresh)
		}
		ps, rep := fresh.Model()
		if now := margin.CheckFit(margin.Account{Positions: ps}, rep, tol); got.Summary() != now.Summary() || got.Worst != now.Worst {
			t.Fatalf("step %d: fit %q, CheckFit now %q", s, got.Summary(), now.Summary())
		}
		steps++
	}
	if steadySteps < steps/2 {
		t.Errorf("the view was steady at %d of %d steps: the steady path is hardly tested", steadySteps, steps)
	}
}

// The tick's account keeps the map of each model position's place
// (act.Model.At), and Sigma its map of each symbol's index, while the
// view's rows are steady: at every step they are those of the rows read
// afresh, as positions open, close and turn; the model's own σ and fast
// moves (made once for the watch, their maps emptied at each tick's
// account) are those of the rows' indexes.
func TestAccountMapsFollowTheRows(t *testing.T) {
	t.Parallel()
	two := 2
	sc := &sim.Scenario{Currencies: []string{"USDT"}, Balance: decimal.NewFromInt(1_000_000)}
	for i := range 5 {
		base, sym := fmt.Sprintf("C%d", i), fmt.Sprintf("X%d", i)
		sc.Currencies = append(sc.Currencies, base)
		sc.Contracts = append(sc.Contracts, sim.ContractSpec{
			SymbolSpec: sim.SymbolSpec{Name: sym, Base: base, Quote: "USDT", BaseScale: 2, QuoteScale: 2},
			RiskLimit:  sim.RiskLimitSpec{MaxLeverage: 20, MaintenanceMarginRate: decimal.RequireFromString("0.005")}})
		if i < 3 {
			sc.Positions = append(sc.Positions, sim.PositionSpec{Symbol: sym, Direction: exchange.Long,
				Quantity: decimal.NewFromInt(100), EntryPrice: decimal.NewFromInt(100), Leverage: 5})
		}
		sc.Indexes = append(sc.Indexes, sim.IndexSpec{Name: base, Scale: &two, Points: []sim.PricePoint{{Price: decimal.NewFromInt(100)}}})
	}
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	now := t0
	ex, err := sim.New(sim.Config{Key: "k", Secret: "s", Scenario: sc, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	snaps := market.NewSnapshotReader(ex.Local(), 10*time.Minute, nil)
	ctx := context.Background()
	w := New(nil, nil)
	st := Stress{Horizon: time.Hour, Floor: 0.01, Likely: 3, FastMove: 0.004, FastWindow: 5 * time.Minute}
	var view market.View
	put := func(sym string, dir string, qty int64) {
		if err := ex.PutPosition(sim.PositionSpec{Symbol: sym, Direction: dir, Quantity: decimal.NewFromInt(qty),
			EntryPrice: decimal.NewFromInt(100), Leverage: 5, Empty: qty == 0}); err != nil {
			t.Fatal(err)
		}
	}
	fast := 0
	for s := range 60 {
		now = t0.Add(time.Duration(s) * time.Minute)
		switch s {
		case 10:
			put("X3", exchange.Short, 50) // a position opens
		case 20:
			put("X0", exchange.Long, 0) // one closes
		case 30:
			put("X1", exchange.Short, 70) // one turns
		case 40:
			put("X0", exchange.Long, 10) // and opens again
		}
		prices := map[string]decimal.Decimal{}
		for i := range 5 {
			prices[fmt.Sprintf("C%d", i)] = decimal.New(int64(10000+(s*37+i*11)%900), -2)
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
		m := w.Account(&view)
		sigma := w.Sigma(&view, st)
		var fresh market.View
		fresh.Join(snap, snaps, nil)
		ps, _ := fresh.Model()
		want := map[string]int{}
		for i, mp := range ps {
			want[mp.Symbol] = i
		}
		if !reflect.DeepEqual(m.At, want) {
			t.Fatalf("step %d: places %v, of the rows read afresh %v", s, m.At, want)
		}
		for i := range fresh.Rows {
			r := &fresh.Rows[i]
			if !r.Open || r.Sym == nil {
				continue
			}
			if got, want := sigma(r.Sym.Name), w.vol.sigma(r.IndexName, st.Horizon, st.Floor); got != want {
				t.Fatalf("step %d: σ of %s %g, of its index %s %g", s, r.Sym.Name, got, r.IndexName, want)
			}
			// The model's own, made once for the watch and set to each
			// tick's view (tickFuncs).
			if got, want := m.Sigma(r.Sym.Name), w.vol.sigma(r.IndexName, st.Horizon, st.Floor); got != want {
				t.Fatalf("step %d: the model's σ of %s %g, of its index %s %g", s, r.Sym.Name, got, r.IndexName, want)
			}
			got, want := m.Fast(r.Sym.Name), w.vol.fast(r.IndexName, now, r.IndexF, st.FastWindow, st.FastMove)
			if got != want {
				t.Fatalf("step %d: the model's fast move of %s %q, of its index %s %q", s, r.Sym.Name, got, r.IndexName, want)
			}
			if got != "" {
				fast++
			}
		}
		// A symbol without an open position this tick has no index: the
		// maps of an earlier tick are not read.
		for i := range 5 {
			sym := fmt.Sprintf("X%d", i)
			if _, open := want[sym]; open {
				continue
			}
			if got, want := m.Sigma(sym), w.vol.sigma("", st.Horizon, st.Floor); got != want {
				t.Fatalf("step %d: the model's σ of %s, not open, %g, want %g", s, sym, got, want)
			}
			if got := m.Fast(sym); got != "" {
				t.Fatalf("step %d: the model's fast move of %s, not open, %q", s, sym, got)
			}
		}
	}
	if fast == 0 {
		t.Fatal("no fast move seen: the model's Fast was not tried")
	}
}

// The tick's account reads the dust notional as the decimal of the
// setting's float, kept while the value stays: at every tick it is the
// decimal made afresh, as the value changes and changes back.
func TestDustNotionalFollowsTheSetting(t *testing.T) {
	t.Parallel()
	w := New(nil, nil)
	var view market.View
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	for i, dust := range []float64{20, 20, 12.5, 0.1, 20, 1e-9, 1e-9, 20} {
		now := t0.Add(time.Duration(i) * time.Second)
		w.Begin(now, "")
		w.Observe(now, &view, Settings{Orders: Orders{Cost: 0.001, Dust: dust}})
		got, want := w.Account(&view).DustNotional, decimal.NewFromFloat(dust)
		if got.String() != want.String() || got.Exponent() != want.Exponent() {
			t.Errorf("tick %d: dust notional %s (exponent %d), of %g %s (exponent %d)", i, got, got.Exponent(), dust, want, want.Exponent())
		}
	}
}
