package backtest

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/shopspring/decimal"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// The rule names and the warning carry markup: the report must print them
// as text.
const (
	hostileRule    = `near <b>liq</b> & "soon"`
	hostileWarning = `<script>alert("x")</script>`
)

// reportFixture is a small backtest: XSOL falls through its liquidation
// price at 15× (144.907) at 09:06; the guard lowered it to 10× (139.84) at
// 09:02 and it survives. XETH stays flat. A baseline differs.
func reportFixture() *Result {
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	d := decimal.RequireFromString
	sol := []float64{150, 149.2, 148.5, 148, 147.6, 147.1, 146.5, 146.2, 145.9, 145.6, 145.3, 145.1,
		144.5, 144.6, 145.2, 146, 147, 148.4, 149.5, 150.2, 151}
	var xsol, xeth []Point
	for i, p := range sol {
		pt := Point{Time: at(30 * i), Index: p, LiquidationGuarded: 144.907, LiquidationUnguarded: 144.907}
		if i >= 4 {
			pt.LiquidationGuarded = 139.84
		}
		if i >= 12 {
			pt.LiquidationUnguarded = 0
		}
		xsol = append(xsol, pt)
		xeth = append(xeth, Point{Time: at(30 * i), Index: 3010, LiquidationGuarded: 3172, LiquidationUnguarded: 3172})
	}
	run := func(name string, liqs []Liquidation, bal string, rs []RuleStats, ps []PositionEnd) RunResult {
		return RunResult{Name: name, Evaluations: 42, Liquidations: liqs, Balance: d(bal), Margin: d("6966"),
			RealizedPNL: d("-4053.33"), UnrealizedPNL: d("1120"), Equity: d("28086"), Rules: rs, Positions: ps}
	}
	liq := Liquidation{Time: at(360), Symbol: "XSOL", Price: d("144.5"), LiquidationPrice: d("144.907"), Leverage: 15, Margin: d("2026.67")}
	xethEnd := PositionEnd{Symbol: "XETH", StartLeverage: 20, Leverage: 20, LiquidationPrice: d("3172")}
	guardedRules := []RuleStats{
		{Rule: "over-max-leverage", Firings: 1, Actions: 1, Pending: 0, Firing: 30 * time.Second},
		{Rule: hostileRule, Firings: 1, Notifications: 1, Pending: 5 * time.Second, Firing: 5 * time.Minute},
	}
	// The grids: one account at the start (XSOL alone on it, as the grid
	// sees it), and each run's at its worst; the guarded run's engine had
	// seen enough returns for XSOL's own σ.
	grid := func(sec int, expected, sigma float64, lost float64) *StressGrid {
		s := margin.Stress{Known: true, Likely: 3, Sigma: []margin.SymbolSigma{{Symbol: "XSOL", Sigma: sigma}}, Expected: expected}
		for _, family := range []string{margin.StressTogether, "XSOL"} {
			for _, k := range margin.StressShown {
				p := margin.StressPoint{Family: family, K: k}
				if k <= -4 {
					p.Loss, p.Lost = lost, []string{"XSOL LONG"}
				}
				s.Points = append(s.Points, p)
			}
		}
		if expected > 50 {
			s.Fatal = []margin.FatalMove{{Symbol: "XSOL", Direction: "LONG", Family: margin.StressTogether, K: -2.5, Move: -2.5 * sigma}}
		}
		return &StressGrid{Time: at(sec), Stress: s, Inputs: engine.StressInputs{Sigma: map[string]float64{"XSOL": sigma}, Floor: 0.02, Horizon: time.Hour, Likely: 3}}
	}
	start := grid(0, 25.63, 0.02, 2026.67)
	guarded := run(RunGuarded, nil, "17973.33", guardedRules, []PositionEnd{xethEnd,
		{Symbol: "XSOL", StartLeverage: 15, Leverage: 10, LiquidationPrice: d("139.84")}})
	guarded.StressStart, guarded.StressWorst = start, grid(330, 12.5, 0.031, 4053.33)
	unguarded := run(RunUnguarded, []Liquidation{liq}, "20000", []RuleStats{
		{Rule: "over-max-leverage", Firings: 1, Actions: 1, Firing: 6 * time.Minute},
		{Rule: hostileRule, Firings: 1, Notifications: 1, Pending: 5 * time.Second, Firing: time.Minute},
	}, []PositionEnd{xethEnd, {Symbol: "XSOL", StartLeverage: 15, Leverage: 15, Liquidated: true}})
	unguarded.StressStart, unguarded.StressWorst = start, grid(300, 96.2, 0.02, 2026.67)
	lossBefore, lossAfter := d("25.63"), d("12.5")
	return &Result{
		From: t0, To: at(600), Steps: 21, Ticks: 601,
		Guarded:   guarded,
		Unguarded: unguarded,
		Baseline: &RunResult{Name: RunBaseline, Liquidations: []Liquidation{liq}, Balance: d("20000"),
			Rules: []RuleStats{{Rule: "over-max-leverage", Firings: 1, Notifications: 1, Firing: 6 * time.Minute}}},
		Diffs:     []Diff{{Time: at(120), Run: RunGuarded, Decision: "lower_leverage XSOL 15→10 by over-max-leverage"}},
		DiffCount: 3,
		Symbols: []SymbolSeries{
			{Symbol: "XETH", Index: "ETH", Points: xeth},
			{Symbol: "XSOL", Index: "SOL", Points: xsol,
				Markers: []Marker{
					{Time: at(120), Action: "lower_leverage", Rules: []string{"over-max-leverage"}, Outcome: "sent", From: 15, To: 10,
						ExpectedLossBefore: &lossBefore, ExpectedLossAfter: &lossAfter},
					{Time: at(305), Action: "notify", Rules: []string{hostileRule}, Outcome: "sent"},
					{Time: at(330), Action: "cancel_orders", Rules: []string{"over-max-leverage"}, Outcome: "error", Error: "status 500: INTERNAL_ERROR: ledger busy"},
				},
				Spans: []Span{
					{Rule: "over-max-leverage", Start: at(90), End: at(120)},
					{Rule: hostileRule, Start: at(300), End: at(600)},
				}},
		},
		Warnings: []string{hostileWarning},
	}
}

