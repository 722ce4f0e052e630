package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/riskguard/riskguard/engine/act"
	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/engine/control"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/engine/lane"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/engine/model"
	"github.com/riskguard/riskguard/engine/reconcile"
	"github.com/riskguard/riskguard/engine/window"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// evaluator is the rule evaluation (tick-owned): the rule set in force
// laid out for the loop, the book of rule states by position with the
// row join that finds them, what the rules failing at run time and the
// index prices' staleness need remembered, and the scratch every
// evaluation reuses so that a tick does not allocate per rule. The engine
// hands it the tick's view and rows; it returns the plans, and reaches
// back for nothing: its collaborators (evalDeps) are given once.
type evaluator struct {
	evalDeps
	// interval and staleAfter are the engine's settings it reads
	// (Config.Interval, Config.StaleAfter).
	interval, staleAfter time.Duration
	// intents are orders of unknown outcome taken over at the start (or
	// from the last leader) whose position has no state yet, by position
	// id: their rules' cooldowns are applied when it is first seen.
	intents map[string][]act.Intent

	// moneyTV and moneyRows are the tick's view and rows, for money;
	// moneyVal its answer once asked (moneyAsked).
	moneyTV    *market.View
	moneyRows  []tickRow
	moneyAsked bool
	moneyVal   money

	set *rules.Set
	// book is the rule states by position (engine/alert), names the rule
	// set's names by index.
	book  *alert.Book[posExtra]
	names []string
	// kinds are the action kinds the engine knows (Deps.Kinds), each
	// with its own state.
	kinds    act.Kinds
	failing  []bool // by rule index: the last evaluation failed at run time
	nFailing int    // how many of failing are true
	// win is the rule set's functions over the recent past (the
	// positions' series are in their posState).
	win *window.Store
	// reasons caches the texts of the no-data errors of functions over
	// time and account fields.
	reasons map[[2]string]string
	// hasAccountRules: the set has rules of scope account.
	hasAccountRules bool
	// posRules are the set's position rules, in order (bindRules).
	posRules []posRule
	// acct is the tick's account, computed once when a rule reads it.
	acct rules.Account
	// stateEpoch moves whenever rule states are written other than by
	// evaluate's steps (posExtra.inactive).
	stateEpoch uint64
	// badItems are the unreadable items last reported, "what id" → why.
	badItems map[string]string
	// indexSeen is when each index price last changed (staleAfter).
	indexSeen map[string]indexSeen
	// actedSince: a rule's cooldown started since the active rules were
	// last published (takeActed), a change no transition says.
	actedSince bool

	// rows join the tick's view with the rule states (join), of the
	// snapshot rowsOf; rowGen counts the joins; rowFresh holds the keys
	// of the join's rows that have no state yet, for telling duplicates.
	rows     []tickRow
	rowsOf   *market.Snapshot
	rowGen   uint64
	rowFresh map[market.Key]struct{}
	// seen counts the book's entries the tick marked seen (markSeen):
	// when it is every entry, none is gone.
	seen int

	// Scratch reused by every evaluation so a tick does not allocate per
	// rule; plans are the tick's plans handed to the dispatcher, let go
	// by finish.
	plans   []*act.Plan
	plan    act.Plan
	env     rules.Env
	acctEnv rules.Env // the account rules' environment
	ev      rules.Evaluator
	// lent are the tick's plans with their environments (planOf), free
	// those given back: finish gives the tick's back when the dispatcher
	// holds none of them (settled), so that a plan and its environment
	// (a kilobyte) are made once, not once per position acting.
	lent, free []*planBox
}

// planBox is a plan that left evaluate's loop with its environment, in
// one piece.
type planBox struct {
	pl  act.Plan
	env rules.Env
}

// evalDeps are the evaluator's collaborators.
type evalDeps struct {
	// jr says the transitions, the rule errors and the account rules'
	// notify actions; ctl resolves the acknowledgements of the alerts
	// that resolve.
	jr      *journal.Journal
	ctl     *control.Service
	log     *slog.Logger
	metrics *journal.Metrics
	// model computes the tick's account for the rules that read it.
	model *model.Watch
	// lane takes in each evaluated position's distance.
	lane *lane.Lane
	// changed marks the state to be saved.
	changed func()
	// recon names what became of a position gone: liquidated, closed,
	// turned over.
	recon *reconcile.Reconciler
}

// posState is the state of every rule on one position, aligned with the
// current rule set (engine/alert's book entry), with what the evaluator
// keeps beside it.
type posState = alert.Entry[posExtra]

