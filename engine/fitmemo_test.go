package engine

import (
	"context"
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange/margin"
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
	if got, want := e.model.Fit().Summary(), fresh(); got != want {
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
	if got, want := e.model.Fit().Summary(), fresh(); got != want {
		t.Errorf("fit %q, CheckFit now %q", got, want)
	}
}
