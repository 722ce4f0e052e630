package act

import (
	"fmt"
	"strconv"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/shopspring/decimal"
)

// Skip is a part of a plan's settings call left out, to be said: an
// isolation that would harm (Isolation, with its prediction), or a
// leverage cut no bound leaves room for.
type Skip struct {
	Isolation bool
	// Want is the settings asked for when it was left out; Asked the
	// leverage the cut asked for.
	Want  exchange.Settings
	Asked int
	Pred  *Prediction
	Why   string
	// note is "skipped: " and Why, when it was made as one text with it
	// (the step's Note says the first skip so): "" when it was not.
	note string
}

// skipNote is what a settings step's Note says of the skip sk.
func skipNote(sk *Skip) string {
	if sk.note != "" {
		return sk.note
	}
	return skippedNote + sk.Why
}

// skippedNote is what a step's Note says before a skip's reason.
const skippedNote = "skipped: "

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
// predicts nothing).
//
// Where the model does not fit the exchange's own figures (m.Unfit), its
// prediction is said as unverified and decides nothing: the call goes out
// as the rules ask (leverage within 1..current and maxLeverage, Target)
// and the exchange decides; only an isolation still needs its rules'
// allow_closer_liquidation.
//
// Where it fits, every call is judged first on the stress grid
// (margin.Stress, when the model has σ): no call goes out that makes a
// likely move fatal to a position that survives every likely move now,
// nor an isolation that raises the expected loss; then by the account
// measure (margin.Survival): an isolation that moves the position's
// liquidation price closer goes out when it ring-fences it — the rest of
// the account survives larger moves, the position stays above its rules'
// floor, and a likely move liquidates it anyway — or when its rules allow
// it, above their floor; a leverage cut the free
// balance cannot fund, or that moves more into the position than the
// rules' margin budgets leave, or that would leave the account worse off
// (unless allowed) or move another position under its floor, becomes the
// cut within those bounds the measure prefers, or is left out. Among the
// cuts within bounds, the one the measure prefers is sent (the lowest of
// equals). A call the exchange refused for good from this very leverage is
// tried halfway instead. It writes the margin budgets' windows of the
// plan's rule states.
func DecideSettings(m *Model, pl *Plan, c *SettingsStep, now time.Time) Decision {
	sd := &settingsDecider{m: m, pl: pl, c: c, now: now}
	d := &sd.d
	d.Want, d.Change = c.Target(pl.Pos)
	if d.Change && m.scored() {
		// Judged by cost: the call asked is a candidate like the others
		// (without the account measure, which only a call said needs).
		if d.Pred = m.candidate(pl, d.Want); d.Pred != nil && d.Pred.Scored {
			decideByCost(m, pl, c, now, d)
			refusedHalf(d, pl, sd.predict, sd.unchanged)
			holdInvariant(m, pl, d)
			return *d
		}
	}
	sd.predict()

	if m != nil && m.Unfit != "" {
		if d.Pred != nil && d.Change && d.Want.Cross != pl.Pos.Cross && pl.Pos.Cross {
			if allowed, _ := closerAllowed(pl, c.isolateKind); !allowed {
				sd.dropIsolation("the model does not fit the exchange (" + m.Unfit + "), so isolating a cross position needs the rule's opt-in (allow_closer_liquidation)")
			}
		}
		refusedHalf(d, pl, sd.predict, sd.unchanged)
		return *d
	}

	// Not scored: the bounds decide. The isolation is judged on the plan
	// as asked and again on the plan after its leverage is bounded: an
	// isolation that was safe at a lower leverage may not be at the one
	// left.
	sd.harm()
	sd.boundCut()
	sd.harm()
	refusedHalf(d, pl, sd.predict, sd.unchanged)
	holdInvariant(m, pl, d)
	return *d
}

// settingsDecider is one DecideSettings in progress: its inputs and the
// decision so far, for the steps of the decision by bounds (harm,
// boundCut) to share.
type settingsDecider struct {
	m   *Model
	pl  *Plan
	c   *SettingsStep
	now time.Time
	d   Decision
}

