package main

// Failure isolation across symbols: one symbol whose actions keep failing
// or hang never holds back another's protection (issue 12, items 2 and 6).

import (
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange/sim"
)

// nearLiqXETH is nearLiqRule on XETH only: XETH (isolated) gets a cancel.
var nearLiqXETH = strings.Replace(nearLiqRule, "    cooldown: 5m\n", "    symbols: [XETH]\n    cooldown: 5m\n", 1)

// patientEnv is the environment of a daemon whose client waits longer
// than engine.action_timeout: the action's own deadline ends a hung call.
func patientEnv(baseURL string) map[string]string {
	return map[string]string{
		"RISKGUARD_EXCHANGE_BASE_URL":    baseURL,
		"RISKGUARD_EXCHANGE_TIMEOUT":     "10s",
		"RISKGUARD_EXCHANGE_MAX_RETRIES": "0",
	}
}

// positionReads counts the positions reads among calls.
func positionReads(calls []sim.Call) int {
	n := 0
	for _, c := range calls {
		if c.Route == "/v1/contracts/positions" {
			n++
		}
	}
	return n
}

// XSOL's settings call fails on every attempt (503, or answered without the
// change applied) while XETH turns dangerous: XSOL backs off on its own, the
// breaker never opens, and XETH is acted on within two ticks.
func TestFaultOneSymbolFailingDoesNotStarveOthers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fault sim.Fault
		why   string
	}{
		{"503", sim.Fault{Status: 503}, "SERVICE_UNAVAILABLE"},
		{"not applied", sim.Fault{NotApplied: true}, "settings not applied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// With 100ms ticks and a budget of 10 a minute, the old guard
			// opened the breaker on XSOL's failures within about a second.
			g := newGuardEnv(t, "  max_actions_per_minute: 10\n  symbol_backoff_max: 800ms\n", overMaxRule+nearLiqXETH)
			g.ex.InjectFault(settingsXSOL, tc.fault)
			d := g.start(campaignEnv(g.url))
			waitFor(t, "XSOL backing off", 10*time.Second, func() bool {
				return strings.Contains(d.logs.String(), "4 failed calls in a row on XSOL")
			})
			// Long enough for 10 failures had XSOL been retried every tick.
			time.Sleep(1500 * time.Millisecond)
			mark := len(g.ex.Calls())
			g.putNearLiquidation("XETH", "ETH", 0.03)
			waitFor(t, "XETH protected", 10*time.Second, func() bool { return len(g.mutatingOn("XETH")) > 0 })
			d.running(t)
			calls := g.ex.Calls()[mark:]
			var reads int
			for i, c := range calls {
				if c.Mutating && strings.Contains(c.Path, "/XETH/") {
					reads = positionReads(calls[:i])
					break
				}
			}
			if reads > 2 {
				t.Errorf("XETH acted on after %d positions reads, want within two ticks", reads)
			}
			if code := d.stop(t); code != 0 {
				t.Errorf("exit %d, want 0", code)
			}
			xsol := g.mutatingOn("XSOL")
			if len(xsol) < 4 || len(xsol) > 12 {
				t.Errorf("XSOL calls = %d, want a few (backing off), not one per tick", len(xsol))
			}
			var backoff, breaker int
			for _, r := range g.auditLines() {
				switch {
				case r.Type == "breaker":
					breaker++
				case r.Type == "backoff" && r.Symbol == "XSOL" && strings.Contains(r.Reason, tc.why):
					backoff++
				}
			}
			if breaker != 0 {
				t.Errorf("%d breaker records: failed calls must not open the breaker", breaker)
			}
			if backoff < 4 {
				t.Errorf("%d backoff records for XSOL naming %q, want one per failure", backoff, tc.why)
			}
		})
	}
}

// A cancel that hangs on XETH does not hold back XSOL's settings call in
// the same tick (XETH comes first in the answer): XSOL's call is answered
// long before XETH's times out (each call has its own deadline,
// engine.action_timeout).
func TestFaultHangingActionDoesNotHoldOthers(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "  action_timeout: 2s\n", overMaxRule+nearLiqXETH)
	g.putNearLiquidation("XETH", "ETH", 0.03) // XSOL and XETH are due in the first tick
	g.ex.InjectFault("/v1/contracts/orders/XETH/cancel", sim.Fault{Latency: time.Minute})
	d := g.start(patientEnv(g.url))
	waitFor(t, "the hanging XETH call timing out", 15*time.Second, func() bool {
		return len(g.mutatingOn("XETH")) > 0
	})
	if code := d.stop(t); code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
	xsol, xeth := g.mutatingOn("XSOL"), g.mutatingOn("XETH")
	if len(xsol) == 0 {
		t.Fatal("XSOL was not acted on")
	}
	if xeth[0].Status != 0 {
		t.Errorf("XETH call status %d, want 0 (the guard gave up at its deadline)", xeth[0].Status)
	}
	if lag := xeth[0].Time.Sub(xsol[0].Time); lag < time.Second {
		t.Errorf("XSOL answered %s before XETH's call ended, want about action_timeout (2s): it waited for XETH", lag)
	}
}

// With one action at a time, an action that would go out on a snapshot
// older than engine.max_snapshot_age is skipped and said; it is taken on a
// later tick's fresh read.
func TestFaultNoActionOnOldSnapshot(t *testing.T) {
	t.Parallel()
	rules := strings.Replace(nearLiqRule, "    cooldown: 5m\n", "    symbols: [XBTC, XETH]\n    cooldown: 5m\n", 1)
	g := newGuardEnv(t, "  action_concurrency: 1\n  action_timeout: 1500ms\n  max_snapshot_age: 1s\n", rules)
	g.putNearLiquidation("XBTC", "BTC", 0.03)
	g.putNearLiquidation("XETH", "ETH", 0.03)
	// XBTC comes first in the answer; its cancel hangs past the snapshot's age, twice.
	g.ex.InjectFault("/v1/contracts/orders/XBTC/cancel", sim.Fault{Latency: time.Minute, Times: 2})
	d := g.start(patientEnv(g.url))
	waitFor(t, "XETH protected", 20*time.Second, func() bool { return len(g.mutatingOn("XETH")) > 0 })
	if code := d.stop(t); code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
	var stale int
	for _, r := range g.auditLines() {
		if r.Type == "action" && r.Phase == "skipped" && strings.Contains(r.Error, "snapshot too old to act on") {
			stale++
		}
	}
	if stale == 0 {
		t.Errorf("no action skipped for an old snapshot:\n%s", d.logs.String())
	}
	if !strings.Contains(d.logs.String(), "engine.max_snapshot_age") {
		t.Error("the log does not name engine.max_snapshot_age")
	}
}