// posExtra is what the evaluator keeps of a position beside its rule states.
type posExtra struct {
	// rowGen and closedGen are the row build (evaluator.rowGen) that last
	// listed the position non-empty and empty: a second non-empty row in
	// one build is a duplicate, an empty one closes the position.
	rowGen, closedGen uint64
	// mm is the position's maintenance margin, worked out from mmIn.
	// series is the position's samples for the windowed terms.
	series window.Series
	// refused is the last settings call the exchange refused for good,
	// from the leverage the position had: never sent again unchanged.
	refused act.Refusal
	// inactive has bit ri set when rule ri's state is known to be
	// Inactive, so that quietRun need not read the state (a cache miss
	// per rule and position, the states being large): evaluate sets a bit
	// where it finds the state Inactive and clears it where a step leaves
	// another. It holds only while inactiveEpoch is evaluator.stateEpoch: a
	// restore, a takeover or a reload writes states without evaluate and
	// moves the epoch. A clear bit says nothing (rules past the 64th never
	// have one).
	inactive      uint64
	inactiveEpoch uint64
}

// indexSeen tracks when an index price last changed, for StaleAfter.
type indexSeen struct {
	price   decimal.Decimal
	changed time.Time
}

// newEvaluator lays out set (whose kinds are known) for evaluation, with
// an empty book. Its collaborators come with connect, once they exist: the
// state file is restored into the book before the journal is open.
func newEvaluator(set *rules.Set, kinds act.Kinds, win *window.Store, cfg Config) evaluator {
	v := evaluator{
		set:        set,
		book:       alert.NewBook[posExtra](),
		names:      ruleNames(set),
		kinds:      kinds,
		failing:    make([]bool, len(set.Rules)),
		win:        win,
		reasons:    make(map[[2]string]string),
		indexSeen:  make(map[string]indexSeen),
		stateEpoch: 1,
	}
	v.setConfig(cfg)
	v.bindRules(set)
	v.hasAccountRules = slices.ContainsFunc(set.Rules, (*rules.Rule).Account)
	return v
}

// connect gives the evaluator its collaborators.
func (v *evaluator) connect(d evalDeps) { v.evalDeps = d }

// setConfig takes in the settings the evaluator reads.
func (v *evaluator) setConfig(cfg Config) { v.interval, v.staleAfter = cfg.Interval, cfg.StaleAfter }

// ruleSet is the rule set in force.
func (v *evaluator) ruleSet() *rules.Set { return v.set }

// emit hands ev to the journal, with the tick's report when there is one.
func (v *evaluator) emit(ctx context.Context, rep *TickReport, ev event) {
	v.jr.Emit(ctx, rep.report(), ev)
}

// rebind puts set in force: the states of the rules unchanged (same name
// and fingerprint) move with them, the others start inactive. It returns
// how many rules kept their state, or why set cannot be used (it leaves
// the old set in force then).
func (v *evaluator) rebind(set *rules.Set) (kept int, err error) {
	if err := v.kinds.Check(set); err != nil {
		return 0, err
	}
	oldIdx := make(map[string]int, len(v.set.Rules))
	for i, r := range v.set.Rules {
		oldIdx[r.Name+"\x00"+r.Fingerprint()] = i
	}
	mapping := make([]int, len(set.Rules))
	for i, r := range set.Rules {
		j, ok := oldIdx[r.Name+"\x00"+r.Fingerprint()]
		if !ok {
			j = -1
		} else {
			kept++
		}
		mapping[i] = j
	}
	v.book.Remap(mapping)
	v.stateEpoch++ // the states moved with their rules
	v.set, v.names = set, ruleNames(set)
	v.win.Bind(set)
	v.bindRules(set)
	v.hasAccountRules = slices.ContainsFunc(set.Rules, (*rules.Rule).Account)
	v.failing, v.nFailing = make([]bool, len(set.Rules)), 0
	v.changed()
	return kept, nil
}

// restore puts the saved states of the rules whose fingerprint is
// unchanged into the book, each of its times passed through clamp first.
func (v *evaluator) restore(s *savedState, clamp func(*time.Time)) {
	v.stateEpoch++ // states written from the file
	for ri, r := range v.set.Rules {
		sr, ok := s.Rules[r.Name]
		if !ok || sr.Fingerprint != r.Fingerprint() {
			continue
		}
		for saved, st := range sr.Positions {
			for _, t := range []*time.Time{&st.ActiveAt, &st.FiredAt, &st.LastTrueAt, &st.LastActionAt, &st.HarmNotedAt, &st.BudgetFrom, &st.MissingSince} {
				clamp(t)
			}
			key := market.ParseKey(saved)
			ps := v.book.Get(key)
			if ps == nil {
				ps = v.book.Ensure(key, s.Symbols[saved], len(v.set.Rules))
			}
			ps.Rules[ri] = st
		}
	}
}

