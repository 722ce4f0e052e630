package engine

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/rules"
)

// The active rules a reader took are its own: the board writes its list
// again at each tick (setActive), and Active hands out copies. XBTC over
// its maximum leverage fires at the first tick; the second sees it
// lowered and XETH over its maximum instead, and the first list still
// says XBTC.
func TestActiveListIsTheReaders(t *testing.T) {
	t.Parallel()
	fx := newFake()
	set := &rules.Set{Rules: []*rules.Rule{rule(t, overMax)}}
	e, err := New(Config{Interval: 2 * time.Second, ActionTimeout: time.Minute}, set, Deps{Reader: fx, Actuator: fx})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := e.Tick(ctx, at(0)); err != nil {
		t.Fatal(err)
	}
	first := e.Active()
	want := slices.Clone(first)
	if len(want) != 1 || want[0].Symbol != "XBTC" || want[0].State != alert.Firing {
		t.Fatalf("active after the first tick: %+v, want XBTC firing", want)
	}
	fx.mu.Lock()
	fx.positions[1].Leverage = 30
	fx.mu.Unlock()
	if _, err := e.Tick(ctx, at(2)); err != nil {
		t.Fatal(err)
	}
	if now := e.Active(); !slices.ContainsFunc(now, func(a alert.Alert) bool { return a.Symbol == "XETH" }) {
		t.Fatalf("active after the second tick: %+v, want XETH among them", now)
	}
	if !reflect.DeepEqual(first, want) {
		t.Errorf("the list the first tick handed out became %+v, want %+v", first, want)
	}
}
