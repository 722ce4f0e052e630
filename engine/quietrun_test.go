package engine

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// TestQuietRunsMatchTheGeneralPath ticks two engines over the same moving
// account: one as built, whose plain rules run through quietRun, and one
// whose rules are all marked not plain, so that every rule goes through
// the general path. Plain runs of several lengths sit between rules that
// are not plain (windowed, symbol-bound, reading the account); rules turn
// true, pending and firing inside a run, so that a run is left and taken
// up again in the middle. The reports must be the same, tick for tick.
func TestQuietRunsMatchTheGeneralPath(t *testing.T) {
	whens := []struct {
		when    string
		symbols []string
		forDur  time.Duration
	}{
		{when: "indexPrice > 104"},
		{when: "indexPrice < 101", forDur: 2 * time.Second},
		{when: `change(indexPrice, "5s") > 0.01`},
		{when: "position.leverage > 12"},
		{when: "indexPrice > 102 && position.side > 0"},
		{when: "indexPrice >= 103", symbols: []string{"X0001", "X0004"}},
		{when: "indexPrice == 100", forDur: time.Second},
		{when: "account.positions > 100 || indexPrice == 106"},
		{when: "indexPrice > 105"},
	}
	build := func(general bool) (*Engine, *fakeExchange) {
		fx := benchAccount(12)
		set := &rules.Set{}
		for i, w := range whens {
			set.Rules = append(set.Rules, rule(t, rules.Rule{Name: fmt.Sprintf("r%d", i), When: w.when, Symbols: w.symbols,
				For: w.forDur, KeepFiringFor: time.Second, Cooldown: time.Hour}))
		}
		e, err := New(Config{}, set, Deps{Reader: fx, Actuator: fx})
		if err != nil {
			t.Fatal(err)
		}
		if general {
			for k := range e.eval.posRules {
				e.eval.posRules[k].plain = false
			}
		}
		return e, fx
	}
	quick, qx := build(false)
	general, gx := build(true)
	plain, runs := 0, 0
	for k, pr := range quick.eval.posRules {
		if pr.plain {
			plain++
			if k+1 == len(quick.eval.posRules) || !quick.eval.posRules[k+1].plain {
				runs++
			}
		}
	}
	if plain < 5 || runs < 3 {
		t.Fatalf("the set has %d plain rules in %d runs; the test wants several runs", plain, runs)
	}
	ctx := context.Background()
	fired := 0
	for tick := range 40 {
		for _, fx := range []*fakeExchange{qx, gx} {
			fx.mu.Lock()
			for i := range 12 {
				fx.index[fmt.Sprintf("B%04d", i)] = decimal.NewFromInt(int64(100 + (i*3+tick)%7))
			}
			fx.mu.Unlock()
		}
		now := t0.Add(time.Duration(tick) * time.Second)
		a, err := quick.Tick(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		b, err := general.Tick(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		if a.Evaluations != b.Evaluations || !reflect.DeepEqual(a.Transitions, b.Transitions) {
			t.Fatalf("tick %d: quiet runs %d evaluations, transitions\n%v\ngeneral path %d,\n%v", tick, a.Evaluations, a.Transitions, b.Evaluations, b.Transitions)
		}
		for _, tr := range a.Transitions {
			if tr.To == alert.Firing {
				fired++
			}
		}
	}
	if fired < 20 {
		t.Fatalf("only %d firings in 40 ticks: the account hardly moved the rules", fired)
	}
	if a, b := ruleStates(quick), ruleStates(general); !reflect.DeepEqual(a, b) {
		t.Fatalf("the rule states differ after the ticks:\n%v\n%v", a, b)
	}
}

// ruleStates are the engine's rule states by position.
func ruleStates(e *Engine) map[string][]alert.RuleState {
	out := map[string][]alert.RuleState{}
	for key, ps := range e.eval.book.All() {
		out[key.String()] = append([]alert.RuleState(nil), ps.Rules...)
	}
	return out
}

// The states a position's quiet rules are known to be in (posExtra's
// inactive bits) do not outlive a reload that moves the states: rule A
// fires, a reload puts it where inactive B was, and A's condition turning
// false still resolves it.
func TestKnownInactiveFollowsMovedStates(t *testing.T) {
	a := rule(t, rules.Rule{Name: "a", When: "indexPrice > 100.5"})
	b := rule(t, rules.Rule{Name: "b", When: "indexPrice > 1000"})
	fx := benchAccount(3) // index prices 100, 101, 102
	e, err := New(Config{}, &rules.Set{Rules: []*rules.Rule{a, b}}, Deps{Reader: fx, Actuator: fx})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for s := range 2 {
		if _, err := e.Tick(ctx, t0.Add(time.Duration(s)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	firing := func() int {
		n := 0
		for _, ps := range e.eval.book.All() {
			for _, st := range ps.Rules {
				if st.State == alert.Firing {
					n++
				}
			}
		}
		return n
	}
	if n := firing(); n != 2 {
		t.Fatalf("%d states firing, want a on two positions", n)
	}
	e.Update(t0.Add(2*time.Second), &rules.Set{Rules: []*rules.Rule{b, a}})
	fx.mu.Lock()
	for name := range fx.index {
		fx.index[name] = decimal.NewFromInt(100)
	}
	fx.mu.Unlock()
	for s := 3; s < 5; s++ {
		if _, err := e.Tick(ctx, t0.Add(time.Duration(s)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if n := firing(); n != 0 {
		t.Errorf("%d states still firing after a's condition turned false: %v", n, ruleStates(e))
	}
}
