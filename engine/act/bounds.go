package act

import (
	"fmt"
	"time"

	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// preferredWithin is the leverage between want's and the position's (at
// most maxLeverage, the highest the exchange accepts as a new one) whose
// prediction passes bound and that the account measure prefers, the
// lowest of equals; the position's own when none passes. It says what was
// chosen: "the lowest within it", or "which the account measure prefers
// to 5x (survives …)".
func preferredWithin(m *Model, pl *Plan, want exchange.Settings, bound func(*Prediction) (bool, string)) (int, string) {
	top := pl.Pos.Leverage
	if ml := pl.Pos.RiskLimit.MaxLeverage; ml > 0 && ml < top {
		top = ml + 1
	}
	best := pl.Pos.Leverage
	var bestPred, firstPred *Prediction
	for lev := want.Leverage; lev < top; lev++ {
		p := m.Predict(pl, exchange.Settings{Leverage: lev, Cross: want.Cross})
		if p == nil {
			continue
		}
		if ok, _ := bound(p); !ok {
			continue
		}
		if firstPred == nil {
			firstPred = p
		}
		if bestPred == nil || p.After.Compare(bestPred.After) > 0 {
			best, bestPred = lev, p
		}
	}
	if bestPred == nil || bestPred == firstPred {
		return best, "the lowest within it"
	}
	return best, fmt.Sprintf("which the account measure prefers to %dx (%s)", firstPred.Leverage, margin.Change(firstPred.After, bestPred.After))
}

// withinBudget checks a leverage cut's margin move against the margin
// budgets of the rules asking for it: the smallest remaining one binds.
// A budget that is a share of the free balance cannot be checked when the
// free balance is unknown: nothing is then within it.
func withinBudget(pl *Plan, lowerKind rules.ActionKind, now time.Time, p *Prediction) (bool, string) {
	return budgetBound(pl, lowerKind, now, p, false)
}

// withinSetBudget is withinBudget over the budgets the rules set
// themselves (margin_budget): a scored decision counts what a cut takes
// from the cross pool, so the default share does not bind it.
func withinSetBudget(pl *Plan, lowerKind rules.ActionKind, now time.Time, p *Prediction) (bool, string) {
	return budgetBound(pl, lowerKind, now, p, true)
}

func budgetBound(pl *Plan, lowerKind rules.ActionKind, now time.Time, p *Prediction, setOnly bool) (bool, string) {
	if !p.MarginMoved.IsPositive() {
		return true, ""
	}
	for _, d := range pl.Due {
		r := d.Rule
		if r.MarginBudget == 0 || !r.HasAction(lowerKind) || setOnly && !r.BudgetSet {
			continue
		}
		if !r.BudgetSet {
			if ml := pl.Pos.RiskLimit.MaxLeverage; ml > 0 && p.Leverage >= ml {
				continue // the default never shrinks a cut to the exchange's own maximum
			}
		}
		st := d.St
		resetBudget(st, r, now)
		amount := decimal.NewFromFloat(r.MarginBudget)
		if r.BudgetFraction {
			if !p.FreeKnown && !r.BudgetSet {
				continue // the default share binds only where the free balance is known
			}
			if !p.FreeKnown {
				return false, fmt.Sprintf("rule %s's margin budget is %s%% of the free balance, which cannot be inferred", r.Name, amount.Shift(2))
			}
			amount = amount.Mul(p.FreeAfter.Add(p.MarginMoved))
		}
		left := amount.Sub(decimal.NewFromFloat(st.MarginMoved))
		if p.MarginMoved.GreaterThan(left) {
			return false, fmt.Sprintf("rule %s's margin budget leaves %s (%s per %s, %s moved) and %dx needs %s", r.Name,
				decimal.Max(left, decimal.Zero).Round(2), amount.Round(2), r.BudgetPer, decimal.NewFromFloat(st.MarginMoved).Round(2), p.Leverage, p.MarginMoved.Round(2))
		}
	}
	return true, ""
}

// SpendBudget counts margin moved into the position by settings call c
// against the budgets of the rules that asked for its cut, and reports
// whether any counted it.
func SpendBudget(pl *Plan, c *SettingsStep, moved decimal.Decimal) bool {
	spent := false
	for _, d := range pl.Due {
		if d.Rule.MarginBudget == 0 || !d.Rule.HasAction(c.lowerKind) {
			continue
		}
		d.St.MarginMoved += moved.InexactFloat64()
		spent = true
	}
	return spent
}

// resetBudget starts a new budget window when the rule fired again or, for
// a daily budget, a new UTC day began.
func resetBudget(st *alert.RuleState, r *rules.Rule, now time.Time) {
	from := st.FiredAt
	if r.BudgetPer == "day" {
		y, m, d := now.UTC().Date()
		from = time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	}
	if !st.BudgetFrom.Equal(from) {
		st.BudgetFrom, st.MarginMoved = from, 0
	}
}
