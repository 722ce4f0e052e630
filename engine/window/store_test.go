package window

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/rules"
)

// parseSet is a rule set with one rule per condition.
func parseSet(t *testing.T, whens ...string) *rules.Set {
	t.Helper()
	var b strings.Builder
	b.WriteString("rules:\n")
	for i, w := range whens {
		fmt.Fprintf(&b, "  - name: r%d\n    when: '%s'\n    actions:\n      - action: cancel_orders\n", i, w)
	}
	set, err := rules.Parse("r.yaml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// termValues are the values of the store's terms at its last sample, by
// term.
func termValues(s *Store) map[string]string {
	out := map[string]string{}
	for _, g := range s.ws.position {
		out[s.ws.specs[g].Key()] = fmt.Sprintf("%v %q", s.pos.v[g], s.pos.why[g])
	}
	return out
}

// Terms over the same series and span read one ring: each has the values
// it has alone, tick after tick, through ticks without data and a gap; a
// reload that adds a term over a series and span already sampled gives it
// those samples, as a store that had it from the start has them (a term
// over a new series or span starts a ring).
func TestTermsShareASeriesRing(t *testing.T) {
	t.Parallel()
	whens := []string{`rate(liquidationDistance, "1m") < -1`, `timeToLiquidation < 1`,
		`min_over_time(liquidationDistance, "1m") < 0`, `change(indexPrice, "1m") < -0.5`, `drawdown(indexPrice, "2m") > 0.9`}
	shared := NewStore(parseSet(t, whens...), time.Second, nil, nil)
	var alone []*Store
	for _, w := range whens {
		alone = append(alone, NewStore(parseSet(t, w), time.Second, nil, nil))
	}
	// Added by a reload at tick 150.
	later := NewStore(parseSet(t, whens[0], whens[3]), time.Second, nil, nil)
	series := make([]Series, len(alone)+2)
	ctx := context.Background()
	now := t0
	for i := range 400 {
		now = now.Add(time.Second)
		if i == 200 {
			now = now.Add(40 * time.Second) // a gap
		}
		if i == 150 {
			later.Bind(parseSet(t, whens...))
		}
		index := 100 - float64(i%97)/10 + 3*math.Sin(float64(i)/7)
		env := rules.Env{IndexPrice: index, Now: now,
			Position:  rules.Position{Direction: "LONG", Leverage: 10, LiquidationPrice: 80, Quantity: 1},
			RiskLimit: rules.RiskLimit{MaxLeverage: 50}}
		env.FillDerived(i%23 != 5) // now and then no index: no data
		for j, s := range append(append([]*Store{}, alone...), shared, later) {
			s.Begin()
			s.SamplePosition(ctx, now, &series[j], &env, "")
		}
		got := termValues(shared)
		for _, s := range alone {
			for k, v := range termValues(s) {
				if got[k] != v {
					t.Fatalf("tick %d: %s = %s sharing rings, %s alone", i, k, got[k], v)
				}
			}
		}
		if i >= 150 {
			for k, v := range termValues(later) {
				if strings.HasPrefix(k, "drawdown") {
					continue // a series and span new with the reload: a new ring
				}
				if got[k] != v {
					t.Fatalf("tick %d: %s = %s added by a reload, %s from the start", i, k, v, got[k])
				}
			}
		}
	}
	if n := len(shared.ws.rings); n != 3 {
		t.Errorf("%d rings for five terms over three series and spans", n)
	}
}