// predict predicts the decision's call as it stands (nil when there is
// none, or no model).
func (sd *settingsDecider) predict() {
	d := &sd.d
	d.Pred = nil
	if d.Change && sd.m != nil {
		d.Pred = sd.m.Predict(sd.pl, d.Want)
	}
}

// unchanged reports whether the call as it stands is the position's own
// settings.
func (sd *settingsDecider) unchanged() bool {
	return sd.d.Want == exchange.Settings{Leverage: sd.pl.Pos.Leverage, Cross: sd.pl.Pos.Cross}
}

// dropIsolation leaves the isolation out of the call, said with why.
func (sd *settingsDecider) dropIsolation(why string) {
	d := &sd.d
	d.Skips = append(d.Skips, Skip{Isolation: true, Want: d.Want, Pred: d.Pred, Why: why})
	sd.c.Isolate = false
	d.Want.Cross = sd.pl.Pos.Cross
	d.Change = !sd.unchanged()
	sd.predict()
}

// harm drops isolation from the plan when it would move the liquidation
// price closer without ring-fencing the position, and its rules do not
// allow it (or it would end under their floor); a failing cross position
// may be isolated funded instead (dropOrFund).
func (sd *settingsDecider) harm() {
	m, pl, c, d := sd.m, sd.pl, sd.c, &sd.d
	if d.Pred == nil || d.Want.Cross == pl.Pos.Cross {
		return
	}
	optedIn, _ := closerAllowed(pl, c.isolateKind)
	// The bounds no estimate lifts first: never into the cut zone,
	// never closer in a fast move.
	if why := m.invariant(d.Pred, pl.Sym.Name); why != "" {
		sd.dropOrFund("isolating "+pl.Sym.Name+" "+why, optedIn)
		return
	}
	// The stress grid: no isolation makes a likely move fatal
	// to a position that survives it now, or raises the expected
	// loss; allow_closer_liquidation does not lift it.
	if veto := d.Pred.gridVeto(pl.Sym.Name, true, optedIn); veto != "" {
		sd.dropOrFund("isolating "+pl.Sym.Name+" "+veto, optedIn)
		return
	}
	if !d.Pred.Closer() {
		// Its own liquidation price moves away, but leaving the pool
		// takes the position's margin and PNL out of it: the rest of
		// the account can end worse off (the others' liquidation
		// prices closer, even past the index). On the stress grid,
		// which it passed, that is judged by what is likely; without
		// one, by the account measure: only one that worsens it
		// needs the opt-in.
		if !d.Pred.Stressed && d.Pred.After.Compare(d.Pred.Before) < 0 {
			if allowed, _ := closerAllowed(pl, c.isolateKind); !allowed {
				sd.dropIsolation("isolating would leave the account worse off (" + d.Pred.accountChange() + "); the rule does not allow it (allow_closer_liquidation)")
			}
		}
		return
	}
	if d.Pred.ringFences(rulesFloor(pl, c.isolateKind), pl.Sym.Name) {
		d.Stepped = fmt.Sprintf("ring-fences %s: the rest of the account %s", pl.Sym.Name, margin.Change(d.Pred.RestBefore, d.Pred.RestAfter))
		return
	}
	allowed, floor := closerAllowed(pl, c.isolateKind)
	_, after := d.Pred.Distances()
	switch {
	case !allowed:
		sd.dropOrFund("isolating would move the liquidation price closer; the rule does not allow it (allow_closer_liquidation)", optedIn)
	case after.LessThan(floor):
		sd.dropOrFund(fmt.Sprintf("the liquidation price would end %s%% away, under the floor of %s%% (min_liquidation_distance)",
			after.Shift(2).StringFixed(2), floor.Shift(2).StringFixed(2)), optedIn)
	}
}

