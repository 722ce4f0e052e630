package act

import "github.com/riskguard/riskguard/rules"

// cancelOrders cancels the symbol's open orders: at most one call per
// symbol and tick, sent before the settings call (fewer open orders is
// never riskier).
type cancelOrders struct{}

// Merge marks the plan's symbol for a cancel.
func (cancelOrders) Merge(pl *Plan, d *Due, _ *rules.Action, _ *rules.Evaluator, _ *rules.Env) {
	pl.Cancel = true
	pl.CancelRules = append(pl.CancelRules, d.Rule.Name)
	d.Cancel = true
}
