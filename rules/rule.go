// Package rules reads the guard's rules from YAML, compiles their
// expressions once against a typed environment (Env), and evaluates them.
//
// A rule's `when` is an expr (github.com/expr-lang/expr) expression that must
// be boolean; an action's `leverage` and `quantity` parameters are
// expressions that must be numbers (kinds.go: the action kinds' table). Every error of a file is reported at once with its
// position: FILE:LINE:COL: rule "NAME": what is wrong.
package rules

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/expr-lang/expr/vm"
)

// Severity is how serious a firing rule is.
type Severity string

// Severities, from least to most serious.
const (
	Info     Severity = "info"
	Warning  Severity = "warning"
	Critical Severity = "critical"
)

// NoDataPolicy says what a rule does when its inputs are missing or invalid.
type NoDataPolicy string

// No-data policies. The no-data state never triggers an action; it can only
// alert.
const (
	// NoDataAlert reports the no-data state (notification, log, metric).
	NoDataAlert NoDataPolicy = "alert"
	// NoDataIgnore keeps the no-data state silent.
	NoDataIgnore NoDataPolicy = "ignore"
)

// Defaults of the optional rule fields.
const (
	// DefaultCooldown is the cooldown of a rule that does not set one: its
	// actions run at most once a minute per symbol while it keeps firing.
	DefaultCooldown = time.Minute
	// DefaultSeverity is the severity of a rule that does not set one.
	DefaultSeverity = Warning
	// DefaultOnNoData is the no-data policy of a rule that does not set one:
	// bad inputs are reported, never silently read as safe.
	DefaultOnNoData = NoDataAlert
	// DefaultMinLiquidationDistance is the floor below which no action
	// that moves a liquidation price closer is sent, even when allowed.
	DefaultMinLiquidationDistance = 0.02
	// DefaultMarginBudget is the margin budget of a rule that does not set
	// one: a share (DefaultBudgetFraction) of the free balance its
	// leverage cuts may move into one position per firing, chosen on the
	// scenario battery (README, "The margin_budget default"). margin_budget: none
	// (or 0) lifts it.
	DefaultMarginBudget   = 0.05
	DefaultBudgetFraction = true
)

// Scope says what a rule is evaluated on.
type Scope string

// Scopes.
const (
	// ScopePosition evaluates the rule on every open position (the
	// default); its state and cooldown are per position.
	ScopePosition Scope = "position"
	// ScopeAccount evaluates the rule once per tick on the account; its
	// state is the rule's own, and its actions go to its Targets.
	ScopeAccount Scope = "account"
)

// Target kinds of an account rule.
const (
	TargetAll      = "all"
	TargetCross    = "cross"
	TargetIsolated = "isolated"
	TargetRiskiest = "riskiest"
	TargetSymbols  = "symbols"
)

// Targets are the positions an account rule's actions go to.
type Targets struct {
	// Kind is one of the Target constants; "" for none.
	Kind string
	// N is how many of the riskiest positions (TargetRiskiest).
	N int
	// Symbols are the positions' symbols (TargetSymbols).
	Symbols []string
}

// String is the targets as the rules file writes them.
func (t Targets) String() string {
	switch t.Kind {
	case TargetRiskiest:
		return fmt.Sprintf("{riskiest: %d}", t.N)
	case TargetSymbols:
		return "{symbols: [" + strings.Join(t.Symbols, ", ") + "]}"
	}
	return t.Kind
}

// Set is the rules of one file, in file order.
type Set struct {
	Rules []*Rule
	// Kinds is the table of action kinds the set was parsed with; nil is
	// DefaultKinds.
	Kinds Kinds
}

// Rule is one guard rule. Parse fills and compiles it; a Rule built by hand
// must be compiled with Compile before Eval.
type Rule struct {
	// Name is unique in a Set and matches [a-z0-9-]+.
	Name        string
	Description string
	// When is the source of the boolean condition.
	When string
	// For is how long When must hold (pending) before the rule fires.
	For time.Duration
	// KeepFiringFor keeps the rule firing this long after When clears.
	KeepFiringFor time.Duration
	// Cooldown is the minimum time between two runs of the rule's actions
	// on one symbol.
	Cooldown time.Duration
	OnNoData NoDataPolicy
	// Symbols restricts the rule to these contract symbols; empty means all.
	Symbols []string
	// SymbolsAt is where each of Symbols is written, for errors about it.
	SymbolsAt []Pos
	Severity  Severity
	// AllowCloserLiquidation lets the rule's actions move its position's
	// liquidation price closer to the index (an isolation meant to
	// ring-fence the account), which the engine otherwise refuses to do;
	// never past MinLiquidationDistance.
	AllowCloserLiquidation bool
	// MinLiquidationDistance is the distance to liquidation (a fraction
	// of the index) below which an action that moves the liquidation price
	// closer is never sent.
	MinLiquidationDistance float64
	// MarginBudget bounds the free balance the rule's leverage cuts may
	// move into one position's margin per BudgetPer: an amount in the
	// quote currency, or (BudgetFraction) a fraction of the free balance.
	// Zero is no bound (margin_budget: none or 0); a rule without the key
	// gets DefaultMarginBudget.
	MarginBudget   float64
	BudgetFraction bool
	// BudgetSet: the file sets margin_budget (the fingerprint then
	// carries it, so that a rule's saved state survives the default).
	BudgetSet bool
	// BudgetPer is "firing" (each time the rule fires; the default) or
	// "day" (a UTC day).
	BudgetPer string
	// Message is an optional template for notifications, kept as text.
	Message string
	Actions []Action
	// Scope is position (the default) or account.
	Scope Scope
	// Targets are where an account rule's actions go.
	Targets Targets
	// File and Line locate the rule in its source, for messages.
	File string
	Line int

	program *vm.Program
	fast    boolFn     // nil when When is outside the fast subset
	pool    *sync.Pool // of *Evaluator, for the concurrency-safe Eval
	reads   reads
	// position lists the position-level names When reads.
	position []string
	// distanceBelow is DistanceBelow's, when hasDistanceBelow.
	distanceBelow    float64
	hasDistanceBelow bool
}

