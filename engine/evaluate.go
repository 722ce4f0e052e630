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
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/rules"
)

// evaluate runs every rule on every non-empty position of the snapshot.
func (e *Engine) evaluate(ctx context.Context, now time.Time, snap *Snapshot, rep *TickReport) {
	var plans []*act.Plan // the positions with actions due, run once every position is evaluated
	e.seen = 0
	rows := e.buildRows(snap)
	if f, fresh := e.model.checkFit(ctx, now, &e.view, e.cfg.ModelTolerance, e.jr); fresh {
		e.metrics.ModelFit(f)
		e.board.setFit(f) // for Status; allocated only for a fresh fit
	}
	e.unreadable(ctx, now, snap)
	e.win.Begin()
	if e.win.NeedAccount() {
		e.acct = e.model.accountOf(&e.view, rows)
		e.env.Account = e.acct
		e.acctEnv.FillAccount(&e.acct, now)
		e.win.SampleAccount(ctx, now, &e.acctEnv)
	}
	due := e.evaluateAccount(ctx, now, snap, rep)
	for i := range rows {
		row := &rows[i]
		p, key := row.P, row.Key
		if p.Empty {
			continue // closed: buildRows marked its state
		}
		if row.dup {
			// Two positions with one identity (the spec forms the id from
			// user and symbol): each is evaluated under its direction; a
			// true duplicate is reported and the second skipped.
			e.log.Error("two positions in one answer share an identity; the second is skipped", "position", p.ID, "direction", p.Direction)
			continue
		}
		sym := row.Sym
		if sym == nil {
			// Keep what the rules remember of it: the symbol may be known
			// again after the next refresh.
			if ps := row.ps; ps != nil {
				e.markSeen(ps, now)
			}
			e.log.Error("position names an unknown symbol; skipped", "position", p.ID, "symbolId", p.SymbolID)
			continue
		}
		rep.Positions++
		why, hasIndex := e.rowIndex(snap, row, now)
		if !hasIndex {
			e.log.Warn("no usable index price", "symbol", sym.Name, "reason", why)
		}
		market.FillRow(&e.env, row.Row, hasIndex, now)
		e.lane.observe(sym.Name, &e.env)
		ps := row.ps
		if ps != nil && len(ps.Rules) == len(e.set.Rules) {
			if ps.Symbol != sym.Name {
				ps.Symbol = sym.Name
			}
		} else {
			ps = e.posState(key, sym.Name)
			row.ps = ps
		}
		e.markListed(ps, now)
		if e.win.Positional() {
			e.win.SamplePosition(ctx, now, &ps.X.series, &e.env, row.IndexName)
		}
		// The plan is built in scratch the engine keeps: one that stays
		// empty (nearly every position, every tick) costs nothing. Only
		// Add changes its other fields, and Add leaves it not Empty: an
		// empty one is as new but for its position, which is set before
		// the first Add (an empty plan's is never read).
		pl := &e.plan
		if !pl.Empty() {
			*pl = act.Plan{}
		}
		// valid: the position's inputs have data, so a rule that reads
		// neither windows nor the account is evaluated without the
		// checks (condition's) it would pass anyway.
		valid := why == "" && e.env.NoData() == ""
		// Locals the compiler keeps in registers across the loop.
		posRules, states, env := e.posRules, ps.Rules, &e.env
		// quick: plain rules may run through quietRun, which steps over the
		// false ones on inactive states without leaving its loop.
		quick := valid && e.nFailing == 0
		// known: the rules whose state is known Inactive (posExtra.inactive),
		// kept up to date below wherever a state is read or stepped.
		var known uint64
		if ps.X.inactiveEpoch == e.stateEpoch {
			known = ps.X.inactive
		}
		evals := 0
		for k := 0; k < len(posRules); k++ {
			pr := &posRules[k]
			ri := pr.ri
			var cond Condition
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
				case !ok || (e.nFailing != 0 && e.failing[ri]):
					var err error
					b, err = e.ev.EvalPrechecked(pr.r, env)
					cond, reason = e.outcome(ri, pr.r, env, why, b, err)
				case b:
					cond = True
				case states[ri].State == Inactive:
					known |= 1 << ri
					continue // false on an inactive rule: nothing to step
				default:
					cond = False
				}
			} else {
				r := pr.r
				if pr.symbols && !r.AppliesTo(sym.Name) {
					continue
				}
				if pr.windows {
					e.win.Fill(ri, env)
				}
				evals++
				if valid && !pr.checks {
					b, err := e.ev.EvalPrechecked(r, env)
					cond, reason = e.outcome(ri, r, env, why, b, err)
				} else {
					cond, reason, of = e.conditionOf(ri, r, env, why)
				}
				if cond == False && states[ri].State == Inactive {
					known |= 1 << ri
					continue
				}
			}
			r, st := pr.r, &states[ri]
			if stepNoop(r, st, cond) {
				continue // no data again, ignored or failed: nothing to step
			}
			if of != "" {
				reason = e.reasonOf(of, reason) // made only when it may be said
			}
			acts := e.step(ctx, now, rep, r, st, cond, reason, env, sym.Name, p.ID)
			if st.State == Inactive {
				known |= 1 << ri
			} else {
				known &^= 1 << ri
			}
			if acts {
				pl.Pos, pl.Sym = p, sym
				pl.Add(e.kinds, ri, r, st, nil, &e.ev, env)
			}
		}
		ps.X.inactive, ps.X.inactiveEpoch = known, e.stateEpoch
		rep.Evaluations += evals
		for _, d := range due {
			if d.Targets[key] {
				pl.Pos, pl.Sym = p, sym
				pl.Add(e.kinds, d.Idx, d.Rule, d.St, d, &e.ev, &e.env)
			}
		}
		if !pl.Empty() {
			run := *pl // only a plan with actions leaves the loop
			run.Refused, run.Env = &ps.X.refused, new(rules.Env)
			*run.Env = e.env
			plans = append(plans, &run)
		}
	}
	e.disp.runPlans(ctx, now, snap, plans, rep, e.set)
	e.accountDone(now, due)
	e.forgetGone(ctx, now, rep)
}