func render(t *testing.T, r *Result) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteReport(&b, r); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestWriteReportGolden(t *testing.T) {
	t.Parallel()
	got := render(t, reportFixture())
	path := filepath.Join("testdata", "report.golden.html")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("report differs from %s (go test -update rewrites it); first difference at byte %d", path, firstDiff(got, string(want)))
	}
	// The same result, the same bytes.
	if again := render(t, reportFixture()); again != got {
		t.Errorf("two renderings differ at byte %d", firstDiff(got, again))
	}
}

func firstDiff(a, b string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// svgElement is a parsed SVG element, for structural checks.
type svgElement struct {
	Name     string
	Attr     map[string]string
	Text     string
	Children []*svgElement
}

func (e *svgElement) walk(f func(*svgElement)) {
	f(e)
	for _, c := range e.Children {
		c.walk(f)
	}
}

// title is the text of the element's <title> child.
func (e *svgElement) title() string {
	for _, c := range e.Children {
		if c.Name == "title" {
			return c.Text
		}
	}
	return ""
}

var svgRE = regexp.MustCompile(`(?s)<svg\b.*?</svg>`)

// parseSVGs parses every <svg> element of the page as strict XML and
// returns the symbol charts (the equity and distance curves are parsed too,
// not returned).
func parseSVGs(t *testing.T, page string) []*svgElement {
	t.Helper()
	var out []*svgElement
	for i, src := range svgRE.FindAllString(page, -1) {
		curve := strings.HasPrefix(src, `<svg class="curve"`)
		dec := xml.NewDecoder(strings.NewReader(src))
		dec.Strict = true
		var stack []*svgElement
		var root *svgElement
		for {
			tok, err := dec.Token()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("svg %d is not well-formed XML: %v\n%s", i, err, src)
			}
			switch tok := tok.(type) {
			case xml.StartElement:
				e := &svgElement{Name: tok.Name.Local, Attr: map[string]string{}}
				for _, a := range tok.Attr {
					e.Attr[a.Name.Local] = a.Value
				}
				if len(stack) == 0 {
					if root != nil {
						t.Fatalf("svg %d has two roots", i)
					}
					root = e
				} else {
					p := stack[len(stack)-1]
					p.Children = append(p.Children, e)
				}
				stack = append(stack, e)
			case xml.EndElement:
				stack = stack[:len(stack)-1]
			case xml.CharData:
				if len(stack) > 0 {
					stack[len(stack)-1].Text += string(tok)
				}
			}
		}
		if root == nil || root.Name != "svg" || root.Attr["xmlns"] != "http://www.w3.org/2000/svg" {
			t.Fatalf("svg %d: root %+v", i, root)
		}
		if !curve {
			out = append(out, root)
		}
	}
	return out
}