// Windows returns the rule's functions over the recent past, in the order
// the engine sets their values (Env.SetWindow).
func (r *Rule) Windows() []Window { return r.reads.windows }

// ReadsAccount reports whether the leverage expression reads the account.
func (a *Action) ReadsAccount() bool { return a.reads.account != 0 }

// ReadsAccount reports whether When reads the account.
func (r *Rule) ReadsAccount() bool { return r.reads.account != 0 }

// Account reports whether the rule is evaluated on the account.
func (r *Rule) Account() bool { return r.Scope == ScopeAccount }

// Pos is a position in a source file, 1-based.
type Pos struct {
	Line, Col int
}

// UnknownSymbols returns an error for every symbols: entry of the set
// that is not among listed (the contract symbols the exchange lists), with
// a did-you-mean: such a rule would silently guard nothing.
func (s *Set) UnknownSymbols(listed []string) []*Error {
	known := make(map[string]bool, len(listed))
	for _, n := range listed {
		known[n] = true
	}
	var out []*Error
	for _, r := range s.Rules {
		for i, sym := range r.Symbols {
			if known[sym] {
				continue
			}
			e := &Error{File: r.File, Line: r.Line, Rule: r.Name, Msg: fmt.Sprintf("symbol %q is not listed by the exchange", sym)}
			if i < len(r.SymbolsAt) {
				e.Line, e.Col = r.SymbolsAt[i].Line, r.SymbolsAt[i].Col
			}
			if hint := DidYouMean(sym, listed); hint != "" {
				e.Msg += fmt.Sprintf(" (did you mean %q?)", hint)
			}
			out = append(out, e)
		}
	}
	return out
}

// Action is one thing a firing rule does.
type Action struct {
	Kind ActionKind
	// Leverage is the source of the target leverage expression (a kind
	// that takes ParamLeverage only).
	Leverage string
	// Channels names the notification channels (notify only); empty means
	// the default ones.
	Channels []string
	// Fraction is the share of the position's quantity to reduce, in
	// (0, 1] (a kind that takes ParamAmount only; 0 when Quantity is set instead).
	Fraction float64
	// Quantity is the source of the expression giving the quantity to
	// reduce, in the base currency (a kind that takes ParamAmount only; "" when
	// Fraction is set instead).
	Quantity string

	program *vm.Program
	fast    floatFn // nil when Leverage is outside the fast subset
	reads   reads
}

// HasAction reports whether one of the rule's actions is of kind k.
func (r *Rule) HasAction(k ActionKind) bool {
	for i := range r.Actions {
		if r.Actions[i].Kind == k {
			return true
		}
	}
	return false
}

// AppliesTo reports whether the rule evaluates positions of symbol.
func (r *Rule) AppliesTo(symbol string) bool {
	return len(r.Symbols) == 0 || slices.Contains(r.Symbols, symbol)
}

// Compile compiles the rule's expressions against Env: When must be boolean
// and every action parameter a number. Parse compiles the rules it reads;
// call Compile on a Rule built by hand.
func (r *Rule) Compile() error {
	p, an, err := compileExpr(r.When, exprBool)
	if err != nil {
		return fmt.Errorf("rule %q: when: %w", r.Name, err)
	}
	for i := range r.Actions {
		a := &r.Actions[i]
		src, what := a.Leverage, "leverage"
		spec, _ := DefaultKinds().Spec(a.Kind) // a rule built by hand uses the shipped kinds
		switch {
		case spec.Params&ParamLeverage != 0 || a.Leverage != "":
		case a.Quantity != "":
			src, what = a.Quantity, "quantity"
		default:
			continue
		}
		ap, aan, err := compileExpr(src, exprNumber)
		if err == nil {
			err = a.setProgram(ap, aan, what)
		}
		if err != nil {
			return fmt.Errorf("rule %q: %s %s: %w", r.Name, a.Kind, what, err)
		}
	}
	r.setProgram(p, an)
	if err := r.checkScope(); err != nil {
		return fmt.Errorf("rule %q: %w", r.Name, err)
	}
	return nil
}

