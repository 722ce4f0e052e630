package backtest

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// WriteReport writes the result as one self-contained HTML page: the
// summary tables and, per symbol (those where the guard acted or a position
// was liquidated first), an inline SVG chart of the index price,
// the liquidation prices with and without the guard, the guard's actions,
// its firing spans and the liquidations. The page loads nothing — no
// script, font or image from elsewhere — so it reads offline. It is a pure
// function of the result: the same result gives the same bytes, and its
// size is bounded by the result's (already capped) series.
func WriteReport(w io.Writer, r *Result) error {
	if r == nil {
		return fmt.Errorf("write report: no result")
	}
	var b bytes.Buffer
	if err := reportTemplate.Execute(&b, newReportView(r)); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// Chart geometry, in SVG user units.
const (
	chartW      = 1160
	chartH      = 400
	plotL       = 84 // room for the price labels
	plotR       = chartW - 40
	plotT       = 14
	plotB       = chartH - 46 // room for the time labels and caption
	maxYTicks   = 8
	maxXTicks   = 9
	bandClasses = 12 // band0 … band11 in the style sheet
	maxLanes    = 8  // firing lanes at the top of the plot; more rules share
	laneH       = 7
	denseMarks  = 60 // above this many markers they are drawn smaller
)

// reportView is everything the template prints, formatted: the template
// only places strings.
type reportView struct {
	Title, Period, Span string
	Verdict             string
	Harmful             bool // the guard caused a liquidation
	Actions             []actionRow
	ActionsMore         int
	// Curves are the account equity and each symbol's distance to
	// liquidation, with and without the guard.
	Curves       []curveView
	Steps, Ticks int
	Runs         []string // column heads
	Rows         []summaryRow
	RuleTables   []ruleTable
	Positions    []positionRow
	Avoided      []string
	Baseline     bool
	DiffCount    int
	Diffs        []string
	DiffsMore    int
	Warnings     []string
	Charts       []chartView
	// Stress are the runs' accounts on the stress grid.
	Stress []stressView
}

type summaryRow struct {
	Label string
	Cells []string
	// Differs marks a row whose runs disagree.
	Differs bool
}

// maxActionRows bounds the report's action table.
const maxActionRows = 300

// actionRow is one action of the guarded run, or a run of the same action
// repeated (Count > 1): the same symbol, rules, call and outcome, and the
// same error when it failed.
type actionRow struct {
	Time, Symbol, Rules, Action, Outcome, Effect, Actual string
	// ExpectedLoss is the stress grid's expected loss before → after
	// ("" without a grid).
	ExpectedLoss string
	// Count is how many times it was decided, Last the last time.
	Count  int
	Last   string
	Failed bool
}

type ruleTable struct {
	Run, Note string
	Rows      []RuleStats
}

type positionRow struct {
	Symbol, Unguarded, Guarded string
	Saved                      bool
}

type chartView struct {
	Symbol, Index, ID, Facts string
	W, H                     int
	PlotL, PlotR, PlotT      int
	PlotB                    int
	PlotW, PlotH             int
	Empty                    bool
	YTicks, XTicks           []axisTick
	XCaption                 string
	IndexPath                string
	LiqGuardedPath           string
	LiqUnguardedPath         string
	Bands                    []bandView
	Actions                  []markView
	Liquidations             []markView
	Legend                   []legendItem
	Dropped                  int
}

type axisTick struct {
	Pos   string // x or y of the tick
	Label string
}

// bandView is a firing span: a faint band over the plot's height and a
// strip in the rule's own lane at the top, so overlapping rules stay apart.
type bandView struct {
	X, Y, W, H, LaneY, LaneH, Class, Title string
}

type markView struct {
	X, Y, Class, Title, Path string
}

type legendItem struct {
	Class, Label string
}

func newReportView(r *Result) *reportView {
	v := &reportView{
		Title:  "riskguard backtest " + fmtTime(r.From) + " → " + fmtTime(r.To),
		Period: fmtTime(r.From) + " → " + fmtTime(r.To),
		Span:   r.To.Sub(r.From).String(),
		Steps:  r.Steps,
		Ticks:  r.Ticks,
	}
	verdict := VerdictOf(r)
	v.Verdict, v.Harmful = verdict.String(), len(verdict.CausedSymbols) > 0
	v.Actions = actionRows(r)
	v.Curves = curves(r)
	if len(v.Actions) > maxActionRows { // the charts have them all
		v.ActionsMore = len(v.Actions) - maxActionRows
		v.Actions = v.Actions[:maxActionRows]
	}
	runs := []*RunResult{&r.Unguarded, &r.Guarded}
	v.Runs = []string{"without guard", "with guard"}
	if r.Baseline != nil {
		runs = append(runs, r.Baseline)
		v.Runs = append(v.Runs, "baseline")
		v.Baseline = true
	}
	row := func(label string, f func(*RunResult) string) {
		sr := summaryRow{Label: label}
		for _, run := range runs {
			sr.Cells = append(sr.Cells, f(run))
		}
		for _, c := range sr.Cells[1:] {
			if c != sr.Cells[0] {
				sr.Differs = true
			}
		}
		v.Rows = append(v.Rows, sr)
	}
	row("liquidations", func(run *RunResult) string {
		if len(run.Liquidations) == 0 {
			return "0"
		}
		syms := make([]string, 0, len(run.Liquidations))
		for _, l := range run.Liquidations {
			syms = append(syms, l.Symbol)
		}
		return fmt.Sprintf("%d (%s)", len(run.Liquidations), strings.Join(syms, ", "))
	})
	money := func(d decimal.Decimal) string { return d.StringFixed(2) }
	row("free balance", func(run *RunResult) string { return money(run.Balance) })
	row("margin", func(run *RunResult) string { return money(run.Margin) })
	row("realized PNL", func(run *RunResult) string { return money(run.RealizedPNL) })
	row("unrealized PNL", func(run *RunResult) string { return money(run.UnrealizedPNL) })
	row("equity", func(run *RunResult) string { return money(run.Equity) })
	row("evaluations", func(run *RunResult) string { return strconv.FormatInt(run.Evaluations, 10) })

	v.RuleTables = append(v.RuleTables,
		ruleTable{Run: "with guard", Rows: r.Guarded.Rules},
		ruleTable{Run: "without guard", Note: "dry run: the actions the rules would have taken, none sent", Rows: r.Unguarded.Rules})
	if r.Baseline != nil {
		v.RuleTables = append(v.RuleTables, ruleTable{Run: "baseline", Rows: r.Baseline.Rules})
	}

	unguarded := map[string]PositionEnd{}
	for _, p := range r.Unguarded.Positions {
		unguarded[p.Symbol] = p
	}
	for _, p := range r.Guarded.Positions {
		u := unguarded[p.Symbol]
		v.Positions = append(v.Positions, positionRow{Symbol: p.Symbol, Unguarded: positionText(u), Guarded: positionText(p),
			Saved: u.Liquidated && !p.Liquidated})
	}
	for _, l := range avoidedLiquidations(r) {
		v.Avoided = append(v.Avoided, fmt.Sprintf("%s at %s: index %s crossed %s (%d×)", l.Symbol, fmtTime(l.Time), l.Price, l.LiquidationPrice, l.Leverage))
	}
	v.DiffCount = r.DiffCount
	for _, g := range GroupDiffs(r.Diffs) {
		s := fmt.Sprintf("%s  only %s: %s", fmtTime(g.First), g.Run, g.Decision)
		if g.Count > 1 {
			s += fmt.Sprintf(" (×%d from then)", g.Count)
		}
		v.Diffs = append(v.Diffs, s)
	}
	v.DiffsMore = r.DiffCount - len(r.Diffs)
	v.Warnings = r.Warnings
	v.Stress = stressViews(r)

	colours := ruleColours(r)
	for i := range r.Symbols {
		v.Charts = append(v.Charts, newChart(r, &r.Symbols[i], i, colours))
	}
	// The charts where something happened come first: they are what the
	// reader opened the report for.
	slices.SortStableFunc(v.Charts, func(a, b chartView) int {
		return cmpBool(b.eventful(), a.eventful())
	})
	return v
}

// actionRows are the guarded run's actions in time order, an action
// repeated (the same symbol, rules, call, outcome and error) grouped in
// one row at its first time, with its count and last time: a rule that
// retried a refused call 46 times is one row, not 46.
func actionRows(r *Result) []actionRow {
	type keyed struct {
		row  actionRow
		at   time.Time
		last time.Time
	}
	var rows []*keyed
	byKey := map[string]*keyed{}
	for _, s := range r.Symbols {
		for _, m := range s.Markers {
			action := m.Action
			if m.To != 0 && m.To != m.From {
				action += fmt.Sprintf(" %d×→%d×", m.From, m.To)
			}
			outcome := m.Outcome
			if m.Error != "" {
				outcome += ": " + m.Error // the exchange's answer: why it failed
			}
			key := strings.Join([]string{s.Symbol, action, strings.Join(m.Rules, ","), outcome}, "\x00")
			if k := byKey[key]; k != nil {
				k.row.Count++
				if m.Time.After(k.last) {
					k.last = m.Time
				}
				continue
			}
			k := &keyed{at: m.Time, last: m.Time, row: actionRow{Symbol: s.Symbol, Rules: strings.Join(m.Rules, ", "), Action: action,
				Outcome: outcome, Effect: m.Effect, Actual: m.Actual, ExpectedLoss: expectedLossText(m), Count: 1, Failed: m.Outcome == "error"}}
			byKey[key] = k
			rows = append(rows, k)
		}
	}
	slices.SortStableFunc(rows, func(a, b *keyed) int { return a.at.Compare(b.at) })
	out := make([]actionRow, 0, len(rows))
	for _, k := range rows {
		k.row.Time = fmtTime(k.at)
		if k.row.Count > 1 {
			k.row.Last = fmtTime(k.last)
		}
		out = append(out, k.row)
	}
	return out
}

// expectedLossText is a marker's expected loss before → after, "" without
// a grid.
func expectedLossText(m Marker) string {
	if m.ExpectedLossBefore == nil || m.ExpectedLossAfter == nil {
		return ""
	}
	return m.ExpectedLossBefore.StringFixed(2) + " → " + m.ExpectedLossAfter.StringFixed(2)
}

// stressView is one run's account on the stress grid at one moment, as
// a small table: the expected loss, σ, the likely fatal moves and the
// loss at the shown moves, together and each symbol alone.
type stressView struct {
	Title    string
	Unknown  bool
	Expected string
	Sigma    string
	Fatal    []string
	NoFatal  string
	Heads    []string
	Rows     []stressRowView
}

type stressRowView struct {
	Move  string
	Cells []string
}

// stressViews are the grids of the runs: at the start (once when both
// runs start the same, as they do from one scenario) and at each run's
// worst account measure.
func stressViews(r *Result) []stressView {
	var out []stressView
	g, u := r.Guarded.StressStart, r.Unguarded.StressStart
	switch {
	case g != nil && u != nil && sameGrid(g, u):
		out = append(out, newStressView("both runs, at the start", g))
	default:
		if u != nil {
			out = append(out, newStressView("without guard, at the start", u))
		}
		if g != nil {
			out = append(out, newStressView("with guard, at the start", g))
		}
	}
	worst := func(name string, run *RunResult) {
		if run.StressWorst == nil {
			return
		}
		title := name + ", at its lowest account measure"
		if m := run.WorstAccountMeasure; m != nil && *m > 0 {
			title += fmt.Sprintf(" (%.2f%%)", *m*100)
		}
		out = append(out, newStressView(title, run.StressWorst))
	}
	worst("without guard", &r.Unguarded)
	worst("with guard", &r.Guarded)
	return out
}

// sameGrid reports whether two grids say the same.
func sameGrid(a, b *StressGrid) bool {
	if a.Stress.Summary() != b.Stress.Summary() {
		return false
	}
	fa, ra := a.Stress.Table()
	fb, rb := b.Stress.Table()
	return fmt.Sprint(fa, ra) == fmt.Sprint(fb, rb)
}

func newStressView(title string, g *StressGrid) stressView {
	s := g.Stress
	v := stressView{Title: title + " — " + fmtTime(g.Time)}
	if !s.Known {
		v.Unknown = true
		return v
	}
	v.Expected = fmt.Sprintf("%.2f", s.Expected)
	v.Sigma = sigmaText(g)
	for _, f := range s.Fatal {
		v.Fatal = append(v.Fatal, f.String())
	}
	if len(s.Fatal) == 0 {
		v.NoFatal = fmt.Sprintf("no move within ±%gσ liquidates a position", s.Likely)
	}
	families, rows := s.Table()
	if len(rows) == 0 {
		return v
	}
	v.Heads = append(v.Heads, "move")
	for _, f := range families {
		if f == margin.StressTogether {
			v.Heads = append(v.Heads, "every index together")
		} else {
			v.Heads = append(v.Heads, f+" alone")
		}
	}
	for _, row := range rows {
		rv := stressRowView{Move: fmt.Sprintf("%+gσ", row.K)}
		for _, p := range row.Points {
			rv.Cells = append(rv.Cells, p.Cell())
		}
		v.Rows = append(v.Rows, rv)
	}
	return v
}

// sigmaText says the grid's σ and where it came from: "σ: the floor,
// 2.00% over 1h" when every symbol's is the floor (the engine had seen
// too few returns), else each symbol's, the floor marked.
func sigmaText(g *StressGrid) string {
	in, s := g.Inputs, g.Stress
	h := rules.FormatSpan(in.Horizon)
	floor := true
	for _, sg := range s.Sigma {
		floor = floor && in.AtFloor(sg.Symbol)
	}
	if floor {
		return fmt.Sprintf("σ: the floor, %.2f%% over %s (engine.stress_sigma_floor: the engine had seen too few returns of any index); likely: ±%gσ", in.Floor*100, h, s.Likely)
	}
	var parts []string
	for _, sg := range s.Sigma {
		p := fmt.Sprintf("%s %.2f%%", sg.Symbol, sg.Sigma*100)
		if in.AtFloor(sg.Symbol) {
			p += " (the floor)"
		}
		parts = append(parts, p)
	}
	return fmt.Sprintf("σ over %s, from the index returns the engine had seen: %s; likely: ±%gσ", h, strings.Join(parts, ", "), s.Likely)
}

// ruleColours gives every rule that fired in the report one colour (a
// band class), the same in every chart: in the order of the guarded run's
// table, then any other that fired. Only rules drawn get one, so that up
// to bandClasses of them never share a colour (a rule that never fired
// once took a colour and made two others share one).
func ruleColours(r *Result) map[string]int {
	fired := map[string]bool{}
	for _, s := range r.Symbols {
		for _, sp := range s.Spans {
			fired[sp.Rule] = true
		}
	}
	out := map[string]int{}
	add := func(rule string) {
		if _, ok := out[rule]; !ok && fired[rule] {
			out[rule] = len(out) % bandClasses
		}
	}
	for _, rs := range r.Guarded.Rules {
		add(rs.Rule)
	}
	for _, s := range r.Symbols {
		for _, sp := range s.Spans {
			add(sp.Rule)
		}
	}
	return out
}

func (c *chartView) eventful() bool {
	return len(c.Actions) > 0 || len(c.Liquidations) > 0 || len(c.Bands) > 0
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

func fmtTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// coord formats an SVG coordinate: one decimal is below a screen pixel.
func coord(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

// usable is a price that can be plotted: positive and finite (0 means no
// position or no price).
func usable(f float64) bool { return f > 0 && !math.IsInf(f, 0) && !math.IsNaN(f) }

func newChart(r *Result, s *SymbolSeries, n int, colours map[string]int) chartView {
	c := chartView{
		Symbol: s.Symbol, Index: s.Index, ID: "chart-" + strconv.Itoa(n),
		W: chartW, H: chartH, PlotL: plotL, PlotR: plotR, PlotT: plotT, PlotB: plotB,
		PlotW: plotR - plotL, PlotH: plotB - plotT, Dropped: s.Dropped,
	}
	c.Facts = symbolFacts(r, s.Symbol)
	liqs := symbolLiquidations(r, s.Symbol)

	// The time domain: the whole backtest, widened when degenerate.
	t0, t1 := r.From, r.To
	for _, p := range s.Points {
		if t0.IsZero() || p.Time.Before(t0) {
			t0 = p.Time
		}
		if p.Time.After(t1) {
			t1 = p.Time
		}
	}
	if !t1.After(t0) {
		t0, t1 = t0.Add(-30*time.Second), t0.Add(30*time.Second)
	}
	span := float64(t1.Sub(t0))
	xOf := func(t time.Time) float64 {
		x := plotL + float64(t.Sub(t0))/span*float64(plotR-plotL)
		return math.Min(math.Max(x, plotL), plotR)
	}

	// The price domain: every plotted price, rounded out to nice ticks.
	lo, hi := math.Inf(1), math.Inf(-1)
	see := func(f float64) {
		if usable(f) {
			lo, hi = math.Min(lo, f), math.Max(hi, f)
		}
	}
	for _, p := range s.Points {
		see(p.Index)
		see(p.LiquidationGuarded)
		see(p.LiquidationUnguarded)
	}
	for _, l := range liqs {
		see(l.price)
	}
	if lo > hi {
		c.Empty = true
		lo, hi = 0, 1
	}
	// Headroom for the firing lanes above the prices.
	var ruleOrder []string
	for _, sp := range s.Spans {
		if !slices.Contains(ruleOrder, sp.Rule) {
			ruleOrder = append(ruleOrder, sp.Rule)
		}
	}
	lanesPx := float64(min(len(ruleOrder), maxLanes)*laneH + 2)
	if pad := (hi - lo) * 0.04; pad > 0 {
		lo, hi = lo-pad, hi+pad
		hi += (hi - lo) * lanesPx / float64(plotB-plotT-lanesPx)
	} else {
		pad = math.Max(math.Abs(lo)*0.01, 1e-9)
		lo, hi = lo-pad, hi+pad
	}
	step := niceStep((hi - lo) / (maxYTicks - 2))
	lo, hi = math.Floor(lo/step)*step, math.Ceil(hi/step)*step
	yOf := func(f float64) float64 {
		y := plotB - (f-lo)/(hi-lo)*float64(plotB-plotT)
		return math.Min(math.Max(y, plotT), plotB)
	}
	decimals := 0
	if step < 1 {
		decimals = int(math.Ceil(-math.Log10(step) - 1e-9))
	}
	for i := 0; i <= maxYTicks+2; i++ {
		f := lo + float64(i)*step
		if f > hi+step/2 {
			break
		}
		c.YTicks = append(c.YTicks, axisTick{Pos: coord(yOf(f)), Label: strconv.FormatFloat(f, 'f', decimals, 64)})
	}
	c.XTicks, c.XCaption = timeTicks(t0, t1, xOf)

	if !c.Empty {
		c.IndexPath = linePath(s.Points, func(p Point) float64 { return p.Index }, xOf, yOf)
		c.LiqGuardedPath = stepPath(s.Points, func(p Point) float64 { return p.LiquidationGuarded }, xOf, yOf)
		c.LiqUnguardedPath = stepPath(s.Points, func(p Point) float64 { return p.LiquidationUnguarded }, xOf, yOf)
	}

	// Firing spans: one lane per rule, in order of first appearance, and
	// the rule's colour of the whole report.
	for _, sp := range s.Spans {
		k := slices.Index(ruleOrder, sp.Rule)
		x0, x1 := xOf(sp.Start), xOf(sp.End)
		lane := float64(plotT + 1 + (k%maxLanes)*laneH)
		c.Bands = append(c.Bands, bandView{
			X: coord(x0), Y: coord(plotT), W: coord(math.Max(x1-x0, 1.5)), H: coord(plotB - plotT),
			LaneY: coord(lane), LaneH: coord(laneH - 1),
			Class: "band band" + strconv.Itoa(colours[sp.Rule]),
			Title: fmt.Sprintf("%s firing %s → %s (%s)", sp.Rule, fmtTime(sp.Start), fmtTime(sp.End), sp.End.Sub(sp.Start)),
		})
	}

	for _, m := range s.Markers {
		x := xOf(m.Time)
		y := float64(plotT) + 8
		if p, ok := indexAt(s.Points, m.Time); ok && !c.Empty {
			y = yOf(p)
		}
		c.Actions = append(c.Actions, markView{X: coord(x), Y: coord(y), Class: markerClass(m), Title: markerTitle(s.Symbol, m),
			Path: markerPath(markerOf(r.kinds, m.Action), x, y, len(s.Markers) > denseMarks)})
	}
	for _, l := range liqs {
		x, y := xOf(l.t), yOf(l.price)
		if !usable(l.price) {
			y = plotB - 8
		}
		const d = 6
		c.Liquidations = append(c.Liquidations, markView{X: coord(x), Y: coord(y), Class: "liq " + l.class, Title: l.title,
			Path: fmt.Sprintf("M%s %sL%s %sM%s %sL%s %s", coord(x-d), coord(y-d), coord(x+d), coord(y+d), coord(x-d), coord(y+d), coord(x+d), coord(y-d))})
	}

	c.Legend = []legendItem{
		{Class: "sw-index", Label: "index price " + s.Index},
		{Class: "sw-guarded", Label: "liquidation price with guard"},
		{Class: "sw-unguarded", Label: "liquidation price without guard"},
	}
	c.Legend = append(c.Legend, markerLegend(r.kinds, s.Markers, liqs)...)
	for _, rule := range ruleOrder {
		c.Legend = append(c.Legend, legendItem{Class: "sw-band band" + strconv.Itoa(colours[rule]), Label: rule + " firing"})
	}
	return c
}

// markerOf is the marker of an action on the charts: its kind's
// (rules.KindSpec.Marker, "cancel" or "notify") in kinds (nil:
// rules.DefaultKinds), "settings" for a settings change and any other.
func markerOf(kinds rules.Kinds, action string) string {
	if kinds == nil {
		kinds = rules.DefaultKinds()
	}
	if spec, ok := kinds.Spec(rules.ActionKind(action)); ok && spec.Marker != "" {
		return spec.Marker
	}
	return "settings"
}

// markerLegend explains the marker kinds the chart shows, in a fixed order.
func markerLegend(kinds rules.Kinds, ms []Marker, liqs []chartLiquidation) []legendItem {
	has := map[string]bool{}
	for _, m := range ms {
		has[markerOf(kinds, m.Action)] = true
		switch markerClass(m) {
		case "act act-failed":
			has["failed"] = true
		case "act act-idle":
			has["idle"] = true
		}
	}
	for _, l := range liqs {
		has[l.class] = true
	}
	var out []legendItem
	for _, k := range []legendItem{
		{"settings", "leverage or margin mode changed"},
		{"cancel", "orders cancelled"},
		{"notify", "notification"},
		{"failed", "action failed"},
		{"idle", "action not needed or held back"},
		{"liq-unguarded", "liquidated without guard"},
		{"liq-guarded", "liquidated with guard"},
	} {
		if has[k.Class] {
			out = append(out, legendItem{Class: "sw-" + k.Class, Label: k.Label})
		}
	}
	return out
}

// niceStep rounds a raw tick step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if !(raw > 0) || math.IsInf(raw, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// timeSteps are the candidate spacings of time labels.
var timeSteps = []time.Duration{
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour,
	24 * time.Hour, 2 * 24 * time.Hour, 7 * 24 * time.Hour, 14 * 24 * time.Hour, 30 * 24 * time.Hour,
	91 * 24 * time.Hour, 182 * 24 * time.Hour, 365 * 24 * time.Hour,
}

// timeTicks places labels at round UTC times (multiples of the step since
// the Unix epoch), at most maxXTicks of them.
func timeTicks(t0, t1 time.Time, xOf func(time.Time) float64) ([]axisTick, string) {
	span := t1.Sub(t0)
	step := timeSteps[len(timeSteps)-1]
	for _, s := range timeSteps {
		if span/s < maxXTicks {
			step = s
			break
		}
	}
	if span/step >= maxXTicks { // longer than years: whole multiples of the last
		step *= span/(step*(maxXTicks-1)) + 1
	}
	sameDay := t0.UTC().Format(time.DateOnly) == t1.UTC().Format(time.DateOnly)
	layout := "Jan 2"
	switch {
	case step < time.Minute:
		layout = "15:04:05"
	case step < 24*time.Hour && sameDay:
		layout = "15:04"
	case step < 24*time.Hour:
		layout = "Jan 2 15:04"
	}
	caption := "time (UTC)"
	if sameDay {
		caption = "time (UTC), " + t0.UTC().Format("Mon 2 Jan 2006")
	} else if t0.Year() == t1.Year() {
		caption = "time (UTC), " + strconv.Itoa(t0.UTC().Year())
	}
	first := time.Unix(0, 0).UTC().Add(t0.Sub(time.Unix(0, 0)).Truncate(step))
	if first.Before(t0) {
		first = first.Add(step)
	}
	var ticks []axisTick
	for i, t := 0, first; i <= maxXTicks && !t.After(t1); i, t = i+1, t.Add(step) {
		ticks = append(ticks, axisTick{Pos: coord(xOf(t)), Label: t.UTC().Format(layout)})
	}
	return ticks, caption
}

// linePath joins the usable values with straight lines; a gap (no price)
// breaks the line.
func linePath(ps []Point, val func(Point) float64, xOf func(time.Time) float64, yOf func(float64) float64) string {
	var b strings.Builder
	pen := false
	for _, p := range ps {
		v := val(p)
		if !usable(v) {
			pen = false
			continue
		}
		if pen {
			b.WriteString("L")
		} else {
			b.WriteString("M")
		}
		b.WriteString(coord(xOf(p.Time)) + " " + coord(yOf(v)))
		pen = true
	}
	return b.String()
}

// stepPath draws a liquidation price as the steps it is: it holds until
// the next sample. A position's end (0) draws the last level up to the time
// it was seen gone.
func stepPath(ps []Point, val func(Point) float64, xOf func(time.Time) float64, yOf func(float64) float64) string {
	var b strings.Builder
	pen := false
	for _, p := range ps {
		v := val(p)
		x := coord(xOf(p.Time))
		if !usable(v) {
			if pen {
				b.WriteString("H" + x)
			}
			pen = false
			continue
		}
		if pen {
			b.WriteString("H" + x + "V" + coord(yOf(v)))
		} else {
			b.WriteString("M" + x + " " + coord(yOf(v)))
		}
		pen = true
	}
	return b.String()
}

// indexAt interpolates the index price at t between the samples.
func indexAt(ps []Point, t time.Time) (float64, bool) {
	i, _ := slices.BinarySearchFunc(ps, t, func(p Point, t time.Time) int { return p.Time.Compare(t) })
	switch {
	case len(ps) == 0:
		return 0, false
	case i == 0:
		return ps[0].Index, usable(ps[0].Index)
	case i == len(ps):
		return ps[i-1].Index, usable(ps[i-1].Index)
	}
	a, b := ps[i-1], ps[i]
	if !usable(a.Index) || !usable(b.Index) {
		return b.Index, usable(b.Index)
	}
	f := float64(t.Sub(a.Time)) / float64(b.Time.Sub(a.Time))
	return a.Index + f*(b.Index-a.Index), true
}

func markerClass(m Marker) string {
	switch m.Outcome {
	case "sent", "dry_run":
		return "act"
	case "error":
		return "act act-failed"
	default: // noop, skipped
		return "act act-idle"
	}
}

func markerTitle(symbol string, m Marker) string {
	var b strings.Builder
	b.WriteString(fmtTime(m.Time) + " " + symbol + ": " + m.Action)
	if m.From != 0 || m.To != 0 {
		fmt.Fprintf(&b, " %d× → %d×", m.From, m.To)
	}
	b.WriteString(" by " + strings.Join(m.Rules, ", "))
	if m.Outcome != "" {
		b.WriteString(" (" + m.Outcome + ")")
	}
	if m.Error != "" {
		b.WriteString(": " + m.Error)
	}
	return b.String()
}

// markerPath shapes a marker (markerOf): a triangle pointing down for a
// settings change, a square for cancelled orders, a diamond for a notice.
func markerPath(marker string, x, y float64, dense bool) string {
	d := 7.0
	if dense {
		d = 4
	}
	switch {
	case marker == "cancel":
		return fmt.Sprintf("M%s %sh%sv%sh-%sz", coord(x-d+1), coord(y-d+1), coord(2*d-2), coord(2*d-2), coord(2*d-2))
	case marker == "notify":
		return fmt.Sprintf("M%s %sL%s %sL%s %sL%s %sz", coord(x), coord(y-d), coord(x+d), coord(y), coord(x), coord(y+d), coord(x-d), coord(y))
	default:
		return fmt.Sprintf("M%s %sL%s %sL%s %sz", coord(x-d), coord(y-d-2), coord(x+d), coord(y-d-2), coord(x), coord(y+1))
	}
}

// chartLiquidation is a liquidation of one run, placed on a chart.
type chartLiquidation struct {
	t            time.Time
	price        float64
	class, title string
}

func symbolLiquidations(r *Result, symbol string) []chartLiquidation {
	var out []chartLiquidation
	for _, run := range []struct {
		res          *RunResult
		class, label string
	}{{&r.Unguarded, "liq-unguarded", "without guard"}, {&r.Guarded, "liq-guarded", "with guard"}} {
		for _, l := range run.res.Liquidations {
			if l.Symbol != symbol {
				continue
			}
			out = append(out, chartLiquidation{t: l.Time, price: l.Price.InexactFloat64(), class: run.class,
				title: fmt.Sprintf("%s %s liquidated %s: index %s crossed %s (%d×), margin lost %s",
					fmtTime(l.Time), l.Symbol, run.label, l.Price, l.LiquidationPrice, l.Leverage, l.Margin.StringFixed(2))})
		}
	}
	return out
}

// symbolFacts says in a line how the position ended in both runs.
func symbolFacts(r *Result, symbol string) string {
	find := func(ps []PositionEnd) PositionEnd {
		for _, p := range ps {
			if p.Symbol == symbol {
				return p
			}
		}
		return PositionEnd{}
	}
	return "at the end — without guard: " + positionText(find(r.Unguarded.Positions)) +
		"; with guard: " + positionText(find(r.Guarded.Positions))
}

var reportTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"plus":  func(d, n int) int { return n + d },
	"minus": func(d, n int) int { return n - d },
	"secs":  func(d time.Duration) string { return d.Round(time.Second).String() },
}).Parse(reportHTML))