// byClass finds the elements whose class list holds class.
func byClass(root *svgElement, class string) []*svgElement {
	var out []*svgElement
	root.walk(func(e *svgElement) {
		for _, c := range strings.Fields(e.Attr["class"]) {
			if c == class {
				out = append(out, e)
				return
			}
		}
	})
	return out
}

var pathRE = regexp.MustCompile(`^([MLHVhvz]-?\d+(\.\d)?( -?\d+(\.\d)?)?)*$`)

func TestWriteReportCharts(t *testing.T) {
	t.Parallel()
	page := render(t, reportFixture())
	svgs := parseSVGs(t, page)
	if len(svgs) != 2 {
		t.Fatalf("%d charts, want one per symbol (2)", len(svgs))
	}
	// XSOL, where things happened, comes first.
	for i, sym := range []string{"XSOL", "XETH"} {
		if got := svgs[i].Attr["data-symbol"]; got != sym {
			t.Errorf("chart %d is of %q, want %q", i, got, sym)
		}
		// Every line is drawn, with coordinates inside the plot.
		for _, class := range []string{"index", "liq-guarded-line", "liq-unguarded-line"} {
			paths := byClass(svgs[i], class)
			if len(paths) != 1 || paths[0].Attr["d"] == "" || !pathRE.MatchString(paths[0].Attr["d"]) {
				t.Errorf("%s: %s path %+v", sym, class, paths)
			}
		}
		var texts []string
		svgs[i].walk(func(e *svgElement) {
			if e.Name == "text" {
				texts = append(texts, e.Text)
			}
		})
		joined := strings.Join(texts, "|")
		// Time labels every two minutes, a caption with the date.
		for _, want := range []string{"|09:00|09:02|09:04|09:06|09:08|09:10|", "time (UTC), Mon 2 Mar 2026"} {
			if !strings.Contains(joined, want) {
				t.Errorf("%s: axis labels %q lack %q", sym, joined, want)
			}
		}
	}
	// The range 139.84 … 151, padded and rounded out to whole steps.
	if got := strings.Join(labels(svgs[0], "y-axis"), " "); got != "135 140 145 150 155" {
		t.Errorf("XSOL price labels %q", got)
	}

	xsol, xeth := svgs[0], svgs[1]
	// The unguarded liquidation price stops where the position was gone.
	if d := byClass(xsol, "liq-unguarded-line")[0].Attr["d"]; strings.Count(d, "M") != 1 {
		t.Errorf("unguarded liquidation line %q: want one stretch", d)
	}
	var titles []string
	for _, class := range []string{"act", "band", "liq"} {
		for _, e := range byClass(xsol, class) {
			titles = append(titles, class+": "+e.title())
		}
	}
	want := []string{
		"act: 2026-03-02T09:02:00Z XSOL: lower_leverage 15× → 10× by over-max-leverage (sent)",
		"act: 2026-03-02T09:05:05Z XSOL: notify by " + hostileRule + " (sent)",
		"act: 2026-03-02T09:05:30Z XSOL: cancel_orders by over-max-leverage (error): status 500: INTERNAL_ERROR: ledger busy",
		"band: over-max-leverage firing 2026-03-02T09:01:30Z → 2026-03-02T09:02:00Z (30s)",
		"band: " + hostileRule + " firing 2026-03-02T09:05:00Z → 2026-03-02T09:10:00Z (5m0s)",
		"liq: 2026-03-02T09:06:00Z XSOL liquidated without guard: index 144.5 crossed 144.907 (15×), margin lost 2026.67",
	}
	if strings.Join(titles, "\n") != strings.Join(want, "\n") {
		t.Errorf("tooltips:\n%s\nwant:\n%s", strings.Join(titles, "\n"), strings.Join(want, "\n"))
	}
	// The two rules' bands are told apart.
	bands := byClass(xsol, "band")
	if len(bands) == 2 && bands[0].Attr["class"] == bands[1].Attr["class"] {
		t.Errorf("both rules' bands are %q", bands[0].Attr["class"])
	}
	if len(byClass(xeth, "act")) != 0 || len(byClass(xeth, "band")) != 0 {
		t.Errorf("XETH has markers or bands it never had")
	}
}