// takeover merges the last leader's rule states into the book: the
// cooldowns, harm notes and margin budgets are the later of the two (a
// time after now is not credible); the pending and firing states stay
// this process's own (it evaluated every tick).
func (v *evaluator) takeover(s *savedState, now time.Time) {
	v.stateEpoch++ // states written from the last leader's
	later := func(a, b time.Time) time.Time {
		if b.After(a) && !b.After(now) {
			return b
		}
		return a
	}
	for ri, r := range v.set.Rules {
		sr, ok := s.Rules[r.Name]
		if !ok || sr.Fingerprint != r.Fingerprint() {
			continue
		}
		for saved, st := range sr.Positions {
			key := market.ParseKey(saved)
			ps := v.book.Get(key)
			if ps == nil {
				ps = v.book.Ensure(key, s.Symbols[saved], len(v.set.Rules))
				ps.Rules[ri] = st
				continue
			}
			mine := &ps.Rules[ri]
			mine.LastActionAt = later(mine.LastActionAt, st.LastActionAt)
			mine.HarmNotedAt = later(mine.HarmNotedAt, st.HarmNotedAt)
			if st.BudgetFrom.After(mine.BudgetFrom) || st.BudgetFrom.Equal(mine.BudgetFrom) && st.MarginMoved > mine.MarginMoved {
				mine.BudgetFrom, mine.MarginMoved = st.BudgetFrom, st.MarginMoved
			}
		}
	}
}

// save puts the states that are not zero into s, by rule and position,
// with the positions' symbols.
func (v *evaluator) save(s *savedState) {
	s.Rules, s.Symbols = make(map[string]savedRule, len(v.set.Rules)), make(map[string]string, v.book.Len())
	for ri, r := range v.set.Rules {
		sr := savedRule{Fingerprint: r.Fingerprint(), Positions: make(map[string]alert.RuleState)}
		for key, ps := range v.book.All() {
			if ri < len(ps.Rules) && ps.Rules[ri] != (alert.RuleState{}) {
				sr.Positions[key.String()] = ps.Rules[ri]
				s.Symbols[key.String()] = ps.Symbol
			}
		}
		s.Rules[r.Name] = sr
	}
}

// account is the tick's account, when the tick made it (a rule reads
// it).
func (v *evaluator) account() (*rules.Account, bool) { return &v.acct, v.win.NeedAccount() }

// alerts lists the rules whose state is, by position, one in, in the
// book's list, which the next call writes again (alert.Book.AlertsView).
func (v *evaluator) alerts(in func(alert.State) bool) []alert.Alert {
	return v.book.AlertsView(v.names, in)
}

// hot lists the rules that can change something and are pending or
// firing on a position or the account, sorted by symbol and rule.
func (v *evaluator) hot() []alert.Alert {
	out := v.book.Alerts(v.names, func(s alert.State) bool { return s == alert.Pending || s == alert.Firing })
	acting := make(map[string]bool, len(v.set.Rules))
	for _, r := range v.set.Rules {
		acting[r.Name] = lane.Acts(r)
	}
	out = slices.DeleteFunc(out, func(a alert.Alert) bool { return !acting[a.Rule] })
	for i := range out {
		out[i].Since = time.Time{} // the lane reads the states only
	}
	return out
}

// counts counts rule states by rule, for the metrics.
func (v *evaluator) counts() map[string]*[4]int { return v.book.Counts(v.names) }

// acted starts the cooldown of rule r (index idx), whose state on key was
// st under the rule set setAt: its actions succeeded at now.
func (v *evaluator) acted(now time.Time, key market.Key, idx int, r *rules.Rule, st *alert.RuleState, setAt *rules.Set) {
	if st := v.stateNow(key, idx, r, st, setAt); st != nil {
		st.LastActionAt, st.Skipped, st.SkippedMoney, st.SkippedFree = now, false, 0, 0
		v.actedSince = true
		v.changed()
	}
}

// money is the account's money as act.Model.MoneySig says it.
type money struct {
	sig  uint64
	free float64
	ok   bool
}

// money is the tick's act.Model.MoneySig, from the tick's model built when
// first asked (moneyChanged, skipped); not ok outside a tick.
func (v *evaluator) money() money {
	if !v.moneyAsked && v.model != nil && v.moneyTV != nil {
		v.moneyVal.sig, v.moneyVal.free, v.moneyVal.ok = v.model.Account(v.moneyTV).MoneySig()
		v.moneyAsked = true
	}
	return v.moneyVal
}

// skipped starts the cooldown of rule r as acted does, its actions all
// left out as unfunded, bounded or harmful at now: it remembers the
// account's money then, so that the rule decides again once it changes.
func (v *evaluator) skipped(now time.Time, key market.Key, idx int, r *rules.Rule, st *alert.RuleState, setAt *rules.Set) {
	if st := v.stateNow(key, idx, r, st, setAt); st != nil {
		st.LastActionAt, st.Skipped, st.SkippedMoney, st.SkippedFree = now, false, 0, 0
		if m := v.money(); m.ok {
			st.Skipped, st.SkippedMoney, st.SkippedFree = true, m.sig, m.free
		}
		v.actedSince = true
		v.changed()
	}
}

