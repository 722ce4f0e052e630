package backtest_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/engine/backtest"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/shopspring/decimal"
)

// startStress is the default scenario's account on the stress grid at the
// crash path's start (SOL at 150, the walks at their start), worked out
// here from a simulated exchange of the scenario alone — not through the
// backtest — with σ the engine's floor, as a run's engine has it before it
// has seen a return.
func startStress(t *testing.T) margin.Stress {
	t.Helper()
	sc := sim.DefaultScenario()
	for i, ix := range sc.Indexes {
		price := ix.Points
		if ix.Walk != nil {
			price = []sim.PricePoint{{Price: ix.Walk.Start}}
		}
		sc.Indexes[i] = sim.IndexSpec{Name: ix.Name, Scale: ix.Scale, Points: price[:1]}
	}
	ex, err := sim.New(sim.Config{Key: "k", Secret: "s", Now: func() time.Time { return t0 }, Scenario: sc})
	if err != nil {
		t.Fatal(err)
	}
	names, scales, bases := map[int64]string{}, map[string]int32{}, map[string]string{}
	for _, c := range ex.Trades().ContractsSymbols {
		names[c.ID], bases[c.Name] = c.Name, c.BaseName
	}
	for _, c := range sc.Contracts {
		scales[c.Name] = int32(c.QuoteScale)
	}
	ix := ex.IndexPrices()
	acct := margin.Account{Free: ex.Balance()}
	for _, p := range ex.Positions() {
		if p.Empty {
			continue
		}
		name := names[p.SymbolID]
		mp := margin.PositionOf(&p, name, scales[name])
		mp.Index = ix[bases[name]]
		acct.Positions = append(acct.Positions, mp)
	}
	cfg := engine.DefaultConfig()
	return acct.Stress(func(string) float64 { return cfg.StressSigmaFloor }, cfg.StressLikely, nil)
}

// The report shows the stress grid of a real replay: at the start (both
// runs start from one account) with the expected loss Account.Stress gives
// for the scenario's account, σ said to be the floor, the loss at the shown
// moves together and each symbol alone; at each run's worst account
// measure; and the actions table says an action's expected loss before →
// after, the figures its audit record carries.
func TestWriteReportStressGrid(t *testing.T) {
	t.Parallel()
	var audit bytes.Buffer
	res := run(t, backtest.Options{Rules: parseRules(t, overMaxLeverage), Audit: &audit}, solCrash())
	var b bytes.Buffer
	if err := backtest.WriteReport(&b, res); err != nil {
		t.Fatal(err)
	}
	// The page's text, its entities read (html/template writes a + as
	// &#43;).
	got := html.UnescapeString(b.String())

	want := startStress(t)
	if !want.Known || len(want.Points) == 0 {
		t.Fatalf("the scenario's grid is unknown: %+v", want)
	}
	section := regexp.MustCompile(`(?s)<h2>Stress grid.*?(<h2>|</body>)`).FindString(got)
	if section == "" {
		t.Fatalf("the report has no stress grid section:\n%s", got)
	}
	start := regexp.MustCompile(`(?s)<h3>both runs, at the start — 2026-03-02T09:00:00Z</h3>.*?</table>`).FindString(section)
	if start == "" {
		t.Fatalf("no grid at the start:\n%s", section)
	}
	for _, w := range []string{
		fmt.Sprintf("expected loss <strong>%.2f</strong>", want.Expected),
		"σ: the floor, 2.00% over 1h",
		"<th>every index together</th>",
		"<th>XSOL alone</th>",
		"<td>-5σ</td>",
		"<td>+5σ</td>",
	} {
		if !strings.Contains(start, w) {
			t.Errorf("the grid at the start lacks %q:\n%s", w, start)
		}
	}
	if len(want.Fatal) == 0 {
		if w := "no move within ±3σ liquidates a position"; !strings.Contains(start, w) {
			t.Errorf("the grid at the start lacks %q:\n%s", w, start)
		}
	}
	for _, f := range want.Fatal {
		if !strings.Contains(start, f.String()) {
			t.Errorf("the grid at the start lacks the fatal move %q:\n%s", f, start)
		}
	}
	// Each cell of the start's table is the scenario's point.
	families, rows := want.Table()
	for _, r := range rows {
		cells := fmt.Sprintf("<tr><td>%+gσ</td>", r.K)
		for _, p := range r.Points {
			cells += "<td>" + p.Cell() + "</td>"
		}
		if !strings.Contains(start, cells) {
			t.Errorf("the grid at the start lacks the row %s (families %q):\n%s", cells, families, start)
		}
	}
	for _, w := range []string{"<h3>without guard, at its lowest account measure", "<h3>with guard, at its lowest account measure"} {
		if !strings.Contains(section, w) {
			t.Errorf("the stress section lacks %q:\n%s", w, section)
		}
	}

	// The lowering of XSOL's leverage: its row says the expected loss its
	// audit record says.
	var before, after *decimal.Decimal
	sc := bufio.NewScanner(&audit)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r journal.Record
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.Type == "action" && r.Phase == "result" && r.Symbol == "XSOL" && r.Prediction != nil {
			before, after = r.Prediction.ExpectedLossBefore, r.Prediction.ExpectedLossAfter
		}
	}
	if before == nil || after == nil {
		t.Fatalf("the audit log has no expected loss for the XSOL action:\n%s", audit.String())
	}
	actions := regexp.MustCompile(`(?s)<table class="actions">.*?</table>`).FindString(got)
	if !strings.Contains(actions, "<th>expected loss before → after</th>") {
		t.Errorf("the actions table has no expected loss column:\n%s", actions)
	}
	cell := fmt.Sprintf("<td>%s → %s</td>", before.StringFixed(2), after.StringFixed(2))
	if !strings.Contains(actions, cell) {
		t.Errorf("the actions table lacks %s:\n%s", cell, actions)
	}
}

