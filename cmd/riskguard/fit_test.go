package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
)

// An exchange whose figures the margin model does not reproduce: the fit
// is reported as not fitting (log, audit, status, metrics), the
// predictions as unverified, and the cut of a position over its
// maxLeverage goes out as the rule asks, where the model would have
// called it unaffordable; the exchange accepts it.
func TestModelDoesNotFitCutGoesOut(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		skew    sim.ModelSkew
		why     string
		summary string
	}{
		// XSOL long 800 @ 150 ×20: the exchange holds 6,000 and lists
		// 100.5 (as in issue 19). The model, taking the 100.5, would
		// move 11,899.5 for 10x with 9,025 free (inferred from XBTC's
		// liquidation price, whose margin is listed net of the fee too).
		{"margins net of a fee", sim.ModelSkew{MarginFee: mustDec("0.0491625")},
			"XSOL (margin 100.5 reported, 6000 modelled)", "XSOL (margin 100.5 reported, 6000 modelled)"},
		// The exchange liquidates at a maintenance rate 1% above the one
		// its risk limits list: XSOL at 147 where the model says 145.5.
		{"other maintenance rates", sim.ModelSkew{MaintenanceRate: mustDec("0.01")},
			"(liquidation ", "(liquidation "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := newControlEnv(t, overMaxRule, "")
			if err := g.ex.PutPosition(sim.PositionSpec{Symbol: "XSOL", Direction: exchange.Long, Quantity: mustDec("800"),
				EntryPrice: mustDec("150"), Leverage: 20}); err != nil {
				t.Fatal(err)
			}
			g.ex.SetBalance(mustDec("6500")) // funds the 6,000 the exchange moves for 10x
			g.ex.SkewModel(tt.skew)
			addr, logs, stop := g.serve()
			waitHealthy(t, addr)
			waitFor(t, "XSOL cut to 10x", 10*time.Second, func() bool { return g.position("XSOL").Leverage == 10 })
			waitFor(t, "the unverified prediction in the log", 5*time.Second, func() bool {
				return strings.Contains(logs.String(), "lower_leverage XSOL 20→10: unverified: model does not fit ")
			})
			code, body := api(t, addr, "GET", "/api/v1/status", "", nil)
			var st engine.Status
			if err := json.Unmarshal([]byte(body), &st); code != 200 || err != nil || st.Model == nil {
				t.Fatalf("status %d (%v): %s", code, err, body)
			}
			if st.Model.Fits || !strings.Contains(st.Model.Summary, tt.summary) {
				t.Errorf("status model %+v, want not fitting with %q", st.Model, tt.summary)
			}
			_, metrics := api(t, addr, "GET", "/metrics", "", nil)
			for _, want := range []string{`riskguard_model_fit{symbol="account"} 0`, `riskguard_model_fit{symbol="XSOL"} 0`, "riskguard_model_worst_error "} {
				if !strings.Contains(metrics, want) {
					t.Errorf("/metrics lacks %s", want)
				}
			}
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			out := logs.String()
			if !strings.Contains(out, "the margin model does not fit the exchange: ") || !strings.Contains(out, tt.why) {
				t.Errorf("log lacks %q:\n%s", tt.why, out)
			}
			if strings.Contains(out, "cannot fund") || strings.Contains(out, "skipped lower_leverage") {
				t.Errorf("the cut was bounded by an unverified prediction:\n%s", out)
			}
			for _, c := range g.mutatingOn("XSOL") {
				if c.Status != 200 {
					t.Errorf("the exchange refused %s: %d", c.Path, c.Status)
				}
			}
			var model, unverified int
			for _, r := range g.audit() {
				if r.Type == "model" && strings.Contains(r.Reason, "does not fit") {
					model++
				}
				if r.Type == "action" && r.Symbol == "XSOL" && r.Prediction != nil && r.Prediction.Unverified != "" {
					unverified++
				}
			}
			if model != 1 || unverified == 0 {
				t.Errorf("audit: %d model records saying it does not fit (want 1, once per change), %d unverified predictions", model, unverified)
			}
		})
	}
}

