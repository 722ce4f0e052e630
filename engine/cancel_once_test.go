package engine

import (
	"bytes"
	"context"
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
