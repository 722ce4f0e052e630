package engine

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/riskguard/riskguard/engine/act"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/riskguard/riskguard/rules"
)

// accountKey is the state key of the account rules: their state is the
// rule's own, not a position's.
func accountKey() market.Key { return market.Key{Dir: "ACCOUNT"} }

// accountSymbol names the account in events where a symbol goes.
const accountSymbol = "account"

// pastLiquidation is the margin ratio of a cross pool that is not positive:
// at or past liquidation, read as a very large ratio.
const pastLiquidation = 1e12

// Reasons an account figure is no data.
const (
	whyPositionUnread = "a position could not be read: the account's totals are incomplete"
	whyIndexMissing   = "an open position has no index price: the account's totals are incomplete"
	whyFreeUnknown    = "the free balance cannot be inferred without an open cross position"
	whyEquityNotPos   = "the equity is not positive"
)

// accountOf computes the tick's account of its view and rows with the
// margin model: once per tick, before any action.
func (m *modelWatch) accountOf(tv *market.View, rows []tickRow) rules.Account {
	var a rules.Account
	free, freeKnown, _, ok := m.cachedFree(tv)
	whyFree := whyFreeUnknown
	if !ok || m.inFlight != "" {
		v := m.account(tv, rows) // infers it, and caches it
		free, freeKnown = v.Acct.Free, v.FreeKnown
		if v.FreeWhy != whyNoCross {
			whyFree = "the free balance is not known: " + v.FreeWhy
		}
	}
	lines := m.lines[:0]
	a.MinLiquidationDistance = 1
	distances := true
	for i := range rows {
		r := &rows[i]
		if !r.Open {
			continue
		}
		p, sym := r.P, r.Sym
		if sym == nil {
			a.SetUnknown(rules.AccountAll, whyPositionUnread)
			continue
		}
		index := r.IndexF
		mp := margin.PositionOf(p, sym.Name, int32(sym.QuoteScale))
		_, mm := maintenance(r.ps, p, &mp)
		n := r.N
		lines = append(lines, margin.Line{Short: p.Direction == exchange.Short, Cross: p.Cross, Quantity: n.Quantity,
			Index: max(index, 0), EntryValue: n.EntryValue, Margin: n.Margin, Maintenance: mm})
		// The riskiest position, by the liquidation prices the exchange lists.
		d, ok := distance(p.Direction, index, n.LiquidationPrice)
		if !ok {
			distances = false
			continue
		}
		if a.RiskiestSymbol == "" || d < a.MinLiquidationDistance {
			a.MinLiquidationDistance, a.RiskiestSymbol = d, sym.Name
		}
	}
	m.lines = lines
	f := margin.Totals(market.ToFloat(free), lines)
	a.Margin, a.UnrealizedPNL, a.Equity = f.Margin, f.UnrealizedPNL, f.Equity
	a.GrossNotional, a.NetNotional, a.Positions = f.GrossNotional, f.NetNotional, f.Positions
	a.FreeBalance = market.ToFloat(free)
	if r, ok := f.MarginRatio(); ok {
		a.MarginRatio = r
	} else {
		a.MarginRatio = pastLiquidation
	}
	if l, ok := f.Leverage(); ok {
		a.Leverage = l
	} else {
		a.SetUnknown(rules.AccountLeverage, whyEquityNotPos)
	}
	if !distances {
		a.SetUnknown(rules.AccountMinLiquidationDistance|rules.AccountRiskiestSymbol, whyIndexMissing)
	}
	for _, pe := range tv.Snap.Partial {
		if pe.What == "positions" {
			a.SetUnknown(rules.AccountAll, whyPositionUnread)
		}
	}
	if !f.Complete {
		a.SetUnknown(rules.AccountUnrealizedPNL|rules.AccountGrossNotional|rules.AccountNetNotional|rules.AccountEquity|
			rules.AccountLeverage|rules.AccountMarginRatio, whyIndexMissing)
	}
	if !freeKnown {
		fields := rules.AccountFreeBalance | rules.AccountEquity | rules.AccountLeverage
		if f.Cross > 0 {
			fields |= rules.AccountMarginRatio
		}
		a.SetUnknown(fields, whyFree)
	}
	return a
}

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
			if d, ok := distance(p.Direction, r.Index.InexactFloat64(), p.LiquidationPrice.InexactFloat64()); ok {
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

// distance is a position's liquidationDistance as its rules see it; ok is
// false without a positive index or liquidation price.
func distance(direction string, index, liq float64) (float64, bool) {
	if index <= 0 || liq <= 0 {
		return 0, false
	}
	return rules.LiquidationDistance(side(direction), index, liq), true
}

// side is +1 for a long, −1 for a short, as rules see position.side.
func side(direction string) float64 {
	if direction == exchange.Short {
		return -1
	}
	return 1
}
