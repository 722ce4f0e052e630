package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/shopspring/decimal"
)

// The fit check that falls due every minute keeps the fit of a steady
// account (the same positions, figures and index prices: nothing
// computed, said or published again), and computes it again once an input
// moves, though no position's version did: an index price. Each fit the
// engine holds equals CheckFit of the tick's figures.
func TestFitCheckKeepsASteadyAccountsFit(t *testing.T) {
	t.Parallel()
	fx := benchAccount(30)
	e, err := New(Config{}, benchRules(t), Deps{Reader: fx, Actuator: fx})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tick := func(s int) {
		t.Helper()
		if _, err := e.Tick(ctx, t0.Add(time.Duration(s)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	published := func() *margin.Fit { // a new one each time a fit is published
		e.board.mu.Lock()
		defer e.board.mu.Unlock()
		return e.board.status.fit
	}
	fresh := func() string {
		snap, err := e.snaps.Read(ctx, e.lastTick)
		if err != nil {
			t.Fatal(err)
		}
		e.join(snap)
		ps, rep := e.view.Model()
		return margin.CheckFit(margin.Account{Positions: ps}, rep, e.cfg.ModelTolerance).Summary()
	}
	tick(0)
	first := published()
	if first == nil {
		t.Fatal("no fit published")
	}
	for s := 1; s <= 130; s++ { // two checks due, at 60 s and 120 s
		tick(s)
	}
	if got := published(); got != first {
		t.Errorf("a steady account's fit was computed and published again: %+v", got)
	}
	if got, want := e.model.fit.fit.Summary(), fresh(); got != want {
		t.Errorf("kept fit %q, CheckFit now %q", got, want)
	}
	// X0000 is cross (every third position): its index moves; the exchange's
	// figures and versions stay.
	fx.mu.Lock()
	fx.index["B0000"] = decimal.RequireFromString("93.5")
	fx.mu.Unlock()
	for s := 131; s <= 175; s++ { // the next check is due at 180 s
		tick(s)
	}
	if got := published(); got != first {
		t.Error("the fit was computed again before a check fell due")
	}
	for s := 176; s <= 185; s++ {
		tick(s)
	}
	if got := published(); got == first {
		t.Error("the fit was not computed again after an index moved")
	}
	if got, want := e.model.fit.fit.Summary(), fresh(); got != want {
		t.Errorf("fit %q, CheckFit now %q", got, want)
	}
}

// On an account of isolated positions whose liquidation prices the model
// reproduces exactly (a replay's), a fit check that falls due because the
// indexes moved keeps the fit without computing or publishing it again,
// the kept positions following the indexes, and it equals CheckFit of the
// tick's figures; a position whose leverage changes is checked afresh.
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
	now := t0
	ex, err := sim.New(sim.Config{Key: "k", Secret: "s", Scenario: sc, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	d := ex.Local()
	e, err := New(Config{}, benchRules(t), Deps{Reader: d, Actuator: d, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	published := func() *margin.Fit { // a new one each time a fit is published
		e.board.mu.Lock()
		defer e.board.mu.Unlock()
		return e.board.status.fit
	}
	fresh := func() ([]margin.Position, []margin.Reported, margin.Fit) {
		snap, err := e.snaps.Read(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		e.join(snap)
		ps, rep := e.view.Model()
		return ps, rep, margin.CheckFit(margin.Account{Positions: ps}, rep, e.cfg.ModelTolerance)
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
		if _, err := e.Tick(ctx, now); err != nil {
			t.Fatal(err)
		}
	}
	step(0)
	first := published()
	if first == nil {
		t.Fatal("no fit published")
	}
	for s := 1; s <= 5; s++ {
		step(s)
	}
	if got := published(); got != first {
		t.Errorf("the fit was computed and published again while only the indexes moved: %+v", got)
	}
	ps, rep, want := fresh()
	if got := e.model.fit.fit; got.Summary() != want.Summary() || got.Worst != want.Worst {
		t.Errorf("kept fit %q, CheckFit now %q", got.Summary(), want.Summary())
	}
	if !sameFitInputs(e.model.fit.ps, e.model.fit.rep, ps, rep) {
		t.Error("the kept positions did not follow the indexes")
	}
	if err := ex.PutPosition(sim.PositionSpec{Symbol: "X1", Direction: exchange.Long, Quantity: decimal.NewFromInt(100),
		EntryPrice: decimal.NewFromInt(100), Leverage: 4}); err != nil {
		t.Fatal(err)
	}
	step(6)
	if got := published(); got == first {
		t.Error("the fit was not checked again after a leverage changed")
	}
	if _, _, want := fresh(); e.model.fit.fit.Summary() != want.Summary() {
		t.Errorf("fit %q, CheckFit now %q", e.model.fit.fit.Summary(), want.Summary())
	}
}
