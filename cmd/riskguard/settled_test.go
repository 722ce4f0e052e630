package main

// Issue 37 through the daemon (Main.Run against the simulated exchange over
// HTTP): a fill is the order's truth whatever a lagging listing says, and
// a liquidation left out of the listing is said on the evidence, within
// reads, whatever the rules' cooldowns.

import (
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/shopspring/decimal"
)

// The order (XBTC 0.8, halved) is answered FILLED while the next four
// reads of the positions still list 0.8: one fill, its result recorded,
// the lag said once, and no second order over the next reads. Before, the
// daemon recorded "settings not applied … (order N FILLED, filled 0.4)",
// backed off and, the next tick's read still lagging, sent the order
// again: XBTC 0.8 → 0.
func TestRunFilledAnswerLaggingListingOneFill(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "  listing_lag: 500ms\n", reduceRule("10m"))
	g.putNearLiquidation("XBTC", "BTC", 0.03)
	g.ex.InjectFault(exchange.DefaultOrderPath, sim.Fault{ListingLags: 4, Times: 1})
	d := g.start(nil)
	var orderAt int
	waitFor(t, "the order's outcome and ten reads after it", 15*time.Second, func() bool {
		if orderAt == 0 {
			for _, r := range g.reduceRecords() {
				if r.Phase == "result" || r.Phase == "error" {
					orderAt = g.positionsCalls()
				}
			}
			return false
		}
		return g.positionsCalls() >= orderAt+10
	})
	d.running(t)
	if code := d.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	orders := 0
	for _, c := range g.mutatingOn("XBTC") {
		if strings.HasSuffix(c.Path, "/create") {
			orders++
		}
	}
	if left := g.position("XBTC").Quantity; orders != 1 || !left.Equal(decimal.RequireFromString("0.4")) {
		t.Fatalf("%d orders, XBTC 0.8 → %s: want one fill, halved once\n%s", orders, left, d.logs.String())
	}
	var lagged, results int
	for _, r := range g.reduceRecords() {
		switch r.Phase {
		case "error":
			t.Errorf("the fill was recorded as an error: %s", r.Error)
		case "result":
			results++
		case "lagged":
			lagged++
			if !strings.Contains(r.Reason, "the positions listing lagged order") {
				t.Errorf("lagged record: %s", r.Reason)
			}
		}
	}
	if results != 1 || lagged != 1 {
		t.Errorf("%d results and %d lag records, want one of each: %+v", results, lagged, g.reduceRecords())
	}
}

// XSOL's index falls through its liquidation price, the exchange
// liquidates it and stops listing it; the rule firing on it has `cooldown:
// 10m`. "Probably liquidated" is said at the first read that leaves it
// out and LIQUIDATED at the second (engine.liquidation_confirm_reads),
// marked on the status: within a second at a 100ms interval. Before,
// nothing was said for the ten minutes of the rule's grace.
func TestRunLiquidationLeftOutSaidWithinReads(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "", `
  - name: near-edge
    when: liquidationDistance < 0.05
    symbols: [XSOL]
    cooldown: 10m
    severity: critical
    actions: [{action: notify}]
`)
	g.ex.InjectFault("/v1/contracts/positions", sim.Fault{LeaveOutEmpty: true})
	d := g.start(nil)
	firing := func(r journal.Record) bool {
		return r.Type == "transition" && r.Rule == "near-edge" && r.To == "firing"
	}
	waitFor(t, "the rule firing on XSOL", 10*time.Second, func() bool { return len(g.records(firing)) > 0 })
	g.ex.SetIndexPrice("SOL", decimal.RequireFromString("144.5")) // through 144.907
	if ls := g.ex.Liquidations(); len(ls) != 1 || ls[0].Symbol != "XSOL" {
		t.Fatalf("the exchange's liquidations: %+v", ls)
	}
	liquidated := func(r journal.Record) bool { return r.Type == "liquidated" && r.Symbol == "XSOL" && r.Phase == "" }
	waitFor(t, "XSOL said liquidated", 5*time.Second, func() bool { return len(g.records(liquidated)) > 0 })
	d.running(t)
	if code := d.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	var probable, liq time.Time
	for _, r := range g.auditLines() {
		switch {
		case r.Type == "liquidated" && r.Symbol == "XSOL" && r.Phase == "probable" && probable.IsZero():
			probable = r.Time
		case liquidated(r) && liq.IsZero():
			liq = r.Time
		}
	}
	at := g.ex.Liquidations()[0].Time
	if probable.IsZero() || probable.Before(at) || !liq.After(probable) {
		t.Errorf("probably liquidated at %v, LIQUIDATED at %v, the exchange liquidated at %v: want probable first, then confirmed", probable, liq, at)
	}
	if took := liq.Sub(at); took > time.Second {
		t.Errorf("LIQUIDATED said %s after the exchange liquidated, want within a few reads (interval 100ms)", took)
	}
	if !strings.Contains(d.logs.String(), "LIQUIDATED: XSOL LONG 400") {
		t.Errorf("the log lacks the liquidation:\n%s", d.logs.String())
	}
}
