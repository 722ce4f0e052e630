package rules

import "testing"

// The distance a condition names plainly, for the status page's colours.
func TestDistanceBelow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		when string
		want float64
		ok   bool
	}{
		{"liquidationDistance < 0.05", 0.05, true},
		{"liquidationDistance <= 0.1", 0.1, true},
		{"0.03 > liquidationDistance", 0.03, true},
		{"liquidationDistance < 0.05 && position.leverage > 10", 0.05, true},
		{"position.leverage > 10 and liquidationDistance < 0.02 and liquidationDistance < 0.04", 0.02, true},
		{"liquidationDistance > 0.05", 0, false},
		{"liquidationDistance < 0.05 || position.leverage > 10", 0, false},
		{"position.leverage > 10", 0, false},
		{"min_over_time(liquidationDistance, \"5m\") < 0.05", 0, false},
	} {
		r := &Rule{Name: "r", When: tc.when}
		if err := r.Compile(); err != nil {
			t.Fatalf("%s: %v", tc.when, err)
		}
		if got, ok := r.DistanceBelow(); got != tc.want || ok != tc.ok {
			t.Errorf("%s: DistanceBelow = %g, %t; want %g, %t", tc.when, got, ok, tc.want, tc.ok)
		}
	}
}

// The cut zone is the widest distance at which a rule that cuts or reduces
// the position fires; notify-only, isolating and account rules do not count.
func TestCutZone(t *testing.T) {
	t.Parallel()
	set, err := Parse("rules.yaml", []byte(`
rules:
  - name: warn
    when: liquidationDistance < 0.10
    actions: [{action: notify}]
  - name: isolate
    when: liquidationDistance < 0.05
    actions: [{action: set_isolated}]
  - name: cut
    when: liquidationDistance < 0.03
    actions: [{action: lower_leverage, leverage: position.leverage / 2}]
  - name: reduce
    when: liquidationDistance < 0.02
    actions: [{action: reduce_position, fraction: 0.5}]
  - name: eth-only
    symbols: [XETH]
    when: liquidationDistance < 0.04 && position.leverage > 10
    actions: [{action: reduce_position, fraction: 0.25}]
  - name: pool
    scope: account
    when: account.minLiquidationDistance < 0.2
    actions: [{action: notify}]
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		symbol string
		want   float64
	}{{"XBTC", 0.03}, {"XETH", 0.04}} {
		if got := set.CutZone(tc.symbol); got != tc.want {
			t.Errorf("CutZone(%s) = %g, want %g", tc.symbol, got, tc.want)
		}
	}
	if got := (*Set)(nil).CutZone("XBTC"); got != 0 {
		t.Errorf("a nil set's cut zone = %g, want 0", got)
	}
}
