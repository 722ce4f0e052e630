package act

import (
	"fmt"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/rules"
)

// Skip is a part of a plan's settings call left out, to be said: an
// isolation that would harm (Kind set_isolated, with its prediction), or
// a leverage cut no bound leaves room for (Kind lower_leverage).
type Skip struct {
	Kind rules.ActionKind
	// Want is the settings asked for when it was left out; Asked the
	// leverage the cut asked for.
	Want  exchange.Settings
	Asked int
	Pred  *Prediction
	Why   string
}

// Decision is a plan's settings call as decided: Change is false when no
// call is left to make.
type Decision struct {
	Want   exchange.Settings
	Change bool
	Pred   *Prediction
	// Stepped says how the call differs from what the rules asked ("" when
	// it does not).
	Stepped string
	// Skips are the parts left out, in the order they were decided.
	Skips []Skip
}

// DecideSettings decides a plan's settings call on the margin model m (nil
// predicts nothing): the target the rules ask, without an isolation that
// would move the liquidation price closer unless its rules allow it (and
// never under their floor); a leverage cut the free balance cannot fund, or
// that moves more into the position than the rules' margin budgets leave,
// or that takes the cross pool from under other positions, lowered to the
// lowest cut within the bound, or left out; and a call the exchange refused
// for good from this very leverage tried halfway instead. It writes the
// margin budgets' windows of the plan's rule states.
func DecideSettings(m *Model, pl *Plan, now time.Time) Decision {
	pos := pl.Pos
	var d Decision
	d.Want, d.Change = pl.Target()
	predict := func() {
		d.Pred = nil
		if d.Change && m != nil {
			d.Pred = m.Predict(pl, d.Want)
		}
	}
	predict()
	unchanged := func() bool { return d.Want == exchange.Settings{Leverage: pos.Leverage, Cross: pos.Cross} }
	// harm drops isolation from the plan when it would move the
	// liquidation price closer and its rules do not allow it (or it would
	// end under their floor). It runs on the plan as asked and again on the
	// plan after its leverage is bounded: an isolation that was safe at a
	// lower leverage may not be at the one left.
	harm := func() {
		if d.Pred == nil || !d.Pred.Closer() || d.Want.Cross == pos.Cross {
			return
		}
		allowed, floor := closerAllowed(pl, rules.SetIsolated)
		_, after := d.Pred.Distances()
		why := ""
		switch {
		case !allowed:
			why = "isolating would move the liquidation price closer; the rule does not allow it (allow_closer_liquidation)"
		case after.LessThan(floor):
			why = fmt.Sprintf("the liquidation price would end %s%% away, under the floor of %s%% (min_liquidation_distance)",
				after.Shift(2).StringFixed(2), floor.Shift(2).StringFixed(2))
		}
		if why == "" {
			return
		}
		d.Skips = append(d.Skips, Skip{Kind: rules.SetIsolated, Want: d.Want, Pred: d.Pred, Why: why})
		pl.Isolate = false
		d.Want.Cross = pos.Cross
		d.Change = !unchanged()
		predict()
	}
	harm()

	// A leverage cut the free balance cannot fund, or that moves more of
	// it into the position than the rules' margin budget leaves, becomes
	// the lowest cut within the bound (the exchange would refuse the first
	// every cooldown; the second would pour the account into a losing
	// position unasked), or is skipped and said.
	for _, bound := range []func(*Prediction) (bool, string){
		func(p *Prediction) (bool, string) {
			if !p.FreeKnown || p.Affordable {
				return true, ""
			}
			return false, fmt.Sprintf("the free balance cannot fund %dx (%s more margin, %s free)", p.Leverage, p.MarginMoved.Round(2), p.FreeAfter.Add(p.MarginMoved).Round(2))
		},
		func(p *Prediction) (bool, string) { return withinBudget(pl, now, p) },
		othersBound(pl),
	} {
		if !d.Change || d.Pred == nil || d.Want.Leverage >= pos.Leverage {
			break
		}
		ok, why := bound(d.Pred)
		if ok {
			continue
		}
		asked := d.Want.Leverage
		d.Want.Leverage = lowestWithin(m, pl, d.Want, bound)
		if d.Want.Leverage < pos.Leverage {
			why += fmt.Sprintf(": lowered to %dx, the lowest within it", d.Want.Leverage)
		} else {
			why += ": no leverage cut is within it"
		}
		d.Stepped = why
		d.Change = !unchanged()
		predict()
		if d.Change {
			continue
		}
		d.Skips = append(d.Skips, Skip{Kind: rules.LowerLeverage, Want: d.Want, Asked: asked, Why: why})
	}

	harm()

	if r := pl.Refused; r != nil && d.Change && d.Want == r.Settings && pos.Leverage == r.From && d.Want.Leverage < pos.Leverage {
		// The exchange refused this very call from this very leverage: a
		// smaller cut, halfway, is tried instead of the same one again.
		half := (d.Want.Leverage + pos.Leverage + 1) / 2
		d.Stepped = fmt.Sprintf("the exchange refused %dx from %dx before: trying %dx", d.Want.Leverage, pos.Leverage, half)
		d.Want.Leverage = half
		d.Change = !unchanged()
		predict()
	}
	return d
}