// dropOrFund leaves out an isolation refused for why, unless the position
// is a failing cross one (a likely move liquidates it) that can be
// isolated funded: at a lower leverage, the margin from the free balance,
// above its floor, passing the stress grid. The highest such leverage
// goes out instead. A healthy position is not isolated at all: that
// trades a likely loss for protection from an unlikely one.
func (sd *settingsDecider) dropOrFund(why string, optedIn bool) {
	m, pl, c, d := sd.m, sd.pl, sd.c, &sd.d
	_, failing := d.Pred.StressBefore.FatalFor(pl.Sym.Name, pl.Pos.Direction)
	if pl.Pos.Cross && d.Pred.Stressed && failing {
		if lev := fundedIsolation(m, pl, d.Want, rulesFloor(pl, c.isolateKind), optedIn); lev > 0 {
			asked := d.Want.Leverage
			d.Want.Leverage = lev
			sd.predict()
			d.Stepped = fmt.Sprintf("isolated at %dx, funded from the free balance (at %dx: %s)", lev, asked, why)
			return
		}
	}
	sd.dropIsolation(why)
}

// boundCut makes a leverage cut outside a bound (cutBounds) the cut
// within every bound the account measure prefers, or skips it, said.
func (sd *settingsDecider) boundCut() {
	m, pl, d := sd.m, sd.pl, &sd.d
	pos := pl.Pos
	if !d.Change || d.Pred == nil || d.Want.Leverage >= pos.Leverage {
		return
	}
	within := sd.cutBounds()
	ok, why := within(d.Pred)
	asked := d.Want.Leverage
	lev, best := preferredWithin(m, pl, d.Want, within)
	switch {
	case !ok && lev < pos.Leverage:
		d.Want.Leverage = lev
		d.Stepped = why + fmt.Sprintf(": lowered to %dx, %s", lev, best)
	case !ok:
		d.Want.Leverage = pos.Leverage
		d.Stepped = why + ": no leverage cut is within it"
	case lev != asked:
		d.Want.Leverage = lev
		d.Stepped = fmt.Sprintf("%dx, %s", lev, best)
	}
	d.Change = !sd.unchanged()
	sd.predict()
	if !d.Change {
		d.Skips = append(d.Skips, Skip{Want: d.Want, Asked: asked, Why: d.Stepped})
	}
}

// cutBounds is whether a leverage cut predicted as p is within every
// bound of a decision by bounds, and why not: what the free balance
// funds, the margin budgets, the account measure (accountBound), the
// bounds no estimate lifts and the stress grid.
func (sd *settingsDecider) cutBounds() func(*Prediction) (bool, string) {
	m, pl, c, now := sd.m, sd.pl, sd.c, sd.now
	bounds := []func(*Prediction) (bool, string){
		func(p *Prediction) (bool, string) {
			if !p.FreeKnown || p.Affordable {
				return true, ""
			}
			return false, fmt.Sprintf("the free balance cannot fund %dx (%s more margin, %s free)", p.Leverage, p.MarginMoved.Round(2), p.FreeAfter.Add(p.MarginMoved).Round(2))
		},
		func(p *Prediction) (bool, string) { return withinBudget(pl, c.lowerKind, now, p) },
		accountBound(pl, c.lowerKind),
		func(p *Prediction) (bool, string) {
			if why := m.invariant(p, pl.Sym.Name); why != "" {
				return false, fmt.Sprintf("%dx %s", p.Leverage, why)
			}
			return true, ""
		},
		func(p *Prediction) (bool, string) {
			if veto := p.gridVeto(pl.Sym.Name, false, false); veto != "" {
				return false, fmt.Sprintf("%dx %s", p.Leverage, veto)
			}
			return true, ""
		},
	}
	return func(p *Prediction) (bool, string) {
		for _, b := range bounds {
			if ok, why := b(p); !ok {
				return false, why
			}
		}
		return true, ""
	}
}

