package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/journal"
	"github.com/shopspring/decimal"
)

// isolateXBTC isolates the default scenario's XBTC, a cross long 0.8 @
// 64,200 ×10 backed by a free balance of 20,000: its liquidation price
// would move from 33,101 to 58,101 with the index near 65,000 (49.1% →
// 10.6% away). extra goes into the rule.
func isolateXBTC(extra string) string {
	return `
  - name: ring-fence
    when: position.symbol == "XBTC"
    cooldown: 5m
` + extra + `    actions:
      - action: set_isolated
`
}

// settingsRecords returns the audit records of set_isolated actions.
func (g *guardEnv) isolateRecords() []journal.Record {
	var out []journal.Record
	for _, r := range g.audit() {
		if r.Type == "action" && r.Action == "set_isolated" {
			out = append(out, r)
		}
	}
	return out
}

// An action predicted to move a position's liquidation price closer is
// decided by its expected cost (issue 38), and never under the rules'
// floor; a skip is audited with the prediction, logged and notified. With
// σ at its 2% floor the isolated XBTC, 10.61% away, raises the expected
// cost (a healthy position is not isolated), opt-in or not; with σ at
// 0.1% (10.61% is 100σ) it costs nothing and goes out as asked
// (TestIsolationFundedAboveTheRulesFloor: and the rules' floor binds).
func TestHarmfulIsolationSkippedUnlessAllowed(t *testing.T) {
	t.Parallel()
	const tinySigma = "  stress_sigma_floor: 0.001\n"
	tests := []struct {
		name     string
		engine   string
		extra    string
		sent     bool
		wantWhy  string
		wantLine string
	}{
		{"costs more", "", "", false, "isolating XBTC would not lower the expected loss to liquidations over the horizon, first passage: now 53.59",
			"skipped set_isolated XBTC: liquidation 33101 → 58101 (49.08% → 10.61% away), free balance 20000 after"},
		{"costs more, opted in", "", "    allow_closer_liquidation: true\n", false, "isolating XBTC would not lower the expected loss to liquidations",
			"skipped set_isolated XBTC: liquidation 33101 → 58101 (49.08% → 10.61% away), free balance 20000 after"},
		{"costs nothing", tinySigma, "", true, "",
			"set_isolated XBTC cross→isolated: liquidation 33101 → 58101 (49.08% → 10.61% away), free balance 20000 after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := newGuardEnv(t, tt.engine, isolateXBTC(tt.extra))
			code, stderr := g.once()
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, stderr)
			}
			if !strings.Contains(stderr, tt.wantLine) {
				t.Errorf("log lacks %q:\n%s", tt.wantLine, stderr)
			}
			if got := g.position("XBTC").Cross; got == tt.sent {
				t.Errorf("XBTC cross = %t after the tick, want isolated %t", got, tt.sent)
			}
			if n := len(g.mutatingOn("XBTC")); (n == 1) != tt.sent {
				t.Errorf("%d settings calls on XBTC, want sent %t", n, tt.sent)
			}
			recs := g.isolateRecords()
			if len(recs) == 0 || recs[0].Prediction == nil {
				t.Fatalf("no set_isolated audit record with a prediction: %+v", recs)
			}
			p := recs[0].Prediction
			if !p.LiquidationBefore.Equal(mustDec("33101")) || !p.LiquidationAfter.Equal(mustDec("58101")) || p.FreeAfter == nil || !p.FreeAfter.Equal(mustDec("20000")) {
				t.Errorf("prediction %+v", p)
			}
			if tt.sent {
				// The result carries the prediction and what the exchange
				// read back: the same price.
				res := recs[len(recs)-1]
				if res.Phase != "result" || res.Prediction == nil || res.Prediction.Actual == nil || !res.Prediction.Actual.Equal(mustDec("58101")) {
					t.Errorf("result record %+v", res)
				}
			}
			if !tt.sent && (recs[0].Phase != "skipped" || !strings.Contains(recs[0].Reason, tt.wantWhy)) {
				t.Errorf("audit: phase %q reason %q, want skipped because %q", recs[0].Phase, recs[0].Reason, tt.wantWhy)
			}
			if !tt.sent && !strings.Contains(stderr, "notify: skipped set_isolated XBTC") {
				t.Errorf("the skip is not notified:\n%s", stderr)
			}
		})
	}
}

