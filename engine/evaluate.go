package engine

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/riskguard/riskguard/rules"
)

// evaluate runs every rule on every non-empty position of the snapshot.
func (e *Engine) evaluate(ctx context.Context, now time.Time, snap *Snapshot, rep *TickReport) {
	cancelled := make(map[string]bool)
	for i := range snap.Positions {
		p := &snap.Positions[i]
		if p.Empty {
			continue
		}
		sym, ok := e.snaps.Symbol(p.SymbolID)
		if !ok {
			// Keep what the rules remember of it: the symbol may be known
			// again after the next refresh.
			if ps := e.positions[p.ID]; ps != nil {
				ps.seen = now
			}
			e.log.Error("position names an unknown symbol; skipped", "position", p.ID, "symbolId", p.SymbolID)
			continue
		}
		rep.Positions++
		price, why, hasIndex := e.indexPrice(snap, sym, now)
		if !hasIndex {
			e.log.Warn("no usable index price", "symbol", sym.Name, "reason", why)
		}
		fillInput(&e.in, p, sym, price, hasIndex, now)
		e.env.Fill(&e.in)
		ps := e.posState(p.ID, sym.Name)
		ps.seen = now
		pl := plan{pos: p, sym: sym}
		for ri, r := range e.set.Rules {
			if !r.AppliesTo(sym.Name) {
				continue
			}
			rep.Evaluations++
			cond, reason := e.condition(ri, r, why)
			if cond == Invalid && r.OnNoData == rules.NoDataIgnore {
				continue
			}
			if cond == unhealthy {
				continue
			}
			if cond == False && ps.rules[ri].State == Inactive {
				continue // the common case: nothing to step
			}
			prev := ps.rules[ri]
			next, tr := Step(prev, cond, now, Timing{For: r.For, KeepFiringFor: r.KeepFiringFor, Cooldown: r.Cooldown})
			ps.rules[ri] = next
			due := ActionDue(next, now, r.Cooldown)
			if tr != "" {
				e.dirty = true
				// A rule whose notify action runs now tells of its firing
				// itself: one message per event and channel.
				quiet := tr == ToFiring && due && hasNotify(r)
				e.emit(ctx, rep, transitionEvent(now, r, sym.Name, p.ID, prev.State, next.State, tr, reason, quiet, &e.env))
			}
			if due {
				pl.add(ri, r, &e.ev, &e.env)
			}
		}
		if !pl.empty() {
			e.execute(ctx, now, snap, &pl, ps, cancelled, rep)
		}
	}
	e.forgetGone(ctx, now, rep)
}

// unhealthy is a Condition private to the engine: the rule failed at run
// time for a reason other than missing data.
const unhealthy Condition = 255

// condition evaluates r on the current environment.
func (e *Engine) condition(ri int, r *rules.Rule, indexWhy string) (Condition, string) {
	ok, err := e.ev.Eval(r, &e.env)
	switch {
	case err == nil:
		if e.failing[ri] {
			e.failing[ri] = false
			e.log.Info("rule evaluates again", "rule", r.Name)
		}
		if ok {
			return True, ""
		}
		return False, ""
	case errors.Is(err, rules.ErrNoData):
		reason := e.env.NoData()
		if indexWhy != "" {
			reason = indexWhy
		}
		if reason == "" {
			reason = err.Error()
		}
		return Invalid, reason
	default:
		e.emit(context.Background(), nil, ruleErrorEvent(r, e.env.Position.Symbol, err, !e.failing[ri]))
		e.failing[ri] = true
		return unhealthy, err.Error()
	}
}

// posState returns the state of the rules on a position, creating it.
func (e *Engine) posState(id, symbol string) *posState {
	ps, ok := e.positions[id]
	if !ok || len(ps.rules) != len(e.set.Rules) {
		if !ok {
			ps = &posState{symbol: symbol}
			e.positions[id] = ps
		}
		rs := make([]RuleState, len(e.set.Rules))
		copy(rs, ps.rules)
		ps.rules = rs
	}
	ps.symbol = symbol
	return ps
}

// forgetGone drops the state of positions that were closed (empty or no
// longer listed): a rule that was firing on them resolves.
func (e *Engine) forgetGone(ctx context.Context, now time.Time, rep *TickReport) {
	var gone []string
	for id, ps := range e.positions {
		if !ps.seen.Equal(now) {
			gone = append(gone, id)
		}
	}
	slices.Sort(gone) // a deterministic order for the audit log and replays
	for _, id := range gone {
		ps := e.positions[id]
		for ri, s := range ps.rules {
			if s.State == Inactive || ri >= len(e.set.Rules) {
				continue
			}
			r := e.set.Rules[ri]
			to, tr := Inactive, ToInactive
			if s.State == Firing {
				tr = ToResolved
			}
			e.emit(ctx, rep, transitionEvent(now, r, ps.symbol, id, s.State, to, tr, "position closed", false, nil))
		}
		delete(e.positions, id)
		e.dirty = true
	}
}
