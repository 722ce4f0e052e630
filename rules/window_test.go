package rules

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestWindowsCompiled(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		when string
		want []string // the rule's windows, in order
	}{
		{`change(indexPrice, "5m") < -0.04`, []string{`change(indexPrice, "5m")`}},
		{`min_over_time(liquidationDistance, "10m") < 0.05 && max_over_time(indexPrice, "1h") > 0`,
			[]string{`min_over_time(liquidationDistance, "10m")`, `max_over_time(indexPrice, "1h")`}},
		{`rate(position.margin, "1m") < 0`, []string{`rate(position.margin, "1m")`}},
		{`drawdown(account.equity, "24h") > 0.1`, []string{`drawdown(account.equity, "24h")`}},
		{`drawdown(account.equity, "2d") > 0.1`, []string{`drawdown(account.equity, "48h")`}},
		{`timeToLiquidation < 600`, []string{"timeToLiquidation"}},
		{`change(indexPrice, "5m") < -0.04 || change(indexPrice, "5m") > 0.04`, []string{`change(indexPrice, "5m")`}},
		{`position.leverage > 10`, nil},
	} {
		r := &Rule{Name: "r", When: tc.when}
		if err := r.Compile(); err != nil {
			t.Errorf("Compile(%q): %v", tc.when, err)
			continue
		}
		var got []string
		for _, w := range r.Windows() {
			got = append(got, w.String())
		}
		if strings.Join(got, ";") != strings.Join(tc.want, ";") {
			t.Errorf("%q: windows %q, want %q", tc.when, got, tc.want)
		}
		if r.fast == nil {
			t.Errorf("%q: not on the fast path", tc.when)
		}
	}
}

func TestWindowsRejected(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ when, want string }{
		{`change(indexPrice, 5) > 0`, `change: the window must be a literal such as "5m"`},
		{`change(indexPrice, "soon") > 0`, `window "soon": expected a duration`},
		{`change(indexPrice, "8d") > 0`, "at most 168h"},
		{`change(indexPrice, "-5m") > 0`, "must be above 0"},
		{`change(position.direction, "5m") > 0`, "is not a number of the environment"},
		{`change(indexPrice * 2, "5m") > 0`, "change(series, \"window\")"},
		{`change(timeToLiquidation, "5m") > 0`, "is not a series"},
		{`_windows[0] > 0`, "unknown name _windows"},
		{`chnage(indexPrice, "5m") > 0`, "unknown name chnage"},
	} {
		r := &Rule{Name: "r", When: tc.when}
		if err := r.Compile(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Compile(%q) = %v, want %q", tc.when, err, tc.want)
		}
	}
	// check says the names in the rule's terms, with a did-you-mean.
	_, err := Parse("r.yaml", []byte("rules:\n  - name: r\n    when: chnage(indexPrice, \"5m\") < 0 && account.equty > 0\n"))
	for _, want := range []string{"unknown name chnage (did you mean change?)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("check: %v, want %q", err, want)
		}
	}
	_, err = Parse("r.yaml", []byte("rules:\n  - name: r\n    when: account.equty > 0\n"))
	if err == nil || !strings.Contains(err.Error(), "unknown field account.equty (did you mean account.equity?)") {
		t.Errorf("check: %v, want a did-you-mean for account.equty", err)
	}
	r := &Rule{Name: "r", When: "true", Actions: []Action{{Kind: LowerLeverage, Leverage: `position.leverage * (1 + change(indexPrice, "5m"))`}}}
	if err := r.Compile(); err == nil || !strings.Contains(err.Error(), "functions over time belong in when") {
		t.Errorf("a window in a leverage: %v", err)
	}
}

// A windowed term's value comes from the engine; without one it is no
// data, never false.
func TestWindowsEval(t *testing.T) {
	t.Parallel()
	r := &Rule{Name: "r", When: `change(indexPrice, "5m") < -0.04 && timeToLiquidation < 600`}
	if err := r.Compile(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		change, ttl float64
		changeWhy   string
		want        bool
		noData      string
	}{
		{"both true", -0.05, 300, "", true, ""},
		{"slow drop", -0.01, 300, "", false, ""},
		{"far from liquidation", -0.05, 3600, "", false, ""},
		{"window half empty", 0, 300, "less than half the window has data", false, `change(indexPrice, "5m"): less than half the window has data`},
	} {
		env := filled(nil)
		env.SetWindow(0, tc.change, tc.changeWhy)
		env.SetWindow(1, tc.ttl, "")
		var ev Evaluator
		got, err := ev.Eval(r, env)
		var nd *NoDataError
		switch {
		case tc.noData != "":
			if !errors.As(err, &nd) || nd.Of+": "+nd.Reason != tc.noData {
				t.Errorf("%s: err %v, want no data %q", tc.name, err, tc.noData)
			}
		case err != nil || got != tc.want:
			t.Errorf("%s: %t, %v; want %t", tc.name, got, err, tc.want)
		}
	}
}

