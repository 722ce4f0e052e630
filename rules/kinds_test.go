package rules

import (
	"reflect"
	"testing"
)

// Calls names each exchange call of a rule set once, in the kinds'
// table order, with the kinds that make it and the rules in the file's
// order; notify makes none.
func TestSetCalls(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, yaml string
		want       []CallUse
	}{
		{"notify only", `
rules:
  - name: a
    when: position.leverage > 10
    actions:
      - action: notify
`, nil},
		{"every call", `
rules:
  - name: cut
    when: liquidationDistance < 0.01
    actions:
      - action: reduce_position
        fraction: 0.5
  - name: fence
    when: position.cross
    actions:
      - action: set_isolated
      - action: cancel_orders
  - name: lower
    when: position.leverage > 10
    actions:
      - action: lower_leverage
        leverage: 5
      - action: notify
`, []CallUse{
			{Call: CallSettings, Kinds: []ActionKind{LowerLeverage, SetIsolated}, Rules: []string{"fence", "lower"}},
			{Call: CallCancel, Kinds: []ActionKind{CancelOrders}, Rules: []string{"fence"}},
			{Call: CallOrder, Kinds: []ActionKind{ReducePosition}, Rules: []string{"cut"}},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			set, err := Parse("rules.yaml", []byte(c.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if got := set.Calls(); !reflect.DeepEqual(got, c.want) {
				t.Errorf("Calls() = %+v, want %+v", got, c.want)
			}
		})
	}
}
