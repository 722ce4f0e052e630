package rules

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
)

// Functions over the recent past. Each takes a series — a numeric field of
// the environment such as indexPrice, liquidationDistance or
// account.equity — and a window literal such as "5m"; the engine keeps the
// series' recent values and computes them before the rule is evaluated.
// A window less than half covered by samples is no data, never false.
const (
	// FnChange is the fractional change over the window:
	// (now − oldest) / oldest.
	FnChange = "change"
	// FnMinOverTime is the lowest value in the window.
	FnMinOverTime = "min_over_time"
	// FnMaxOverTime is the highest value in the window.
	FnMaxOverTime = "max_over_time"
	// FnRate is the change per second over the window.
	FnRate = "rate"
	// FnDrawdown is the fraction below the window's peak: (peak − now) / peak.
	FnDrawdown = "drawdown"
	// FnTimeToLiquidation is the environment's timeToLiquidation: seconds
	// until liquidationDistance reaches 0 at its velocity over the last
	// minute; no data when it is not shrinking.
	FnTimeToLiquidation = "timeToLiquidation"
)

// windowFns are the functions a rule may call, with the window.
var windowFns = []string{FnChange, FnMinOverTime, FnMaxOverTime, FnRate, FnDrawdown}

// MaxWindows is the most windowed terms one rule may use.
const MaxWindows = 8

// MaxWindowSpan is the longest window a rule may ask for; the engine's own
// maximum (engine.max_window) may be lower.
const MaxWindowSpan = 7 * 24 * time.Hour

// ttlSpan is the window of timeToLiquidation's velocity.
const ttlSpan = time.Minute

// Window is one function over the recent past that a rule uses.
type Window struct {
	// Fn is one of the Fn constants.
	Fn string
	// Series is the environment field it reads, as written:
	// "indexPrice", "account.equity".
	Series string
	// Span is the window.
	Span time.Duration

	read  floatFn
	acct  AccountField // the account field it reads; 0 for a position's series
	label string       // String(), computed once
}

// Key identifies the window: rules that use the same function of the same
// series over the same span share the engine's samples.
func (w Window) Key() string { return w.Fn + "(" + w.Series + "," + w.Span.String() + ")" }

// String is the window as a rule writes it.
func (w Window) String() string {
	if w.Fn == FnTimeToLiquidation {
		return FnTimeToLiquidation
	}
	return fmt.Sprintf("%s(%s, %q)", w.Fn, w.Series, FormatSpan(w.Span))
}

// Account reports whether the series is the account's (one series for the
// whole account) rather than a position's.
func (w Window) Account() bool { return strings.HasPrefix(w.Series, "account.") }

// Read returns the series' value in env now; ok is false when env has no
// valid value for it.
func (w Window) Read(env *Env) (float64, bool) {
	if w.read == nil {
		return 0, false
	}
	if w.acct != 0 {
		if env.Account.unknown&w.acct != 0 {
			return 0, false
		}
	} else if env.NoData() != "" {
		return 0, false
	}
	v, ok := w.read(env)
	return v, ok && finite(v)
}

// FormatSpan writes a duration the way a rule would: 5m, 1h, 24h, 1h30m
// (Go's form without its zero tails). Every place that shows a duration
// to a reader uses it.
func FormatSpan(d time.Duration) string {
	s := d.String()
	if t, ok := strings.CutSuffix(s, "m0s"); ok {
		s = t + "m"
	}
	if t, ok := strings.CutSuffix(s, "h0m"); ok {
		s = t + "h"
	}
	return s
}

