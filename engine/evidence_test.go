package engine_test

import (
	"bytes"
	"context"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/riskguard/riskguard/notify"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// A position whose index falls through its liquidation price and which
// the exchange then stops listing (rather than listing it empty) is said
// on the evidence, under a rule with `cooldown: 10m`: "probably
// liquidated" at the first read that leaves it out, LIQUIDATED (critical,
// marked on the status) at the engine.liquidation_confirm_reads-th — two
// ticks, 4 s, not the ten minutes of the rule's grace. A position left out
// once near its liquidation price and listed again has its "probably"
// withdrawn. Before, nothing at all was said for ten minutes (issue 37).
func TestLiquidationLeftOutSaidOnEvidence(t *testing.T) {
	t.Parallel()
	set, err := rules.Parse("watch.yaml", []byte(`rules:
  - name: near-edge
    when: liquidationDistance < 0.05
    severity: critical
    cooldown: 10m
    actions: [{action: notify}]
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		// index is SOL's price after the first tick; gone: the exchange
		// liquidates XSOL (144.907) and stops listing it; else one read
		// leaves XSOL out.
		index string
		gone  bool
	}{
		{name: "liquidated, left out", index: "144.5", gone: true},
		{name: "left out once near its liquidation price", index: "146", gone: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var audit bytes.Buffer
			note := &kinds{}
			e, ex := simEngineDeps(t, set, engine.Deps{Notifier: note, Audit: journal.NewAudit(&audit)})
			ctx := context.Background()
			now := time.Now()
			ex.SetIndexPrice("SOL", decimal.RequireFromString("146.5"))
			if _, err := e.Tick(ctx, now); err != nil {
				t.Fatal(err)
			}
			ex.SetIndexPrice("SOL", decimal.RequireFromString(tc.index))
			if tc.gone {
				ex.InjectFault("/v1/contracts/positions", sim.Fault{LeaveOutEmpty: true})
			} else {
				ex.InjectFault("/v1/contracts/positions", sim.Fault{Empty: true, Times: 1})
			}
			for i := 1; i <= 3; i++ {
				if _, err := e.Tick(ctx, now.Add(time.Duration(i)*2*time.Second)); err != nil {
					t.Fatal(err)
				}
			}
			marked := e.Status(now.Add(6 * time.Second)).Liquidations
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			said := map[string]time.Duration{} // phase → when, after the first tick
			for _, r := range auditRecords(t, &audit) {
				if r.Type == "liquidated" && r.Symbol == "XSOL" && r.Phase != "evidence" {
					if _, ok := said[r.Phase]; !ok {
						said[r.Phase] = r.Time.Sub(now)
					}
				}
			}
			if tc.gone {
				if at, ok := said["probable"]; !ok || at != 2*time.Second {
					t.Errorf("probably liquidated said at %v (%v), want at the first read that left it out (2s)\naudit:\n%s", at, ok, audit.String())
				}
				if at, ok := said[""]; !ok || at != 4*time.Second {
					t.Errorf("LIQUIDATED said at %v (%v), want at the second read that left it out (4s), whatever the rule's cooldown\naudit:\n%s", at, ok, audit.String())
				}
				if len(marked) != 1 || marked[0].Symbol != "XSOL" {
					t.Errorf("status liquidations = %+v, want XSOL marked", marked)
				}
				critical := false
				for _, m := range note.msgs {
					critical = critical || m.Kind == notify.KindLiquidation && m.Severity == "critical" && strings.HasPrefix(m.Text, "LIQUIDATED: XSOL LONG 400")
				}
				if !critical {
					t.Errorf("no critical liquidation message among %+v", note.msgs)
				}
				return
			}
			if _, ok := said["probable"]; !ok {
				t.Errorf("left out near its liquidation price: no probably liquidated\naudit:\n%s", audit.String())
			}
			if at, ok := said["withdrawn"]; !ok || at != 4*time.Second {
				t.Errorf("withdrawn at %v (%v), want at the read that listed it again (4s)\naudit:\n%s", at, ok, audit.String())
			}
			if _, ok := said[""]; ok || len(marked) != 0 {
				t.Errorf("a position listed again was said liquidated (marked %+v)\naudit:\n%s", marked, audit.String())
			}
		})
	}
}

// A position grown by someone else (LONG 400 → 1200, no order of the
// guard) while the listing's updatedAt did not change is said: the
// quantity is compared on every read, updatedAt is no change marker.
// Before, the reconciler took the unchanged updatedAt for "the same
// position" and said nothing (issue 37).
func TestGrowthWithUpdatedAtUnchangedIsSaid(t *testing.T) {
	t.Parallel()
	var audit bytes.Buffer
	note := &kinds{}
	e, ex := simEngineDeps(t, &rules.Set{}, engine.Deps{Notifier: note, Audit: journal.NewAudit(&audit)})
	ctx := context.Background()
	at := -1
	for i, p := range ex.Positions() {
		if p.Quantity.Equal(decimal.NewFromInt(400)) && p.Direction == "LONG" {
			at = i // XSOL's place in the listing
		}
	}
	if at < 0 {
		t.Fatal("no XSOL LONG 400 in the simulated exchange")
	}
	// Every read says the same updatedAt.
	ex.InjectFault("/v1/contracts/positions", sim.Fault{Item: &sim.ItemFault{Path: strconv.Itoa(at) + ".updatedAt", Value: "1767225600000"}})
	now := time.Now()
	if _, err := e.Tick(ctx, now); err != nil {
		t.Fatal(err)
	}
	if err := ex.PutPosition(sim.PositionSpec{Symbol: "XSOL", Direction: "LONG", Quantity: decimal.NewFromInt(1200), EntryPrice: decimal.NewFromInt(150), Leverage: 15}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Tick(ctx, now.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range auditRecords(t, &audit) {
		found = found || r.Type == "position" && r.To == "grew" && strings.Contains(r.Reason, "XSOL LONG grew 400 → 1200 without an order of the guard")
	}
	if !found {
		t.Errorf("the growth is not audited:\n%s", audit.String())
	}
	warned := false
	for _, m := range note.msgs {
		warned = warned || m.Kind == notify.KindPosition && m.Severity == "warning" && strings.Contains(m.Text, "grew 400 → 1200")
	}
	if !warned {
		t.Errorf("no warning among %+v", note.msgs)
	}
}

// The cross position XBTC doubles (0.8 → 1.6) while the listing's version
// stays the same: the account's figures follow the quantity, as a fresh
// engine reading the same account makes them. Before, the maintenance
// margin was cached per version and the inferred free balance per the
// cross positions' versions, so the margin ratio stayed the old one for up
// to a minute (issue 37: no field the spec gives no meaning stands in for
// a comparison).
func TestAccountFollowsTheQuantityNotTheVersion(t *testing.T) {
	t.Parallel()
	set, err := rules.Parse("acct.yaml", []byte(`rules:
  - name: ratio
    when: account.marginRatio > 0.99
    actions: [{action: notify}]
  - name: watch
    when: position.leverage > 0
    cooldown: 10m
    actions: [{action: notify}]
`))
	if err != nil {
		t.Fatal(err)
	}
	e, ex := simEngineDeps(t, set, engine.Deps{})
	ctx := context.Background()
	at := -1
	for i, p := range ex.Positions() {
		if p.Cross && !p.Empty {
			at = i // XBTC's place in the listing
		}
	}
	if at < 0 {
		t.Fatal("no cross position in the simulated exchange")
	}
	ex.InjectFault("/v1/contracts/positions", sim.Fault{Item: &sim.ItemFault{Path: strconv.Itoa(at) + ".version", Value: "7"}})
	now := time.Now()
	for i := range 2 { // the second tick works out figures the states keep
		if _, err := e.Tick(ctx, now.Add(time.Duration(i-1)*2*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	ratio := func(e *engine.Engine, at time.Time) float64 {
		a := e.Status(at).Account
		if a == nil || a.MarginRatio == nil {
			t.Fatalf("no margin ratio in the status: %+v", a)
		}
		return *a.MarginRatio
	}
	before := ratio(e, now)
	p, _ := ex.Position("XBTC")
	if err := ex.PutPosition(sim.PositionSpec{Symbol: "XBTC", Direction: p.Direction, Quantity: p.Quantity.Mul(decimal.NewFromInt(2)),
		EntryPrice: p.EntryPrice, Leverage: p.Leverage, Cross: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Tick(ctx, now.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	got := ratio(e, now.Add(2*time.Second))
	client := overHTTP(t, ex) // the same account, read afresh by a new engine
	f, err := engine.New(engine.Config{}, set, engine.Deps{Reader: client, Actuator: client})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Tick(ctx, now.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	want := ratio(f, now.Add(2*time.Second))
	if got != want || got == before {
		t.Errorf("margin ratio %v → %v after XBTC doubled under the same version; a fresh read makes %v", before, got, want)
	}
}

// Money added to the account moves the cross position's liquidation price
// while the listing's version stays the same: the free balance inferred
// from it follows at the next read. Before, it was cached per the cross
// positions' versions and leverages for a minute (issue 37).
func TestFreeBalanceFollowsTheFiguresNotTheVersion(t *testing.T) {
	t.Parallel()
	set, err := rules.Parse("acct.yaml", []byte(`rules:
  - name: free
    when: account.freeBalance < 0
    actions: [{action: notify}]
`))
	if err != nil {
		t.Fatal(err)
	}
	e, ex := simEngineDeps(t, set, engine.Deps{})
	ctx := context.Background()
	at := -1
	for i, p := range ex.Positions() {
		if p.Cross && !p.Empty {
			at = i
		}
	}
	ex.InjectFault("/v1/contracts/positions", sim.Fault{Item: &sim.ItemFault{Path: strconv.Itoa(at) + ".version", Value: "7"}})
	now := time.Now()
	free := func(e *engine.Engine, at time.Time) float64 {
		a := e.Status(at).Account
		if a == nil || a.FreeBalance == nil {
			t.Fatalf("no free balance in the status: %+v", a)
		}
		return *a.FreeBalance
	}
	if _, err := e.Tick(ctx, now); err != nil {
		t.Fatal(err)
	}
	before := free(e, now)
	ex.SetBalance(ex.Balance().Add(decimal.NewFromInt(10000)))
	if _, err := e.Tick(ctx, now.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if got, want := free(e, now.Add(2*time.Second)), before+10000; math.Abs(got-want) > 1 {
		t.Errorf("free balance %v → %v after 10000 were added under the same version, want about %v", before, got, want)
	}
}