// The model fits the default scenario: nothing said, status and metrics
// say it fits.
func TestModelFitsTheSimulatedExchange(t *testing.T) {
	t.Parallel()
	g := newControlEnv(t, overMaxRule, "")
	addr, logs, stop := g.serve()
	waitHealthy(t, addr)
	waitFor(t, "XSOL cut to 10x", 10*time.Second, func() bool { return g.position("XSOL").Leverage == 10 })
	_, body := api(t, addr, "GET", "/api/v1/status", "", nil)
	var st engine.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.Model == nil || !st.Model.Fits || !strings.HasPrefix(st.Model.Summary, "fits") {
		t.Errorf("status model %+v (%v)", st.Model, err)
	}
	_, metrics := api(t, addr, "GET", "/metrics", "", nil)
	if !strings.Contains(metrics, `riskguard_model_fit{symbol="account"} 1`) {
		t.Error("/metrics lacks the account's fit")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if out := logs.String(); strings.Contains(out, "does not fit") || strings.Contains(out, "unverified") {
		t.Errorf("the model is said not to fit its own exchange:\n%s", out)
	}
}

// XETH 1% from liquidation, its pool the free balance that also backs
// XBTC (cross): the cut moves XBTC from 49.08% to 45.56% away, and goes
// out without allow_closer_liquidation because it lets the account
// survive a larger move (1.00% → 3.40%, XSOL then first); the log line
// says the measure before and after.
func TestCutNearLiquidationGoesOutWhenTheAccountGains(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "", `
  - name: xeth-near
    when: position.symbol == "XETH" && liquidationDistance < 0.02
    cooldown: 5m
    margin_budget: none # the whole cut, as README's worked example shows it
    actions:
      - action: lower_leverage
        leverage: position.leverage / 2
`)
	g.putNearLiquidation("XETH", "ETH", 0.01)
	code, stderr := g.once()
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if got := g.position("XETH").Leverage; got != 10 {
		t.Fatalf("XETH leverage %d, want 10\n%s", got, stderr)
	}
	for _, want := range []string{
		"lower_leverage XETH 20→10: liquidation 3172 → 3324.5 (1.00% → ",
		"XBTC liquidation 33101 → 35388.5 (49.08% → 45.56% away); account survives 1.00% → 3.40% together (XETH → XSOL first, ",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("log lacks %q:\n%s", want, stderr)
		}
	}
	var res *journal.Record
	for _, r := range g.audit() {
		if r.Type == "action" && r.Symbol == "XETH" && r.Phase == "result" {
			res = &r
		}
	}
	if res == nil || res.Prediction == nil || res.Prediction.SurvivalBefore == nil || res.Prediction.SurvivalAfter == nil ||
		res.Prediction.SurvivalBefore.StringFixed(4) != "0.0100" || res.Prediction.SurvivalAfter.StringFixed(4) != "0.0340" {
		t.Errorf("result record %+v", res)
	}
}

