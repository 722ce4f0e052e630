package rules

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"
)

// Evaluator evaluates compiled rules: through their Go closures when the
// expression is in the fast subset (see fast.go), which allocates nothing,
// otherwise with one reused expr virtual machine. It is not safe for
// concurrent use: give each goroutine its own (the zero value is ready to
// use).
type Evaluator struct {
	vm vm.VM
}

// Eval evaluates r's condition against env; see Rule.Eval for the errors.
func (ev *Evaluator) Eval(r *Rule, env *Env) (bool, error) {
	if reason := env.NoData(); reason != "" {
		return false, &NoDataError{Reason: reason}
	}
	if r.program != nil {
		if err := r.reads.known(env); err != nil {
			return false, err
		}
	}
	return ev.EvalPrechecked(r, env)
}

// EvalPrechecked is Eval for a caller that has checked that env has data
// (env.NoData() is "") and that every windowed term and account field the
// rule reads is known (r.Missing(env) is ""): it skips those two checks,
// which cost as much as a typical expression, and is otherwise Eval. A
// rule without windows that does not read the account (len(r.Windows())
// is 0 and r.ReadsAccount() false) never misses anything.
func (ev *Evaluator) EvalPrechecked(r *Rule, env *Env) (bool, error) {
	// Small enough to be inlined: the closure of a compiled rule's fast
	// path (a rule with one was compiled), else the VM.
	if r.fast != nil {
		if b, ok := r.fast(env); ok {
			return b, nil
		}
	}
	return ev.run(r, env)
}

// FastPath returns the rule's compiled fast path (see fast.go), or nil when
// its expression is outside the fast subset. The function answers (v, true)
// with the value of When, or (_, false) where it cannot (no data inside the
// expression): EvalPrechecked (or Eval) must then run, and reports it. It
// does none of Eval's checks: call it only as EvalPrechecked may be called.
func (r *Rule) FastPath() func(*Env) (bool, bool) {
	if r.fast == nil {
		return nil
	}
	return r.fast
}

// run evaluates r with the VM: a rule outside the fast subset, or one whose
// fast path met no data inside the expression (the VM reports it, with the
// same error and position as for any other expression).
func (ev *Evaluator) run(r *Rule, env *Env) (bool, error) {
	if r.program == nil {
		return false, fmt.Errorf("rule %q: not compiled", r.Name)
	}
	out, err := ev.vm.Run(r.program, env)
	if err != nil {
		return false, fmt.Errorf("rule %q: %w", r.Name, err)
	}
	b, ok := out.(bool)
	if !ok {
		return false, fmt.Errorf("rule %q: when gave %T, not bool", r.Name, out)
	}
	return b, nil
}

// TargetLeverage evaluates a's leverage expression; see
// Action.TargetLeverage.
func (ev *Evaluator) TargetLeverage(a *Action, env *Env) (int, error) {
	if a.Leverage == "" {
		return 0, fmt.Errorf("%s has no leverage", a.Kind)
	}
	f, err := ev.number(a, env, "leverage", "target leverage")
	if err != nil {
		return 0, err
	}
	if f >= math.MaxInt32 || f <= math.MinInt32 {
		return 0, fmt.Errorf("leverage %g out of range", f)
	}
	return int(math.Floor(f)), nil
}

// ReduceQuantity evaluates an action's quantity expression (ParamAmount): a
// finite number (NaN or ±Inf is ErrNoData). The caller rounds it to the
// symbol's increment and bounds it by the position.
func (ev *Evaluator) ReduceQuantity(a *Action, env *Env) (float64, error) {
	if a.Quantity == "" {
		return 0, fmt.Errorf("%s has no quantity expression", a.Kind)
	}
	return ev.number(a, env, "quantity", "quantity")
}

// number evaluates a's expression (an action's leverage or quantity, named
// what in errors and, when it is not finite, said as the no data of
// noData): on no data in env, ErrNoData; through its fast path when it has
// one, else on the VM; a finite number.
func (ev *Evaluator) number(a *Action, env *Env, what, noData string) (float64, error) {
	if reason := env.NoData(); reason != "" {
		return 0, &NoDataError{Reason: reason}
	}
	if a.program == nil {
		return 0, fmt.Errorf("%s: not compiled", what)
	}
	if err := a.reads.known(env); err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	f, ok := 0.0, false
	if a.fast != nil {
		f, ok = a.fast(env)
	}
	if !ok {
		out, err := ev.vm.Run(a.program, env)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", what, err)
		}
		if f, ok = toFloat(out); !ok {
			return 0, fmt.Errorf("%s gave %T, not a number", what, out)
		}
	}
	if !finite(f) {
		return 0, fmt.Errorf("%s: %w", what, &NoDataError{Reason: noData + " is not finite"})
	}
	return f, nil
}

