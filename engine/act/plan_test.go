package act

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/rules"
)

// dedupeReference is Dedupe as it was written first: through a map.
func dedupeReference(s []string) []string {
	out := s[:0:0]
	seen := make(map[string]bool, len(s))
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// Dedupe is the list without repeats, in order, nil for nil and empty for
// empty, in a list of its own: short lists looked through and long ones
// through a map alike.
func TestDedupe(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   []string
	}{
		{"nil", nil},
		{"empty", []string{}},
		{"one", []string{"a"}},
		{"no repeat", []string{"a", "b", "c"}},
		{"repeats", []string{"a", "b", "a", "c", "b", "a"}},
		{"all one", []string{"x", "x", "x"}},
	}
	r := rand.New(rand.NewPCG(38, 31))
	for n := range 3 * dedupeShort {
		in := make([]string, n)
		for i := range in {
			in[i] = fmt.Sprint("r", r.IntN(n/2+1))
		}
		tests = append(tests, struct {
			name string
			in   []string
		}{fmt.Sprintf("random %d", n), in})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			was := slices.Clone(tt.in)
			got, want := Dedupe(tt.in), dedupeReference(tt.in)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Dedupe(%q) = %#v, want %#v", tt.in, got, want)
			}
			if len(got) > 0 {
				got[0] = "changed"
				if !slices.Equal(tt.in, was) {
					t.Fatalf("Dedupe(%q) shares its list with the input", was)
				}
			}
		})
	}
}

// A plan Reset and built again is as a plan built new (its dues, the steps
// they asked for and their notify actions, its steps in order, each as its
// kind's Merge makes it), though it took its steps and lists again; and
// what its first use handed out, a step's list of rules that a report
// keeps, is left as it was.
func TestPlanResetIsAsNew(t *testing.T) {
	t.Parallel()
	kinds := DefaultKinds()
	a := &rules.Rule{Name: "a", Actions: []rules.Action{{Kind: rules.SetIsolated}, {Kind: rules.CancelOrders}, {Kind: rules.Notify, Channels: []string{"ops"}}}}
	b := &rules.Rule{Name: "b", Actions: []rules.Action{{Kind: rules.CancelOrders}}}
	c := &rules.Rule{Name: "c", Actions: []rules.Action{{Kind: rules.SetIsolated}, {Kind: rules.Notify}}}
	build := func(pl *Plan, rs ...*rules.Rule) {
		for i, r := range rs {
			pl.Add(kinds, i, r, &alert.RuleState{}, nil, nil, nil)
		}
	}
	pl := &Plan{}
	build(pl, a, b, c)
	cancel, settings := pl.Steps[0].(*cancelStep), pl.Steps[1].(*SettingsStep)
	handed := cancel.rules
	// What a tick's Prepare and Done leave in the steps.
	cancel.tried, cancel.err, cancel.ev.Outcome = true, fmt.Errorf("refused"), "failed"
	settings.note, settings.skipped, settings.dec.Change = "at target", true, true

	pl.Reset()
	if !pl.Empty() || len(pl.Steps) != 0 {
		t.Fatalf("a Reset plan is not empty: %d dues, %d steps", len(pl.Due), len(pl.Steps))
	}
	build(pl, c, b)
	want := &Plan{}
	build(want, c, b)
	if got, w := describePlan(pl), describePlan(want); got != w {
		t.Errorf("plan built again after Reset:\n%s\nbuilt new:\n%s", got, w)
	}
	if pl.Steps[0] != Step(cancel) || pl.Steps[1] != Step(settings) {
		t.Error("the plan made its steps again instead of taking them back")
	}
	if !slices.Equal(handed, []string{"a", "b"}) {
		t.Errorf("the first use's cancel rules became %q", handed)
	}
}

// describePlan is what a plan says of its dues and steps, the steps'
// state included, their addresses left out.
func describePlan(pl *Plan) string {
	var b strings.Builder
	for _, d := range pl.Due {
		fmt.Fprintf(&b, "due %d %s err=%v notify=%v asked:", d.Idx, d.Rule.Name, d.Err, d.Notify)
		for _, s := range d.Asked {
			fmt.Fprintf(&b, " %d", slices.Index(pl.Steps, s))
		}
		b.WriteString("\n")
	}
	for i, s := range pl.Steps {
		fmt.Fprintf(&b, "step %s %+v\n", pl.keys[i], reflect.ValueOf(s).Elem().Interface())
	}
	return b.String()
}

// A step's list of its rules starts as a piece of the rule set's names
// (Plan.Names), and the rules merged after it leave the names as they were:
// each is appended to a list of the step's own.
func TestPlanNamedLeavesNamesAlone(t *testing.T) {
	t.Parallel()
	kinds := DefaultKinds()
	names := []string{"a", "b", "c"}
	set := []*rules.Rule{
		{Name: "a", Actions: []rules.Action{{Kind: rules.CancelOrders}, {Kind: rules.SetIsolated}}},
		{Name: "b", Actions: []rules.Action{{Kind: rules.CancelOrders}, {Kind: rules.SetIsolated}}},
		{Name: "c", Actions: []rules.Action{{Kind: rules.CancelOrders}}},
	}
	pl := &Plan{Names: names}
	for _, ri := range []int{1, 0} {
		pl.Add(kinds, ri, set[ri], &alert.RuleState{}, nil, nil, nil)
	}
	cancel, settings := pl.Steps[0].(*cancelStep), pl.Steps[1].(*SettingsStep)
	if !slices.Equal(cancel.rules, []string{"b", "a"}) || !slices.Equal(settings.IsolateRules, []string{"b", "a"}) {
		t.Errorf("the steps' rules: %q and %q, want b then a", cancel.rules, settings.IsolateRules)
	}
	if !slices.Equal(names, []string{"a", "b", "c"}) {
		t.Errorf("the rule set's names became %q", names)
	}
	one := &Plan{Names: names}
	one.Add(kinds, 2, set[2], &alert.RuleState{}, nil, nil, nil)
	if got := one.Steps[0].(*cancelStep).rules; !slices.Equal(got, []string{"c"}) || &got[0] != &names[2] {
		t.Errorf("one rule's cancel lists %q in a list of its own, want c cut from the names", got)
	}
}