// Isolating a healthy cross position is refused when it makes a likely
// move fatal (issue 31): XETH short ×20 cross beside XBTC with 500 free,
// ETH at 3,100 (XSOL closed). By the old measure isolating XETH
// "ring-fenced" the rest (XBTC's pool survives 7.72% → 11.58% of every
// index together) and was sent; but XETH, 18.50% from liquidation in the
// pool, would sit 2.32% away alone, and with σ at its 2% floor a rise of
// 1.2σ (+2.40%) — an ordinary hour — would liquidate it. The scored
// decision (issue 38) refuses it: the expected cost to liquidations goes
// from 0.31 to 38.23 at 20x (34.05 at 16x, the cheapest funded
// isolation), and the grid after shows the move; nothing is sent.
func TestIsolationOfAHealthyCrossPositionRefused(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "", `
  - name: ring-fence-xeth
    when: position.symbol == "XETH" && position.cross
    cooldown: 5m
    actions:
      - action: set_isolated
`)
	if err := g.ex.PutPosition(sim.PositionSpec{Symbol: "XETH", Direction: exchange.Short, Quantity: mustDec("12"),
		EntryPrice: mustDec("3050"), Leverage: 20, Cross: true}); err != nil {
		t.Fatal(err)
	}
	if err := g.ex.PutPosition(sim.PositionSpec{Symbol: "XSOL", Empty: true}); err != nil {
		t.Fatal(err)
	}
	g.ex.SetBalance(mustDec("500"))
	g.ex.SetIndexPrice("ETH", mustDec("3100"))
	code, stderr := g.once()
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if !g.position("XETH").Cross || len(g.mutating()) != 0 {
		t.Fatalf("XETH isolated (%d mutating calls)\n%s", len(g.mutating()), stderr)
	}
	for _, want := range []string{
		"skipped set_isolated XETH: liquidation 3673.6 → 3172 (18.50% → 2.32% away)",
		"within ±3σ: +2.40% (+1.2σ, every index together) liquidates XETH SHORT",
		"isolating XETH would not lower the expected loss to liquidations over the horizon, first passage: now 0.31",
		"as asked (isolated at 20x): 38.23",
		"stress: expected loss 1.04 → 68.62",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("log lacks %q:\n%s", want, stderr)
		}
	}
	var skipped *journal.Record
	for _, r := range g.audit() {
		if r.Type == "action" && r.Symbol == "XETH" {
			skipped = &r
		}
	}
	if skipped == nil || skipped.Prediction == nil || skipped.Prediction.ExpectedLossAfter == nil ||
		skipped.Prediction.ExpectedLossAfter.String() != "68.62" || !strings.Contains(skipped.Prediction.Stress, "liquidates XETH SHORT") {
		t.Fatalf("audit record %+v", skipped)
	}
	// The loss at −5σ … +5σ together, before and after: +2σ (the 7th)
	// liquidates XETH only once isolated.
	lb, la := skipped.Prediction.StressLossBefore, skipped.Prediction.StressLossAfter
	if len(lb) != 10 || len(la) != 10 || !lb[6].IsZero() || !la[6].IsPositive() {
		t.Errorf("the audit record's losses at each move: before %v, after %v", lb, la)
	}
}

// check --exchange with credentials reads the live account and prints the
// model's fit without acting; without them it says it did not.
func TestCheckPrintsTheModelFit(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "", overMaxRule)
	code, out, stderr := runOut(t, context.Background(), g.env, "check", "--config", g.config, "--exchange", g.url)
	if code != 0 || !strings.Contains(out, "margin model: fits (") || !strings.Contains(out, "free balance 20000, inferred from the first cross position") ||
		!regexp.MustCompile(`XSOL\s+isolated\s+4053\.33\s+4053\.33\s+144\.907\s+144\.907\s+0\.0000%\s+yes`).MatchString(out) {
		t.Errorf("check: exit %d\n%s%s", code, out, stderr)
	}
	// The account on the stress grid (issue 31): σ at its 2% floor, XSOL
	// 3.40% from liquidation is lost to a likely fall, XETH to a rise.
	for _, want := range []string{
		"stress grid (σ over 1h0m0s; σ is engine.stress_sigma_floor: the index history holds fewer than 30 returns (BTC ", // the sim started a moment ago
		"within ±3σ: +5.40% (+2.7σ, every index together) liquidates XETH SHORT; −3.40% (-1.7σ, every index together) liquidates XSOL LONG",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check lacks %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`-3σ\s+3253.33 \(XSOL LONG\)\s+0\s+0\s+3253.33 \(XSOL LONG\)`).MatchString(out) {
		t.Errorf("the grid's −3σ row:\n%s", out)
	}
	g.ex.SkewModel(sim.ModelSkew{MaintenanceRate: mustDec("0.01")})
	code, out, stderr = runOut(t, context.Background(), g.env, "check", "--config", g.config, "--exchange", g.url)
	if code != 0 || !strings.Contains(out, "margin model: does not fit: ") ||
		!regexp.MustCompile(`XSOL\s+isolated\s+4053\.33\s+4053\.33\s+146\.427\s+144\.907\s+1\.0133%\s+NO \(liquidation\)`).MatchString(out) {
		t.Errorf("check on a skewed exchange: exit %d\n%s%s", code, out, stderr)
	}
	if n := len(g.mutating()); n != 0 {
		t.Errorf("check sent %d mutating calls", n)
	}
	code, out, _ = runOut(t, context.Background(), envMap(nil), "check", "--config", g.config, "--exchange", g.url)
	if code != 0 || !strings.Contains(out, "margin model: not checked against the account (no credentials") {
		t.Errorf("check without credentials: exit %d\n%s", code, out)
	}
}