// exprKind is the type an expression must have.
type exprKind int

const (
	exprBool exprKind = iota
	exprNumber
)

// Names of the checked arithmetic functions the compiler substitutes for
// the operators that can yield ±Inf or NaN. Expressions cannot call them:
// they exist only in the second, patched compilation.
const (
	fnDiv = "_div"
	fnMod = "_mod"
	fnPow = "_pow"
)

// compileExpr compiles src against Env. Division, modulo and power go
// through checked functions, so a division by zero or a non-finite result
// is ErrNoData instead of an Inf or NaN that a comparison would silently
// read as false (or true).
func compileExpr(src string, kind exprKind) (p *vm.Program, an *analysis, err error) {
	defer func() {
		// The compiler has panicked on odd input in the past; an error
		// on one expression must not take the loader down.
		if r := recover(); r != nil {
			p, an, err = nil, nil, fmt.Errorf("expression rejected by the compiler: %v", r)
		}
	}()
	opts := []expr.Option{
		expr.Env(Env{}),
		// now() reads the wall clock; rules use the env's `now`, the
		// tick's time, so that backtests replay exactly.
		expr.DisableBuiltin("now"),
	}
	opts = append(opts, windowFunctions()...)
	switch kind {
	case exprBool:
		opts = append(opts, expr.AsBool())
	case exprNumber:
		opts = append(opts, expr.AsFloat64())
	}
	// First as written, for the type checker's verdict: arguments of a
	// function taking any are checked less strictly than operands, so
	// an error hidden under a patched division would go unnoticed.
	checked, err := expr.Compile(src, opts...)
	if err != nil {
		return nil, nil, err
	}
	if err := boundedCost(checked.Node()); err != nil {
		return nil, nil, err
	}
	an, err = analyse(checked.Node())
	if err != nil {
		return nil, nil, err
	}
	an.resolve()
	opts = append(opts,
		expr.Function(fnDiv, checkedDiv, new(func(any, any) float64)),
		expr.Function(fnMod, checkedMod, new(func(any, any) int)),
		expr.Function(fnPow, checkedPow, new(func(any, any) float64)),
		expr.Patch(windowPatch{windows: an.windows}),
		expr.Patch(checkedArith{}),
	)
	p, err = expr.Compile(src, opts...)
	return p, an, err
}

// reads is what an expression reads beyond the position: its windowed
// terms and its account fields, each checked for data before it runs.
type reads struct {
	windows []Window
	account AccountField
}

// Missing says what r's condition reads that has no value in env — a
// function over time or an account field, and why — without evaluating
// it; "" when nothing is missing. The engine asks it first, so that a
// rule without data costs no error value.
func (r *Rule) Missing(env *Env) (of, why string) {
	for j := range r.reads.windows {
		if why := env.windowWhy[j]; why != "" {
			return r.reads.windows[j].label, why
		}
	}
	if r.reads.account&env.Account.unknown != 0 {
		return env.Account.whyUnknown(r.reads.account)
	}
	return "", ""
}

// known returns a *NoDataError when a windowed term or an account field
// the expression reads has no value in env.
func (r *reads) known(env *Env) error {
	for j := range r.windows {
		if why := env.windowWhy[j]; why != "" {
			return &NoDataError{Reason: why, Of: r.windows[j].label}
		}
	}
	if r.account&env.Account.unknown != 0 {
		of, why := env.Account.whyUnknown(r.account)
		return &NoDataError{Reason: why, Of: of}
	}
	return nil
}

// checkedArith replaces a / b, a % b and a ** b (a ^ b) with calls to the
// checked functions when both operands are numbers (or of unknown type).
// Other operand types are left alone so the type checker reports them.
type checkedArith struct{}

func (checkedArith) Visit(node *ast.Node) {
	b, ok := (*node).(*ast.BinaryNode)
	if !ok {
		return
	}
	var fn string
	switch b.Operator {
	case "/":
		if !numberOrUnknown(b.Left.Type()) || !numberOrUnknown(b.Right.Type()) {
			return
		}
		fn = fnDiv
	case "%":
		if !intOrUnknown(b.Left.Type()) || !intOrUnknown(b.Right.Type()) {
			return
		}
		fn = fnMod
	case "**", "^":
		if !numberOrUnknown(b.Left.Type()) || !numberOrUnknown(b.Right.Type()) {
			return
		}
		fn = fnPow
	default:
		return
	}
	ast.Patch(node, &ast.CallNode{
		Callee:    &ast.IdentifierNode{Value: fn},
		Arguments: []ast.Node{b.Left, b.Right},
	})
}

