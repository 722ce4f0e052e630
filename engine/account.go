package engine

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/riskguard/riskguard/engine/act"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/engine/model"
	"github.com/riskguard/riskguard/rules"
)

// accountKey is the state key of the account rules: their state is the
// rule's own, not a position's.
func accountKey() market.Key { return market.Key{Dir: "ACCOUNT"} }

// accountSymbol names the account in events where a symbol goes.
const accountSymbol = "account"

// evaluateAccount evaluates the account rules on the tick's account and
// returns the ones whose actions are due. A notify action runs here, once;
// the others go to the targets' plans.
func (v *evaluator) evaluateAccount(ctx context.Context, now time.Time, rows []tickRow, rep *TickReport) []*act.AccountDue {
	if !v.hasAccountRules {
		return nil
	}
	ps := v.posState(accountKey(), accountSymbol)
	v.markListed(ps, now)
	v.acctEnv.FillAccount(&v.acct, now)
	var due []*act.AccountDue
	for ri, r := range v.set.Rules {
		if !r.Account() {
			continue
		}
		if v.win.Windowed(ri) {
			v.win.FillAccount(ri, &v.acctEnv)
		}
		if !v.stepRule(ctx, now, rep, ri, r, &ps.Rules[ri], &v.acctEnv, accountSymbol, accountSymbol, "") {
			continue
		}
		d := &act.AccountDue{Idx: ri, Rule: r, St: &ps.Rules[ri], Targets: targets(r.Targets, rows)}
		for _, a := range r.Actions {
			if a.Kind == rules.Notify {
				v.emit(ctx, rep, journal.RuleNotifyEvent(now, r, accountSymbol, a.Channels, &v.acctEnv))
				d.Acted = true
			}
		}
		due = append(due, d)
	}
	return due
}

// targets are the open positions of the tick's rows an account rule's
// actions go to. The riskiest are those nearest their liquidation price; a
// position whose distance is unknown is none of them (no data acts on
// nothing).
func targets(t rules.Targets, rows []tickRow) map[market.Key]bool {
	out := map[market.Key]bool{}
	type ranked struct {
		key market.Key
		d   float64
	}
	var risky []ranked
	for i := range rows {
		r := &rows[i]
		p := r.P
		if p.Empty || r.Sym == nil {
			continue
		}
		switch t.Kind {
		case rules.TargetAll:
			out[r.Key] = true
		case rules.TargetCross, rules.TargetIsolated:
			if p.Cross == (t.Kind == rules.TargetCross) {
				out[r.Key] = true
			}
		case rules.TargetSymbols:
			if slices.Contains(t.Symbols, r.Sym.Name) {
				out[r.Key] = true
			}
		case rules.TargetRiskiest:
			if d, ok := model.Distance(p.Direction, r.Index.InexactFloat64(), p.LiquidationPrice.InexactFloat64()); ok {
				risky = append(risky, ranked{r.Key, d})
			}
		}
	}
	slices.SortStableFunc(risky, func(a, b ranked) int { return cmp.Compare(a.d, b.d) })
	for i := 0; i < len(risky) && i < t.N; i++ {
		out[risky[i].key] = true
	}
	return out
}

// accountDone closes the tick's account rules: the cooldown of each whose
// actions all ended, and succeeded on every target, starts; the others
// start theirs when their last call ends (settle).
func (v *evaluator) accountDone(now time.Time, due []*act.AccountDue) {
	for _, d := range due {
		d.Closed = true
		if d.Pending == 0 {
			v.accountSettled(now, d, v.set)
		}
	}
}

// accountSettled starts the cooldown of an account rule whose actions all
// succeeded on every target; setAt is the rule set they were decided
// under.
func (v *evaluator) accountSettled(now time.Time, d *act.AccountDue, setAt *rules.Set) {
	if d.Acted && !d.Failed {
		if st := v.stateNow(accountKey(), d.Idx, d.Rule, d.St, setAt); st != nil {
			st.LastActionAt = now
			v.changed()
		}
	}
}