// reportHTML is the report's page: report.html.tmpl, a template of
// html/template, embedded so the binary stands alone.
//
//go:embed report.html.tmpl
var reportHTML string

// curveView is a small line chart of two series over the backtest.
type curveView struct {
	Title, Unit      string
	W, H             int
	PlotT, PlotB     int
	Guarded, Without string // SVG polyline points
	Lo, Hi           string // the y axis' bounds, formatted
	HiY, LoY, ZeroY  string
	HasZero          bool
	// Same: both runs drew the same line, so the guarded one is dashed
	// over the other and the title says so.
	Same     bool
	XTicks   []axisTick
	XCaption string
	// Liquidations are vertical lines at each run's liquidations.
	Liquidations []curveLiquidation
}

// curveLiquidation marks a liquidation on a curve.
type curveLiquidation struct {
	X, Colour, Label, Title string
	Dashed                  bool
}

// curves are the account equity and every symbol's distance to
// liquidation (a fraction of the index; negative past it), with the guard
// and without.
func curves(r *Result) []curveView {
	var out []curveView
	if len(r.Equity) > 1 {
		ts := make([]time.Time, len(r.Equity))
		g, u := make([]float64, len(r.Equity)), make([]float64, len(r.Equity))
		for i, p := range r.Equity {
			ts[i], g[i], u[i] = p.Time, p.Guarded, p.Unguarded
		}
		out = append(out, newCurve(r, "Account equity", "", "", ts, g, u, func(f float64) string { return strconv.FormatFloat(f, 'f', 0, 64) }))
	}
	for _, s := range r.Symbols {
		if len(s.Points) < 2 {
			continue
		}
		// A long's liquidation price is below its index, a short's above.
		side := 1.0
		for _, p := range s.Points {
			if usable(p.LiquidationGuarded) && usable(p.Index) {
				if p.LiquidationGuarded > p.Index {
					side = -1
				}
				break
			}
		}
		dist := func(index, liq float64) float64 {
			if !usable(index) || !usable(liq) {
				return math.NaN() // no position: a gap
			}
			return side * (index - liq) / index * 100
		}
		ts := make([]time.Time, len(s.Points))
		g, u := make([]float64, len(s.Points)), make([]float64, len(s.Points))
		for i, p := range s.Points {
			ts[i], g[i], u[i] = p.Time, dist(p.Index, p.LiquidationGuarded), dist(p.Index, p.LiquidationUnguarded)
		}
		out = append(out, newCurve(r, s.Symbol+": distance to liquidation", s.Symbol, "%", ts, g, u, func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }))
	}
	return out
}

