package act

import (
	"strings"

	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// Plan merges the due actions of every rule firing on one position in one
// tick: at most one cancel, then at most one reduce-only order for the
// largest quantity asked, then one settings call with the lowest leverage
// asked and isolation if any rule asked for it. Each action kind merges
// itself (Kind).
type Plan struct {
	Pos *exchange.Position
	Sym *exchange.ContractSymbol
	// Env is what the rules saw on the position, for their notify actions.
	Env *rules.Env
	// Refused is the position's last settings call the exchange refused
	// for good: never sent again unchanged.
	Refused *Refusal

	Due []Due

	Lower        int // lowest target leverage asked for; 0 when none
	LowerRules   []string
	Isolate      bool
	IsolateRules []string
	Cancel       bool
	CancelRules  []string
	// Reduce is the largest quantity a reduce_position asked to take off
	// the position, before rounding (DecideReduce); ReduceRules the rules
	// that asked, ReduceAsked whether any did.
	Reduce      decimal.Decimal
	ReduceRules []string
	ReduceAsked bool
}

// Refusal is a settings call the exchange refused for good, from the
// leverage the position had.
type Refusal struct {
	Settings exchange.Settings
	From     int
}

// Due is a rule whose actions are due, with what became of them.
type Due struct {
	Idx  int
	Rule *rules.Rule
	// St is the rule's state: the position's, or the account rule's own.
	St *alert.RuleState
	// Acct is an account rule's; nil for a position rule.
	Acct     *AccountDue
	Settings bool // asked for lower_leverage or set_isolated
	Cancel   bool
	Reduce   bool // asked for reduce_position
	Notify   []rules.Action
	Err      error // a part of its actions failed; retried next tick
}

// AccountDue is an account rule whose actions are due this tick, with the
// positions they go to.
type AccountDue struct {
	Idx     int
	Rule    *rules.Rule
	St      *alert.RuleState
	Targets map[market.Key]bool
	Acted   bool // a plan of the tick carried its actions
	Failed  bool // a part of them failed: no cooldown, retried next tick
	// Pending counts the plans carrying its actions whose calls have not
	// ended; Closed: the tick that decided them has handed out every plan.
	Pending int
	Closed  bool
}

// Empty reports whether no rule's actions are due.
func (pl *Plan) Empty() bool { return len(pl.Due) == 0 }

// Add merges rule r's actions, each by its kind, evaluating their
// expressions on env; st is the rule's state. An account rule's notify
// actions ran once already.
func (pl *Plan) Add(ri int, r *rules.Rule, st *alert.RuleState, acct *AccountDue, ev *rules.Evaluator, env *rules.Env) {
	d := Due{Idx: ri, Rule: r, St: st, Acct: acct}
	for i := range r.Actions {
		a := &r.Actions[i]
		if acct != nil && a.Kind == rules.Notify {
			continue
		}
		if k := KindOf(a.Kind); k != nil {
			k.Merge(pl, &d, a, ev, env)
		}
	}
	pl.Due = append(pl.Due, d)
}

// Target is the settings the merged plan asks for. Leverage only goes
// down: it is clamped to 1..current, and to the risk limit's maxLeverage
// when a call is made anyway, since the exchange refuses a leverage above
// it.
func (pl *Plan) Target() (exchange.Settings, bool) {
	cur := exchange.Settings{Cross: pl.Pos.Cross, Leverage: pl.Pos.Leverage}
	want := cur
	if pl.Lower > 0 && pl.Lower < cur.Leverage {
		want.Leverage = pl.Lower
	}
	if pl.Isolate {
		want.Cross = false
	}
	if want == cur {
		return want, false
	}
	if ml := pl.Pos.RiskLimit.MaxLeverage; ml > 0 && want.Leverage > ml {
		want.Leverage = ml
	}
	return want, true
}

// SettingsAction names a merged settings call and the rules behind it.
func (pl *Plan) SettingsAction(want exchange.Settings) (string, []string) {
	var parts, names []string
	if want.Leverage < pl.Pos.Leverage {
		parts = append(parts, string(rules.LowerLeverage))
		names = append(names, pl.LowerRules...)
	}
	if want.Cross != pl.Pos.Cross {
		parts = append(parts, string(rules.SetIsolated))
		names = append(names, pl.IsolateRules...)
	}
	return strings.Join(parts, "+"), Dedupe(names)
}

// Dedupe returns s without repeats, in order.
func Dedupe(s []string) []string {
	out := s[:0:0]
	seen := make(map[string]bool, len(s))
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}