// setProgram installs the compiled condition with its native fast path and
// the evaluator pool; Parse and Compile both go through it.
func (r *Rule) setProgram(p *vm.Program, an *analysis) {
	r.program = p
	r.fast = compileFastBool(p.Node())
	r.pool = newEvaluatorPool()
	r.reads = reads{windows: an.windows, account: an.account}
	r.position = an.position
	r.distanceBelow, r.hasDistanceBelow = distanceBelow(p.Node())
}

// setProgram installs the compiled leverage expression with its fast path.
// A leverage (or a quantity) has no functions over time: they belong in
// when.
func (a *Action) setProgram(p *vm.Program, an *analysis, what string) error {
	if len(an.windows) > 0 {
		return fmt.Errorf("%s is not allowed in a %s: functions over time belong in when", an.windows[0], what)
	}
	a.program = p
	a.fast = compileFastNumber(p.Node())
	a.reads = reads{account: an.account}
	return nil
}

// checkScope checks what the rule's scope allows: an account rule's when
// reads the account only, and its actions on positions need targets; a
// position rule has no targets.
func (r *Rule) checkScope() error {
	if r.Scope != ScopeAccount {
		if r.Targets.Kind != "" {
			return errors.New("targets: only an account rule (scope: account) has targets; a position rule acts on its position")
		}
		return nil
	}
	if len(r.position) > 0 {
		return fmt.Errorf("when: an account rule (scope: account) reads the account only; %s belong to a position (use account.minLiquidationDistance, account.riskiestSymbol, …)", strings.Join(r.position, ", "))
	}
	if len(r.Symbols) > 0 {
		return errors.New("symbols: an account rule has no symbols; its targets say where its actions go")
	}
	for _, a := range r.Actions {
		if a.Kind != Notify && r.Targets.Kind == "" {
			return fmt.Errorf("%s: an account rule needs targets (all, cross, isolated, {riskiest: N} or {symbols: [...]}) for its actions on positions", a.Kind)
		}
	}
	return nil
}

func newEvaluatorPool() *sync.Pool {
	return &sync.Pool{New: func() any { return new(Evaluator) }}
}

// Eval evaluates When against env. It is safe for concurrent use; an engine
// evaluating from one goroutine saves a little with its own Evaluator.
// errors.Is(err, ErrNoData) when env has no data or the expression produced
// a non-finite number; any other error is a run-time failure of the rule.
func (r *Rule) Eval(env *Env) (bool, error) {
	if r.pool == nil {
		return false, fmt.Errorf("rule %q: not compiled", r.Name)
	}
	ev := r.pool.Get().(*Evaluator)
	ok, err := ev.Eval(r, env)
	r.pool.Put(ev)
	return ok, err
}

// TargetLeverage evaluates the action's leverage target against env and rounds
// it down to an integer (the more conservative side). The result must be a
// finite number: NaN or ±Inf is ErrNoData. The caller clamps it to
// 1..current leverage.
func (a *Action) TargetLeverage(env *Env) (int, error) {
	var ev Evaluator
	return ev.TargetLeverage(a, env)
}

// Fingerprint identifies what the rule does: rules with the same name,
// condition, timings, no-data policy, symbols, severity and actions have the
// same fingerprint, so a reload keeps the state of unchanged rules.
// Description, message and position in the file do not count.
func (r *Rule) Fingerprint() string {
	var b strings.Builder
	field := func(s string) {
		b.WriteString(strconv.Quote(s))
		b.WriteByte(' ')
	}
	field(r.Name)
	field(r.When)
	field(r.For.String())
	field(r.KeepFiringFor.String())
	field(r.Cooldown.String())
	field(string(r.OnNoData))
	field(string(r.Severity))
	if r.AllowCloserLiquidation || r.MinLiquidationDistance != DefaultMinLiquidationDistance {
		// Only when set, so that the state saved by a version without
		// these keys still matches.
		field(strconv.FormatBool(r.AllowCloserLiquidation))
		field(strconv.FormatFloat(r.MinLiquidationDistance, 'g', -1, 64))
	}
	if r.BudgetSet {
		field(strconv.FormatFloat(r.MarginBudget, 'g', -1, 64))
		field(strconv.FormatBool(r.BudgetFraction))
		field(r.BudgetPer)
	}
	if r.Scope == ScopeAccount {
		field(string(r.Scope))
		field(r.Targets.String())
	}
	field(strconv.Itoa(len(r.Symbols)))
	for _, s := range r.Symbols {
		field(s)
	}
	field(strconv.Itoa(len(r.Actions)))
	for _, a := range r.Actions {
		field(string(a.Kind))
		field(a.Leverage)
		if a.Fraction != 0 || a.Quantity != "" { // an amount (ParamAmount)
			field(strconv.FormatFloat(a.Fraction, 'g', -1, 64))
			field(a.Quantity)
		}
		field(strconv.Itoa(len(a.Channels)))
		for _, c := range a.Channels {
			field(c)
		}
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:16])
}
