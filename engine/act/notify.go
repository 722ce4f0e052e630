package act

import "github.com/riskguard/riskguard/rules"

// notifyKind sends the rule's message once its plan's calls have ended.
type notifyKind struct{}

// Merge keeps the notify action for the rule.
func (notifyKind) Merge(_ *Plan, d *Due, a *rules.Action, _ *rules.Evaluator, _ *rules.Env) {
	d.Notify = append(d.Notify, *a)
}
