package backtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/backtest"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// t0 is the start of every scripted backtest.
var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// sliceSource replays steps held in memory.
type sliceSource struct{ steps []backtest.Step }

func (s *sliceSource) Next() (backtest.Step, error) {
	if len(s.steps) == 0 {
		return backtest.Step{}, io.EOF
	}
	st := s.steps[0]
	s.steps = s.steps[1:]
	return st, nil
}

// solCrash is the default scenario's SOL path, one step a second for two
// minutes: 150 → 148.5 (20 s) → 146.5 (45 s) → 144.5 (70 s) → 147 (90 s)
// → 151 (120 s), linear in between. Only SOL moves.
func solCrash() *sliceSource {
	type pt struct {
		at    int
		price float64
	}
	pts := []pt{{0, 150}, {20, 148.5}, {45, 146.5}, {70, 144.5}, {90, 147}, {120, 151}}
	src := &sliceSource{}
	for s := 0; s <= 120; s++ {
		i := 1
		for pts[i].at < s {
			i++
		}
		a, b := pts[i-1], pts[i]
		p := a.price + (b.price-a.price)*float64(s-a.at)/float64(b.at-a.at)
		src.steps = append(src.steps, backtest.Step{
			Time:   t0.Add(time.Duration(s) * time.Second),
			Prices: map[string]decimal.Decimal{"SOL": decimal.NewFromFloat(p).Round(3)},
		})
	}
	return src
}

func parseRules(t testing.TB, src string) *rules.Set {
	t.Helper()
	set, err := rules.Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatalf("parse rules: %v", err)
	}
	return set
}

const overMaxLeverage = `
rules:
  - name: over-max-leverage
    when: position.leverage > riskLimit.maxLeverage
    cooldown: 5m
    severity: critical
    allow_closer_liquidation: true # XSOL's cut takes free balance from XBTC's cross pool
    actions:
      - action: lower_leverage
        leverage: riskLimit.maxLeverage
`

// A watch-only variant: the same condition, no action that changes risk.
const overMaxLeverageNotify = `
rules:
  - name: over-max-leverage
    when: position.leverage > riskLimit.maxLeverage
    for: 30s
    severity: critical
    actions:
      - action: notify
`