// A cut that leaves the account worse off is not sent: XETH short at 3×
// is far from liquidation (34%) while XBTC's cross pool, backed by 10,000
// free, is what goes first (29.84%); cutting XETH to 2× takes 6,100 from
// that pool (29.84% → 18.11%). Scored (issue 38), it raises the expected
// cost to liquidations (0.05 → 0.23), and allow_closer_liquidation does
// not lift the measure (it lifts the account measure's condition only
// where the account cannot be scored).
func TestCutThatWorsensTheAccountNeedsOptIn(t *testing.T) {
	t.Parallel()
	for _, allow := range []bool{false, true} {
		extra := ""
		if allow {
			extra = "    allow_closer_liquidation: true\n"
		}
		g := newGuardEnv(t, "", `
  - name: xeth-to-2x
    when: position.symbol == "XETH" && position.leverage > 2
    cooldown: 5m
    margin_budget: none
`+extra+`    actions:
      - action: lower_leverage
        leverage: 2
`)
		for _, p := range []sim.PositionSpec{
			{Symbol: "XETH", Direction: exchange.Short, Quantity: mustDec("12"), EntryPrice: mustDec("3050"), Leverage: 3},
			{Symbol: "XSOL", Empty: true},
		} {
			if err := g.ex.PutPosition(p); err != nil {
				t.Fatal(err)
			}
		}
		g.ex.SetBalance(mustDec("10000"))
		code, stderr := g.once()
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		want, line := 3, "skipped lower_leverage XETH: 2x would not lower the expected loss to liquidations over the horizon, first passage: now 0.05"
		if !strings.Contains(stderr, "as asked (isolated at 2x): 0.23") {
			t.Errorf("allow %t: log lacks the cut's cost:\n%s", allow, stderr)
		}
		if got := g.position("XETH").Leverage; got != want {
			t.Errorf("allow %t: XETH at %dx, want %dx\n%s", allow, got, want, stderr)
		}
		if !strings.Contains(stderr, line) {
			t.Errorf("allow %t: log lacks %q:\n%s", allow, line, stderr)
		}
	}
}

// Among the cuts within bounds, the cheapest in expectation: XETH short
// ×20 isolated, 5.38% from liquidation, beside XBTC at 20× cross with
// 6,000 free. A quarter, 5×, would take XBTC's pool under the others'
// floor of 10% (from 6×); of 7×…19×, 7× leaves the lowest expected cost
// to liquidations over the hour (5.24 → 3.41, the margin it moves in
// counted as forfeited with XETH), so it is sent. (The account measure
// preferred 8×, the largest move survived; issue 38 replaced it.)
func TestCutStepTheAccountPrefers(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "", `
  - name: quarter-xeth
    when: position.symbol == "XETH" && position.leverage > 15
    cooldown: 5m
    margin_budget: none
    actions:
      - action: lower_leverage
        leverage: position.leverage / 4
`)
	for _, p := range []sim.PositionSpec{
		{Symbol: "XBTC", Direction: exchange.Long, Quantity: mustDec("0.8"), EntryPrice: mustDec("64200"), Leverage: 20, Cross: true},
		{Symbol: "XSOL", Empty: true},
	} {
		if err := g.ex.PutPosition(p); err != nil {
			t.Fatal(err)
		}
	}
	g.ex.SetBalance(mustDec("6000"))
	code, stderr := g.once()
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if got := g.position("XETH").Leverage; got != 7 {
		t.Errorf("XETH at %dx, want 7x\n%s", got, stderr)
	}
	if want := "lower_leverage XETH 20→7: isolated at 7x: expected loss to liquidations 5.24 → 3.41, the cheapest (as asked (isolated at 5x): 5x would move XBTC liquidation"; !strings.Contains(stderr, want) {
		t.Errorf("log lacks %q:\n%s", want, stderr)
	}
}
