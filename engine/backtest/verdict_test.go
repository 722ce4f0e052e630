package backtest

import (
	"fmt"
	"testing"

	"github.com/shopspring/decimal"
)

func TestJudge(t *testing.T) {
	t.Parallel()
	d := decimal.RequireFromString
	tests := []struct {
		saved, caused int
		delta, start  string
		want          string
	}{
		{2, 0, "-310", "10000", "the guard saved 2 positions and cost 3.1% of equity"},
		{1, 0, "200", "10000", "the guard saved 1 position and gained 2.0% of equity"},
		{0, 0, "0", "10000", "the guard saved no position and left equity unchanged"},
		{0, 0, "-1", "10000", "the guard saved no position and cost less than 0.1% of equity"},
		{0, 1, "-500", "1000", "the guard saved no position, CAUSED 1 liquidation, and cost 50.0% of equity"},
		{3, 2, "10", "0", "the guard saved 3 positions, CAUSED 2 liquidations, and gained 10.00 of equity"},
	}
	for _, tt := range tests {
		if got := Judge(tt.saved, tt.caused, d(tt.delta), d(tt.start)); got != tt.want {
			t.Errorf("Judge(%d, %d, %s, %s) = %q, want %q", tt.saved, tt.caused, tt.delta, tt.start, got, tt.want)
		}
	}
}

// Skips are counted by the reason each one had, as engine/act words it;
// a reason not known here is counted as itself.
func TestSkipReason(t *testing.T) {
	t.Parallel()
	tests := []struct{ why, want string }{
		{"the free balance cannot fund 10x (11899.5 more margin, 3389 free): no leverage cut is within it", "the free balance could not fund it"},
		{"rule r's margin budget leaves 0 (500 per firing, 500 moved) and 5x needs 120: no leverage cut is within it", "a rule's margin budget"},
		{"5x would take free balance from the cross pool and move XBTC 49.08% → 45.56% away; the rule does not allow it (allow_closer_liquidation): no leverage cut is within it",
			"it would move another position's liquidation price closer (allow_closer_liquidation)"},
		{"5x would move XBTC 12.00% → 9.00% away, under 10.00%: no leverage cut is within it", "it would put another position under its floor (min_liquidation_distance)"},
		{"isolating would move the liquidation price closer; the rule does not allow it (allow_closer_liquidation)", "it would move its own liquidation price closer (allow_closer_liquidation)"},
		{"isolating would leave the account worse off (survives 2.33% → 0.00% together (cross pool first, 3533.11 → 0 lost)); the rule does not allow it (allow_closer_liquidation)",
			"it would leave the account worse off (allow_closer_liquidation)"},
		{"the liquidation price would end 2.00% away, under the floor of 5.00% (min_liquidation_distance)", "it would end under its floor (min_liquidation_distance)"},
		{"isolating XBTC would leave XBTC 2.42% from its liquidation price, inside the 3.00% where the rules cut it", "it would leave a position inside its rules' cut zone"},
		{"holding is as cheap in expectation: the expected loss to liquidations over the horizon is 0.01; reducing 0.4 pays 12.40 in fee and spread and leaves 0.00", "holding is as cheap in expectation (the order's fee and spread)"},
		{"XSOL was reduced 1.95% from its liquidation price and is 1.97% from it now: a reduce does not move an isolated position's liquidation price, so it is reduced again once 1.76% away (a tenth closer), not at the same distance", "an isolated position reduced at this distance already"},
		{"isolating XBTC would not lower the expected loss to liquidations over the horizon, first passage: now 1.00", "it would not lower the expected cost (first passage)"},
		{"isolating XBTC costs more in expectation: as asked (isolated at 20x): 0.86; cross at 20x: 0.00 (now 0.00)", "it would not lower the expected cost (first passage)"},
		{"isolating XBTC would move XBTC's liquidation price closer (2.45% away after) during a fast move: BTC moved 4.20% within 5m (40000 → 38320)", "it would move a liquidation price closer during a fast move"},
		{"the account measure would fall from 12% to 9%", "the account measure would fall from"},
		{"", "unknown"},
	}
	for _, tt := range tests {
		if got := skipReason(tt.why); got != tt.want {
			t.Errorf("skipReason(%q) = %q, want %q", tt.why, got, tt.want)
		}
	}
	// A lane's memo of them answers as skipReason, asked again and again,
	// and past its bound, when it starts again.
	var m reasonMemo
	for round := range 3 * reasonMemoSize / len(tests) {
		for i, tt := range tests {
			why := tt.why
			if round%2 == 1 {
				why = fmt.Sprintf("%s; step %d", why, round*len(tests)+i) // new texts: the memo fills
			}
			if got, want := m.of(why), skipReason(why); got != want {
				t.Fatalf("round %d: the memo's reason of %q is %q, skipReason's %q", round, why, got, want)
			}
			if len(m) > reasonMemoSize {
				t.Fatalf("the memo holds %d reasons, past its bound %d", len(m), reasonMemoSize)
			}
		}
	}
}
