package act

import "github.com/riskguard/riskguard/rules"

// notifyKind sends the rule's message once its plan's calls have ended
// (the engine's settle): it makes no call of its own.
type notifyKind struct{}

// Name is the kind's name in the rules.
func (notifyKind) Name() rules.ActionKind { return rules.Notify }

// Spec is the kind's row of the rules' table.
func (notifyKind) Spec() rules.KindSpec { return shipped(rules.Notify) }

// OncePerAccount: an account rule's message is sent once, not on each
// position it targets.
func (notifyKind) OncePerAccount() bool { return true }

// Merge keeps the notify action for the rule.
func (notifyKind) Merge(_ *Plan, d *Due, a *rules.Action, _ *rules.Evaluator, _ *rules.Env) {
	d.Notify = append(d.Notify, *a)
}
