package act

import "github.com/riskguard/riskguard/rules"

// Kind is how one kind of action merges into a position's plan: each kind
// is one file of this package and one row of KindOf.
type Kind interface {
	// Merge adds action a of due rule d to pl, evaluating its expressions
	// on env; a failure is d's error (its other actions go on).
	Merge(pl *Plan, d *Due, a *rules.Action, ev *rules.Evaluator, env *rules.Env)
}

// KindOf is the table of action kinds: nil for a kind the guard does not
// know (the rules' loader refuses it first).
func KindOf(k rules.ActionKind) Kind {
	switch k {
	case rules.LowerLeverage:
		return lowerLeverage{}
	case rules.SetIsolated:
		return setIsolated{}
	case rules.CancelOrders:
		return cancelOrders{}
	case rules.ReducePosition:
		return reducePosition{}
	case rules.Notify:
		return notifyKind{}
	}
	return nil
}
