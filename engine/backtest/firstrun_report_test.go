package backtest

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// The report as a first reader needs it: a failed action says the
// exchange's answer; an action repeated is one row with its count and
// last time; the equity and distance curves have a time axis and a line
// at each liquidation; a curve the same with and without the guard says
// so and dashes the guarded line over the other; a rule has one colour in
// every chart.
func TestWriteReportReadable(t *testing.T) {
	t.Parallel()
	r := reportFixture()
	t0 := r.From
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	xsol := &r.Symbols[1]
	for i := range 45 { // the same refused call, retried every 2 s
		xsol.Markers = append(xsol.Markers, Marker{Time: at(400 + 2*i), Action: "cancel_orders", Rules: []string{"over-max-leverage"},
			Outcome: "error", Error: "status 500: INTERNAL_ERROR: ledger busy"})
	}
	// XETH: the hostile rule fires there too (second in XETH's lanes,
	// first in XSOL's: the colour must follow the rule, not the lane), and
	// the equity was the same in both runs.
	r.Symbols[0].Spans = []Span{{Rule: hostileRule, Start: at(60), End: at(90)}, {Rule: "over-max-leverage", Start: at(100), End: at(110)}}
	r.Equity = []EquityPoint{{Time: at(0), Guarded: 100, Unguarded: 100}, {Time: at(300), Guarded: 90, Unguarded: 90}, {Time: at(600), Guarded: 95, Unguarded: 95}}
	got := render(t, r)

	// The actions table: 46 cancel_orders errors in one row, why included.
	rows := regexp.MustCompile(`(?s)<table class="actions">.*?</table>`).FindString(got)
	if n := strings.Count(rows, "<tr"); n != 4 { // head, lower_leverage, notify, the cancel_orders group
		t.Errorf("the actions table has %d rows, want 4:\n%s", n, rows)
	}
	for _, want := range []string{
		`<tr class="failed"><td>2026-03-02T09:05:30Z<br><span class="note">last 2026-03-02T09:08:08Z</span></td><td>XSOL</td><td>over-max-leverage</td><td>cancel_orders <strong>×46</strong></td><td>error: status 500: INTERNAL_ERROR: ledger busy</td>`,
	} {
		if !strings.Contains(rows, want) {
			t.Errorf("the actions table lacks %s:\n%s", want, rows)
		}
	}
	// The failed marker's title says why too.
	if !strings.Contains(got, "(error): status 500: INTERNAL_ERROR: ledger busy</title>") {
		t.Error("a failed action's marker does not say the exchange's answer")
	}

	curves := regexp.MustCompile(`(?s)<svg class="curve".*?</svg>`).FindAllString(got, -1)
	if len(curves) != 3 { // equity, XETH, XSOL
		t.Fatalf("%d curves, want 3", len(curves))
	}
	for i, c := range curves {
		if n := strings.Count(c, `text-anchor="middle">`); n < 3 {
			t.Errorf("curve %d has %d time labels, want at least 3", i, n)
		}
		if !strings.Contains(c, "time (UTC), Mon 2 Mar 2026") {
			t.Errorf("curve %d has no time caption", i)
		}
	}
	// XSOL liquidated without the guard at 09:06: a line on the equity
	// curve and on XSOL's, not on XETH's.
	liq := `<title>2026-03-02T09:06:00Z XSOL liquidated without guard</title>`
	if !strings.Contains(curves[0], liq) || !strings.Contains(curves[2], liq) || strings.Contains(curves[1], liq) {
		t.Errorf("liquidation lines: equity %t, XETH %t, XSOL %t; want true, false, true",
			strings.Contains(curves[0], liq), strings.Contains(curves[1], liq), strings.Contains(curves[2], liq))
	}
	// Equity and XETH are the same in both runs; XSOL is not.
	same := "the same with and without the guard"
	titles := regexp.MustCompile(`<h3>([^<]*)(<span class="note">[^<]*</span>)?</h3>\n<svg class="curve"`).FindAllStringSubmatch(got, -1)
	for i, want := range []bool{true, true, false} {
		if i >= len(titles) {
			break
		}
		if has := strings.Contains(titles[i][2], same); has != want {
			t.Errorf("curve %q says the same: %t, want %t", titles[i][1], has, want)
		}
		if dashed := strings.Contains(curves[i], `stroke="#2a7" stroke-width="1.5" stroke-dasharray="6 4"`); dashed != want {
			t.Errorf("curve %q guarded line dashed: %t, want %t", titles[i][1], dashed, want)
		}
	}

	// One colour per rule in every chart, legend included.
	classes := map[string]map[string]bool{}
	for _, m := range regexp.MustCompile(`<g class="band (band\d)"><title>([^<]*) firing`).FindAllStringSubmatch(got, -1) {
		if classes[m[2]] == nil {
			classes[m[2]] = map[string]bool{}
		}
		classes[m[2]][m[1]] = true
	}
	for _, m := range regexp.MustCompile(`<span class="sw sw-band (band\d)"></span>([^<]*) firing`).FindAllStringSubmatch(got, -1) {
		if classes[m[2]] == nil {
			classes[m[2]] = map[string]bool{}
		}
		classes[m[2]][m[1]] = true
	}
	if len(classes) != 2 {
		t.Errorf("rules with bands: %v", classes)
	}
	for rule, cs := range classes {
		if len(cs) != 1 {
			t.Errorf("rule %s drawn in %d colours: %v", rule, len(cs), cs)
		}
	}
}