// holdInvariant leaves out a decided call that breaks a bound no estimate
// lifts (Model.invariant) on a model that fits: the last word of either
// decision, whatever stepped it (a refused call tried halfway included).
func holdInvariant(m *Model, pl *Plan, d *Decision) {
	pos := pl.Pos
	if !d.Change || d.Pred == nil || m.Unfit != "" {
		return
	}
	if why := m.invariant(d.Pred, pl.Sym.Name); why != "" {
		d.Skips = append(d.Skips, Skip{Isolation: d.Want.Cross != pos.Cross, Want: d.Want, Asked: d.Want.Leverage, Pred: d.Pred, Why: fmt.Sprintf("%dx %s", d.Want.Leverage, why)})
		d.Want, d.Change, d.Stepped = exchange.Settings{Leverage: pos.Leverage, Cross: pos.Cross}, false, ""
		d.Pred = nil
	}
}

// fundedIsolation is the highest leverage under want's at which isolating
// the plan's position passes the stress grid (gridVeto), leaves it above
// floor and the model's (Model.invariant: never into the cut zone, never
// closer in a fast move, never into a liquidation) and moves a margin the
// free balance funds; 0 when none
// does. Lower leverages only move more margin: the search stops at the
// first the free balance cannot fund.
func fundedIsolation(m *Model, pl *Plan, want exchange.Settings, floor decimal.Decimal, optedIn bool) int {
	for lev := want.Leverage - 1; lev >= 1; lev-- {
		p := m.Predict(pl, exchange.Settings{Leverage: lev, Cross: want.Cross})
		if p == nil || !p.Stressed || !p.FreeKnown || !p.Affordable {
			return 0
		}
		if _, after := p.Distances(); !after.IsPositive() || after.LessThan(floor) || m.invariant(p, pl.Sym.Name) != "" {
			continue
		}
		if p.gridVeto(pl.Sym.Name, true, optedIn) == "" {
			return lev
		}
	}
	return 0
}

// refusedHalf tries a call the exchange refused for good from this very
// leverage halfway instead of the same one again.
func refusedHalf(d *Decision, pl *Plan, predict func(), unchanged func() bool) {
	pos := pl.Pos
	if r := pl.Refused; r != nil && d.Change && d.Want == r.Settings && pos.Leverage == r.From && d.Want.Leverage < pos.Leverage {
		half := (d.Want.Leverage + pos.Leverage + 1) / 2
		d.Stepped = fmt.Sprintf("the exchange refused %dx from %dx before: trying %dx", d.Want.Leverage, pos.Leverage, half)
		d.Want.Leverage = half
		d.Change = !unchanged()
		predict()
	}
}

