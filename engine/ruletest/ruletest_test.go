package ruletest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/rules"
)

// loadRules reads a rules file with no engine settings.
func loadRules(path string) (*rules.Set, *engine.Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	set, err := rules.Parse(path, b)
	return set, nil, err
}

const testRules = `rules:
  - name: over-max
    when: position.leverage > riskLimit.maxLeverage
    actions:
      - action: lower_leverage
        leverage: riskLimit.maxLeverage
  - name: near
    when: liquidationDistance < 0.05
    for: 3s
    actions:
      - action: cancel_orders
      - action: notify
`

const testScenario = `    scenario:
      currencies: [USDT, SOL]
      contracts:
        - {name: XSOL, base: SOL, quote: USDT, riskLimit: {maxLeverage: 10, maintenanceMarginRate: 0.02}}
      balance: 5000
      positions:
        - {symbol: XSOL, quantity: 100, entryPrice: 100, leverage: 12}
      openOrders: {XSOL: 3}
`

// writeSuite writes the rules and a test file into a temporary directory
// and returns the test file's path.
func writeSuite(t *testing.T, test string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(testRules), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "rules.test.yaml")
	if err := os.WriteFile(path, []byte(test), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestExpandSeries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want string // at=price pairs
	}{
		{"150", "0s=150"},
		{"150 149 148x3", "0s=150 1s=149 2s=148 3s=148 4s=148 5s=148"},
		{"100+2x2", "0s=100 1s=102 2s=104"},
		{"100-0.5x2 _ 90", "0s=100 1s=99.5 2s=99 4s=90"},
		{"1.5e2", "0s=150"},
	}
	for _, tt := range tests {
		pts, err := ExpandSeries(tt.in, time.Second)
		if err != nil {
			t.Errorf("ExpandSeries(%q): %v", tt.in, err)
			continue
		}
		var got []string
		for _, p := range pts {
			got = append(got, p.At.String()+"="+p.Price.String())
		}
		if g := strings.Join(got, " "); g != tt.want {
			t.Errorf("ExpandSeries(%q) = %s, want %s", tt.in, g, tt.want)
		}
	}
	for _, bad := range []string{"abc", "10x", "10x-1", "10+x3", "1-1x3", "0", "10+1"} {
		if _, err := ExpandSeries(bad, time.Second); err == nil {
			t.Errorf("ExpandSeries(%q): no error", bad)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	head := "rule_files: [rules.yaml]\ntests:\n  - name: t\n"
	tests := []struct {
		name, file, want string
	}{
		{"empty", "", ":1:1: empty file"},
		{"syntax", "rule_files: [a\n", "invalid YAML"},
		{"unknown top key", "rule_file: [rules.yaml]\ntests: []\n", `:1:1: test file: unknown key "rule_file" (did you mean "rule_files"?)`},
		{"no tests", "rule_files: [rules.yaml]\n", "tests: a non-empty list of tests is required"},
		{"no expect", head + "    scenario: default\n", `:3:5: test "t": expect: a non-empty list`},
		{"at off the interval", head + "    scenario: default\n    expect:\n      - at: 1500ms\n", `:6:13: test "t": expect: at 1.5s is not a multiple of the interval 1s`},
		{"bad series", head + "    scenario: default\n    input_series: {SOL: '150 1x'}\n    expect: [{at: 0s}]\n", `:5:25: test "t": input_series SOL: "1x"`},
		{"scenario field", head + "    scenario:\n      currencies: [USDT]\n      balanse: 1\n    expect: [{at: 0s}]\n", `:6:7: test "t": scenario: unknown key "balanse" (did you mean "balance"?)`},
		{"nested scenario field", head + "    scenario:\n      positions:\n        - {symbol: X, levrage: 2}\n    expect: [{at: 0s}]\n", `:6:23: test "t": scenario.positions[0]: unknown key "levrage"`},
		{"entry field", head + "    scenario: default\n    expect:\n      - at: 0s\n        firing: [{rule: a, sym: X}]\n", `:7:28: test "t": expect at 0s: firing: unknown key "sym" (known: rule, symbol)`},
		{"entry type", head + "    scenario: default\n    expect:\n      - at: 0s\n        actions: [{leverage: ten}]\n", `test "t": expect at 0s: actions: leverage: expected an integer, got the string "ten"`},
		{"nothing to check", head + "    scenario: default\n    expect: [{at: 2s}]\n", `:5:14: test "t": expect at 2s: nothing to check: give firing, pending`},
		{"list not a list", head + "    scenario: default\n    expect:\n      - at: 0s\n        firing: none\n", `expected a list (write [] for none)`},
		{"duplicate test", head + "    scenario: default\n    expect: [{at: 0s}]\n  - name: t\n    scenario: default\n    expect: [{at: 0s}]\n", `test "t": duplicate test name`},
		{"missing rules", "rule_files: [nowhere.yaml]\ntests:\n  - name: t\n    scenario: default\n    expect: [{at: 0s, firing: []}]\n", "rule file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load(writeSuite(t, tt.file), loadRules)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error:\n%v\nwant it to contain %q", err, tt.want)
			}
			var list *rules.ErrorList
			if tt.name != "missing rules" && !errors.As(err, &list) {
				t.Errorf("error %T is not a *rules.ErrorList", err)
			}
		})
	}
}