// A skipped harmful action is notified once per firing, not every
// cooldown.
func TestHarmfulSkipNotifiedOncePerFiring(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "", strings.Replace(isolateXBTC(""), "cooldown: 5m", "cooldown: 0s", 1))
	for range 3 {
		if code, stderr := g.once(); code != 0 {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
	}
	var notes int
	for _, r := range g.isolateRecords() {
		if r.Phase == "skipped" {
			notes++
		}
	}
	if notes != 3 {
		t.Errorf("%d skipped records over three ticks, want 3 (audited every time)", notes)
	}
	// The notification: only the first tick's log says it.
	_, stderr := g.once()
	if strings.Contains(stderr, "notify: skipped set_isolated") {
		t.Errorf("a skip notified again in the same firing:\n%s", stderr)
	}
}

// The exchange reading back another liquidation price than the model
// predicted is reported: the live test of the model.
func TestModelMismatchReported(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "", overMaxRule)
	p := newFaultProxy(t, g.url)
	p.setRewrite(func(path string, body []byte) []byte {
		if path != settingsXSOL {
			return body
		}
		return rewriteJSON(t, body, func(data any) any {
			m := data.(map[string]any)
			m["liquidationPrice"] = json.Number("141.5") // the model says 139.84
			return m
		})
	})
	d := g.start(campaignEnv(p.url()))
	waitFor(t, "the mismatch", 10*time.Second, func() bool {
		return strings.Contains(d.logs.String(), "the margin model disagrees with the exchange on XSOL: predicted liquidation 139.84, got 141.5")
	})
	d.stop(t)
	// One record of the mismatch. A tick that ran before the stop (under
	// load the wait above sees the line late) may add the fit's own
	// record, the model no longer fitting: a record of another kind.
	var mismatches int
	for _, r := range g.auditLines() {
		switch {
		case r.Type != "model":
		case strings.HasPrefix(r.Reason, "the margin model disagrees with the exchange on XSOL"):
			mismatches++
		case !strings.HasPrefix(r.Reason, "the margin model does not fit the exchange: XSOL"):
			t.Errorf("unexpected model record: %+v", r)
		}
	}
	if mismatches != 1 {
		t.Errorf("%d mismatch records in the audit log, want 1", mismatches)
	}
}

func mustDec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

// A lower_leverage target the free balance cannot fund becomes the lowest
// leverage it can fund, predicted and said; the exchange accepts it.
func TestUnaffordableCutSentAtTheAffordableLevel(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "", `
  - name: quarter-xeth
    when: position.symbol == "XETH"
    cooldown: 5m
    allow_closer_liquidation: true
    margin_budget: none # the free balance alone bounds it here
    actions:
      - action: lower_leverage
        leverage: position.leverage / 4
`)
	// XETH short 12 @ 3,050 ×20 isolated: 5x needs 7,320 − 1,830 = 5,490
	// more margin; with 1,000 free, 13x (985.38 more) is the lowest it
	// funds. Scored (issue 38), the 5x asked is no candidate, and no cut
	// it funds lowers the account's expected cost: each takes from the
	// free balance behind XBTC's cross pool more than it saves XETH. No
	// call goes out, and none the free balance cannot fund ever does.
	g.ex.SetBalance(mustDec("1000"))
	code, stderr := g.once()
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if got := g.position("XETH").Leverage; got != 20 {
		t.Errorf("XETH leverage = %d, want 20 (no cut lowers the expected cost)\n%s", got, stderr)
	}
	for _, want := range []string{"skipped lower_leverage XETH: 5x would not lower the expected loss to liquidations over the horizon, first passage: now ",
		"as asked (isolated at 5x): 5x would move XBTC liquidation", "the cheapest other, isolated at 19x: "} {
		if !strings.Contains(stderr, want) {
			t.Errorf("log lacks %q:\n%s", want, stderr)
		}
	}
	var refused int
	for _, c := range g.mutatingOn("XETH") {
		if c.Status != 200 {
			refused++
		}
	}
	if refused != 0 {
		t.Errorf("%d settings calls refused by the exchange", refused)
	}
}

