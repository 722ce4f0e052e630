package backtest

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/riskguard/riskguard/rules"
)

// poisonRules add to lanesRules the actions that read positions again
// inside a tick (reduce orders, with the position read after them) and an
// account rule over every position.
const poisonRules = lanesRules + `
  - name: reduce-near
    when: liquidationDistance < 0.04
    cooldown: 6m
    actions:
      - action: reduce_position
        fraction: 0.25
  - name: cross-pool
    scope: account
    when: account.marginRatio > 0.3
    targets: cross
    cooldown: 12m
    actions:
      - action: lower_leverage
        leverage: position.leverage - 1
`

// TestLaneBuffersAreNotKept: a lane's reads reuse two buffers of
// positions and two maps of index prices in turn (laneReader). A replay in
// which every buffer is spoiled with figures no exchange sends at the read
// that would overwrite it gives the same result, field for field, as one
// with fresh reads that nothing overwrites: nothing keeps a read longer
// than its time. Over firings, actions of every kind, liquidations, ticks
// between data steps, recorded-free walks with a missing index now and
// then, and both runs on their own goroutines or taking turns.
func TestLaneBuffersAreNotKept(t *testing.T) {
	set, err := rules.Parse("poison.yaml", []byte(poisonRules))
	if err != nil {
		t.Fatal(err)
	}
	steps := walkSteps(400)
	for _, tc := range []struct {
		name string
		opt  Options
	}{
		{"one tick a step", Options{MaxPoints: 40}},
		{"ticks between steps", Options{Interval: 40 * time.Second}},
		{"runs on their own goroutines", Options{Baseline: lanesSet(t)}},
		{"runs taking turns", Options{serial: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opt := tc.opt
			opt.Rules, opt.Scenario = set, sim.DefaultScenario()
			opt.poison = true
			spoiled, err := Run(context.Background(), &memSource{steps: steps}, opt)
			if err != nil {
				t.Fatal(err)
			}
			opt.poison = false
			reused, err := Run(context.Background(), &memSource{steps: steps}, opt)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(spoiled, reused) {
				t.Errorf("a spoiled buffer changed the result:\nspoiled: %s\nreused:  %s", Summary(spoiled), Summary(reused))
			}
			acted, liquidated := 0, len(reused.Unguarded.Liquidations)+len(reused.Guarded.Liquidations)
			kinds := map[string]bool{}
			for _, rs := range reused.Guarded.Rules {
				acted += rs.Actions
			}
			for _, s := range reused.Symbols {
				for _, m := range s.Markers {
					kinds[m.Action] = true
				}
			}
			if acted == 0 || liquidated == 0 || len(kinds) < 3 {
				t.Errorf("the data did not exercise the reads: %d actions (kinds %v), %d liquidations", acted, kinds, liquidated)
			}
		})
	}
}

// The spoiled figures would change a result that read them: a lane whose
// reads are spoiled as soon as they are made ends elsewhere.
func TestLanePoisonChangesWhatReadsIt(t *testing.T) {
	ex, err := sim.New(sim.Config{Key: "k", Secret: "s", Scenario: sim.DefaultScenario(), Now: func() time.Time { return lanesT0 }})
	if err != nil {
		t.Fatal(err)
	}
	r := newLaneReader(ex, true)
	ps, _ := r.Positions(context.Background())
	ix, _ := r.IndexPrices(context.Background())
	before := len(ps)
	r.Positions(context.Background())
	r.IndexPrices(context.Background())
	r.Positions(context.Background()) // spoils the first read
	r.IndexPrices(context.Background())
	if before == 0 || len(ix) == 0 {
		t.Fatal("the default scenario has no positions or indexes")
	}
	for _, p := range ps {
		if p.ID != "poisoned" || p.Quantity.Sign() >= 0 || p.SymbolID != -1 {
			t.Fatalf("position not spoiled: %+v", p)
		}
	}
	for name, v := range ix {
		if v.Sign() >= 0 {
			t.Fatalf("index %s not spoiled: %s", name, v)
		}
	}
}
