package act

import "github.com/riskguard/riskguard/rules"

// setIsolated asks for isolated margin: the plan's settings call isolates
// the position when any rule asks for it.
type setIsolated struct{}

// Merge marks the plan's position for isolation.
func (setIsolated) Merge(pl *Plan, d *Due, _ *rules.Action, _ *rules.Evaluator, _ *rules.Env) {
	pl.Isolate = true
	pl.IsolateRules = append(pl.IsolateRules, d.Rule.Name)
	d.Settings = true
}
