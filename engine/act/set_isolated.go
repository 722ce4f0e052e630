package act

import "github.com/riskguard/riskguard/rules"

// setIsolated asks for isolated margin: the plan's settings call
// (settings.go) isolates the position when any rule asks for it, unless
// isolating would harm it (DecideSettings).
type setIsolated struct{}

// Name is the kind's name in the rules.
func (setIsolated) Name() rules.ActionKind { return rules.SetIsolated }

// Spec is the kind's row of the rules' table.
func (setIsolated) Spec() rules.KindSpec { return shipped(rules.SetIsolated) }

// Merge marks the plan's position for isolation.
func (setIsolated) Merge(pl *Plan, d *Due, _ *rules.Action, _ *rules.Evaluator, _ *rules.Env) {
	c := settingsOf(pl)
	c.isolateKind = rules.SetIsolated
	c.Isolate = true
	c.IsolateRules = pl.named(c.IsolateRules, d)
	d.Ask(c)
}
