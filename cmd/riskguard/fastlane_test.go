package main

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

// neverRule never matches: these tests watch the polling, not actions.
const neverRule = `
  - name: never
    when: position.leverage > 1000
    actions:
      - action: cancel_orders
`

// fastLaneYAML turns the fast lane on under 1% from liquidation: the
// default scenario's XSOL (3.4%) and XETH (about 5%) stay calm.
const fastLaneYAML = "  fast_interval: 50ms\n  fast_distance: 0.01\n"

// positionsReadTimes returns the server times of the positions reads.
func (g *guardEnv) positionsReadTimes() []time.Time {
	var out []time.Time
	for _, c := range g.ex.Calls() {
		if c.Path == "/v1/contracts/positions" {
			out = append(out, c.Time)
		}
	}
	return out
}

// readGap lets settle positions reads go by (the ticks that may have read
// the scene before it changed), then waits for n more and returns their
// mean spacing on the server's clock.
func (g *guardEnv) readGap(settle, n int) time.Duration {
	g.t.Helper()
	from := len(g.positionsReadTimes()) + settle
	waitFor(g.t, fmt.Sprintf("%d positions reads", settle+n), 30*time.Second, func() bool {
		return len(g.positionsReadTimes()) >= from+n
	})
	ts := g.positionsReadTimes()
	return ts[from+n-1].Sub(ts[from-1]) / time.Duration(n)
}

// The daemon ticks every fast_interval while a position is within
// fast_distance of its liquidation price and goes back to interval when it
// is not; a reload that turns the fast lane off applies at once. Timing is
// checked as ratios of read spacings (10× expected, 3× required), so a
// slow machine does not fail it.
func TestRunFastLaneFollowsDanger(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, fastLaneYAML, neverRule)
	// Hold the indexes whose paths approach liquidation (XSOL's falls
	// through it at 70 s, ETH drifts towards XETH's): only the test moves
	// a position near danger.
	g.ex.SetIndexPrice("SOL", decimal.NewFromInt(150))
	g.ex.SetIndexPrice("ETH", decimal.NewFromInt(3010))
	env := map[string]string{
		"RISKGUARD_ENGINE_INTERVAL":     "500ms",
		"RISKGUARD_EXCHANGE_RATE_LIMIT": "100", // 3 requests per 50 ms tick is 60/s
	}
	d := g.start(env)
	calm := g.readGap(1, 3)
	g.putNearLiquidation("XBTC", "BTC", 0.006)
	fast := g.readGap(2, 10)
	g.ex.SetIndexPrice("BTC", decimal.NewFromInt(65000))
	calmAgain := g.readGap(2, 3)
	if calm < 3*fast || calmAgain < 3*fast {
		t.Errorf("reads every %s calm, %s near liquidation, %s calm again: want the near ones at least 3× closer", calm, fast, calmAgain)
	}
	logs := d.logs.String()
	for _, want := range []string{"fast lane on: XBTC 0.6% from liquidation", "back to the normal interval"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q", want)
		}
	}

	// A reload without the fast lane: near danger again, the reads stay slow.
	g.writeConfig("", neverRule)
	d.reload <- syscall.SIGHUP
	waitFor(t, "the reload", 10*time.Second, func() bool { return strings.Contains(d.logs.String(), "engine.fast_interval") })
	g.putNearLiquidation("XBTC", "BTC", 0.006)
	off := g.readGap(2, 3)
	if off < 3*fast {
		t.Errorf("reads every %s near liquidation with the fast lane off, %s with it on: want the former at least 3× longer", off, fast)
	}
	if code := d.stop(t); code != 0 {
		t.Fatalf("exit %d\n%s", code, d.logs.String())
	}
}