// stepRule evaluates rule ri on env, steps its state st and says the
// transition; it reports whether the rule's actions are due. symbol and
// position name what it was evaluated on (the account for an account
// rule); indexWhy is why the index price is unusable, if it is.
func (e *Engine) stepRule(ctx context.Context, now time.Time, rep *TickReport, ri int, r *rules.Rule, st *RuleState, env *rules.Env, symbol, position, indexWhy string) bool {
	rep.Evaluations++
	cond, reason := e.condition(ri, r, env, indexWhy)
	return e.step(ctx, now, rep, r, st, cond, reason, env, symbol, position)
}

// step steps rule r's state st by the evaluation's outcome cond (reason
// says why when it is not True or False) and says the transition; it
// reports whether the rule's actions are due. evaluate calls it directly
// for the position rules, having evaluated them itself.
func (e *Engine) step(ctx context.Context, now time.Time, rep *TickReport, r *rules.Rule, st *RuleState, cond Condition, reason string, env *rules.Env, symbol, position string) bool {
	switch {
	case cond == Invalid && r.OnNoData == rules.NoDataIgnore, cond == unhealthy:
		return false
	case cond == False && st.State == Inactive:
		return false // the common case: nothing to step
	}
	prev := *st
	next, tr := alert.Step(prev, cond, now, Timing{For: r.For, KeepFiringFor: r.KeepFiringFor, Cooldown: r.Cooldown})
	*st = next
	due := alert.ActionDue(next, now, r.Cooldown)
	if tr != "" {
		e.dirty = true
		// A rule whose notify action runs now tells of its firing
		// itself: one message per event and channel.
		quiet := tr == ToFiring && due && r.HasAction(rules.Notify)
		ev := transitionEvent(now, r, symbol, position, prev.State, next.State, tr, reason, quiet, env)
		if next.State == Inactive {
			e.ctl.ResolveAcks(ctx, rep.report(), now, r.Name, symbol, ev) // an acknowledgement lasts until its alert resolves
		} else {
			e.emit(ctx, rep, ev)
		}
	}
	return due
}

// unhealthy is a Condition private to the engine: the rule failed at run
// time for a reason other than missing data.
const unhealthy Condition = 255

// condition evaluates r on env.
func (e *Engine) condition(ri int, r *rules.Rule, env *rules.Env, indexWhy string) (Condition, string) {
	cond, reason, of := e.conditionOf(ri, r, env, indexWhy)
	if of != "" {
		reason = e.reasonOf(of, reason)
	}
	return cond, reason
}

