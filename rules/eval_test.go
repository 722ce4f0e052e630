package rules

import (
	"errors"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/expr-lang/expr"
)

func compiled(t testing.TB, when string) *Rule {
	t.Helper()
	r := &Rule{Name: "r", When: when}
	if err := r.Compile(); err != nil {
		t.Fatal(err)
	}
	return r
}

func filled(edit func(in *Input)) *Env {
	in := validInput()
	if edit != nil {
		edit(&in)
	}
	var e Env
	e.Fill(&in)
	return &e
}

func TestEval(t *testing.T) {
	t.Parallel()
	zeroMargin := func(in *Input) { in.Position.Margin = 0 }
	for _, tc := range []struct {
		when   string
		edit   func(in *Input)
		want   bool
		noData bool
	}{
		{"liquidationDistance < 0.05 && position.leverage > 5", nil, false, false},
		{"liquidationDistance < 0.05 && position.leverage > 5", func(in *Input) { in.IndexPrice = 93 }, true, false},
		{"position.leverage > riskLimit.maxLeverage", func(in *Input) { in.Position.Leverage = 21 }, true, false},
		{"position.leverage > riskLimit.maxLeverage / 2", nil, false, false},
		{"position.leverage >= riskLimit.maxLeverage / 2", nil, true, false},
		{"position.side * (indexPrice - position.entryPrice) >= 0", nil, true, false},
		{"position.symbol == 'XBTC' && symbol.baseName == 'BTC'", nil, true, false},
		{"position.direction == 'LONG' && !position.cross", nil, true, false},
		{"notional > 150 && leverageRatio == 0.5", nil, true, false},
		{"position.leverage % 3 == 1", nil, true, false},
		{"2 ** 3 == 8", nil, true, false},
		{"nowMillis - position.updatedAt > 0", nil, true, false},
		{"now.Year() == 2025", nil, true, false},
		// Divisions that would give ±Inf or NaN are no data, never false.
		{"position.margin / 0 < 1", nil, false, true},
		{"position.quantity / position.margin > 1", zeroMargin, false, true},
		{"position.quantity / position.margin <= 1", zeroMargin, false, true},
		{"position.margin / position.margin > 1", zeroMargin, false, true},
		{"position.leverage % (position.leverage - 10) == 0", nil, false, true},
		{"0 ** -1 > 0", nil, false, true},
		{"1 / (2 / position.margin) > 0", zeroMargin, false, true},
		// Short-circuit: a division not evaluated does not matter.
		{"false && position.quantity / position.margin > 1", zeroMargin, false, false},
	} {
		t.Run(tc.when, func(t *testing.T) {
			t.Parallel()
			r := compiled(t, tc.when)
			env := filled(tc.edit)
			got, err := r.Eval(env)
			if tc.noData {
				if !errors.Is(err, ErrNoData) {
					t.Fatalf("Eval = %v, %v; want ErrNoData", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("Eval = %v, want %v", got, tc.want)
			}
			var ev Evaluator
			if got2, err := ev.Eval(r, env); got2 != got || err != nil {
				t.Errorf("Evaluator.Eval = %v, %v; Rule.Eval gave %v", got2, err, got)
			}
		})
	}
}

func TestEvalRuntimeErrorIsNotNoData(t *testing.T) {
	t.Parallel()
	r := compiled(t, `int(position.symbol) > 1`)
	_, err := r.Eval(filled(nil))
	if err == nil || errors.Is(err, ErrNoData) {
		t.Errorf("err = %v; want a run-time error that is not ErrNoData", err)
	}
}

func TestEvalUncompiled(t *testing.T) {
	t.Parallel()
	r := &Rule{Name: "r", When: "true"}
	if _, err := r.Eval(filled(nil)); err == nil || !strings.Contains(err.Error(), "not compiled") {
		t.Errorf("err = %v", err)
	}
}

func TestCompileRejects(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ when, want string }{
		{"position.levrage > 1", "has no field levrage"},
		{"position.leverage", "expected bool"},
		{"now() > now", "not callable"},
		{"_div(1, 0) > 1", "unknown name _div"},
		{"position.margin / zz > 1", "unknown name zz"},
		{`position.margin / "x" > 1`, "mismatched types"},
		{"position.margin % 2 == 0", "mismatched types"},
		// Constructs whose cost grows with their arguments cannot be used
		// to exhaust the process (issue 12, item 13).
		{`len(reduce(1..40, #acc + #acc, "ab")) > 0`, "reduce() is not allowed"},
		{`len(repeat("x", position.leverage * 1000000)) > 0`, "repeat() is not allowed"},
		{`len(map(1..5, #)) > 0`, "map() is not allowed"},
		{`any(1..5, # > position.leverage)`, "any() is not allowed"},
		{`len(1..100000) > 0`, "at most 10000 apart"},
		{`position.leverage in 1..position.leverage`, "two integer constants"},
	} {
		r := &Rule{Name: "r", When: tc.when}
		if err := r.Compile(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Compile(%q) = %v, want %q", tc.when, err, tc.want)
		}
	}
}

func TestTargetLeverage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		expr   string
		edit   func(in *Input)
		want   int
		noData bool
	}{
		{"riskLimit.maxLeverage", nil, 20, false},
		{"riskLimit.maxLeverage / 3", nil, 6, false}, // 6.67 rounds down
		{"position.leverage / 2", nil, 5, false},
		{"5", nil, 5, false},
		{"2.999", nil, 2, false},
		{"position.margin / position.quantity", func(in *Input) { in.Position.Quantity = 0 }, 0, true},
		{"riskLimit.maxLeverage", func(in *Input) { in.HasIndex = false }, 0, true},
	} {
		a := Action{Kind: LowerLeverage, Leverage: tc.expr}
		r := &Rule{Name: "r", When: "true", Actions: []Action{a}}
		if err := r.Compile(); err != nil {
			t.Fatal(err)
		}
		got, err := r.Actions[0].TargetLeverage(filled(tc.edit))
		switch {
		case tc.noData && !errors.Is(err, ErrNoData):
			t.Errorf("%s: got %d, %v; want ErrNoData", tc.expr, got, err)
		case !tc.noData && (err != nil || got != tc.want):
			t.Errorf("%s: got %d, %v; want %d", tc.expr, got, err, tc.want)
		}
	}
	notify := Action{Kind: Notify}
	if _, err := notify.TargetLeverage(filled(nil)); err == nil {
		t.Error("notify has a target leverage")
	}
}

