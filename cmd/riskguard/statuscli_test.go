package main

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/journal"
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

// The daemon names an open position the margin model cannot judge, as
// check --exchange does (margin.Unjudgeable), once, not at every tick;
// and says so again when it judges every one (issue 40, left over).
func TestRunNamesAPositionItCannotJudgeOnce(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "", overMaxRule)
	g.url = corrupting(t, g.ex, "entryPrice", `"0"`, 103) // XSOL
	g.writeConfig("  listen: 127.0.0.1:0\n", overMaxRule)
	addr, logs, stop := g.serve()
	defer stop()
	waitHealthy(t, addr)
	waitFor(t, "the position named", 10*time.Second, func() bool {
		return strings.Contains(logs.String(), "the margin model cannot judge XSOL (position ")
	})
	// Ten ticks more, counted by the metrics.
	ticks := func() int {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		m := regexp.MustCompile(`riskguard_ticks_total\{result="ok"\} (\d+)`).FindSubmatch(b)
		if m == nil {
			return 0
		}
		n, _ := strconv.Atoi(string(m[1]))
		return n
	}
	then := ticks()
	waitFor(t, "ten more ticks", 20*time.Second, func() bool { return ticks() >= then+10 })
	out := logs.String()
	if n := strings.Count(out, "the margin model cannot judge XSOL"); n != 1 {
		t.Errorf("said %d times, want once:\n%s", n, out)
	}
	if !strings.Contains(out, "entry price 0 is not positive") {
		t.Errorf("the reason is not said:\n%s", out)
	}
	if n := len(g.records(func(r journal.Record) bool {
		return r.Type == "model" && strings.Contains(r.Reason, "cannot judge XSOL")
	})); n != 1 {
		t.Errorf("%d audit records, want 1", n)
	}
}
