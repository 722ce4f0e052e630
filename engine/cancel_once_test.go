package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/rules"
)

// A symbol's cancel goes out once a tick, shared by its hedge-mode long
// and short, and again at each tick the rule acts: what a tick did once
// is forgotten by the next, and the plans are grouped by symbol in the
// order of their first, whether the calls run beside the tick or, read
// in process, one plan after the other.
func TestCancelOncePerSymbolAndTick(t *testing.T) {
	t.Parallel()
	cancelAll := rules.Rule{Name: "cancel-all", When: "true", Cooldown: time.Second,
		Actions: []rules.Action{{Kind: rules.CancelOrders}}}
	for _, inProc := range []bool{false, true} {
		t.Run(map[bool]string{false: "concurrent", true: "in process"}[inProc], func(t *testing.T) {
			t.Parallel()
			fx := newFake()
			fx.positions = append(fx.positions, position(1, exchange.Short, 10, true, "1", "100000", "104000"))
			var reader market.Reader = fx
			if inProc {
				reader = &inProcess{fakeExchange: fx}
			}
			e, err := New(Config{}, &rules.Set{Rules: []*rules.Rule{rule(t, cancelAll)}},
				Deps{Reader: reader, Actuator: fx, Audit: journal.NewAudit(new(bytes.Buffer))})
			if err != nil {
				t.Fatal(err)
			}
			for i, sec := range []int{0, 2, 4} {
				if _, err := e.Tick(context.Background(), at(sec)); err != nil {
					t.Fatal(err)
				}
				_, cancels := fx.calls()
				if len(cancels) != 2*(i+1) {
					t.Fatalf("cancels after the tick at %ds: %v, want XBTC and XETH once at each tick", sec, cancels)
				}
				got := cancels[2*i:]
				if !inProc { // the symbols' calls run side by side
					slices.Sort(got)
				}
				if !slices.Equal(got, []string{"XBTC", "XETH"}) {
					t.Fatalf("cancels of the tick at %ds: %v, want XBTC then XETH", sec, got)
				}
			}
		})
	}
}

// failingCancel fails the cancels of one symbol.
type failingCancel struct {
	*fakeExchange
	symbol string
}

func (f failingCancel) CancelOrders(ctx context.Context, symbol string) (json.RawMessage, error) {
	raw, err := f.fakeExchange.CancelOrders(ctx, symbol)
	if symbol == f.symbol {
		return nil, errors.New("exchange down for " + symbol)
	}
	return raw, err
}

// Each plan of a tick takes its own calls' outcomes, whether they run
// beside the tick or, read in process, one plan after the other: the
// symbol whose cancel failed is told so and tried again at the next tick,
// the other one starts its cooldown.
func TestPlansTakeTheirOwnOutcomes(t *testing.T) {
	t.Parallel()
	cancelAll := rules.Rule{Name: "cancel-all", When: "true", Cooldown: time.Minute,
		Actions: []rules.Action{{Kind: rules.CancelOrders}}}
	for _, inProc := range []bool{false, true} {
		t.Run(map[bool]string{false: "concurrent", true: "in process"}[inProc], func(t *testing.T) {
			t.Parallel()
			fx := newFake()
			var reader market.Reader = fx
			if inProc {
				reader = &inProcess{fakeExchange: fx}
			}
			e, err := New(Config{}, &rules.Set{Rules: []*rules.Rule{rule(t, cancelAll)}},
				Deps{Reader: reader, Actuator: failingCancel{fx, "XBTC"}, Audit: journal.NewAudit(new(bytes.Buffer))})
			if err != nil {
				t.Fatal(err)
			}
			for _, tick := range []struct {
				sec      int
				outcomes []string
			}{
				{0, []string{"XBTC error", "XETH sent"}},
				{2, []string{"XBTC error"}}, // XETH waits for its cooldown
			} {
				rep, err := e.Tick(context.Background(), at(tick.sec))
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, a := range rep.Actions {
					got = append(got, a.Symbol+" "+a.Outcome)
				}
				slices.Sort(got)
				if !slices.Equal(got, tick.outcomes) {
					t.Errorf("tick at %ds: %v, want %v", tick.sec, got, tick.outcomes)
				}
			}
		})
	}
}