func TestCheckedFunctions(t *testing.T) {
	t.Parallel()
	if v, err := checkedDiv(7, 2); err != nil || v != 3.5 {
		t.Errorf("7/2 = %v, %v", v, err)
	}
	if _, err := checkedDiv(math.Inf(1), 2.0); !errors.Is(err, ErrNoData) {
		t.Errorf("Inf/2: %v", err)
	}
	if _, err := checkedDiv("a", 2); err == nil || errors.Is(err, ErrNoData) {
		t.Errorf("a/2: %v", err)
	}
	if v, err := checkedMod(math.MinInt64, -1); err != nil || v != 0 {
		t.Errorf("MinInt64 %% -1 = %v, %v", v, err)
	}
	if v, err := checkedMod(int64(7), 3); err != nil || v != 1 {
		t.Errorf("7 %% 3 = %v, %v", v, err)
	}
	if _, err := checkedPow(-8.0, 0.5); !errors.Is(err, ErrNoData) {
		t.Errorf("-8 ** 0.5: %v", err)
	}
}

// Rule.Eval may be called from several goroutines (run with -race).
func TestRuleEvalConcurrent(t *testing.T) {
	t.Parallel()
	r := compiled(t, "liquidationDistance < 0.05 && position.leverage > 5")
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			env := filled(func(in *Input) { in.IndexPrice = 90 + float64(g) })
			for range 200 {
				got, err := r.Eval(env)
				if err != nil || got != (g < 5) {
					t.Errorf("goroutine %d: %v, %v", g, got, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

const benchRule = "liquidationDistance < 0.05 && position.leverage > 10"

// benchEnv makes the condition true, so both sides are evaluated.
func benchEnv() *Env {
	return filled(func(in *Input) {
		in.IndexPrice = 93
		in.Position.Leverage = 15
	})
}

func BenchmarkRuleEval(b *testing.B) {
	r := compiled(b, benchRule)
	env := benchEnv()
	b.ReportAllocs()
	for b.Loop() {
		if ok, err := r.Eval(env); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

func BenchmarkEvaluatorEval(b *testing.B) {
	r := compiled(b, benchRule)
	env := benchEnv()
	var ev Evaluator
	b.ReportAllocs()
	for b.Loop() {
		if ok, err := ev.Eval(r, env); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

// BenchmarkBareExprRun is the reference: expr.Run of the very program
// Rule.Eval runs, on the same *Env.
func BenchmarkBareExprRun(b *testing.B) {
	r := compiled(b, benchRule)
	env := benchEnv()
	b.ReportAllocs()
	for b.Loop() {
		out, err := expr.Run(r.program, env)
		if err != nil || out != true {
			b.Fatal(out, err)
		}
	}
}

// BenchmarkRuleEvalDivision shows the cost of the checked division.
func BenchmarkRuleEvalDivision(b *testing.B) {
	r := compiled(b, "position.quantity / riskLimit.maxQuantity > 0.01")
	env := benchEnv()
	var ev Evaluator
	b.ReportAllocs()
	for b.Loop() {
		if ok, err := ev.Eval(r, env); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

func BenchmarkFill(b *testing.B) {
	in := validInput()
	var e Env
	b.ReportAllocs()
	for b.Loop() {
		e.Fill(&in)
	}
}
