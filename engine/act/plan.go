package act

import (
	"slices"

	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/riskguard/riskguard/rules"
)

// Plan merges the due actions of every rule firing on one position in one
// tick into its calls, at most one of each (Step): a cancel, a reduce-only
// order for the largest quantity asked, one settings call with the lowest
// leverage asked and isolation if any rule asked for it. Each action kind
// merges itself (Kind).
type Plan struct {
	Pos *exchange.Position
	Sym *exchange.ContractSymbol
	// Env is what the rules saw on the position, for their notify actions.
	Env *rules.Env
	// Refused is the position's last settings call the exchange refused
	// for good: never sent again unchanged.
	Refused *Refusal
	// Next, once an earlier call of the plan predicted its effect (a
	// reduce order's fill), is the account the later ones are decided on.
	Next *margin.Account

	// Names are the rule set's names by index, which nothing writes: a
	// step's list of its rules starts as a piece of it (named), where
	// each step made a list of one. nil: each is made.
	Names []string

	Due []Due
	// Steps are the plan's calls in their Order, each under its key.
	Steps []Step
	keys  []string
	// spare are the steps of the plan's last use that Reset emptied
	// (recycler), under their keys: Step takes one again before it makes
	// a step.
	spare     []Step
	spareKeys []string
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
	Acct *AccountDue
	// Asked are the plan's steps the rule asked for (Ask).
	Asked  []Step
	Notify []rules.Action
	Err    error // a part of its actions failed; retried next tick
}

// Ask marks step c as asked by the rule: its outcome is the rule's.
func (d *Due) Ask(c Step) {
	if !slices.Contains(d.Asked, c) {
		d.Asked = append(d.Asked, c)
	}
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

// Add merges rule r's actions, each by its kind in kinds, evaluating their
// expressions on env; st is the rule's state. An account rule's notify
// actions ran once already (a kind with OncePerAccount).
func (pl *Plan) Add(kinds Kinds, ri int, r *rules.Rule, st *alert.RuleState, acct *AccountDue, ev *rules.Evaluator, env *rules.Env) {
	// Most of a rule's actions ask for a step: its list made once. The
	// rule is merged in its place in the plan's list (Kind.Merge: d is
	// pl's last Due), where a Due of its own was copied in after.
	// A Due kept by Reset past the list's end is taken again with its
	// lists' arrays.
	var asked []Step
	var notes []rules.Action
	if n := len(pl.Due); n < cap(pl.Due) {
		kept := &pl.Due[:n+1][n]
		asked, notes = kept.Asked, kept.Notify
	}
	if cap(asked) < len(r.Actions) {
		asked = make([]Step, 0, len(r.Actions))
	}
	pl.Due = append(pl.Due, Due{Idx: ri, Rule: r, St: st, Acct: acct, Asked: asked[:0], Notify: notes[:0]})
	d := &pl.Due[len(pl.Due)-1]
	for i := range r.Actions {
		a := &r.Actions[i]
		k := kinds.Of(a.Kind)
		if k == nil {
			continue // the engine refuses a set with a kind it does not know
		}
		if o, ok := k.(interface{ OncePerAccount() bool }); ok && acct != nil && o.OncePerAccount() {
			continue
		}
		k.Merge(pl, d, a, ev, env)
	}
}

// named is names with rule d's name appended: when names is empty, a list
// of one cut from Names, which an append copies (its capacity is its
// length) and nothing writes in place (the lists of rules are read, and
// cloned by what keeps them).
func (pl *Plan) named(names []string, d *Due) []string {
	if i := d.Idx; len(names) == 0 && i >= 0 && i < len(pl.Names) && pl.Names[i] == d.Rule.Name {
		return pl.Names[i : i+1 : i+1]
	}
	return append(names, d.Rule.Name)
}

// Step is the plan's step under key, made by mk when it has none yet and
// placed in its Order.
func (pl *Plan) Step(key string, mk func() Step) Step {
	if i := slices.Index(pl.keys, key); i >= 0 {
		return pl.Steps[i]
	}
	var c Step
	if i := slices.Index(pl.spareKeys, key); i >= 0 {
		c = pl.spare[i]
		pl.spare, pl.spareKeys = slices.Delete(pl.spare, i, i+1), slices.Delete(pl.spareKeys, i, i+1)
	} else {
		c = mk()
	}
	if pl.Steps == nil {
		// A plan has a step or two, at most one a kind: lists for a few,
		// where each insert grew them.
		pl.Steps, pl.keys = make([]Step, 0, planSteps), make([]string, 0, planSteps)
	}
	i := len(pl.Steps)
	for i > 0 && pl.Steps[i-1].Order() > c.Order() {
		i--
	}
	pl.Steps, pl.keys = slices.Insert(pl.Steps, i, c), slices.Insert(pl.keys, i, key)
	return c
}

// Reset empties pl for its next use, keeping its lists' arrays and its
// steps that may be used again (recycler), emptied: a plan built after it
// is as one built new. Only its owner calls it, once nothing holds pl, its
// lists or its steps (the engine's plans once the dispatcher holds none).
func (pl *Plan) Reset() {
	due := pl.Due[:cap(pl.Due)]
	for i := range due {
		clear(due[i].Asked[:cap(due[i].Asked)])
		clear(due[i].Notify[:cap(due[i].Notify)])
		due[i] = Due{Asked: due[i].Asked[:0], Notify: due[i].Notify[:0]}
	}
	spare, spareKeys := pl.spare, pl.spareKeys
	for i, c := range pl.Steps {
		if r, ok := c.(recycler); ok {
			r.recycle()
			spare, spareKeys = append(spare, c), append(spareKeys, pl.keys[i])
		}
	}
	clear(pl.Steps)
	clear(pl.keys)
	*pl = Plan{Due: due[:0], Steps: pl.Steps[:0], keys: pl.keys[:0], spare: spare, spareKeys: spareKeys}
}

// recycler is a step a plan may take again once it is Reset: recycle
// makes it as its kind's Merge makes it new, holding nothing of its last
// use (lists it handed out are let go, not cleared: a report keeps them).
type recycler interface {
	recycle()
}

// planSteps is how many steps a plan's lists are first made for.
const planSteps = 3

// Dedupe returns s without repeats, in order, in a list of its own. A
// short list is looked through (one list made), a long one through a map.
func Dedupe(s []string) []string {
	if len(s) <= dedupeShort {
		out := s[:0:0]
		if len(s) > 0 {
			out = make([]string, 0, len(s))
		}
		for _, v := range s {
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
		return out
	}
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

// dedupeShort is the longest list Dedupe looks through.
const dedupeShort = 16