// labels are the texts of an axis group.
func labels(root *svgElement, class string) []string {
	var out []string
	for _, g := range byClass(root, class) {
		for _, c := range g.Children {
			if c.Name == "text" {
				out = append(out, c.Text)
			}
		}
	}
	return out
}

func TestWriteReportTablesAndEscaping(t *testing.T) {
	t.Parallel()
	page := render(t, reportFixture())
	for _, want := range []string{
		"<title>riskguard backtest 2026-03-02T09:00:00Z → 2026-03-02T09:10:00Z</title>",
		"2026-03-02T09:00:00Z → 2026-03-02T09:10:00Z (10m0s) · 21 steps · 601 ticks per run",
		"<th>without guard</th><th>with guard</th><th>baseline</th>",
		`<tr class="differs"><td>liquidations</td><td>1 (XSOL)</td><td>0</td><td>1 (XSOL)</td></tr>`,
		`<tr class="differs"><td>margin</td><td>6966.00</td><td>6966.00</td><td>0.00</td></tr>`,
		"<li>XSOL at 2026-03-02T09:06:00Z: index 144.5 crossed 144.907 (15×)</li>",
		"<tr><td>over-max-leverage</td><td>1</td><td>1</td><td>0</td><td>0</td><td>0</td><td>0</td><td>0s</td><td>30s</td></tr>",
		`<td class="saved">10× isolated, liq 139.84 (was 15×)</td>`,
		"Decisions that differ from the baseline: 3",
		"<li>… 2 more</li>",
		"near &lt;b&gt;liq&lt;/b&gt; &amp; &#34;soon&#34;",
		"&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, bad := range []string{hostileRule, hostileWarning, "<script", "NaN", "Inf", "http://", "https://", "@import", "url("} {
		if bad == "http://" {
			// The SVG namespace is a name, not a fetch.
			page := strings.ReplaceAll(page, `xmlns="http://www.w3.org/2000/svg"`, "")
			if strings.Contains(page, bad) {
				t.Errorf("report refers to something outside itself: %q", bad)
			}
			continue
		}
		if strings.Contains(page, bad) {
			t.Errorf("report holds %q", bad)
		}
	}
}

// Odd results still give a well-formed page: no symbol, a symbol with no
// samples, one instant, prices missing, a marker outside the samples.
func TestWriteReportEdgeCases(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		res    *Result
		charts int
		want   string
	}{
		{"no symbol", &Result{From: t0, To: t0.Add(time.Minute)}, 0, "<h2>Charts</h2>"},
		{"no samples", &Result{From: t0, To: t0.Add(time.Minute), Symbols: []SymbolSeries{{Symbol: "XSOL", Index: "SOL",
			Markers: []Marker{{Time: t0, Action: "lower_leverage", Rules: []string{"r"}, Outcome: "sent"}}}}}, 1, "no prices to draw"},
		{"one instant", &Result{From: t0, To: t0, Symbols: []SymbolSeries{{Symbol: "XSOL", Index: "SOL",
			Points: []Point{{Time: t0, Index: 150, LiquidationGuarded: 150, LiquidationUnguarded: 150}}}}}, 1, "08:59:30"},
		{"prices missing", &Result{From: t0, To: t0.Add(time.Hour), Symbols: []SymbolSeries{{Symbol: "XSOL", Index: "SOL",
			Points: []Point{{Time: t0}, {Time: t0.Add(time.Minute), Index: 0.00012}, {Time: t0.Add(time.Hour)}}}}}, 1, "0.00012"},
		{"marker past the samples", &Result{From: t0, To: t0.Add(48 * time.Hour), Symbols: []SymbolSeries{{Symbol: "XSOL", Index: "SOL",
			Points:  []Point{{Time: t0, Index: 150}, {Time: t0.Add(time.Hour), Index: 151}},
			Markers: []Marker{{Time: t0.Add(47 * time.Hour), Action: "settings", Rules: []string{"r"}, Outcome: "noop"}}}}}, 1, "Mar 3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			page := render(t, tc.res)
			if got := len(parseSVGs(t, page)); got != tc.charts {
				t.Errorf("%d charts, want %d", got, tc.charts)
			}
			if !strings.Contains(page, tc.want) {
				t.Errorf("report lacks %q:\n%s", tc.want, page)
			}
			if strings.Contains(page, "NaN") || strings.Contains(page, "Inf") {
				t.Errorf("report holds a non-number")
			}
		})
	}
	if err := WriteReport(io.Discard, nil); err == nil {
		t.Error("a nil result gave no error")
	}
}