// conditionOf is condition without making the text of a windowed term's or
// an account field's no data: when of is not "", cond is Invalid, and the
// reason is reasonOf(of, reason).
func (e *Engine) conditionOf(ri int, r *rules.Rule, env *rules.Env, indexWhy string) (cond Condition, reason, of string) {
	if indexWhy == "" && env.NoData() == "" {
		if of, why := r.Missing(env); of != "" {
			return Invalid, why, of
		}
	}
	ok, err := e.ev.Eval(r, env)
	cond, reason = e.outcome(ri, r, env, indexWhy, ok, err)
	return cond, reason, ""
}

// stepNoop reports whether step would change nothing and act on nothing:
// a rule that ignores no data, or failed, or has no data again.
func stepNoop(r *rules.Rule, st *RuleState, cond Condition) bool {
	switch cond {
	case unhealthy:
		return true
	case Invalid:
		// Step leaves a nodata rule as it is (and a nodata rule never
		// acts).
		return r.OnNoData == rules.NoDataIgnore || st.State == NoData
	}
	return false
}

// outcome is the Condition of an evaluation of r on env that gave ok and
// err, with the reason when it has no data or failed.
func (e *Engine) outcome(ri int, r *rules.Rule, env *rules.Env, indexWhy string, ok bool, err error) (Condition, string) {
	switch {
	case err == nil:
		if e.failing[ri] {
			e.failing[ri] = false
			e.nFailing--
			e.log.Info("rule evaluates again", "rule", r.Name)
		}
		if ok {
			return True, ""
		}
		return False, ""
	case errors.Is(err, rules.ErrNoData):
		reason := env.NoData()
		if indexWhy != "" {
			reason = indexWhy
		}
		if reason == "" {
			reason = err.Error()
		}
		return Invalid, reason
	default:
		e.emit(context.Background(), nil, ruleErrorEvent(r, env.Position.Symbol, err, !e.failing[ri]))
		if !e.failing[ri] {
			e.failing[ri] = true
			e.nFailing++
		}
		return unhealthy, err.Error()
	}
}

// posState returns the state of the rules on a position, creating it.
func (e *Engine) posState(key market.Key, symbol string) *posState {
	return e.book.Ensure(key, symbol, len(e.set.Rules))
}

// forgetGone drops the state of positions that were closed: listed empty
// (closed), at once; missing from the answer, after a grace period — at
// least the longest cooldown, for or keep_firing_for of the rules active or
// having acted on it, and two intervals — so that an answer that is empty
// now and then does not wipe cooldowns (a returning position keeps them).
// A rule that was firing on a forgotten position resolves.
func (e *Engine) forgetGone(ctx context.Context, now time.Time, rep *TickReport) {
	if e.seen == e.book.Len() {
		return // every position the guard keeps was seen in this tick
	}
	var gone []market.Key
	for key, ps := range e.book.All() {
		if ps.Seen.Equal(now) {
			continue
		}
		if ps.X.closedGen != e.rowGen {
			if ps.MissingSince.IsZero() {
				ps.MissingSince = now
			}
			if now.Sub(ps.MissingSince) < e.grace(ps) {
				continue
			}
		}
		gone = append(gone, key)
	}
	// A deterministic order for the audit log and replays.
	slices.SortFunc(gone, func(a, b market.Key) int { return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.Dir, b.Dir)) })
	for _, key := range gone {
		ps := e.book.Get(key)
		reason := "position closed"
		if ps.X.closedGen != e.rowGen {
			reason = fmt.Sprintf("position not listed for %s", now.Sub(ps.MissingSince).Round(time.Second))
		}
		for ri, s := range ps.Rules {
			if s.State == Inactive || ri >= len(e.set.Rules) {
				continue
			}
			r := e.set.Rules[ri]
			to, tr := Inactive, ToInactive
			if s.State == Firing {
				tr = ToResolved
			}
			e.ctl.ResolveAcks(ctx, rep.report(), now, r.Name, ps.Symbol, transitionEvent(now, r, ps.Symbol, key.ID, s.State, to, tr, reason, false, nil))
		}
		e.book.Forget(key)
		e.dirty = true
	}
}

// markSeen records that the tick at now saw the position (or the account)
// of state ps, and counts it in e.seen the first time in the tick: only
// forgetGone drops an entry, so when e.seen is the book's length every
// entry was seen.
func (e *Engine) markSeen(ps *posState, now time.Time) {
	if !ps.Seen.Equal(now) {
		ps.Seen = now
		e.seen++
	}
}