// moneyChanged reports whether a firing rule whose last actions were all
// skipped may decide again inside its cooldown: the account's money (the
// free balance, the positions' margins and sizes) differs from when it
// skipped. It logs the decision made again.
func (v *evaluator) moneyChanged(now time.Time, r *rules.Rule, st *alert.RuleState, symbol string) bool {
	if !st.Skipped || st.State != alert.Firing || !st.LastTrueAt.Equal(now) {
		return false
	}
	m := v.money()
	if !m.ok || (m.sig == st.SkippedMoney && !act.MoneyMoved(st.SkippedFree, m.free)) {
		return false
	}
	v.log.Info("deciding again inside the cooldown: the account's money changed since its actions were skipped", "rule", r.Name, "symbol", symbol,
		"skipped_at", st.LastActionAt.UTC().Format(time.RFC3339))
	return true
}

// takeActed reports whether a rule acted since it was last asked.
func (v *evaluator) takeActed() bool {
	a := v.actedSince
	v.actedSince = false
	return a
}

// evaluate runs every rule on every non-empty row of the tick's view tv
// (rows are its join with the rule states, of join) and returns the plans
// of the positions with actions due, for the dispatcher, and the account
// rules whose actions are due, for finish.
func (v *evaluator) evaluate(ctx context.Context, now time.Time, tv *market.View, rows []tickRow, rep *TickReport) ([]*act.Plan, []*act.AccountDue) {
	plans := v.plans[:0] // the positions with actions due, run once every position is evaluated
	v.begin(ctx, now, tv, rows)
	due := v.evaluateAccount(ctx, now, rows, rep)
	for i := range rows {
		row := &rows[i]
		p, sym := row.P, row.Sym
		if p.Empty {
			continue // closed: join marked its state
		}
		if row.dup || sym == nil {
			v.passOver(row, now)
			continue
		}
		rep.Positions++
		why, hasIndex := v.rowIndex(tv.Snap, row, now)
		if !hasIndex {
			v.log.Warn("no usable index price", "symbol", sym.Name, "reason", why)
		}
		market.FillRow(&v.env, row.Row, hasIndex, now)
		v.lane.Observe(sym.Name, &v.env)
		ps := row.ps
		if ps == nil || len(ps.Rules) != len(v.set.Rules) {
			ps = v.posState(row.Key, sym.Name)
			row.ps = ps
		} else if ps.Symbol != sym.Name {
			ps.Symbol = sym.Name
		}
		v.markListed(ps, now)
		if v.win.Positional() {
			v.win.SamplePosition(ctx, now, &ps.X.series, &v.env, row.IndexName)
		}
		pl := &v.plan // scratch: see planOf
		if !pl.Empty() {
			*pl = act.Plan{}
		}
		// valid: the position's inputs have data, so a rule that reads
		// neither windows nor the account is evaluated without the
		// checks (condition's) it would pass anyway.
		valid := why == "" && v.env.NoData() == ""
		// Locals the compiler keeps in registers across the loop.
		posRules, states, env := v.posRules, ps.Rules, &v.env
		// quick: plain rules may run through quietRun, which steps over the
		// false ones on inactive states without leaving its loop.
		quick := valid && v.nFailing == 0
		// known: the rules whose state is known Inactive (posExtra.inactive),
		// kept up to date below wherever a state is read or stepped.
		var known uint64
		if ps.X.inactiveEpoch == v.stateEpoch {
			known = ps.X.inactive
		}
		evals := 0
		for k := 0; k < len(posRules); k++ {
			pr := &posRules[k]
			ri := pr.ri
			var cond alert.Condition
			var reason, of string
			if pr.plain && valid {
				// The common case: a rule of every symbol without windows
				// or account fields on a position with data, through its
				// fast path. condition would find nothing missing.
				var b, ok bool
				if quick {
					j := quietRun(posRules, k, pr.runEnd, states, env, &known, &b, &ok)
					if j == pr.runEnd {
						evals += j - k
						k = j - 1
						continue // the whole run false on inactive rules
					}
					evals += j - k + 1
					k, pr = j, &posRules[j]
					ri = pr.ri
				} else {
					evals++
					b, ok = pr.fast(env)
				}
				switch {
				case !ok || (v.nFailing != 0 && v.failing[ri]):
					var err error
					b, err = v.ev.EvalPrechecked(pr.r, env)
					cond, reason = v.outcome(ri, pr.r, env, why, b, err)
				case b:
					cond = alert.True
				case states[ri].State == alert.Inactive:
					known |= 1 << ri
					continue // false on an inactive rule: nothing to step
				default:
					cond = alert.False
				}
			} else {
				r := pr.r
				if pr.symbols && !r.AppliesTo(sym.Name) {
					continue
				}
				if pr.windows {
					v.win.Fill(ri, env)
				}
				evals++
				if valid && !pr.checks {
					b, err := v.ev.EvalPrechecked(r, env)
					cond, reason = v.outcome(ri, r, env, why, b, err)
				} else {
					cond, reason, of = v.conditionOf(ri, r, env, why)
				}
				if cond == alert.False && states[ri].State == alert.Inactive {
					known |= 1 << ri
					continue
				}
			}
			r, st := pr.r, &states[ri]
			if stepNoop(r, st, cond) {
				continue // no data again, ignored or failed: nothing to step
			}
			if of != "" {
				reason = v.reasonOf(of, reason) // made only when it may be said
			}
			acts := v.step(ctx, now, rep, r, st, cond, reason, env, sym.Name, p.ID)
			if st.State == alert.Inactive {
				known |= 1 << ri
			} else {
				known &^= 1 << ri
			}
			if acts {
				pl.Pos, pl.Sym, pl.Names = p, sym, v.names
				pl.Add(v.kinds, ri, r, st, nil, &v.ev, env)
			}
		}
		ps.X.inactive, ps.X.inactiveEpoch = known, v.stateEpoch
		rep.Evaluations += evals
		for _, d := range due {
			if d.Targets[row.Key] {
				pl.Pos, pl.Sym, pl.Names = row.P, row.Sym, v.names
				pl.Add(v.kinds, d.Idx, d.Rule, d.St, d, &v.ev, &v.env)
			}
		}
		if !pl.Empty() {
			plans = append(plans, v.planOf(ps)) // only a plan with actions leaves the loop
		}
	}
	v.plans = plans
	return plans, due
}