// parseSpan reads a window literal: a Go duration, or a whole number of
// days ("2d").
func parseSpan(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(d)
		if err != nil {
			return 0, fmt.Errorf("window %q: expected a duration like \"5m\", \"1h\" or \"2d\"", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("window %q: expected a duration like \"5m\", \"1h\" or \"2d\"", s)
	}
	return d, nil
}

// windowFunctions declares the window functions to the type checker; the
// engine's values replace their calls before a rule runs.
func windowFunctions() []expr.Option {
	var opts []expr.Option
	for _, name := range windowFns {
		opts = append(opts, expr.Function(name, func(...any) (any, error) {
			return nil, errors.New(name + " runs only inside the engine")
		}, new(func(any, any) float64))) // the arguments are checked by windowCall, in the rule's terms
	}
	return opts
}

// Account fields a rule reads, as bits.
type AccountField uint16

// The account fields that can be unknown.
const (
	AccountEquity AccountField = 1 << iota
	AccountFreeBalance
	AccountMargin
	AccountUnrealizedPNL
	AccountMarginRatio
	AccountGrossNotional
	AccountNetNotional
	AccountLeverage
	AccountPositions
	AccountMinLiquidationDistance
	AccountRiskiestSymbol

	// AccountAll is every account field.
	AccountAll AccountField = 1<<iota - 1
)

// accountFieldNames are the account fields by bit position.
var accountFieldNames = [accountFields]string{"account.equity", "account.freeBalance", "account.margin", "account.unrealizedPNL",
	"account.marginRatio", "account.grossNotional", "account.netNotional", "account.leverage", "account.positions",
	"account.minLiquidationDistance", "account.riskiestSymbol"}

// accountFieldBits maps the expr names of Account's fields to their bits.
var accountFieldBits = map[string]AccountField{
	"equity": AccountEquity, "freeBalance": AccountFreeBalance, "margin": AccountMargin,
	"unrealizedPNL": AccountUnrealizedPNL, "marginRatio": AccountMarginRatio,
	"grossNotional": AccountGrossNotional, "netNotional": AccountNetNotional,
	"leverage": AccountLeverage, "positions": AccountPositions,
	"minLiquidationDistance": AccountMinLiquidationDistance, "riskiestSymbol": AccountRiskiestSymbol,
}

// analysis is what a compiled expression reads beyond the plain position
// fields: its windows, its account fields, and whether it reads a
// position at all (an account rule must not).
type analysis struct {
	windows  []Window
	account  AccountField
	position []string // the position-level names it reads, sorted
}

// positionNames are the environment's names that belong to one position.
var positionNames = []string{"position", "riskLimit", "symbol", "indexPrice", "liquidationDistance", "notional",
	"leverageRatio", FnTimeToLiquidation}

// analyse walks a checked tree: it validates and collects the windowed
// terms and the account fields read, and refuses the environment's
// internal names.
func analyse(root ast.Node) (*analysis, error) {
	a := &analysis{}
	var err error
	idents, accountMembers := 0, 0
	visit := func(n ast.Node) {
		if err != nil {
			return
		}
		switch n := n.(type) {
		case *ast.IdentifierNode:
			switch {
			case strings.HasPrefix(n.Value, "_"):
				err = fmt.Errorf("unknown name %s", n.Value)
			case n.Value == "account":
				idents++
			case n.Value == FnTimeToLiquidation:
				err = a.addWindow(Window{Fn: FnTimeToLiquidation, Series: "liquidationDistance", Span: ttlSpan})
			}
			if slices.Contains(positionNames, n.Value) && !slices.Contains(a.position, n.Value) {
				a.position = append(a.position, n.Value)
			}
		case *ast.MemberNode:
			if id, ok := n.Node.(*ast.IdentifierNode); ok && id.Value == "account" {
				accountMembers++
				if p, ok := n.Property.(*ast.StringNode); ok {
					a.account |= accountFieldBits[p.Value]
				} else {
					a.account = AccountAll
				}
			}
		case *ast.CallNode:
			var w Window
			var ok bool
			w, ok, err = windowCall(n)
			if ok && err == nil {
				err = a.addWindow(w)
			}
		}
	}
	walk(root, visit)
	if idents > accountMembers {
		a.account = AccountAll // account used whole
	}
	slices.Sort(a.position)
	return a, err
}

func (a *analysis) addWindow(w Window) error {
	w.label = w.String()
	if slices.ContainsFunc(a.windows, func(o Window) bool { return o.Key() == w.Key() }) {
		return nil
	}
	if len(a.windows) == MaxWindows {
		return fmt.Errorf("more than %d functions over time in one expression", MaxWindows)
	}
	a.windows = append(a.windows, w)
	return nil
}

// windowCall reads a call of a window function: ok is false for any other
// call.
func windowCall(c *ast.CallNode) (Window, bool, error) {
	id, isIdent := c.Callee.(*ast.IdentifierNode)
	if !isIdent || !slices.Contains(windowFns, id.Value) {
		return Window{}, false, nil
	}
	usage := fmt.Errorf("%s(series, \"window\"): the series is a number of the environment such as indexPrice or account.equity, the window a literal such as \"5m\"", id.Value)
	if len(c.Arguments) != 2 {
		return Window{}, true, usage
	}
	var path []string
	switch s := c.Arguments[0].(type) {
	case *ast.IdentifierNode:
		path = []string{s.Value}
	case *ast.MemberNode:
		p, ok := memberPath(s)
		if !ok {
			return Window{}, true, usage
		}
		path = p
	default:
		return Window{}, true, usage
	}
	if path[0] == FnTimeToLiquidation || strings.HasPrefix(path[0], "_") {
		return Window{}, true, fmt.Errorf("%s: %s is not a series", id.Value, path[0])
	}
	read, ok := fieldNode(path)
	if !ok || !read.numeric() {
		return Window{}, true, fmt.Errorf("%s: %s is not a number of the environment", id.Value, strings.Join(path, "."))
	}
	lit, ok := c.Arguments[1].(*ast.StringNode)
	if !ok {
		return Window{}, true, fmt.Errorf("%s: the window must be a literal such as \"5m\"", id.Value)
	}
	span, err := parseSpan(lit.Value)
	if err != nil {
		return Window{}, true, fmt.Errorf("%s: %w", id.Value, err)
	}
	if span <= 0 || span > MaxWindowSpan {
		return Window{}, true, fmt.Errorf("%s: window %q must be above 0 and at most %s", id.Value, lit.Value, FormatSpan(MaxWindowSpan))
	}
	w := Window{Fn: id.Value, Series: strings.Join(path, "."), Span: span, read: read.asFloat()}
	if path[0] == "account" && len(path) == 2 {
		w.acct = accountFieldBits[path[1]]
	}
	return w, true, nil
}

// resolve attaches the series readers to windows built elsewhere (the
// ttl window).
func (a *analysis) resolve() {
	for i := range a.windows {
		w := &a.windows[i]
		if w.read == nil {
			if n, ok := fieldNode(strings.Split(w.Series, ".")); ok {
				w.read = n.asFloat()
			}
		}
	}
}

// windowPatch replaces each windowed term with a read of the value the
// engine computed for it: _windows[j].
type windowPatch struct{ windows []Window }

func (p windowPatch) Visit(node *ast.Node) {
	var key string
	switch n := (*node).(type) {
	case *ast.IdentifierNode:
		if n.Value != FnTimeToLiquidation {
			return
		}
		key = Window{Fn: FnTimeToLiquidation, Series: "liquidationDistance", Span: ttlSpan}.Key()
	case *ast.CallNode:
		w, ok, err := windowCall(n)
		if !ok || err != nil {
			return
		}
		key = w.Key()
	default:
		return
	}
	j := slices.IndexFunc(p.windows, func(w Window) bool { return w.Key() == key })
	if j < 0 {
		return
	}
	ast.Patch(node, &ast.MemberNode{Node: &ast.IdentifierNode{Value: windowsName}, Property: &ast.IntegerNode{Value: j}})
	(*node).SetType(reflect.TypeFor[float64]())
}

// windowsName is the environment's internal name for the windowed values.
const windowsName = "_windows"

// walk calls f on every node of the tree.
func walk(root ast.Node, f func(ast.Node)) {
	ast.Walk(&root, visitorFunc(f))
}

type visitorFunc func(ast.Node)

func (f visitorFunc) Visit(n *ast.Node) { f(*n) }