// decideByCost decides a plan's settings call by comparing candidates by
// their expected cost (cost.go) on a model that scores them: doing
// nothing; what the rules asked; every leverage between the one asked and
// the position's (never below the one asked), in the mode asked and, when
// an isolation was asked with a cut, in the position's own mode; and an
// isolation asked alone at every lower leverage the free balance funds.
// A candidate out of the bounds no estimate lifts (Model.invariant), of
// the rules' min_liquidation_distance, of a margin_budget a rule sets, or
// that the free balance cannot fund, or that isolates a position into
// its liquidation, is not a candidate. What the rules asked goes out when
// no candidate is cheaper; else the cheapest, or nothing, said with the
// figures.
func decideByCost(m *Model, pl *Plan, c *SettingsStep, now time.Time, d *Decision) {
	pos, sym := pl.Pos, pl.Sym.Name
	asked := d.Want // d.Pred is its candidate: Predict(asked) where it is said
	current := exchange.Settings{Leverage: pos.Leverage, Cross: pos.Cross}
	type cand struct {
		want exchange.Settings
		p    *Prediction
		cost float64
	}
	cands := make([]cand, 0, 32)
	askedOut := "" // why the call asked is no candidate (the only one said)
	consider := func(w exchange.Settings) bool {
		if w == current {
			return true
		}
		p := m.candidate(pl, w)
		if p == nil || !p.Scored {
			if w == asked {
				askedOut = "the model cannot measure it"
			}
			return true
		}
		if why := admissible(m, pl, c, now, p); why != "" {
			if w == asked {
				askedOut = why
			}
			// Lower leverages only move more margin: once the free
			// balance cannot fund one, it funds none below.
			return !p.FreeKnown || p.Affordable
		}
		cands = append(cands, cand{w, p, 0})
		return true
	}
	top := pos.Leverage
	if ml := pos.RiskLimit.MaxLeverage; ml > 0 && ml < top {
		top = ml
	}
	modes := []bool{asked.Cross}
	if asked.Cross != pos.Cross && asked.Leverage < pos.Leverage {
		modes = append(modes, pos.Cross)
	}
	for _, cross := range modes {
		for lev := asked.Leverage; lev <= top; lev++ {
			consider(exchange.Settings{Leverage: lev, Cross: cross})
		}
	}
	if asked.Cross != pos.Cross && asked.Leverage >= top {
		// An isolation asked alone: funded at a lower leverage, while the
		// free balance funds it (each lower one moves more).
		for lev := asked.Leverage - 1; lev >= 1; lev-- {
			if !consider(exchange.Settings{Leverage: lev, Cross: asked.Cross}) {
				break
			}
		}
	}

	before := m.forfeitBefore() // the candidates', with its parts
	costNothing := before.Expected
	i := m.At[sym]
	for j := range cands {
		cands[j].cost = settingsCost(cands[j].p, i, cands[j].want)
	}
	var best *cand
	var askedC *cand
	for i := range cands {
		cd := &cands[i]
		if best == nil || cheaper(cd.cost, best.cost) {
			best = cd
		}
		if cd.want == asked {
			askedC = cd
		}
	}
	// What the call asked costs, said in every reason but the call's own:
	// "as asked (isolated at 4x): 12.30", or why it is no candidate.
	askedSaid := func(b []byte) []byte {
		b = appendSettings(append(b, "as asked ("...), asked)
		b = append(b, "): "...)
		if askedC != nil {
			return appendFixed(b, askedC.cost, 2)
		}
		return append(b, askedOut...)
	}
	var chosen *cand
	switch {
	case askedC != nil && !clearlyCheaper(best.cost, askedC.cost) && !cheaper(costNothing, askedC.cost):
		chosen = askedC
	case best != nil && !cheaper(costNothing, best.cost):
		chosen = best
	}
	if chosen == nil {
		// Nothing is cheapest (or nothing else is admissible): said with
		// the figures of the call asked, the leverage cut's as "4x "
		// and the reason, made as one text with the step's note before
		// it ("skipped: ", skipNote; the isolation's reason is the text
		// after "4x ").
		b := make([]byte, 0, 256)
		b = append(b, skippedNote...)
		cut := len(b)
		b = append(strconv.AppendInt(b, int64(asked.Leverage), 10), "x "...)
		at := len(b)
		b = append(b, "would not lower the expected loss to liquidations over the horizon, first passage: now "...)
		b = appendFixed(b, costNothing, 2)
		n := len(b)
		if b = appendNearest(append(b, " ("...), before); len(b) == n+2 {
			b = b[:n] // no part is lost
		} else {
			b = append(b, ')')
		}
		b = askedSaid(append(b, "; "...))
		if best != nil && best != askedC {
			b = appendSettings(append(b, "; the cheapest other, "...), best.want)
			b = appendFixed(append(b, ": "...), best.cost, 2)
		}
		if asked.Cross != pos.Cross {
			d.Skips = append(d.Skips, Skip{Isolation: true, Want: asked, Pred: m.Predict(pl, asked), Why: "isolating " + sym + " " + string(b[at:])})
		}
		if asked.Leverage < pos.Leverage {
			note := string(b) // the step's note, the reason after "skipped: "
			d.Skips = append(d.Skips, Skip{Want: asked, Asked: asked.Leverage, Why: note[cut:], note: note})
		}
		if asked.Cross != pos.Cross {
			c.Isolate = false
		}
		d.Want, d.Change, d.Pred, d.Stepped = current, false, nil, ""
		return
	}
	describe := func(w exchange.Settings) string { return string(appendSettings(nil, w)) }
	if chosen.want.Cross != asked.Cross {
		c.Isolate = false
		d.Skips = append(d.Skips, Skip{Isolation: true, Want: asked, Pred: m.Predict(pl, asked),
			Why: fmt.Sprintf("isolating %s costs more in expectation: %s; %s: %.2f (now %.2f)", sym, askedSaid(nil), describe(chosen.want), chosen.cost, costNothing)})
	}
	if chosen != askedC {
		d.Stepped = fmt.Sprintf("%s: expected loss to liquidations %.2f → %.2f, the cheapest (%s)", describe(chosen.want), costNothing, chosen.cost, askedSaid(nil))
	}
	d.Want, d.Change, d.Pred = chosen.want, chosen.want != current, chosen.p
	if d.Change {
		d.Pred = m.Predict(pl, chosen.want) // the candidate's, with the account measure to say
	}
}

