package backtest

import (
	"maps"
	"reflect"
	"testing"

	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/shopspring/decimal"
)

// A step's prices under the exchanges' index names (resolveStep) are
// resolve's of them, whether they are passed through (no name of a
// symbol or an alias) or copied into a map reused from an earlier step,
// and a map passed through comes back for reuse like the others.
func TestResolveStepIsResolve(t *testing.T) {
	t.Parallel()
	sc := sim.DefaultScenario()
	r := &replay{res: &Result{}}
	r.opt.Engine.IndexNames = map[string]string{sc.Contracts[0].Name: "INDEXALIAS"}
	r.fixIndexes(sc)
	d := decimal.RequireFromString
	steps := []map[string]decimal.Decimal{
		{sc.Indexes[0].Name: d("100.5"), sc.Indexes[1].Name: d("7")},                 // index names: passed through
		{sc.Contracts[0].Name: d("101"), sc.Indexes[1].Name: d("8")},                 // a symbol for its index
		{"INDEXALIAS": d("102")},                                                     // an engine index name
		{sc.Indexes[0].Name: d("103")},                                               // passed through again
		{sc.Contracts[1].Name: d("104"), "INDEXALIAS": d("105"), "OTHER": d("0.01")}, // both, and a name unknown
		{},
	}
	passed := 0
	for i, st := range steps {
		in := maps.Clone(st)
		want := r.resolve(in)
		got := r.resolveStep(in)
		if !maps.Equal(got, want) {
			t.Fatalf("step %d: %v, resolve gives %v", i, got, want)
		}
		if reflect.ValueOf(got).Pointer() == reflect.ValueOf(in).Pointer() {
			passed++
		}
		r.recycle(got)
	}
	if passed < 2 || len(r.freeMaps) == 0 {
		t.Fatalf("%d steps passed through, %d maps kept: the paths are not both taken", passed, len(r.freeMaps))
	}
}
