package rules

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// wants reads the expected error substrings of a bad file: its leading
// "# want: …" lines, one per expected error, in file order.
func wants(t *testing.T, data []byte) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		w, ok := strings.CutPrefix(line, "# want: ")
		if !ok {
			break
		}
		out = append(out, w)
	}
	if len(out) == 0 {
		t.Fatal("no \"# want:\" line at the top of the file")
	}
	return out
}

func TestParseBadFiles(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/*.bad.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 11 {
		t.Fatalf("found %d bad files, want at least 11", len(files))
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			want := wants(t, data)
			set, err := Parse(filepath.Base(path), data)
			if err == nil {
				t.Fatalf("Parse succeeded with %d rules; want errors %q", len(set.Rules), want)
			}
			var list *ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("error is %T, want *ErrorList", err)
			}
			if len(list.Errors) != len(want) {
				t.Errorf("got %d errors, want %d:\n%v", len(list.Errors), len(want), err)
			}
			for i, w := range want {
				if i >= len(list.Errors) {
					break
				}
				if got := list.Errors[i].Error(); !strings.Contains(got, w) {
					t.Errorf("error %d:\n got %s\nwant substring %s", i, got, w)
				}
			}
		})
	}
}

func TestParseExampleFile(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../rules.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	set, err := Parse("rules.example.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Rules) < 6 {
		t.Fatalf("example has %d rules, want at least 6", len(set.Rules))
	}
	kinds := map[ActionKind]bool{}
	scoped := false
	for _, r := range set.Rules {
		for _, a := range r.Actions {
			kinds[a.Kind] = true
		}
		scoped = scoped || len(r.Symbols) > 0
	}
	for _, k := range []ActionKind{LowerLeverage, SetIsolated, CancelOrders, Notify} {
		if !kinds[k] {
			t.Errorf("example uses no %s action", k)
		}
	}
	if !scoped {
		t.Error("example has no rule scoped to symbols")
	}
}

func TestParseFields(t *testing.T) {
	t.Parallel()
	src := `
engine: {interval: 2s}
rules:
  - name: over-max-leverage
    description: Leverage above what the risk limit allows
    when: position.leverage > riskLimit.maxLeverage
    for: 30s
    keep_firing_for: 1m
    cooldown: 5m
    on_nodata: ignore
    symbols: [XBTC, XETH]
    severity: critical
    message: "{{ .Rule }} on {{ .Symbol }}"
    actions:
      - action: lower_leverage
        leverage: riskLimit.maxLeverage
      - action: set_isolated
      - action: cancel_orders
      - action: notify
        channels: [ops]
  - name: defaults
    when: true
    actions:
      - action: lower_leverage
        leverage: 5
`
	set, err := Parse("f.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if got := len(set.Rules); got != 2 {
		t.Fatalf("got %d rules, want 2", got)
	}
	r := set.Rules[0]
	if r.Name != "over-max-leverage" || r.When != "position.leverage > riskLimit.maxLeverage" ||
		r.For != 30*time.Second || r.KeepFiringFor != time.Minute || r.Cooldown != 5*time.Minute ||
		r.OnNoData != NoDataIgnore || r.Severity != Critical || r.Message != "{{ .Rule }} on {{ .Symbol }}" ||
		r.File != "f.yaml" || r.Line != 4 || r.Description == "" {
		t.Errorf("rule 0 = %+v", r)
	}
	if got, want := strings.Join(r.Symbols, ","), "XBTC,XETH"; got != want {
		t.Errorf("symbols = %s, want %s", got, want)
	}
	if len(r.Actions) != 4 || r.Actions[0].Kind != LowerLeverage || r.Actions[0].Leverage != "riskLimit.maxLeverage" ||
		r.Actions[3].Kind != Notify || len(r.Actions[3].Channels) != 1 || r.Actions[3].Channels[0] != "ops" {
		t.Errorf("actions = %+v", r.Actions)
	}
	if !r.AppliesTo("XBTC") || r.AppliesTo("XLTC") {
		t.Error("AppliesTo does not follow symbols")
	}
	d := set.Rules[1]
	if d.Cooldown != DefaultCooldown || d.Severity != DefaultSeverity || d.OnNoData != DefaultOnNoData || d.For != 0 {
		t.Errorf("defaults = %+v", d)
	}
	if !d.AppliesTo("ANY") {
		t.Error("a rule without symbols must apply to every symbol")
	}
}

func TestParseAcceptsEmptyRuleList(t *testing.T) {
	t.Parallel()
	set, err := Parse("f.yaml", []byte("rules: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Rules) != 0 {
		t.Errorf("got %d rules", len(set.Rules))
	}
}

func TestParseErrorSnippet(t *testing.T) {
	t.Parallel()
	src := "rules:\n  - name: a\n    when: \"position.levrage > 1\"\n"
	_, err := Parse("f.yaml", []byte(src))
	if err == nil {
		t.Fatal("no error")
	}
	want := "f.yaml:3:21: rule \"a\": when: unknown field position.levrage (did you mean position.leverage?)\n" +
		"        when: \"position.levrage > 1\"\n" +
		"    " + strings.Repeat(" ", 20) + "^"
	if got := err.Error(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestFingerprint(t *testing.T) {
	t.Parallel()
	parse := func(src string) *Rule {
		t.Helper()
		set, err := Parse("f.yaml", []byte("rules:\n"+src))
		if err != nil {
			t.Fatal(err)
		}
		return set.Rules[0]
	}
	base := parse("  - name: a\n    when: position.leverage > 10\n    cooldown: 5m\n")
	same := parse("\n\n  - name: a\n    description: only words changed\n    message: hi\n    when: position.leverage > 10\n    cooldown: 5m\n")
	if base.Fingerprint() != same.Fingerprint() {
		t.Error("description, message or position changed the fingerprint")
	}
	for _, other := range []string{
		"  - name: b\n    when: position.leverage > 10\n    cooldown: 5m\n",
		"  - name: a\n    when: position.leverage > 11\n    cooldown: 5m\n",
		"  - name: a\n    when: position.leverage > 10\n    cooldown: 4m\n",
		"  - name: a\n    when: position.leverage > 10\n    cooldown: 5m\n    for: 1s\n",
		"  - name: a\n    when: position.leverage > 10\n    cooldown: 5m\n    symbols: [XBTC]\n",
		"  - name: a\n    when: position.leverage > 10\n    cooldown: 5m\n    actions: [{action: notify}]\n",
	} {
		if parse(other).Fingerprint() == base.Fingerprint() {
			t.Errorf("same fingerprint for a changed rule:\n%s", other)
		}
	}
}

func TestDidYouMean(t *testing.T) {
	t.Parallel()
	keys := ruleKeys()
	for _, tc := range []struct{ word, want string }{
		{"cooldwon", "cooldown"},
		{"severty", "severity"},
		{"keep_firing", ""},
		{"actoins", "actions"},
		{"xyz", ""},
		{"when", "when"},
	} {
		if got := DidYouMean(tc.word, keys); got != tc.want {
			t.Errorf("DidYouMean(%q) = %q, want %q", tc.word, got, tc.want)
		}
	}
}

func TestParseReducePosition(t *testing.T) {
	t.Parallel()
	src := `rules:
  - name: halve
    when: liquidationDistance < 0.03
    actions:
      - {action: cancel_orders}
      - {action: reduce_position, fraction: 0.5}
  - name: trim
    when: liquidationDistance < 0.05
    actions:
      - {action: reduce_position, quantity: position.quantity * 0.25}
  - name: whole
    when: liquidationDistance < 0.01
    actions:
      - {action: reduce_position, fraction: 1}
`
	set, err := Parse("r.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	halve, trim, whole := set.Rules[0].Actions[1], set.Rules[1].Actions[0], set.Rules[2].Actions[0]
	if halve.Kind != ReducePosition || halve.Fraction != 0.5 || halve.Quantity != "" {
		t.Errorf("halve = %+v", halve)
	}
	if trim.Kind != ReducePosition || trim.Fraction != 0 || trim.Quantity != "position.quantity * 0.25" {
		t.Errorf("trim = %+v", trim)
	}
	if whole.Fraction != 1 {
		t.Errorf("whole = %+v", whole)
	}
	env := filled(nil)
	var ev Evaluator
	got, err := ev.ReduceQuantity(&trim, env)
	if want := env.Position.Quantity * 0.25; err != nil || got != want || got <= 0 {
		t.Errorf("quantity = %v, %v; want %v", got, err, want)
	}
	if _, err := ev.ReduceQuantity(&trim, &Env{}); !errors.Is(err, ErrNoData) {
		t.Errorf("an unfilled env gave %v, want no data", err)
	}
	if _, err := ev.ReduceQuantity(&halve, env); err == nil {
		t.Error("a fraction action gave a quantity")
	}
	// The fraction and the quantity are part of what the rule does.
	again, _ := Parse("r.yaml", []byte(strings.Replace(src, "fraction: 0.5", "fraction: 0.4", 1)))
	if again.Rules[0].Fingerprint() == set.Rules[0].Fingerprint() {
		t.Error("a changed fraction keeps the fingerprint")
	}
	if again.Rules[1].Fingerprint() != set.Rules[1].Fingerprint() {
		t.Error("an unchanged rule changed its fingerprint")
	}
}

// A rule without margin_budget gets the default share of the free
// balance; none or 0 lifts it; the fingerprint carries only a budget the
// file sets, so a rule's saved state survives the default.
func TestMarginBudgetDefault(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line     string
		amount   float64
		fraction bool
	}{
		{"", DefaultMarginBudget, DefaultBudgetFraction},
		{"    margin_budget: none\n", 0, false},
		{"    margin_budget: 0\n", 0, false},
		{"    margin_budget: 500\n", 500, false},
		{"    margin_budget: \"10%\"\n", 0.1, true},
	}
	var fingerprints []string
	for _, tt := range tests {
		set, err := Parse("f.yaml", []byte("rules:\n  - name: a\n    when: position.leverage > 10\n"+tt.line+
			"    actions: [{action: lower_leverage, leverage: 5}]\n"))
		if err != nil {
			t.Fatalf("%q: %v", tt.line, err)
		}
		r := set.Rules[0]
		if r.MarginBudget != tt.amount || r.BudgetFraction != tt.fraction || r.BudgetSet != (tt.line != "") {
			t.Errorf("%q: budget %v fraction %t set %t", tt.line, r.MarginBudget, r.BudgetFraction, r.BudgetSet)
		}
		fingerprints = append(fingerprints, r.Fingerprint())
	}
	if fingerprints[0] == fingerprints[1] || fingerprints[1] == fingerprints[3] {
		t.Error("a budget set in the file does not change the fingerprint")
	}
}
