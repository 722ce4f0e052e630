package backtest

import (
	"fmt"
	"testing"
)

// Two rules never share a colour in a report while at most bandClasses of
// them fired (issue 32, item 15): the example's 11 rules took 6 colours
// in turn, whether they fired or not. Here 13 rules, 12 of them fired:
// the 12 get 12 colours, the one that never fired none.
func TestRuleColoursDistinct(t *testing.T) {
	t.Parallel()
	r := &Result{Symbols: []SymbolSeries{{}}}
	for i := range 13 {
		name := fmt.Sprintf("rule-%02d", i)
		r.Guarded.Rules = append(r.Guarded.Rules, RuleStats{Rule: name})
		if i != 3 {
			r.Symbols[0].Spans = append(r.Symbols[0].Spans, Span{Rule: name})
		}
	}
	got := ruleColours(r)
	if _, ok := got["rule-03"]; ok || len(got) != 12 {
		t.Fatalf("colours %v: want the 12 fired rules, not rule-03", got)
	}
	seen := map[int]string{}
	for rule, c := range got {
		if other, ok := seen[c]; ok {
			t.Errorf("%s and %s share colour %d", rule, other, c)
		}
		seen[c] = rule
	}
}