func TestRunPassesAndFails(t *testing.T) {
	t.Parallel()
	file := "rule_files: [rules.yaml]\nevaluation_interval: 1s\ntests:\n  - name: lowered\n" + testScenario + `    input_series:
      SOL: '100x4 93'
    expect:
      - at: 0s
        firing: [{rule: over-max, symbol: XSOL}]
        actions: [{action: lower_leverage, symbol: XSOL, from: 12, leverage: 10, outcome: sent}]
      - at: 1s
        firing: []
        actions: []
      - at: 5s
        pending: [{rule: near, symbol: XSOL}]
      - at: 8s
        firing: [{rule: near}]
        actions: [{action: cancel_orders, rules: [near]}]
        notifications: [{rule: near, symbol: XSOL}]
        liquidations: []
  - name: wrong
` + testScenario + `    input_series: {SOL: '100'}
    expect:
      - at: 0s
        firing: [{rule: near, symbol: XSOL}]
        actions: [{action: lower_leverage, leverage: 5}]
`
	s, err := Load(writeSuite(t, file), loadRules)
	if err != nil {
		t.Fatal(err)
	}
	res := s.Run(context.Background(), nil)
	if len(res) != 2 {
		t.Fatalf("%d results, want 2", len(res))
	}
	if !res[0].Passed() {
		var b strings.Builder
		Report(&b, res[:1])
		t.Errorf("test %q failed:\n%s", res[0].Test, b.String())
	}
	if res[1].Passed() {
		t.Fatalf("test %q passed, want failures", res[1].Test)
	}
	var b strings.Builder
	run, failed := Report(&b, res)
	if run != 2 || failed != 1 {
		t.Errorf("Report = %d run, %d failed, want 2, 1", run, failed)
	}
	out := b.String()
	for _, want := range []string{
		`rules.test.yaml:40: test "wrong" at 0s: firing`,
		"    expected: [{rule: near, symbol: XSOL}]\n    got:      [{rule: over-max, symbol: XSOL}]\n",
		"    - missing:    {rule: near, symbol: XSOL}\n    + unexpected: {rule: over-max, symbol: XSOL}\n",
		`test "wrong" at 0s: actions`,
		"    - missing:    {action: lower_leverage, leverage: 5}\n",
		"    + unexpected: {action: lower_leverage, symbol: XSOL, leverage: 10, from: 12, cross: false, rules: [over-max], outcome: sent}\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}

	only := s.Run(context.Background(), func(n string) bool { return n == "wrong" })
	if len(only) != 1 || only[0].Test != "wrong" {
		t.Errorf("filtered run = %v, want the one test", only)
	}
}

func TestRunScenarioErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, series, want string
	}{
		{"contract name", "XSOL: '100'", "input_series XSOL: name the index, not the contract: the index of XSOL is SOL"},
		{"unknown index", "DOGE: '1'", "input_series DOGE: no contract of the scenario is priced by index DOGE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			file := "rule_files: [rules.yaml]\ntests:\n  - name: t\n" + testScenario + "    input_series: {" + tt.series + "}\n    expect: [{at: 0s, firing: []}]\n"
			s, err := Load(writeSuite(t, file), loadRules)
			if err != nil {
				t.Fatal(err)
			}
			res := s.Run(context.Background(), nil)
			if res[0].Err == nil || !strings.Contains(res[0].Err.Error(), tt.want) {
				t.Errorf("error %v, want %q", res[0].Err, tt.want)
			}
		})
	}
}

func TestMatchPrefersAPerfectPairing(t *testing.T) {
	t.Parallel()
	// The loose entry fits both items; the strict one only the first. A
	// greedy pairing would give the first item to the loose entry.
	want := []Entry{
		{Fields: map[string]string{"rule": "a"}},
		{Fields: map[string]string{"rule": "a", "symbol": "X"}},
	}
	got := []map[string]string{{"rule": "a", "symbol": "X"}, {"rule": "a", "symbol": "Y"}}
	missing, unexpected := match(want, got)
	if len(missing) != 0 || len(unexpected) != 0 {
		t.Errorf("missing %v, unexpected %v, want none", missing, unexpected)
	}
	missing, unexpected = match(want[1:], got)
	if !slices.Equal(missing, []int(nil)) || !slices.Equal(unexpected, []int{1}) {
		t.Errorf("missing %v, unexpected %v, want none and [1]", missing, unexpected)
	}
}

// The example test file is run by cmd's tests through loadConfig; this
// one checks the rules-file loader path of a test that reads its scenario
// from a file.
func TestScenarioFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sc := "currencies: [USDT, SOL]\ncontracts:\n  - {name: XSOL, base: SOL, quote: USDT, riskLimit: {maxLeverage: 10, maintenanceMarginRate: 0.02}}\n" +
		"balance: 10\npositions:\n  - {symbol: XSOL, quantity: 1, entryPrice: 100, leverage: 20}\nindexes:\n  - {name: SOL, points: [{price: 100}]}\n"
	if err := os.WriteFile(filepath.Join(dir, "sc.yaml"), []byte(sc), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(testRules), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "t.yaml")
	test := "rule_files: rules.yaml\ntests:\n  - name: file\n    scenario: sc.yaml\n    expect:\n      - at: 0s\n        firing: [{rule: over-max, symbol: XSOL}]\n"
	if err := os.WriteFile(path, []byte(test), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Load(path, loadRules)
	if err != nil {
		t.Fatal(err)
	}
	if res := s.Run(context.Background(), nil); !res[0].Passed() {
		var b strings.Builder
		Report(&b, res)
		t.Errorf("failed:\n%s", b.String())
	}
}