// The series are capped, so the page is too: the largest result a backtest
// returns (2,000 points and 1,000 markers and spans per symbol) stays a few
// hundred kilobytes per symbol.
func TestWriteReportSizeBounded(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := SymbolSeries{Symbol: "XBTC", Index: "BTC"}
	for i := range defaultMaxPoints {
		p := 60000 + float64(i%97)*13.37
		s.Points = append(s.Points, Point{Time: t0.Add(time.Duration(i) * 4 * time.Hour), Index: p,
			LiquidationGuarded: p * 0.8, LiquidationUnguarded: p * 0.9})
	}
	for i := range maxMarkers {
		at := t0.Add(time.Duration(i) * 8 * time.Hour)
		s.Markers = append(s.Markers, Marker{Time: at, Action: "lower_leverage", Rules: []string{"over-max-leverage"}, Outcome: "sent", From: 20, To: 10})
		s.Spans = append(s.Spans, Span{Rule: fmt.Sprintf("rule-%d", i%9), Start: at, End: at.Add(time.Hour)})
	}
	s.Dropped = 12345
	res := &Result{From: t0, To: t0.Add(8000 * time.Hour), Symbols: []SymbolSeries{s, s, s}}
	page := render(t, res)
	const perSymbol = 600 << 10
	if len(page) > 3*perSymbol {
		t.Errorf("report of 3 capped symbols is %d bytes, want at most %d", len(page), 3*perSymbol)
	}
	svgs := parseSVGs(t, page)
	if len(svgs) != 3 || len(byClass(svgs[0], "act")) != maxMarkers || len(byClass(svgs[0], "band")) != maxMarkers {
		t.Fatalf("%d charts", len(svgs))
	}
	if x := labels(svgs[0], "x-axis"); len(x) > maxXTicks+2 {
		t.Errorf("%d time labels over a year: %q", len(x), x)
	}
	if !strings.Contains(page, "12345 markers or spans not drawn") {
		t.Error("the dropped markers are not mentioned")
	}
	t.Logf("report of 3 capped symbols: %d bytes", len(page))
}

func TestNiceStep(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ raw, want float64 }{
		{0.7, 1}, {1, 1}, {1.2, 2}, {3, 5}, {7, 10}, {1830, 2000}, {0.00031, 0.0005}, {0, 1}, {-3, 1},
	} {
		if got := niceStep(tc.raw); got != tc.want {
			t.Errorf("niceStep(%v) = %v, want %v", tc.raw, got, tc.want)
		}
	}
}

func TestTimeTicks(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 2, 9, 0, 7, 0, time.UTC)
	for _, tc := range []struct {
		span        time.Duration
		first, last string
		caption     string
	}{
		{2 * time.Minute, "09:00:15", "09:02:00", "time (UTC), Mon 2 Mar 2026"},
		{10 * time.Hour, "10:00", "18:00", "time (UTC), Mon 2 Mar 2026"},
		{30 * time.Hour, "Mar 2 12:00", "Mar 3 12:00", "time (UTC), 2026"},
		{30 * 24 * time.Hour, "Mar 5", "Mar 26", "time (UTC), 2026"},
		{20 * 365 * 24 * time.Hour, "", "", "time (UTC)"},
	} {
		ticks, caption := timeTicks(t0, t0.Add(tc.span), func(time.Time) float64 { return 0 })
		if len(ticks) == 0 || len(ticks) > maxXTicks {
			t.Errorf("%s: %d ticks", tc.span, len(ticks))
			continue
		}
		if caption != tc.caption || tc.first != "" && (ticks[0].Label != tc.first || ticks[len(ticks)-1].Label != tc.last) {
			t.Errorf("%s: %q … %q, %q; want %q … %q, %q", tc.span, ticks[0].Label, ticks[len(ticks)-1].Label, caption, tc.first, tc.last, tc.caption)
		}
	}
}