// passOver takes in a row of the tick at now that is not evaluated: a
// duplicate, or a position of an unknown symbol, whose state is kept.
func (v *evaluator) passOver(row *tickRow, now time.Time) {
	p := row.P
	if row.dup {
		// Two positions with one identity (the spec forms the id from
		// user and symbol): each is evaluated under its direction; a
		// true duplicate is reported and the second skipped.
		v.log.Error("two positions in one answer share an identity; the second is skipped", "position", p.ID, "direction", p.Direction)
		return
	}
	// Keep what the rules remember of it: the symbol may be known again
	// after the next refresh.
	if ps := row.ps; ps != nil {
		v.markSeen(ps, now)
	}
	v.log.Error("position names an unknown symbol; skipped", "position", p.ID, "symbolId", p.SymbolID)
}

// planOf is the plan built in v.plan for the position of state ps, with
// its own copy of the environment it was decided on, to leave the loop.
// The plan is built in scratch the engine keeps: one that stays empty
// (nearly every position, every tick) costs nothing. Only Add changes its
// other fields, and Add leaves it not Empty: an empty one is as new but
// for its position, which is set before the first Add (an empty plan's is
// never read). The plan and its environment are a box of a past tick
// whose plans were all settled (finish), or a new one; the scratch takes
// the box's emptied plan (Plan.Reset), its lists' arrays and its steps
// for the next plan.
func (v *evaluator) planOf(ps *posState) *act.Plan {
	var b *planBox
	if n := len(v.free); n > 0 {
		b, v.free[n-1] = v.free[n-1], nil
		v.free = v.free[:n-1]
	} else {
		b = new(planBox)
	}
	v.lent = append(v.lent, b)
	// The box takes the plan built, and the scratch the box's emptied
	// lists and steps (finish), for the next position's plan.
	b.pl, v.plan = v.plan, b.pl
	b.env = v.env
	b.pl.Refused, b.pl.Env = &ps.X.refused, &b.env
	return &b.pl
}

// begin starts the tick's evaluation of view tv and its rows: the money
// asked of the model is of them, the unreadable items are said, and the
// account is made and sampled when a rule reads it.
func (v *evaluator) begin(ctx context.Context, now time.Time, tv *market.View, rows []tickRow) {
	v.seen = 0
	v.moneyTV, v.moneyRows, v.moneyAsked = tv, rows, false
	v.unreadable(ctx, now, tv.Snap)
	v.win.Begin()
	if v.win.NeedAccount() {
		v.acct = v.model.AccountOf(tv)
		v.env.Account = v.acct
		v.acctEnv.FillAccount(&v.acct, now)
		v.win.SampleAccount(ctx, now, &v.acctEnv)
	}
}

// finish closes the tick once its plans were handed to the dispatcher:
// the account rules' cooldowns (accountDone) and the positions gone
// (forgetGone). settled says that the dispatcher holds no plan: every
// plan's calls ended and its outcome was said (Dispatcher.Idle), so the
// tick's plans are reused by the next ticks; otherwise they are let go.
func (v *evaluator) finish(ctx context.Context, now time.Time, due []*act.AccountDue, rep *TickReport, settled bool) {
	clear(v.plans) // the dispatcher is done with them
	if settled {
		for _, b := range v.lent {
			b.pl.Reset() // let go of what it pointed to, its lists kept; env is overwritten when lent again
		}
		v.free = append(v.free, v.lent...)
	}
	clear(v.lent)
	v.lent = v.lent[:0]
	v.accountDone(now, due)
	v.forgetGone(ctx, now, rep)
}

// stepRule evaluates rule ri on env, steps its state st and says the
// transition; it reports whether the rule's actions are due. symbol and
// position name what it was evaluated on (the account for an account
// rule); indexWhy is why the index price is unusable, if it is.
func (v *evaluator) stepRule(ctx context.Context, now time.Time, rep *TickReport, ri int, r *rules.Rule, st *alert.RuleState, env *rules.Env, symbol, position, indexWhy string) bool {
	rep.Evaluations++
	cond, reason := v.condition(ri, r, env, indexWhy)
	return v.step(ctx, now, rep, r, st, cond, reason, env, symbol, position)
}

