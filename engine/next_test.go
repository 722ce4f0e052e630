package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/engine/control"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// nextOf is the next text of rule on symbol in st, and whether the rule is
// listed there.
func nextOf(st *engine.Status, symbol, rule string) (engine.RuleStatus, bool) {
	for _, p := range st.Positions {
		if p.Symbol != symbol {
			continue
		}
		for _, r := range p.Rules {
			if r.Rule == rule {
				return r, true
			}
		}
	}
	return engine.RuleStatus{}, false
}

// The status says, per firing rule, what the guard does next and why no
// more (issue 32, item 14): through the client against the simulated
// exchange over HTTP, whose XSOL (long 400 at 15×, the risk limit's max
// 10×) two rules fire on. The one that lowered the leverage cools down
// until its cooldown ends; the notify-only one too, having notified; at
// its next attempt the leverage is at target and it says so; a pause of
// the symbol holds both. An inactive rule has no next text. Each position
// lists the distance thresholds of its rules that say one plainly.
func TestStatusSaysWhatComesNext(t *testing.T) {
	t.Parallel()
	set, err := rules.Parse("next.yaml", []byte(`rules:
  - name: sol-over-max
    when: position.leverage > 9
    symbols: [XSOL]
    cooldown: 5m
    severity: critical
    allow_closer_liquidation: true
    actions: [{action: lower_leverage, leverage: riskLimit.maxLeverage}]
  - name: sol-watch
    when: position.leverage > 9
    symbols: [XSOL]
    cooldown: 2m
    severity: critical
    actions: [{action: notify}]
  - name: never
    when: position.leverage > 1000 && liquidationDistance < 0.02
    symbols: [XBTC, XETH]
    severity: critical
    actions: [{action: notify}]
`))
	if err != nil {
		t.Fatal(err)
	}
	e, ex := simEngineDeps(t, set, engine.Deps{Notifier: &kinds{}})
	ctx := context.Background()
	t0 := time.Date(2025, 3, 14, 9, 0, 0, 0, time.UTC)
	ex.SetIndexPrice("SOL", decimal.RequireFromString("150"))

	// Never read: no age, and the lists are [].
	st := e.Status(t0)
	raw, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"snapshotAgeSeconds":null`, `"liquidations":[]`, `"positions":[]`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("status before the first read lacks %s: %s", want, raw)
		}
	}

	check := func(at time.Time, rule, want string) {
		t.Helper()
		rs, ok := nextOf(e.Status(at), "XSOL", rule)
		if !ok || rs.State != "firing" || rs.Next != want {
			t.Errorf("at %s, XSOL %s: %s, next %q; want firing, next %q", at.Format("15:04:05"), rule, rs.State, rs.Next, want)
		}
	}
	if _, err := e.Tick(ctx, t0); err != nil {
		t.Fatal(err)
	}
	check(t0.Add(time.Second), "sol-over-max", "acted at 09:00:00 UTC; cooling down until 09:05:00 UTC")
	check(t0.Add(time.Second), "sol-watch", "notified; cooling down until 09:02:00 UTC")
	if rs, _ := nextOf(e.Status(t0), "XBTC", "never"); rs.State != "inactive" || rs.Next != "" {
		t.Errorf("an inactive rule: %+v, want no next text", rs)
	}
	raw, _ = json.Marshal(e.Status(t0))
	for _, want := range []string{`"snapshotAgeSeconds":0,`, `"distanceThresholds":[{"rule":"never","severity":"critical","below":0.02}]`, `"distanceThresholds":[]`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("status just after a read lacks %s: %s", want, raw)
		}
	}
	if !strings.Contains(string(raw), `"snapshotAgeSeconds":0,`) {
		t.Errorf("status just after a read: %s", raw)
	}

	// Still over 9× at 10×: the cut is due again after its cooldown, and
	// finds the leverage at the risk limit's already.
	t1 := t0.Add(6 * time.Minute)
	if _, err := e.Tick(ctx, t1); err != nil {
		t.Fatal(err)
	}
	check(t1, "sol-over-max", "at target: leverage 10x, isolated; cooling down until 09:11:00 UTC")

	// A pause of the symbol holds both; its end is said.
	if _, err := e.Control().Pause(ctx, t1, control.Pause{Symbol: "XSOL", EndsAt: t1.Add(30 * time.Minute), CreatedBy: "ops"}); err != nil {
		t.Fatal(err)
	}
	check(t1.Add(time.Second), "sol-over-max", "paused until 09:36:00 UTC (by ops): nothing is sent")
	check(t1.Add(time.Second), "sol-watch", "paused until 09:36:00 UTC (by ops): nothing is sent")
	// After the cooldown, an attempt under the pause: still the pause.
	t2 := t1.Add(10 * time.Minute)
	if _, err := e.Tick(ctx, t2); err != nil {
		t.Fatal(err)
	}
	check(t2, "sol-over-max", "paused until 09:36:00 UTC (by ops): nothing is sent")
}
