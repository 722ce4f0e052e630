package notify

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// golden compares got with testdata/name.golden, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (rerun with -update if intended):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// engineValues are the figures the engine attaches to rule messages.
var engineValues = &Figures{
	Index: 64210.5, LiquidationPrice: 62150, Distance: 0.03208,
	Leverage: 20, MaxLeverage: 50, Notional: 32105.25,
}

func TestRenderGolden(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC)
	custom := `{{upper .Severity}} {{.Rule}}: {{.Symbol}} is {{pct .Distance}} from liquidation (index {{num .Index}}, liq {{num .LiquidationPrice}}, {{num .Leverage}}x){{if eq .Kind "resolved"}}, resolved{{end}}`
	cases := []struct {
		name string
		m    Message
	}{
		{"firing", Message{Kind: KindFiring, Severity: "critical", Rule: "near-liquidation", Symbol: "XBTCUSDT",
			Text: "near-liquidation firing on XBTCUSDT: liquidationDistance < 0.05 (index 64210.5, liquidation 62150, distance 3.21%, leverage 20x of max 50x)", Values: engineValues}},
		{"resolved", Message{Kind: KindResolved, Severity: "critical", Rule: "near-liquidation", Symbol: "XBTCUSDT", Text: "near-liquidation resolved on XBTCUSDT"}},
		{"nodata", Message{Kind: KindNoData, Severity: "warning", Rule: "near-liquidation", Symbol: "ETHUSDT", Text: "near-liquidation has no data on ETHUSDT: index price missing"}},
		{"rule notify", Message{Kind: KindRule, Severity: "warning", Rule: "high-leverage", Symbol: "XBTCUSDT", Action: "notify",
			Text: "[warning] high-leverage on XBTCUSDT: leverage > 0.8 * maxLeverage (index 64210.5, liquidation 62150, distance 3.21%, leverage 20x of max 50x)", Values: engineValues}},
		{"action", Message{Kind: KindAction, Severity: "warning", Rule: "high-leverage", Symbol: "XBTCUSDT", Action: "lower_leverage",
			Text: "lower_leverage XBTCUSDT 20→10 done (rules: high-leverage)"}},
		{"action failed", Message{Kind: KindActionFailed, Severity: "critical", Rule: "near-liquidation", Symbol: "XBTCUSDT", Action: "cancel_orders",
			Text: "FAILED cancel_orders XBTCUSDT: status 503"}},
		{"breaker", Message{Kind: KindBreaker, Severity: "critical", Text: "circuit breaker OPEN: more than 10 actions in a minute; no actions until 2025-03-14T09:27:53Z"}},
		{"lifecycle", Message{Kind: KindLifecycle, Severity: "info", Text: "riskguard started: 4 rules, dry run off"}},
		{"no text", Message{Kind: KindFiring, Severity: "critical", Rule: "near-liquidation", Symbol: "XBTCUSDT", Values: engineValues}},
		{"grouped", Message{Kind: KindResolved, Severity: "critical", Rule: "near-liquidation", Symbol: "XBTCUSDT", Text: "near-liquidation resolved on XBTCUSDT", Count: 40}},
		{"custom template", Message{Kind: KindFiring, Severity: "critical", Rule: "near-liquidation", Symbol: "XBTCUSDT", Text: "ignored", Values: engineValues, Template: custom}},
		{"custom template resolved", Message{Kind: KindResolved, Severity: "critical", Rule: "near-liquidation", Symbol: "XBTCUSDT", Values: engineValues, Template: custom}},
		{"broken template falls back", Message{Kind: KindFiring, Severity: "critical", Rule: "near-liquidation", Symbol: "XBTCUSDT", Text: "near-liquidation firing on XBTCUSDT", Template: "{{.Nope}}"}},
		{"unparsable template falls back", Message{Kind: KindFiring, Severity: "critical", Rule: "r", Symbol: "S", Text: "r firing on S", Template: "{{if}"}},
	}
	r, err := newRenderer(nil)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, c := range cases {
		c.m.Time = at
		text, err := r.render(c.m)
		fmt.Fprintf(&b, "== %s\n%s\n", c.name, text)
		if err != nil {
			fmt.Fprintf(&b, "template error: %v\n", err)
		}
		if strings.HasSuffix(c.name, "falls back") != (err != nil) {
			t.Errorf("%s: error %v", c.name, err)
		}
	}
	golden(t, "render", b.String())

	// The e-mail body of a firing message.
	m := cases[0].m
	m.Time = at
	m.Text, _ = r.render(m)
	golden(t, "email_body", emailBody(m))
}

func TestWithTemplates(t *testing.T) {
	t.Parallel()
	d := newTestDispatcher(t, logConfig(0, "c"), WithTemplates(map[Kind]string{KindAction: "ACTION {{.Action}} {{.Symbol}}: {{.Text}}"}))
	_ = d.Send(t.Context(), Message{Kind: KindAction, Symbol: "XBTC", Action: "cancel_orders", Text: "done"})
	_ = d.Send(t.Context(), Message{Kind: KindLifecycle, Text: "started"})
	q := queued(d, "c")
	if len(q) != 2 || q[0].Text != "ACTION cancel_orders XBTC: done" || q[1].Text != "🔵 started" {
		t.Errorf("rendered %+v", q)
	}
	if q[0].Template != "" {
		t.Error("template left on the rendered message")
	}
}

func TestCheckTemplate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		text, wantErr string
	}{
		{"{{.Rule}} {{pct .Distance}} {{num .Index}} {{summary .Values}} {{.Values.leverage}}", ""},
		{"plain text", ""},
		{"{{.Rule", "unclosed action"},
		{"{{.Nope}}", "line 1, column 2: unknown field .Nope (fields: .Account, .Action, .Count, .Distance,"},
		{"{{pct .Distnce}}", "unknown field .Distnce (did you mean .Distance?)"},
		{"{{nope .Rule}}", `unknown function "nope" (functions: lower, num, pct, summary, upper)`},
		{"{{pcts .Distance}}", `line 1: unknown function "pcts" (did you mean "pct"?)`},
		{"{{.Values.nope}}", "map has no entry for key"},
	}
	for _, tt := range tests {
		err := CheckTemplate(tt.text)
		if (tt.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("CheckTemplate(%q) = %v, want %q", tt.text, err, tt.wantErr)
		}
		if err != nil && strings.Contains(err.Error(), "notify.") {
			t.Errorf("CheckTemplate(%q) = %v: Go type names leak to the user", tt.text, err)
		}
	}
}

func TestFormatNumber(t *testing.T) {
	t.Parallel()
	for in, want := range map[float64]string{64210.5: "64210.5", 20: "20", 0.000123: "0.000123", 1e-9: "1e-09", 0: "0", -3.5: "-3.5"} {
		if got := formatNumber(in); got != want {
			t.Errorf("formatNumber(%v) = %q, want %q", in, got, want)
		}
	}
}