// step steps rule r's state st by the evaluation's outcome cond (reason
// says why when it is not True or False) and says the transition; it
// reports whether the rule's actions are due. evaluate calls it directly
// for the position rules, having evaluated them itself.
func (v *evaluator) step(ctx context.Context, now time.Time, rep *TickReport, r *rules.Rule, st *alert.RuleState, cond alert.Condition, reason string, env *rules.Env, symbol, position string) bool {
	switch {
	case cond == alert.Invalid && r.OnNoData == rules.NoDataIgnore, cond == unhealthy:
		return false
	case cond == alert.False && st.State == alert.Inactive:
		return false // the common case: nothing to step
	}
	prev := *st
	next, tr := alert.Step(prev, cond, now, alert.Timing{For: r.For, KeepFiringFor: r.KeepFiringFor, Cooldown: r.Cooldown})
	*st = next
	due := alert.ActionDue(next, now, r.Cooldown)
	if !due && next.Skipped {
		due = v.moneyChanged(now, r, st, symbol)
	}
	if tr != "" {
		v.changed()
		// A rule whose notify action runs now tells of its firing
		// itself: one message per event and channel.
		quiet := tr == alert.ToFiring && due && r.HasAction(rules.Notify)
		ev := transitionEvent(now, r, symbol, position, prev.State, next.State, tr, reason, quiet, env)
		if next.State == alert.Inactive {
			v.ctl.ResolveAcks(ctx, rep.report(), now, r.Name, symbol, ev) // an acknowledgement lasts until its alert resolves
		} else {
			v.emit(ctx, rep, ev)
		}
	}
	return due
}

// unhealthy is a Condition private to the engine: the rule failed at run
// time for a reason other than missing data.
const unhealthy alert.Condition = 255

// condition evaluates r on env.
func (v *evaluator) condition(ri int, r *rules.Rule, env *rules.Env, indexWhy string) (alert.Condition, string) {
	cond, reason, of := v.conditionOf(ri, r, env, indexWhy)
	if of != "" {
		reason = v.reasonOf(of, reason)
	}
	return cond, reason
}

// conditionOf is condition without making the text of a windowed term's or
// an account field's no data: when of is not "", cond is Invalid, and the
// reason is reasonOf(of, reason).
func (v *evaluator) conditionOf(ri int, r *rules.Rule, env *rules.Env, indexWhy string) (cond alert.Condition, reason, of string) {
	if indexWhy == "" && env.NoData() == "" {
		if of, why := r.Missing(env); of != "" {
			return alert.Invalid, why, of
		}
	}
	ok, err := v.ev.Eval(r, env)
	cond, reason = v.outcome(ri, r, env, indexWhy, ok, err)
	return cond, reason, ""
}

// stepNoop reports whether step would change nothing and act on nothing:
// a rule that ignores no data, or failed, or has no data again.
func stepNoop(r *rules.Rule, st *alert.RuleState, cond alert.Condition) bool {
	switch cond {
	case unhealthy:
		return true
	case alert.Invalid:
		// Step leaves a nodata rule as it is (and a nodata rule never
		// acts).
		return r.OnNoData == rules.NoDataIgnore || st.State == alert.NoData
	}
	return false
}

// outcome is the Condition of an evaluation of r on env that gave ok and
// err, with the reason when it has no data or failed.
func (v *evaluator) outcome(ri int, r *rules.Rule, env *rules.Env, indexWhy string, ok bool, err error) (alert.Condition, string) {
	switch {
	case err == nil:
		if v.failing[ri] {
			v.failing[ri] = false
			v.nFailing--
			v.log.Info("rule evaluates again", "rule", r.Name)
		}
		if ok {
			return alert.True, ""
		}
		return alert.False, ""
	case errors.Is(err, rules.ErrNoData):
		reason := env.NoData()
		if indexWhy != "" {
			reason = indexWhy
		}
		if reason == "" {
			reason = err.Error()
		}
		return alert.Invalid, reason
	default:
		v.emit(context.Background(), nil, ruleErrorEvent(r, env.Position.Symbol, err, !v.failing[ri]))
		if !v.failing[ri] {
			v.failing[ri] = true
			v.nFailing++
		}
		return unhealthy, err.Error()
	}
}

// posState returns the state of the rules on a position, creating it.
func (v *evaluator) posState(key market.Key, symbol string) *posState {
	ps := v.book.Ensure(key, symbol, len(v.set.Rules))
	if ins, ok := v.intents[key.ID]; ok {
		delete(v.intents, key.ID)
		for _, in := range ins {
			v.cooldownFrom(ps, in)
		}
	}
	return ps
}

