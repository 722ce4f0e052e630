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