// A cut no free balance can fund is skipped, and the skip counts as the
// rule's run: it is not skipped again at every tick while the money stays
// the same. Money added meanwhile is used at once, inside the cooldown
// (issue 31: it once waited for the cooldown to pass).
func TestSkippedCutDecidedAgainWhenMoneyIsAdded(t *testing.T) {
	t.Parallel()
	const cooldown = 20 * time.Second
	g := newGuardEnv(t, "", `
  - name: quarter-xeth
    when: position.symbol == "XETH"
    cooldown: `+cooldown.String()+`
    allow_closer_liquidation: true
    margin_budget: none
    actions:
      - action: lower_leverage
        leverage: position.leverage / 4
`)
	// XETH short 12 @ 3,050 ×20: even 19x needs 96.32 more margin.
	g.ex.SetBalance(mustDec("1"))
	d := g.start(campaignEnv(g.url))
	var skippedAt time.Time
	waitFor(t, "the cut skipped", 20*time.Second, func() bool {
		for _, r := range g.auditLines() {
			if r.Symbol == "XETH" && r.Action == "lower_leverage" && r.Phase == "skipped" {
				skippedAt = r.Time
				return true
			}
		}
		return false
	})
	time.Sleep(500 * time.Millisecond) // five ticks on the same money: no skip again
	g.ex.SetBalance(mustDec("20000"))
	waitFor(t, "XETH cut once the money came", 10*time.Second, func() bool { return g.position("XETH").Leverage == 5 })
	if code := d.stop(t); code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
	skips := 0
	var sentAt time.Time
	for _, r := range g.auditLines() {
		switch {
		case r.Symbol != "XETH" || r.Action != "lower_leverage":
		case r.Phase == "skipped":
			skips++
		case r.Phase == "sent" && sentAt.IsZero():
			sentAt = r.Time
		}
	}
	if skips != 1 {
		t.Errorf("%d skips of the cut, want 1 (the skip starts the cooldown; the same money is not decided again)", skips)
	}
	if sentAt.IsZero() || sentAt.Sub(skippedAt) >= cooldown {
		t.Errorf("the cut went out at %s, %s after the skip at %s; want it inside the cooldown of %s, once the money came",
			sentAt.Format(time.RFC3339Nano), sentAt.Sub(skippedAt), skippedAt.Format(time.RFC3339Nano), cooldown)
	}
}

// A rule's margin budget bounds how much free balance its leverage cuts
// move into one position: a cut past it is no candidate. (Once spent, the
// rule moves no more in that firing: act's budget tests.)
func TestMarginBudget(t *testing.T) {
	t.Parallel()
	rule := func(budget string) string {
		return `
  - name: quarter-xeth
    when: position.symbol == "XETH"
    cooldown: 0s
    allow_closer_liquidation: true
    margin_budget: ` + budget + `
    actions:
      - action: lower_leverage
        leverage: position.leverage / 4
`
	}
	tests := []struct {
		name, budget string
		want         int
		first, then  string
	}{
		// XETH short 12 @ 3,050 ×20: 5x needs 5,490 more margin, over
		// either budget, so it is no candidate (issue 38: the scored
		// decision compares the cuts within the budget). Of the cuts
		// 1,000 funds (13x…19x) none lowers the account's expected cost
		// (each margin moved in is forfeited with XETH if it is
		// liquidated): nothing is sent, and nothing of the budget spent.
		{"amount", "1000", 20, "as asked (isolated at 5x): rule quarter-xeth's margin budget leaves 1000 (1000 per firing, 0 moved) and 5x needs 5490", ""},
		// 25% of the 20,000 free is 5,000: of 6x…19x, 6x (4,270) is the
		// cheapest and goes out.
		{"share of the free balance", `"25%"`, 6, "lower_leverage XETH 20→6: isolated at 6x: expected loss to liquidations 53.59 → 51.08, the cheapest (as asked (isolated at 5x): rule quarter-xeth's margin budget leaves 5000 (5000 per firing, 0 moved) and 5x needs 5490)", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := newGuardEnv(t, "", rule(tt.budget))
			code, stderr := g.once()
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, stderr)
			}
			if got := g.position("XETH").Leverage; got != tt.want {
				t.Errorf("XETH leverage = %d, want %d\n%s", got, tt.want, stderr)
			}
			if !strings.Contains(stderr, tt.first) {
				t.Errorf("log lacks %q:\n%s", tt.first, stderr)
			}
			if tt.then == "" {
				return
			}
			code, stderr = g.once()
			if code != 0 || !strings.Contains(stderr, "skipped lower_leverage XETH: "+tt.then) {
				t.Errorf("second tick: exit %d, log lacks %q:\n%s", code, tt.then, stderr)
			}
			if got := g.position("XETH").Leverage; got != tt.want {
				t.Errorf("XETH leverage after the budget is spent = %d, want %d", got, tt.want)
			}
		})
	}
}