// adopt takes over an order whose outcome was never recorded: its rules'
// cooldowns on its position count from it (now on a position the book
// has, else when the position is first seen), so the order is not sent
// again inside them.
func (v *evaluator) adopt(in act.Intent) {
	found := false
	for key, ps := range v.book.All() {
		if key.ID == in.Position {
			v.cooldownFrom(ps, in)
			found = true
		}
	}
	if !found {
		if v.intents == nil {
			v.intents = map[string][]act.Intent{}
		}
		v.intents[in.Position] = append(v.intents[in.Position], in)
	}
}

// cooldownFrom starts the cooldowns of in's rules on ps at in.At, unless
// they started later.
func (v *evaluator) cooldownFrom(ps *posState, in act.Intent) {
	for ri, r := range v.set.Rules {
		if ri < len(ps.Rules) && slices.Contains(in.Rules, r.Name) && in.At.After(ps.Rules[ri].LastActionAt) {
			ps.Rules[ri].LastActionAt = in.At
			v.stateEpoch++
			v.changed()
		}
	}
}

// forgetGone drops the state of positions that were closed: listed empty
// (closed), at once; missing from the answer, after a grace period — at
// least the longest cooldown, for or keep_firing_for of the rules active or
// having acted on it, and two intervals — so that an answer that is empty
// now and then does not wipe cooldowns (a returning position keeps them).
// A rule that was firing on a forgotten position resolves.
func (v *evaluator) forgetGone(ctx context.Context, now time.Time, rep *TickReport) {
	if v.seen == v.book.Len() {
		return // every position the guard keeps was seen in this tick
	}
	var gone []market.Key
	for key, ps := range v.book.All() {
		if ps.Seen.Equal(now) {
			continue
		}
		if ps.X.closedGen != v.rowGen {
			if ps.MissingSince.IsZero() {
				ps.MissingSince = now
			}
			if now.Sub(ps.MissingSince) < v.grace(ps) {
				continue
			}
		}
		gone = append(gone, key)
	}
	// A deterministic order for the audit log and replays.
	slices.SortFunc(gone, func(a, b market.Key) int { return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.Dir, b.Dir)) })
	for _, key := range gone {
		ps := v.book.Get(key)
		reason, why := "position closed", "listed empty"
		if ps.X.closedGen != v.rowGen {
			reason = fmt.Sprintf("position not listed for %s", now.Sub(ps.MissingSince).Round(time.Second))
			why = reason[len("position "):]
		}
		// A liquidation, or a turn to the other side, is said by the
		// reconciler, critically; the rules that were firing on it do not
		// resolve with a "✅": they end quietly.
		quiet := false
		if v.recon != nil {
			said, evs := v.recon.Gone(now, key, why)
			for _, ev := range evs {
				v.emit(ctx, rep, ev)
			}
			if said == reconcile.ReasonLiquidated || said == reconcile.ReasonTurned {
				reason, quiet = said, true
			}
		}
		for ri, s := range ps.Rules {
			if s.State == alert.Inactive || ri >= len(v.set.Rules) {
				continue
			}
			r := v.set.Rules[ri]
			to, tr := alert.Inactive, alert.ToInactive
			if s.State == alert.Firing {
				tr = alert.ToResolved
			}
			v.ctl.ResolveAcks(ctx, rep.report(), now, r.Name, ps.Symbol, transitionEvent(now, r, ps.Symbol, key.ID, s.State, to, tr, reason, quiet, nil))
		}
		v.book.Forget(key)
		v.changed()
	}
}

// markSeen records that the tick at now saw the position (or the account)
// of state ps, and counts it in v.seen the first time in the tick: only
// forgetGone drops an entry, so when v.seen is the book's length every
// entry was seen.
func (v *evaluator) markSeen(ps *posState, now time.Time) {
	if !ps.Seen.Equal(now) {
		ps.Seen = now
		v.seen++
	}
}

// markListed records that the tick at now listed the position (or the
// account) of state ps: seen, and not missing.
func (v *evaluator) markListed(ps *posState, now time.Time) {
	v.markSeen(ps, now)
	if !ps.MissingSince.IsZero() {
		ps.MissingSince = time.Time{}
	}
}

// grace is how long a position missing from the answers keeps its state.
func (v *evaluator) grace(ps *posState) time.Duration {
	g := 2 * v.interval
	for ri, s := range ps.Rules {
		if ri >= len(v.set.Rules) || (s.State == alert.Inactive && s.LastActionAt.IsZero()) {
			continue
		}
		r := v.set.Rules[ri]
		g = max(g, r.Cooldown, r.For, r.KeepFiringFor)
	}
	return g
}

