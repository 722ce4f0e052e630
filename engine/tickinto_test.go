package engine_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// TickInto with one report for every tick says what Tick says with a
// report of its own each tick: two engines on two simulated exchanges
// alike, the prices moved alike, their reports compared tick by tick. The
// reused report starts full of another tick's lists, and ticks with
// transitions and actions are followed by quiet ones, so a list that is
// not emptied shows.
func TestTickIntoIsTick(t *testing.T) {
	t.Parallel()
	mk := func() *rules.Rule {
		return &rules.Rule{Name: "near", When: "liquidationDistance < 0.04", OnNoData: rules.NoDataAlert, Symbols: []string{"XBTC"},
			Cooldown: time.Minute, Actions: []rules.Action{{Kind: rules.CancelOrders}, {Kind: rules.Notify, Channels: []string{"log"}}}}
	}
	fresh, exF := simEngine(t, mk())
	reused, exR := simEngine(t, mk())
	ctx := context.Background()
	rep := engine.TickReport{Positions: 99, Evaluations: 99, Report: journal.Report{
		Transitions: []journal.TransitionEvent{{Rule: "stale", Symbol: "XOLD", To: alert.Firing}},
		Actions:     []journal.ActionEvent{{Symbol: "XOLD", Action: "stale", Outcome: "sent"}},
		Liquidated:  []string{"XOLD"},
	}}
	p, _ := exF.Position("XBTC")
	near := p.LiquidationPrice.Div(decimal.RequireFromString("0.97")).Round(1)
	far := p.LiquidationPrice.Mul(decimal.NewFromInt(2)).Round(1)
	// By tick: the BTC index price to set first ("" leaves it).
	moves := []decimal.Decimal{{}, near, {}, far, {}, near, {}, {}, far}
	said := 0
	for i, m := range moves {
		if !m.IsZero() {
			exF.SetIndexPrice("BTC", m)
			exR.SetIndexPrice("BTC", m)
		}
		now := time.Date(2026, 1, 1, 0, i, 0, 0, time.UTC)
		want, errF := fresh.Tick(ctx, now)
		errR := reused.TickInto(ctx, now, &rep)
		if (errF == nil) != (errR == nil) {
			t.Fatalf("tick %d: Tick's error %v, TickInto's %v", i, errF, errR)
		}
		// This tick's snapshot (the sims' own times of creation differ).
		if rep.Snapshot == nil || want.Snapshot == nil || !rep.Snapshot.Time.Equal(now) || len(rep.Snapshot.Positions) != len(want.Snapshot.Positions) ||
			!rep.Snapshot.IndexPrices["BTC"].Equal(want.Snapshot.IndexPrices["BTC"]) {
			t.Fatalf("tick %d: snapshots differ: %+v, want %+v", i, rep.Snapshot, want.Snapshot)
		}
		got, wantR := rep.Report, want.Report
		for _, r := range []*journal.Report{&got, &wantR} { // an empty list is no list
			if len(r.Transitions) == 0 {
				r.Transitions = nil
			}
			if len(r.Actions) == 0 {
				r.Actions = nil
			}
			if len(r.Liquidated) == 0 {
				r.Liquidated = nil
			}
		}
		if !rep.Time.Equal(want.Time) || rep.Positions != want.Positions || rep.Evaluations != want.Evaluations || !reflect.DeepEqual(got, wantR) {
			t.Errorf("tick %d: TickInto's report\n%v %d %d %+v\nTick's\n%v %d %d %+v", i, rep.Time, rep.Positions, rep.Evaluations, got,
				want.Time, want.Positions, want.Evaluations, wantR)
		}
		said += len(want.Transitions) + len(want.Actions)
	}
	if said < 4 {
		t.Fatalf("the moves made %d transitions and actions, want at least 4: the test does not exercise the lists", said)
	}
}