// markListed records that the tick at now listed the position (or the
// account) of state ps: seen, and not missing.
func (e *Engine) markListed(ps *posState, now time.Time) {
	e.markSeen(ps, now)
	if !ps.MissingSince.IsZero() {
		ps.MissingSince = time.Time{}
	}
}

// grace is how long a position missing from the answers keeps its state.
func (e *Engine) grace(ps *posState) time.Duration {
	g := 2 * e.cfg.Interval
	for ri, s := range ps.Rules {
		if ri >= len(e.set.Rules) || (s.State == Inactive && s.LastActionAt.IsZero()) {
			continue
		}
		r := e.set.Rules[ri]
		g = max(g, r.Cooldown, r.For, r.KeepFiringFor)
	}
	return g
}

// unreadable reports the items of the tick's answers that could not be
// decoded — by name, in the log and the audit log when the set changes, and
// in a metric every tick — and keeps the rule states of an unreadable
// position: it has no data, which neither resolves nor forgets anything.
func (e *Engine) unreadable(ctx context.Context, now time.Time, snap *Snapshot) {
	if len(snap.Partial) == 0 && len(e.badItems) == 0 {
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
			for key, ps := range e.book.All() {
				if key.ID == it.ID {
					e.markSeen(ps, now)
				}
			}
		}
	}
	e.metrics.Unreadable(counts)
	if maps.Equal(current, e.badItems) {
		return
	}
	e.badItems = current
	if len(current) == 0 {
		e.emit(ctx, nil, event{Level: slog.LevelInfo, Msg: "every item of the answers is readable again", Audit: &Record{Time: now, Type: "read", Reason: "every item readable again"}})
		return
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(current)) {
		parts = append(parts, k+": "+current[k])
	}
	text := "unreadable items, left out (the rest of each answer is used): " + strings.Join(parts, "; ")
	e.emit(ctx, nil, event{Level: slog.LevelError, Msg: text, Audit: &Record{Time: now, Type: "read", Reason: text}})
}

// reasonOf is the text of a no-data error about a function over time or an
// account field, made once per pair: the few pairs recur every tick.
func (e *Engine) reasonOf(of, why string) string {
	k := [2]string{of, why}
	r, ok := e.reasons[k]
	if !ok {
		if len(e.reasons) > 1000 {
			clear(e.reasons)
		}
		r = (&rules.NoDataError{Of: of, Reason: why}).Error()
		e.reasons[k] = r
	}
	return r
}

// posRule is a position rule of the set in force as evaluate's loop reads
// it, worked out once per set rather than once per position and rule.
type posRule struct {
	ri int
	r  *rules.Rule
	// runEnd is, for a plain rule, the end of the run of consecutive
	// plain rules it is in (an index into Engine.posRules).
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
func (e *Engine) bindRules(set *rules.Set) {
	e.posRules = e.posRules[:0]
	for ri, r := range set.Rules {
		if r.Account() {
			continue
		}
		pr := posRule{ri: ri, r: r, symbols: len(r.Symbols) > 0,
			windows: e.win.Windowed(ri), checks: len(r.Windows()) > 0 || r.ReadsAccount()}
		if pr.fast = r.FastPath(); pr.fast != nil && !pr.symbols && !pr.windows && !pr.checks {
			pr.plain = true
		}
		e.posRules = append(e.posRules, pr)
	}
	end := 0
	for k := len(e.posRules) - 1; k >= 0; k-- {
		if pr := &e.posRules[k]; pr.plain {
			if k+1 == len(e.posRules) || !e.posRules[k+1].plain {
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
func quietRun(prs []posRule, k, end int, states []RuleState, env *rules.Env, known *uint64, b, ok *bool) int {
	prs = prs[:end]
	mask := *known
	for ; k < len(prs); k++ {
		v, good := prs[k].fast(env)
		if !good || v {
			*b, *ok, *known = v, good, mask
			return k
		}
		if ri := prs[k].ri; mask&(1<<ri) == 0 {
			if states[ri].State != Inactive {
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
func (e *Engine) stateNow(key market.Key, idx int, r *rules.Rule, st *RuleState, setAt *rules.Set) *RuleState {
	if setAt == e.set {
		return st
	}
	ps := e.book.Get(key)
	if ps == nil {
		return nil
	}
	for ri, nr := range e.set.Rules {
		if nr.Name == r.Name && nr.Fingerprint() == r.Fingerprint() && ri < len(ps.Rules) {
			return &ps.Rules[ri]
		}
	}
	return nil
}
