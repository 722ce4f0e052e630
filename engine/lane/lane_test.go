package lane

import (
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/rules"
)

func TestCause(t *testing.T) {
	t.Parallel()
	on := Settings{Interval: 2 * time.Second, FastInterval: 250 * time.Millisecond, FastDistance: 0.05}
	off := on
	off.FastInterval = 0
	slower := on
	slower.FastInterval = 3 * time.Second
	near := nearest{symbol: "XBTC", distance: 0.031, ok: true}
	far := nearest{symbol: "XBTC", distance: 0.2, ok: true}
	tests := []struct {
		name string
		s    Settings
		hot  []alert.Alert
		near nearest
		want string
	}{
		{"calm", on, nil, far, ""},
		{"nothing measured", on, nil, nearest{}, ""},
		{"near liquidation", on, nil, near, "XBTC 3.1% from liquidation"},
		{"at the threshold is calm", on, nil, nearest{symbol: "XBTC", distance: 0.05, ok: true}, ""},
		{"past liquidation", on, nil, nearest{symbol: "XETH", distance: -0.01, ok: true}, "XETH -1.0% from liquidation"},
		{"pending", on, []alert.Alert{{Symbol: "XSOL", Rule: "r", State: alert.Pending}}, far, "rule r pending on XSOL"},
		{"firing", on, []alert.Alert{{Symbol: "XSOL", Rule: "r", State: alert.Firing}}, far, "rule r firing on XSOL"},
		{"a rule state beats the distance", on, []alert.Alert{{Symbol: "XSOL", Rule: "r", State: alert.Firing}}, near, "rule r firing on XSOL"},
		{"no data is not danger", on, []alert.Alert{{Symbol: "XSOL", Rule: "r", State: alert.NoData}}, far, ""},
		{"off", off, []alert.Alert{{Symbol: "XSOL", Rule: "r", State: alert.Firing}}, near, ""},
		{"not faster than the interval", slower, nil, near, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := causeOf(tt.s, tt.hot, tt.near); got != tt.want {
				t.Errorf("causeOf = %q, want %q", got, tt.want)
			}
		})
	}
}

// Only a rule with an action other than notify can hold the fast lane.
func TestActs(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		kinds []rules.ActionKind
		want  bool
	}{
		{nil, false},
		{[]rules.ActionKind{rules.Notify}, false},
		{[]rules.ActionKind{rules.Notify, rules.CancelOrders}, true},
		{[]rules.ActionKind{rules.LowerLeverage}, true},
		{[]rules.ActionKind{rules.SetIsolated}, true},
	} {
		r := &rules.Rule{Name: "r"}
		for _, k := range c.kinds {
			r.Actions = append(r.Actions, rules.Action{Kind: k})
		}
		if got := Acts(r); got != c.want {
			t.Errorf("Acts(%v) = %v, want %v", c.kinds, got, c.want)
		}
	}
}