func run(t testing.TB, opt backtest.Options, src backtest.Source) *backtest.Result {
	t.Helper()
	if opt.Scenario == nil {
		opt.Scenario = sim.DefaultScenario()
	}
	res, err := backtest.Run(context.Background(), src, opt)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

// The crash path: SOL dips to 144.5, past XSOL's liquidation price at 15×
// (144.907). Without the guard XSOL is liquidated at about 65 s; the rule
// lowers it to 10× (liquidation 139.84) in the first tick, and it survives.
func TestCrashPathGuardAvoidsLiquidation(t *testing.T) {
	t.Parallel()
	res := run(t, backtest.Options{Rules: parseRules(t, overMaxLeverage)}, solCrash())

	if res.Steps != 121 || res.Ticks != 121 {
		t.Errorf("steps %d ticks %d, want 121 each", res.Steps, res.Ticks)
	}
	// The equity curve: both runs start equal; the run without the guard
	// drops by XSOL's margin at its liquidation, the guarded one does not.
	if len(res.Equity) < 100 || res.Equity[0].Guarded != res.Equity[0].Unguarded {
		t.Fatalf("equity curve of %d points, first %+v", len(res.Equity), res.Equity[0])
	}
	last := res.Equity[len(res.Equity)-1]
	if last.Unguarded >= last.Guarded || math.Abs(last.Guarded-res.Guarded.Equity.InexactFloat64()) > 1e-6 {
		t.Errorf("last equity point %+v, runs end at %s guarded, %s without", last, res.Guarded.Equity, res.Unguarded.Equity)
	}
	if n := len(res.Unguarded.Liquidations); n != 1 {
		t.Fatalf("unguarded liquidations = %+v, want XSOL", res.Unguarded.Liquidations)
	}
	l := res.Unguarded.Liquidations[0]
	if l.Symbol != "XSOL" || l.Leverage != 15 || !l.LiquidationPrice.Equal(decimal.RequireFromString("144.907")) {
		t.Errorf("unguarded liquidation = %+v, want XSOL at 15× past 144.907", l)
	}
	if at := l.Time.Sub(t0); at < 60*time.Second || at > 70*time.Second {
		t.Errorf("XSOL liquidated at +%s, want about 65s", at)
	}
	if len(res.Guarded.Liquidations) != 0 {
		t.Errorf("guarded liquidations = %+v, want none", res.Guarded.Liquidations)
	}
	var xsol *backtest.PositionEnd
	for i, p := range res.Guarded.Positions {
		if p.Symbol == "XSOL" {
			xsol = &res.Guarded.Positions[i]
		}
	}
	if xsol == nil || xsol.Leverage != 10 || xsol.StartLeverage != 15 || !xsol.LiquidationPrice.Equal(decimal.RequireFromString("139.84")) {
		t.Errorf("guarded XSOL at the end = %+v, want 10× liquidating at 139.84", xsol)
	}
	rs := res.Guarded.Rules[0]
	if rs.Actions != 1 || rs.Firings != 1 || rs.Failed != 0 {
		t.Errorf("guarded rule stats = %+v, want one firing and one action", rs)
	}
	// The unguarded run saw the rule fire (dry run) until XSOL was gone.
	us := res.Unguarded.Rules[0]
	if us.Firings != 1 || us.Actions != 1 || us.Firing < 60*time.Second || us.Firing > 70*time.Second {
		t.Errorf("unguarded rule stats = %+v, want one dry-run action, firing about 65s", us)
	}
	// The guard paid the extra margin out of the free balance: the equity is
	// the same but the liquidated margin is kept.
	if !res.Guarded.RealizedPNL.IsZero() || !res.Unguarded.RealizedPNL.IsNegative() {
		t.Errorf("realized PNL guarded %s unguarded %s", res.Guarded.RealizedPNL, res.Unguarded.RealizedPNL)
	}
	sum := backtest.Summary(res)
	for _, want := range []string{"liquidations", "1 (XSOL)", "over-max-leverage", "liquidations the guard avoided:", "XSOL at 2026-03-02T09:01:0"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
}

// A pending rule accrues pending time; spans and markers reach the series.
func TestPendingTimeAndSeries(t *testing.T) {
	t.Parallel()
	res := run(t, backtest.Options{Rules: parseRules(t, overMaxLeverageNotify), MaxPoints: 16}, solCrash())
	rs := res.Guarded.Rules[0]
	// Pending from 0 to 30 s, then firing until XSOL is liquidated (~65 s):
	// the notify-only rule does not save it.
	if rs.Pending != 30*time.Second {
		t.Errorf("pending = %s, want 30s", rs.Pending)
	}
	if rs.Firings != 1 || rs.Notifications != 1 || rs.Actions != 0 {
		t.Errorf("stats = %+v", rs)
	}
	if len(res.Guarded.Liquidations) != 1 {
		t.Errorf("a notify-only rule avoided the liquidation: %+v", res.Guarded.Liquidations)
	}
	var sol *backtest.SymbolSeries
	for i := range res.Symbols {
		if res.Symbols[i].Symbol == "XSOL" {
			sol = &res.Symbols[i]
		}
	}
	if sol == nil {
		t.Fatal("no XSOL series")
	}
	if n := len(sol.Points); n == 0 || n > 16 {
		t.Errorf("XSOL series has %d points, want 1..16", n)
	}
	if sol.Points[0].Index != 150 || sol.Points[0].LiquidationGuarded != 144.907 {
		t.Errorf("first point = %+v", sol.Points[0])
	}
	if len(sol.Spans) != 1 || sol.Spans[0].Start != t0.Add(30*time.Second) {
		t.Errorf("spans = %+v, want one from +30s", sol.Spans)
	}
	if len(sol.Markers) != 1 || sol.Markers[0].Action != "notify" {
		t.Errorf("markers = %+v, want the notification", sol.Markers)
	}
}

// The same inputs give the same bytes.
func TestDeterministic(t *testing.T) {
	t.Parallel()
	const set = overMaxLeverage + `
  - name: close-to-liquidation
    when: liquidationDistance < 0.02
    for: 5s
    actions:
      - action: cancel_orders
      - action: set_isolated
`
	var out [2]string
	for i := range out {
		res := run(t, backtest.Options{Rules: parseRules(t, set), Baseline: parseRules(t, overMaxLeverageNotify), Interval: 250 * time.Millisecond}, solCrash())
		out[i] = backtest.Summary(res)
	}
	if out[0] != out[1] {
		t.Errorf("two runs differ:\n%s\n---\n%s", out[0], out[1])
	}
}

// The baseline comparison lists the decisions that differ, with their time.
func TestBaselineDiff(t *testing.T) {
	t.Parallel()
	res := run(t, backtest.Options{Rules: parseRules(t, overMaxLeverage), Baseline: parseRules(t, overMaxLeverageNotify)}, solCrash())
	if res.Baseline == nil {
		t.Fatal("no baseline run")
	}
	if len(res.Baseline.Liquidations) != 1 {
		t.Errorf("baseline liquidations = %+v, want XSOL", res.Baseline.Liquidations)
	}
	want := map[string]backtest.Diff{
		"guarded":  {Time: t0, Run: backtest.RunGuarded, Decision: "lower_leverage XSOL 15→10 (over-max-leverage)"},
		"baseline": {Time: t0, Run: backtest.RunBaseline, Decision: "over-max-leverage XSOL: inactive → pending"},
	}
	for name, w := range want {
		found := false
		for _, d := range res.Diffs {
			if d == w {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: diff %+v not listed in %+v", name, w, res.Diffs)
		}
	}
	if res.DiffCount != len(res.Diffs) || res.DiffCount < 3 {
		t.Errorf("DiffCount %d, listed %d", res.DiffCount, len(res.Diffs))
	}
	if sum := backtest.Summary(res); !strings.Contains(sum, "only guarded   lower_leverage XSOL 15→10") {
		t.Errorf("summary lacks the differing decision:\n%s", sum)
	}
}

func TestFromTo(t *testing.T) {
	t.Parallel()
	res := run(t, backtest.Options{Rules: parseRules(t, overMaxLeverage), From: t0.Add(10 * time.Second), To: t0.Add(20 * time.Second)}, solCrash())
	if !res.From.Equal(t0.Add(10*time.Second)) || !res.To.Equal(t0.Add(20*time.Second)) || res.Steps != 11 {
		t.Errorf("range %s..%s, %d steps; want +10s..+20s, 11 steps", res.From, res.To, res.Steps)
	}
	if len(res.Unguarded.Liquidations) != 0 {
		t.Errorf("liquidated before the dip: %+v", res.Unguarded.Liquidations)
	}
}

func TestRunErrors(t *testing.T) {
	t.Parallel()
	set := parseRules(t, overMaxLeverage)
	tests := []struct {
		name string
		opt  backtest.Options
		src  backtest.Source
		want string
	}{
		{"no rules", backtest.Options{}, solCrash(), "rule set is required"},
		{"no data", backtest.Options{Rules: set, Scenario: sim.DefaultScenario()}, &sliceSource{}, "no data"},
		{"recorded data without symbols", backtest.Options{Rules: set}, solCrash(), "no symbols"},
		{"time backwards", backtest.Options{Rules: set, Scenario: sim.DefaultScenario()}, &sliceSource{steps: []backtest.Step{{Time: t0.Add(time.Second)}, {Time: t0}}}, "before the previous"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := backtest.Run(context.Background(), tt.src, tt.opt)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

// The guard says a liquidation as the simulated exchange counts it: on the
// crash path with a rule that only notifies, the guarded run's audit log
// has one liquidated record per liquidation of the exchange, with its
// symbol (issue 30, item 5: the backtest and the guard count alike).
func TestLiquidationsSaidAsTheExchangeCountsThem(t *testing.T) {
	t.Parallel()
	var audit bytes.Buffer
	res := run(t, backtest.Options{Rules: parseRules(t, overMaxLeverageNotify), Audit: &audit}, solCrash())
	if len(res.Guarded.Liquidations) != 1 {
		t.Fatalf("the guarded run's liquidations = %+v, want XSOL", res.Guarded.Liquidations)
	}
	var said []string
	for _, line := range strings.Split(strings.TrimSpace(audit.String()), "\n") {
		var r struct{ Type, Symbol, Reason string }
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if r.Type == "liquidated" {
			said = append(said, r.Symbol)
			if !strings.HasPrefix(r.Reason, "LIQUIDATED: XSOL LONG 400 at 15x") {
				t.Errorf("liquidated record says %q", r.Reason)
			}
		}
	}
	if len(said) != 1 || said[0] != res.Guarded.Liquidations[0].Symbol {
		t.Errorf("the guard said %v liquidated, the exchange %+v", said, res.Guarded.Liquidations)
	}
}
