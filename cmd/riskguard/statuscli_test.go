package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

// riskguard status (and --json) shows a marked liquidation first, with
// what it cost and the command that acknowledges it, as the page does;
// acknowledged, it is gone (issue 37, given with issue 40).
func TestStatusShowsMarkedLiquidationsFirst(t *testing.T) {
	t.Parallel()
	g := newControlEnv(t, watchOnly, "")
	g.ex.SetIndexPrice("SOL", decimal.RequireFromString("146"))
	addr, _, stop := g.serve()
	defer stop()
	waitHealthy(t, addr)
	g.ex.SetIndexPrice("SOL", decimal.RequireFromString("144.5")) // through 144.907: the exchange liquidates XSOL
	var out string
	waitFor(t, "the liquidation of XSOL in riskguard status", 20*time.Second, func() bool {
		_, out, _ = g.ctl(addr, "status")
		return strings.Contains(out, "LIQUIDATED XSOL")
	})
	if !strings.HasPrefix(out, "LIQUIDATED XSOL LONG 400 at ") {
		t.Errorf("the liquidation is not the first line:\n%s", out)
	}
	for _, want := range []string{"lost its margin ", "liquidation price 144.907", "\n  acknowledge: riskguard ack --liquidation XSOL\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	code, js, stderr := g.ctl(addr, "status", "--json")
	if code != 0 {
		t.Fatalf("status --json: exit %d %s", code, stderr)
	}
	if !strings.HasPrefix(js, "{\n  \"liquidations\": [") {
		t.Errorf("status --json does not start with the liquidations:\n%.300s", js)
	}
	var st struct {
		Liquidations []struct{ Symbol, Loss, Acknowledge string }
		Healthy      bool
		Positions    []struct{ Symbol string }
	}
	if err := json.Unmarshal([]byte(js), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Liquidations) != 1 || st.Liquidations[0].Symbol != "XSOL" || st.Liquidations[0].Acknowledge != "riskguard ack --liquidation XSOL" ||
		!strings.HasPrefix(st.Liquidations[0].Loss, "its margin ") || len(st.Positions) == 0 {
		t.Errorf("status --json: %+v", st)
	}
	if code, _, stderr := g.ctl(addr, "ack", "--liquidation", "XSOL"); code != 0 {
		t.Fatalf("ack: %s", stderr)
	}
	if _, out, _ = g.ctl(addr, "status"); strings.Contains(out, "LIQUIDATED") {
		t.Errorf("acknowledged, still shown:\n%s", out)
	}
}

// watchOnly is a rule that only notifies: the guard changes nothing, and
// the exchange liquidates what the index takes through.
const watchOnly = `  - name: near-edge
    when: liquidationDistance < 0.05
    severity: critical
    actions: [{action: notify}]
`