// newCurve draws g (with the guard) and u (without) over the backtest's
// time, with the liquidations of symbol ("" for every symbol's).
func newCurve(r *Result, title, symbol, unit string, ts []time.Time, g, u []float64, format func(float64) string) curveView {
	const w, h, pad, axis = 720, 140, 8, 26 // axis: room for the time labels
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, vs := range [][]float64{g, u} {
		for _, v := range vs {
			if !math.IsNaN(v) {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 0) {
		lo, hi = 0, 1
	}
	if hi-lo < 1e-9 {
		lo, hi = lo-1, hi+1
	}
	t0, t1 := r.From, r.To
	if !t1.After(t0) {
		t1 = t0.Add(time.Second)
	}
	x := func(t time.Time) float64 { return pad + float64(t.Sub(t0))/float64(t1.Sub(t0))*(w-2*pad) }
	y := func(v float64) float64 { return pad + (hi-v)/(hi-lo)*(h-axis-2*pad) }
	line := func(vs []float64) string {
		var b strings.Builder
		for i, v := range vs {
			if math.IsNaN(v) {
				continue
			}
			fmt.Fprintf(&b, "%s,%s ", coord(x(ts[i])), coord(y(v)))
		}
		return strings.TrimSpace(b.String())
	}
	c := curveView{Title: title, Unit: unit, W: w, H: h, PlotT: pad, PlotB: h - axis, Guarded: line(g), Without: line(u),
		Lo: format(lo) + unit, Hi: format(hi) + unit, HiY: coord(y(hi) + 10), LoY: coord(y(lo) - 2)}
	c.Same = c.Guarded == c.Without
	c.XTicks, c.XCaption = timeTicks(t0, t1, x)
	for _, run := range []struct {
		res           *RunResult
		colour, label string
		dashed        bool
	}{{&r.Unguarded, "#d55e00", "without guard", true}, {&r.Guarded, "#009e73", "with guard", false}} {
		for _, l := range run.res.Liquidations {
			if symbol != "" && l.Symbol != symbol {
				continue
			}
			c.Liquidations = append(c.Liquidations, curveLiquidation{X: coord(x(l.Time)), Colour: run.colour, Dashed: run.dashed,
				Label: "✕ " + l.Symbol, Title: fmt.Sprintf("%s %s liquidated %s", fmtTime(l.Time), l.Symbol, run.label)})
		}
	}
	if lo < 0 && hi > 0 {
		c.HasZero, c.ZeroY = true, coord(y(0))
	}
	return c
}
