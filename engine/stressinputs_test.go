package engine

import (
	"testing"
	"time"
)

// StressInputs says σ as the engine has it: before a tick every symbol is
// at the floor; after one, the open positions' symbols are listed, still
// at the floor (a tick has seen no return), the empty XSOL is not; the
// settings are the config's.
func TestStressInputs(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{StressSigmaFloor: 0.03, StressLikely: 2.5, StressHorizon: 30 * time.Minute})
	tests := []struct {
		name  string
		ticks int
		want  []string // the symbols listed
	}{
		{"before a tick", 0, nil},
		{"after a tick", 1, []string{"XBTC", "XETH"}},
	}
	for _, tt := range tests {
		for i := range tt.ticks {
			h.tick(i)
		}
		in := h.e.StressInputs()
		if in.Floor != 0.03 || in.Likely != 2.5 || in.Horizon != 30*time.Minute {
			t.Errorf("%s: settings %+v, want the config's", tt.name, in)
		}
		if len(in.Sigma) != len(tt.want) {
			t.Errorf("%s: σ of %v, want %v", tt.name, in.Sigma, tt.want)
		}
		for _, s := range append(tt.want, "XSOL", "XNONE") {
			if got := in.SigmaOf(s); got != 0.03 || !in.AtFloor(s) {
				t.Errorf("%s: σ of %s %v (at the floor %t), want the floor 0.03", tt.name, s, got, in.AtFloor(s))
			}
		}
		for _, s := range tt.want {
			if _, ok := in.Sigma[s]; !ok {
				t.Errorf("%s: %s not listed in %v", tt.name, s, in.Sigma)
			}
		}
	}
}