// settingsCost is a settings call's expected cost (its prediction p, on
// the position at index i of the account, set to want): the account's
// expected forfeit after it, plus the margin it moves into an isolated
// position times the probability that the position's liquidation point
// is touched: that margin is forfeited with it (a cut that pours the free
// balance into a position falling all day loses the margin it moved, where
// the position alone would have lost its own).
func settingsCost(p *Prediction, i int, want exchange.Settings) float64 {
	c := p.ForfeitAfter.Expected
	if want.Cross || !p.MarginMoved.IsPositive() {
		return c
	}
	touch := 0.0
	for _, part := range p.ForfeitAfter.Parts {
		if part.At == i {
			touch += part.Weight * part.Prob
		}
	}
	return c + min(touch, 1)*p.MarginMoved.InexactFloat64()
}

// admissible is why a candidate's prediction p is no candidate ("" when
// it is one): the bounds no estimate lifts (Model.invariant), an
// isolation into its liquidation, the rules' min_liquidation_distance for
// a call that moves the position closer, a margin_budget a rule sets (the
// default share binds only where calls are not scored: the measure
// counts what the pool loses), and what the free balance cannot fund.
func admissible(m *Model, pl *Plan, c *SettingsStep, now time.Time, p *Prediction) string {
	if why := m.invariant(p, pl.Sym.Name); why != "" {
		return why
	}
	// The rules' floor binds a call that moves a position closer, its
	// own or another's: worked out only for one.
	floor := func() decimal.Decimal { return decimal.Max(rulesFloor(pl, c.isolateKind), rulesFloor(pl, c.lowerKind)) }
	if p.Closer() {
		floor := floor()
		_, after := p.Distances()
		if !after.IsPositive() {
			return fmt.Sprintf("%dx would put it past its liquidation price", p.Leverage)
		}
		if after.LessThan(floor) {
			return fmt.Sprintf("the liquidation price would end %s%% away, under the floor of %s%% (min_liquidation_distance)",
				after.Shift(2).StringFixed(2), floor.Shift(2).StringFixed(2))
		}
	}
	// A call on one position does not sacrifice another: no position it
	// moves closer ends under OthersFloor (or the rules' floor), and none
	// that survives every likely move now is made to fail one.
	var others *decimal.Decimal
	for _, o := range p.others {
		if !o.closer() {
			continue
		}
		if others == nil {
			others = new(decimal.Max(floor(), decimal.NewFromFloat(OthersFloor)))
		}
		if o.distAfter.LessThan(*others) {
			return fmt.Sprintf("%dx would move %s, under %s%%", p.Leverage, o, others.Shift(2).StringFixed(2))
		}
	}
	if p.Stressed {
		if nf := margin.NewlyFatal(p.StressBefore, p.StressAfter, pl.Sym.Name); len(nf) > 0 {
			return fmt.Sprintf("%dx would make a likely move fatal to %s (stress grid)", p.Leverage, nf[0])
		}
	}
	if p.FreeKnown && !p.Affordable {
		return fmt.Sprintf("the free balance cannot fund %dx (%s more margin, %s free)", p.Leverage, p.MarginMoved.Round(2), p.FreeAfter.Add(p.MarginMoved).Round(2))
	}
	if ok, why := withinSetBudget(pl, c.lowerKind, now, p); !ok {
		return why
	}
	return ""
}
