package main

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange"
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

// liquidationDistance is how far sym's position is from its liquidation
// price, as a fraction of its index.
func (g *guardEnv) liquidationDistance(sym, index string) float64 {
	g.t.Helper()
	p := g.position(sym)
	ix, ok := g.ex.IndexPrice(index)
	if !ok {
		g.t.Fatalf("no index %s", index)
	}
	d := ix.Sub(p.LiquidationPrice).Div(ix)
	if p.Direction == exchange.Short {
		d = d.Neg()
	}
	return d.InexactFloat64()
}

// The fast lane follows danger, not every alert: an account rule that only
// notifies, firing with every position 17% or more from liquidation, keeps
// the normal interval for as long as it holds; the same rule with an action
// that can change something (cancel_orders on its targets) puts the guard
// in the fast lane. Reads are counted over a bounded stretch and compared
// as spacings (interval 500ms, fast_interval 50ms).
func TestRunFastLaneIgnoresANotifyOnlyAlert(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, action string
		fast         bool
	}{
		{"notify only", "notify", false},
		{"can change something", "cancel_orders", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rule := `
  - name: account-watch
    scope: account
    when: account.positions > 0
    targets: all
    cooldown: 1h
    actions:
      - action: ` + c.action + "\n"
			g := newGuardEnv(t, "  fast_interval: 50ms\n", rule) // fast_distance: the default 5%
			// Every position far from liquidation: set each index so its
			// position is 25% away, twice, as the cross pool moves them all.
			for range 2 {
				for _, p := range [][2]string{{"XBTC", "BTC"}, {"XETH", "ETH"}, {"XSOL", "SOL"}, {"XDOGE", "DOGE"}} {
					if _, ok := g.ex.Position(p[0]); ok {
						g.putNearLiquidation(p[0], p[1], 0.25)
					}
				}
			}
			for _, p := range [][2]string{{"XBTC", "BTC"}, {"XETH", "ETH"}, {"XSOL", "SOL"}, {"XDOGE", "DOGE"}} {
				if pos, ok := g.ex.Position(p[0]); ok && !pos.Quantity.IsZero() {
					if d := g.liquidationDistance(p[0], p[1]); d < 0.17 {
						t.Fatalf("%s is %.1f%% from liquidation, want at least 17%%", p[0], d*100)
					}
				}
			}
			d := g.start(map[string]string{
				"RISKGUARD_ENGINE_INTERVAL":     "500ms",
				"RISKGUARD_EXCHANGE_RATE_LIMIT": "100", // 3 requests per 50 ms tick is 60/s
			})
			gap := g.readGap(2, 6) // the rule fires at the first tick
			fired := false
			for _, r := range g.auditLines() {
				if r.Type == "transition" && r.Rule == "account-watch" && r.To == "firing" {
					fired = true
				}
			}
			if !fired {
				t.Fatal("the account rule did not fire")
			}
			logs := d.logs.String()
			if c.fast {
				if gap > 200*time.Millisecond || !strings.Contains(logs, "fast lane on: rule account-watch firing on account") {
					t.Errorf("reads every %s while a rule that can act fires, want the fast lane (50ms)", gap)
				}
			} else if gap < 300*time.Millisecond || strings.Contains(logs, "fast lane on") {
				t.Errorf("reads every %s while a notify-only alert fires far from liquidation, want the normal interval (500ms)", gap)
			}
			if code := d.stop(t); code != 0 {
				t.Fatalf("exit %d", code)
			}
		})
	}
}