func numberOrUnknown(t reflect.Type) bool {
	if t == nil {
		return true
	}
	switch t.Kind() {
	case reflect.Interface, reflect.Float32, reflect.Float64:
		return true
	}
	return intOrUnknown(t)
}

func intOrUnknown(t reflect.Type) bool {
	if t == nil {
		return true
	}
	switch t.Kind() {
	case reflect.Interface,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

func checkedDiv(args ...any) (any, error) {
	x, y, err := floatArgs("/", args)
	if err != nil {
		return nil, err
	}
	if y == 0 {
		return nil, &NoDataError{Reason: "division by zero"}
	}
	return finiteResult(x / y)
}

func checkedPow(args ...any) (any, error) {
	x, y, err := floatArgs("**", args)
	if err != nil {
		return nil, err
	}
	return finiteResult(math.Pow(x, y))
}

func checkedMod(args ...any) (any, error) {
	if len(args) != 2 {
		return nil, errors.New("%: want 2 operands")
	}
	x, okx := toInt(args[0])
	y, oky := toInt(args[1])
	if !okx || !oky {
		return nil, fmt.Errorf("invalid operation: %T %% %T", args[0], args[1])
	}
	if y == 0 {
		return nil, &NoDataError{Reason: "modulo by zero"}
	}
	if y == -1 {
		return 0, nil // x % -1 is 0; avoids the MinInt64 overflow trap
	}
	return int(x % y), nil
}

func floatArgs(op string, args []any) (float64, float64, error) {
	if len(args) != 2 {
		return 0, 0, fmt.Errorf("%s: want 2 operands", op)
	}
	x, okx := toFloat(args[0])
	y, oky := toFloat(args[1])
	if !okx || !oky {
		return 0, 0, fmt.Errorf("invalid operation: %T %s %T", args[0], op, args[1])
	}
	if !finite(x) || !finite(y) {
		return 0, 0, &NoDataError{Reason: "operand is not a finite number"}
	}
	return x, y, nil
}

func finiteResult(f float64) (any, error) {
	if !finite(f) {
		return nil, &NoDataError{Reason: "result is not a finite number"}
	}
	return f, nil
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	}
	if i, ok := toInt(v); ok {
		return float64(i), true
	}
	return 0, false
}

func toInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint:
		return int64(x), true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		return int64(x), true
	}
	return 0, false
}

// unboundedBuiltins are the builtins whose cost grows with their
// arguments: a rule using them could exhaust the process on a tick
// (reduce doubling a string forty times is a terabyte). A rule reads one
// position's figures and needs none of them.
var unboundedBuiltins = []string{"all", "any", "none", "one", "filter", "map", "find", "findIndex", "findLast",
	"findLastIndex", "count", "sum", "groupBy", "sortBy", "reduce", "repeat", "mean", "median", "sort", "flatten",
	"uniq", "concat", "keys", "values", "join", "split", "splitAfter", "toPairs", "fromPairs", "reverse", "take"}

// maxRange is the largest range a rule may write.
const maxRange = 10000

// boundedCost rejects the constructs whose evaluation cost is not bounded
// by the expression's size: the unbounded builtins, ranges (1..n), and
// predicates over collections.
func boundedCost(root ast.Node) (err error) {
	ast.Walk(&root, costVisitor{err: &err})
	return err
}

type costVisitor struct{ err *error }

func (v costVisitor) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.BuiltinNode:
		// Visited after its arguments: it names the builtin, which says
		// more than a predicate inside it.
		if slices.Contains(unboundedBuiltins, n.Name) {
			*v.err = fmt.Errorf("%s() is not allowed in a rule: its cost grows with its arguments, and a rule must not be able to exhaust the guard", n.Name)
		}
	case *ast.BinaryNode:
		if n.Operator != ".." || *v.err != nil {
			return
		}
		// A range of two integer constants is bounded (position.leverage
		// in 1..10); any other could be as large as its operands.
		lo, ok1 := n.Left.(*ast.IntegerNode)
		hi, ok2 := n.Right.(*ast.IntegerNode)
		if !ok1 || !ok2 || hi.Value-lo.Value > maxRange {
			*v.err = fmt.Errorf("a range in a rule must be between two integer constants at most %d apart: its size must be bounded", maxRange)
		}
	case *ast.PredicateNode:
		if *v.err != nil {
			return
		}
		*v.err = errors.New("predicates over collections are not allowed in a rule: their cost has no bound")
	}
}
