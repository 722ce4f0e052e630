package act

import (
	"fmt"

	"github.com/riskguard/riskguard/rules"
)

// lowerLeverage asks for a lower leverage: the plan's settings call
// (settings.go) takes the lowest asked by its rules (at least 1), within
// the bounds DecideSettings keeps.
type lowerLeverage struct{}

// Name is the kind's name in the rules.
func (lowerLeverage) Name() rules.ActionKind { return rules.LowerLeverage }

// Spec is the kind's row of the rules' table.
func (lowerLeverage) Spec() rules.KindSpec { return shipped(rules.LowerLeverage) }

// Merge evaluates the rule's leverage target.
func (lowerLeverage) Merge(pl *Plan, d *Due, a *rules.Action, ev *rules.Evaluator, env *rules.Env) {
	lev, err := ev.TargetLeverage(a, env)
	if err != nil {
		d.Err = fmt.Errorf("leverage target: %w", err)
		return
	}
	lev = max(lev, 1)
	c := settingsOf(pl)
	c.lowerKind = rules.LowerLeverage
	if c.Lower == 0 || lev < c.Lower {
		c.Lower = lev
	}
	c.LowerRules = pl.named(c.LowerRules, d)
	d.Ask(c)
}