func TestAccountFields(t *testing.T) {
	t.Parallel()
	r := &Rule{Name: "r", When: `account.marginRatio > 0.8 && account.positions >= 2`}
	if err := r.Compile(); err != nil {
		t.Fatal(err)
	}
	if !r.ReadsAccount() || r.fast == nil {
		t.Fatalf("reads account %t, fast %t", r.ReadsAccount(), r.fast != nil)
	}
	env := filled(nil)
	env.Account = Account{MarginRatio: 0.85, Positions: 3}
	if ok, err := r.Eval(env); !ok || err != nil {
		t.Errorf("known: %t, %v", ok, err)
	}
	env.Account.SetUnknown(AccountMarginRatio|AccountEquity, "the free balance cannot be inferred without a cross position")
	if _, err := r.Eval(env); !errors.Is(err, ErrNoData) || !strings.Contains(err.Error(), "free balance cannot be inferred") {
		t.Errorf("unknown margin ratio: %v, want no data", err)
	}
	// A field the rule does not read does not matter.
	other := &Rule{Name: "o", When: `account.positions >= 2`}
	if err := other.Compile(); err != nil {
		t.Fatal(err)
	}
	if ok, err := other.Eval(env); !ok || err != nil {
		t.Errorf("a known field next to an unknown one: %t, %v", ok, err)
	}
}

func TestAccountRules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"cancel everything", `rules:
  - name: margin-call
    scope: account
    when: account.marginRatio > 0.8
    targets: all
    actions:
      - action: cancel_orders
`, ""},
		{"halve the riskiest", `rules:
  - name: halve
    scope: account
    when: account.minLiquidationDistance < 0.05
    targets: {riskiest: 2}
    actions:
      - action: lower_leverage
        leverage: position.leverage / 2
`, ""},
		{"some symbols", `rules:
  - name: isolate
    scope: account
    when: drawdown(account.equity, "1h") > 0.2
    targets: {symbols: [XBTC, XETH]}
    actions:
      - action: set_isolated
`, ""},
		{"reads a position", `rules:
  - name: bad
    scope: account
    when: account.marginRatio > 0.8 && position.leverage > 5
    targets: all
`, `4:11: rule "bad": when: an account rule (scope: account) reads the account only; position belong to a position`},
		{"no targets", `rules:
  - name: bad
    scope: account
    when: account.marginRatio > 0.8
    actions:
      - action: cancel_orders
`, `3:12: rule "bad": cancel_orders: an account rule needs targets`},
		{"targets on a position rule", `rules:
  - name: bad
    when: position.leverage > 5
    targets: all
`, `4:14: rule "bad": targets: only an account rule`},
		{"bad targets", `rules:
  - name: bad
    scope: account
    when: account.marginRatio > 0.8
    targets: {riskest: 2}
`, `5:15: rule "bad": targets: unknown key "riskest" (did you mean "riskiest"?)`},
		{"bad scope", `rules:
  - name: bad
    scope: acount
    when: account.marginRatio > 0.8
`, `3:12: rule "bad": scope`},
	} {
		set, err := Parse("r.yaml", []byte(tc.yaml))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want == "" && !set.Rules[0].Account():
			t.Errorf("%s: not an account rule", tc.name)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// An account rule's environment has the account and the time, and no
// position: its when is evaluated without one.
func TestAccountRuleEval(t *testing.T) {
	t.Parallel()
	set, err := Parse("r.yaml", []byte("rules:\n  - name: a\n    scope: account\n    when: account.leverage > 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	var env Env
	env.FillAccount(&Account{Leverage: 4}, time.Unix(0, 0))
	if ok, err := set.Rules[0].Eval(&env); !ok || err != nil {
		t.Errorf("account rule: %t, %v", ok, err)
	}
}