// Once the engine has seen enough of an index's returns, the grid at the
// worst moment takes σ from them, as the engine judges by it, and the
// report says so: SOL swings ±0.5% every 10 s while it drifts down for
// half an hour (σ over 1h about 9%, far above the 2% floor), so the worst
// account measure is near the end.
func TestWriteReportStressGridOwnSigma(t *testing.T) {
	t.Parallel()
	src := &sliceSource{}
	for i := 0; i <= 180; i++ {
		p := 150 - 0.01*float64(i)
		if i%2 == 1 {
			p -= 0.75
		}
		src.steps = append(src.steps, backtest.Step{Time: t0.Add(time.Duration(10*i) * time.Second),
			Prices: map[string]decimal.Decimal{"SOL": decimal.NewFromFloat(p).Round(3)}})
	}
	res := run(t, backtest.Options{Rules: parseRules(t, overMaxLeverageNotify)}, src)
	for _, r := range []*backtest.RunResult{&res.Guarded, &res.Unguarded} {
		g := r.StressWorst
		if g == nil {
			t.Fatalf("%s: no grid at the worst", r.Name)
		}
		if g.Time.Sub(t0) < 20*time.Minute {
			t.Errorf("%s: worst at +%s, want near the end", r.Name, g.Time.Sub(t0))
		}
		if s := g.Inputs.SigmaOf("XSOL"); !(s > 0.05) || g.Inputs.AtFloor("XSOL") {
			t.Errorf("%s: σ of XSOL %v, want its own, above 5%%", r.Name, s)
		}
		if got, want := g.Stress.Sigma, g.Inputs.SigmaOf("XSOL"); !slices.ContainsFunc(got, func(s margin.SymbolSigma) bool { return s.Symbol == "XSOL" && s.Sigma == want }) {
			t.Errorf("%s: the grid's σ %+v, want XSOL's %v", r.Name, got, want)
		}
	}
	var b bytes.Buffer
	if err := backtest.WriteReport(&b, res); err != nil {
		t.Fatal(err)
	}
	got := html.UnescapeString(b.String())
	sigma := fmt.Sprintf("σ over 1h, from the index returns the engine had seen: XBTC 2.00%% (the floor), XETH 2.00%% (the floor), XSOL %.2f%%", res.Guarded.StressWorst.Inputs.SigmaOf("XSOL")*100)
	if !strings.Contains(got, sigma) {
		t.Errorf("the report lacks %q:\n%s", sigma, regexp.MustCompile(`(?s)<h2>Stress grid.*?(<h2>|</body>)`).FindString(got))
	}
	if !strings.Contains(got, "σ: the floor, 2.00% over 1h") {
		t.Error("the grid at the start does not say its σ is the floor")
	}
}