// unreadable reports the items of the tick's answers that could not be
// decoded — by name, in the log and the audit log when the set changes, and
// in a metric every tick — and keeps the rule states of an unreadable
// position: it has no data, which neither resolves nor forgets anything.
func (v *evaluator) unreadable(ctx context.Context, now time.Time, snap *market.Snapshot) {
	if len(snap.Partial) == 0 && len(v.badItems) == 0 {
		return // the common case: nothing to say, and the gauges read 0
	}
	current := map[string]string{}
	counts := map[string]int{}
	for _, pe := range snap.Partial {
		for _, it := range pe.Items {
			current[pe.What+" "+it.ID] = it.Err.Error()
			counts[pe.What]++
			if pe.What != "positions" || it.ID == "" {
				continue
			}
			for key, ps := range v.book.All() {
				if key.ID == it.ID {
					v.markSeen(ps, now)
				}
			}
		}
	}
	v.metrics.Unreadable(counts)
	if maps.Equal(current, v.badItems) {
		return
	}
	v.badItems = current
	if len(current) == 0 {
		v.emit(ctx, nil, event{Level: slog.LevelInfo, Msg: "every item of the answers is readable again", Audit: &journal.Record{Time: now, Type: "read", Reason: "every item readable again"}})
		return
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(current)) {
		parts = append(parts, k+": "+current[k])
	}
	text := "unreadable items, left out (the rest of each answer is used): " + strings.Join(parts, "; ")
	v.emit(ctx, nil, event{Level: slog.LevelError, Msg: text, Audit: &journal.Record{Time: now, Type: "read", Reason: text}})
}

// reasonOf is the text of a no-data error about a function over time or an
// account field, made once per pair: the few pairs recur every tick.
func (v *evaluator) reasonOf(of, why string) string {
	k := [2]string{of, why}
	r, ok := v.reasons[k]
	if !ok {
		if len(v.reasons) > 1000 {
			clear(v.reasons)
		}
		r = (&rules.NoDataError{Of: of, Reason: why}).Error()
		v.reasons[k] = r
	}
	return r
}

// posRule is a position rule of the set in force as evaluate's loop reads
// it, worked out once per set rather than once per position and rule.
type posRule struct {
	ri int
	r  *rules.Rule
	// runEnd is, for a plain rule, the end of the run of consecutive
	// plain rules it is in (an index into evaluator.posRules).
	runEnd int
	// symbols: the rule names its symbols (AppliesTo must be asked);
	// windows: it has windowed terms to set in the environment; checks:
	// it reads windows or the account, so rules.Rule.Missing may find no
	// data and the evaluation goes through condition.
	symbols, windows, checks bool
	// plain: none of the three, and the rule has a fast path, fast:
	// evaluate calls it directly on a position with data.
	plain bool
	fast  func(*rules.Env) (bool, bool)
}

// bindRules lays out the set's position rules for evaluate's loop.
func (v *evaluator) bindRules(set *rules.Set) {
	v.posRules = v.posRules[:0]
	for ri, r := range set.Rules {
		if r.Account() {
			continue
		}
		pr := posRule{ri: ri, r: r, symbols: len(r.Symbols) > 0,
			windows: v.win.Windowed(ri), checks: len(r.Windows()) > 0 || r.ReadsAccount()}
		if pr.fast = r.FastPath(); pr.fast != nil && !pr.symbols && !pr.windows && !pr.checks {
			pr.plain = true
		}
		v.posRules = append(v.posRules, pr)
	}
	end := 0
	for k := len(v.posRules) - 1; k >= 0; k-- {
		if pr := &v.posRules[k]; pr.plain {
			if k+1 == len(v.posRules) || !v.posRules[k+1].plain {
				end = k + 1
			}
			pr.runEnd = end
		}
	}
}

// quietRun runs the fast paths of the plain rules prs[k:end] on env until
// one needs more than skipping: true, no answer from its fast path (ok
// false), or false on a rule whose state is not Inactive. It returns that
// rule's index with its result in *b and *ok, or end when every one was
// false on an inactive state. A loop of its own, so that a quiet position
// costs little more than the fast paths themselves. *known has bit ri set
// for the rules whose state is known Inactive: their states are not read
// (each would be a cache miss), and a state read Inactive sets its bit.
func quietRun(prs []posRule, k, end int, states []alert.RuleState, env *rules.Env, known *uint64, b, ok *bool) int {
	prs = prs[:end]
	mask := *known
	for ; k < len(prs); k++ {
		v, good := prs[k].fast(env)
		if !good || v {
			*b, *ok, *known = v, good, mask
			return k
		}
		if ri := prs[k].ri; mask&(1<<ri) == 0 {
			if states[ri].State != alert.Inactive {
				*b, *ok, *known = v, good, mask
				return k
			}
			mask |= 1 << ri
		}
	}
	*known = mask
	return end
}

// stateNow is the state a plan's rule points at, found again when the rule
// set was reloaded since the plan was decided (the states moved with their
// rules); nil when the rule or the position is gone.
func (v *evaluator) stateNow(key market.Key, idx int, r *rules.Rule, st *alert.RuleState, setAt *rules.Set) *alert.RuleState {
	if setAt == v.set {
		return st
	}
	ps := v.book.Get(key)
	if ps == nil {
		return nil
	}
	for ri, nr := range v.set.Rules {
		if nr.Name == r.Name && nr.Fingerprint() == r.Fingerprint() && ri < len(ps.Rules) {
			return &ps.Rules[ri]
		}
	}
	return nil
}
