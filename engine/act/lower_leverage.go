package act

import (
	"fmt"

	"github.com/riskguard/riskguard/rules"
)

// lowerLeverage asks for a lower leverage: the plan's settings call takes
// the lowest asked by its rules (at least 1).
type lowerLeverage struct{}

// Merge evaluates the rule's leverage target.
func (lowerLeverage) Merge(pl *Plan, d *Due, a *rules.Action, ev *rules.Evaluator, env *rules.Env) {
	lev, err := ev.TargetLeverage(a, env)
	if err != nil {
		d.Err = fmt.Errorf("leverage target: %w", err)
		return
	}
	lev = max(lev, 1)
	if pl.Lower == 0 || lev < pl.Lower {
		pl.Lower = lev
	}
	pl.LowerRules = append(pl.LowerRules, d.Rule.Name)
	d.Settings = true
}