// The daemon starts over a corrupt state file: moved aside, said, guarding.
func TestRunStartsOverACorruptStateFile(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "", overMaxRule)
	state := filepath.Join(g.dir, "state.json")
	if err := os.WriteFile(state, []byte("{\"version\":1,"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stderr := g.once()
	if code != 0 || !strings.Contains(stderr, "the state file could not be read (unexpected end of JSON input); moved to "+state+".corrupt-") {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if got := g.position("XSOL").Leverage; got != 10 {
		t.Errorf("XSOL leverage = %d: the guard did not act after starting afresh", got)
	}
	matches, _ := filepath.Glob(state + ".corrupt-*")
	if len(matches) != 1 {
		t.Errorf("corrupt files kept: %v", matches)
	}
}

// A second daemon on the state file of a running one refuses to start,
// naming the holder: two guards on one account would both act.
func TestSecondDaemonRefused(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "", overMaxRule)
	d := g.start(nil)
	waitFor(t, "the first daemon", 10*time.Second, func() bool { return strings.Contains(d.logs.String(), "riskguard started") })
	code, stderr := g.once()
	if code != 1 || !strings.Contains(stderr, fmt.Sprintf("(pid %d) holds the state file %s", os.Getpid(), filepath.Join(g.dir, "state.json"))) {
		t.Errorf("second daemon: exit %d\n%s", code, stderr)
	}
	d.running(t)
	if code := d.stop(t); code != 0 {
		t.Errorf("first daemon exit %d", code)
	}
	if code, stderr := g.once(); code != 0 {
		t.Errorf("after the first stopped: exit %d\n%s", code, stderr)
	}
}

// A cut skipped because the free balance could not fund it is decided
// again when the money changes, inside its rule's cooldown (issue 31):
// XSOL at 15× over its maximum of 10×, 50 free — no cut within it. The
// same money at the next run: nothing decided again (the cooldown holds).
// 20,000 added: the next run decides again and the cut goes out, said.
func TestSkippedCutDecidedAgainWhenMoneyChanges(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "", overMaxRule)
	g.ex.SetBalance(mustDec("50"))
	skips := func() int {
		n := 0
		for _, r := range g.audit() {
			if r.Type == "action" && r.Action == "lower_leverage" && r.Symbol == "XSOL" && r.Phase == "skipped" {
				n++
			}
		}
		return n
	}
	if code, stderr := g.once(); code != 0 || skips() != 1 || len(g.mutatingOn("XSOL")) != 0 {
		t.Fatalf("first run: exit %d, %d skips, %d calls\n%s", code, skips(), len(g.mutatingOn("XSOL")), stderr)
	}
	if code, stderr := g.once(); code != 0 || skips() != 1 || len(g.mutatingOn("XSOL")) != 0 {
		t.Fatalf("the same money: exit %d, %d skips (want the cooldown to hold: 1), %d calls\n%s", code, skips(), len(g.mutatingOn("XSOL")), stderr)
	}
	g.ex.SetBalance(mustDec("20000"))
	code, stderr := g.once()
	if code != 0 || len(g.mutatingOn("XSOL")) != 1 || g.position("XSOL").Leverage != 10 {
		t.Fatalf("money added: exit %d, %d calls, XSOL at %dx; want the cut sent inside the cooldown\n%s", code, len(g.mutatingOn("XSOL")), g.position("XSOL").Leverage, stderr)
	}
	if !strings.Contains(stderr, "deciding again inside the cooldown: the account's money changed since its actions were skipped") {
		t.Errorf("the decision made again is not said:\n%s", stderr)
	}
}

// The rules' min_liquidation_distance binds a scored isolation: at 10x the
// isolated XBTC would end 10.61% from its liquidation price, under the
// floor of 15%, so it is no candidate; the isolation at 6x, funded from the
// free balance, ends 17.20% away and costs nothing more (σ 0.1%): it goes
// out instead, said with the 10x's reason.
func TestIsolationFundedAboveTheRulesFloor(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "  stress_sigma_floor: 0.001\n", isolateXBTC("    allow_closer_liquidation: true\n    min_liquidation_distance: 0.15\n"))
	code, stderr := g.once()
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if p := g.position("XBTC"); p.Cross || p.Leverage != 6 {
		t.Errorf("XBTC cross %t at %dx, want isolated at 6x\n%s", p.Cross, p.Leverage, stderr)
	}
	for _, want := range []string{"set_isolated XBTC 10→6 cross→isolated: isolated at 6x",
		"as asked (isolated at 10x): the liquidation price would end 10.61% away, under the floor of 15.00% (min_liquidation_distance)",
		"liquidation 33101 → 53821 (49.08% → 17.20% away)"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("log lacks %q:\n%s", want, stderr)
		}
	}
}
