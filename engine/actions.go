package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/riskguard/riskguard/engine/act"
	"github.com/riskguard/riskguard/engine/control"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// ErrBreakerOpen is the error of an action the circuit breaker held back.
var ErrBreakerOpen = errors.New("circuit breaker open: action budget exceeded")

// ErrStaleSnapshot is the error of an action not sent because the snapshot
// it was decided on is older than Config.MaxSnapshotAge.
var ErrStaleSnapshot = errors.New("snapshot too old to act on")

// ErrNotApplied is wrapped when the exchange answered a settings call with
// values other than those asked for.
var ErrNotApplied = errors.New("settings not applied")

// execute decides a position's plan and returns its exchange calls and
// what to do once they have ended: cancel first (fewer open orders is never
// riskier), then the reduce order (reduce.go), then the settings call
// (decided on the position the reduce leaves), then the rules' notify
// actions. A rule
// whose parts all succeeded starts its cooldown. It runs on the tick's
// goroutine; the calls are sent by the executor, and done runs on the
// goroutine that collects them (the tick's, this one or a later one).
// held is why the symbol's calls wait (its backoff, or a call in flight),
// nil when they do not.
func (e *Engine) execute(ctx context.Context, now time.Time, snap *Snapshot, pl *act.Plan, cancelled map[string]bool, rep *TickReport, held error) ([]*pendingCall, func(ctx context.Context, rep *TickReport)) {
	sym, pos := pl.Sym.Name, pl.Pos
	setAt := e.set

	var cancelErr, settingsErr error
	var cancelPC, settingsPC *pendingCall
	if held != nil {
		cancelErr, settingsErr = held, held
	}
	cancelTried := false
	if pl.Cancel && !cancelled[sym] && held == nil {
		cancelled[sym], cancelTried = true, true
		base := Record{Time: now, Type: "action", Action: "cancel_orders", Symbol: sym, Position: pos.ID, Rules: pl.CancelRules}
		cancelPC, cancelErr = e.prepare(ctx, rep, base, "cancel_orders "+sym, "", &ActionEvent{Symbol: sym, Action: "cancel_orders", Rules: pl.CancelRules},
			func(ctx context.Context) (json.RawMessage, error) { return e.act.CancelOrders(ctx, sym) })
	}

	var rc *reduceCall
	switch {
	case pl.ReduceAsked && held != nil:
		rc = &reduceCall{err: held}
	case pl.ReduceAsked:
		rc = e.prepareReduce(ctx, now, e.marginView(snap), pl, rep)
	}

	var dec act.Decision
	if held == nil {
		var m *act.Model
		if _, change := pl.Target(); change {
			m = e.marginView(snap) // built once a tick, for the first plan that needs it
		}
		dec = act.DecideSettings(afterReduce(m, rc), pl, now)
	}
	want, change, pred, stepped := dec.Want, dec.Change, dec.Pred, dec.Stepped
	for _, sk := range dec.Skips {
		e.emit(ctx, rep, e.skipEvent(now, pl, sk))
	}

	var base Record
	var actEv ActionEvent
	if change {
		name, names := pl.SettingsAction(want)
		prevCross := pos.Cross
		base = Record{Time: now, Type: "action", Action: name, Symbol: sym, Position: pos.ID, Rules: names,
			Cross: &want.Cross, Leverage: want.Leverage, PrevLeverage: pos.Leverage, PrevCross: &prevCross}
		desc := fmt.Sprintf("%s %s", name, sym)
		if want.Leverage != pos.Leverage {
			desc += fmt.Sprintf(" %d→%d", pos.Leverage, want.Leverage)
		}
		if want.Cross != pos.Cross {
			desc += " cross→isolated"
		}
		effect := ""
		if pred != nil && !e.tally {
			effect = pred.String()
			base.Prediction = pred.Record()
		}
		if stepped != "" {
			effect = stepped + "; " + effect
			base.Reason = stepped
		}
		actEv = ActionEvent{Symbol: sym, Action: name, Rules: names, From: pos.Leverage, To: want.Leverage, Cross: want.Cross, Effect: effect}
		settingsPC, settingsErr = e.prepare(ctx, rep, base, desc, effect, &actEv, func(ctx context.Context) (json.RawMessage, error) {
			got, err := e.act.SetPositionSettings(ctx, sym, want)
			if err != nil {
				return nil, err
			}
			raw, _ := json.Marshal(got)
			if got.Leverage != want.Leverage || got.Cross != want.Cross {
				return raw, fmt.Errorf("%w: asked cross=%t leverage=%d, exchange reports cross=%t leverage=%d",
					ErrNotApplied, want.Cross, want.Leverage, got.Cross, got.Leverage)
			}
			if pred != nil {
				// The result's audit record carries the prediction and
				// what the exchange read back.
				actual := got.LiquidationPrice
				base.Prediction.Actual = &actual
				actEv.Actual = fmt.Sprintf("liquidation %s read back (%s predicted)", actual, pred.LiquidationAfter)
			}
			return raw, nil
		})
	} else if held == nil && (pl.Lower > 0 || pl.Isolate) {
		e.log.Debug("settings already at target", "symbol", sym, "leverage", pos.Leverage, "cross", pos.Cross)
	}

	var reducePC *pendingCall
	if rc != nil {
		reducePC = rc.pc
	}
	var calls []*pendingCall
	for _, pc := range []*pendingCall{cancelPC, reducePC, settingsPC} {
		if pc != nil {
			calls = append(calls, pc)
		}
	}
	for i := range pl.Due {
		if d := pl.Due[i].Acct; d != nil {
			d.Pending++
		}
	}
	done := func(ctx context.Context, rep *TickReport) {
		if cancelPC != nil {
			cancelErr = e.finish(rep, cancelPC)
		}
		// A failure counts from when it is known: a call that ran past
		// its tick is collected by a later one.
		if cancelTried {
			e.symbolOutcome(ctx, e.lastTick, sym, cancelErr)
		}
		var reduceErr error
		if rc != nil {
			if rc.pc != nil {
				rc.err = e.finish(rep, rc.pc)
				e.symbolOutcome(ctx, e.lastTick, sym, rc.err)
				e.reduceDone(ctx, now, pl, rc)
			}
			reduceErr = rc.err
		}
		if settingsPC != nil {
			settingsErr = e.finish(rep, settingsPC)
		}
		if change {
			e.symbolOutcome(ctx, e.lastTick, sym, settingsErr)
			if settingsErr == nil && pred != nil {
				if base.Prediction != nil && base.Prediction.Actual != nil {
					e.checkPrediction(ctx, now, sym, pred, *base.Prediction.Actual)
				}
				if e.tickView != nil && e.lastTick.Equal(now) {
					e.tickView.Acct = pred.Next // later calls of the tick see this one's effect
				}
			}
			if refusedForGood(settingsErr) && pl.Refused != nil {
				*pl.Refused = act.Refusal{Settings: want, From: pos.Leverage}
			}
			if settingsErr == nil && pred != nil && pred.MarginMoved.IsPositive() && !e.cfg.DryRun && act.SpendBudget(pl, pred.MarginMoved) {
				e.dirty = true
			}
		}
		e.settle(ctx, now, rep, pl, setAt, cancelErr, reduceErr, settingsErr)
	}
	return calls, done
}

// settle says what became of each rule of a plan once its calls ended:
// notify actions run, a rule whose parts all succeeded starts its cooldown,
// an account rule counts its target done. setAt is the rule set the plan
// was decided under: a reload in between moves the states it names.
func (e *Engine) settle(ctx context.Context, now time.Time, rep *TickReport, pl *act.Plan, setAt *rules.Set, cancelErr, reduceErr, settingsErr error) {
	sym := pl.Sym.Name
	for i := range pl.Due {
		d := &pl.Due[i]
		var refused []error
		for _, part := range []struct {
			asked bool
			err   error
		}{{d.Settings, settingsErr}, {d.Cancel, cancelErr}, {d.Reduce, reduceErr}} {
			switch {
			case !part.asked || part.err == nil:
			case refusedForGood(part.err), errors.Is(part.err, ErrReduceStopped), errors.Is(part.err, errNoOrders):
				refused = append(refused, part.err)
			default:
				d.Err = errors.Join(d.Err, part.err)
			}
		}
		if len(refused) > 0 && d.Err == nil {
			// Sending the same call every tick would only spend the action
			// budget and starve the other rules: wait for the cooldown.
			e.log.Error("the exchange refused the action; retried after the cooldown", "rule", d.Rule.Name, "symbol", sym,
				"cooldown", d.Rule.Cooldown, "err", errors.Join(refused...))
		}
		for _, a := range d.Notify {
			e.emit(ctx, rep, ruleNotifyEvent(now, d.Rule, sym, a.Channels, pl.Env))
		}
		if d.Acct != nil {
			// An account rule's cooldown starts once every target's part
			// succeeded (accountDone).
			d.Acct.Acted = true
			d.Acct.Failed = d.Acct.Failed || d.Err != nil
			d.Acct.Pending--
			if d.Acct.Pending == 0 && d.Acct.Closed {
				e.accountSettled(now, d.Acct, setAt)
			}
		}
		if errors.Is(d.Err, errBackingOff) || errors.Is(d.Err, control.ErrPaused) || errors.Is(d.Err, errInFlight) || errors.Is(d.Err, ErrStandby) {
			continue // said by heldBack and symbolOutcome
		}
		if d.Err != nil {
			e.log.Warn("actions failed; retried next tick", "rule", d.Rule.Name, "symbol", sym, "err", d.Err)
			continue
		}
		if d.Acct == nil {
			if st := e.stateNow(market.KeyOf(pl.Pos), d.Idx, d.Rule, d.St, setAt); st != nil {
				st.LastActionAt = now
				e.dirty = true
			}
		}
	}
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

// refusedForGood reports whether the exchange refused a call in a way that
// repeating it cannot change soon: a 4xx answer other than 429 (a leverage
// the exchange will not accept, isolation that would liquidate at once, a
// bad signature).
func refusedForGood(err error) bool {
	var ae *exchange.APIError
	return errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500 && ae.Status != 429
}

// pendingCall is a mutating call the tick decided to send, with what its
// phases say.
type pendingCall struct {
	base         Record
	desc, effect string
	act          *ActionEvent
	call         func(context.Context) (json.RawMessage, error)
	readStart    time.Time // of the snapshot it was decided on
	result       act.Result
}

// prepare is the part of one mutating call that happens when the tick
// decides it: the checks that can hold it (a dry run, a pause, an old
// snapshot, the action budget with its breaker). A call held back is said
// at once (its intended phase, then why not), and prepare returns why (nil
// for a dry run); a call to send is returned, to be said by the executor
// as it goes (executorCall). act is the action as the tick's report shows
// it, completed with its outcome.
func (e *Engine) prepare(ctx context.Context, rep *TickReport, base Record, desc, effect string, act *ActionEvent, call func(context.Context) (json.RawMessage, error)) (*pendingCall, error) {
	now := base.Time
	phase := func(name string, err error) {
		var a *ActionEvent
		if name != "intended" {
			a = act
		}
		e.emit(ctx, rep, actionPhaseEvent(base, name, desc, effect, nil, err, a))
	}
	if e.tally {
		act.Outcome = "dry_run"
		e.emit(ctx, rep, event{Action: act})
		return nil, nil
	}
	if e.cfg.DryRun {
		phase("intended", nil)
		phase("dry_run", nil)
		return nil, nil
	}
	if err := e.lead.MayAct(now); err != nil {
		if e.lead.SayStandby(desc) {
			phase("intended", nil)
			e.emit(ctx, rep, actionPhaseEvent(base, "standby", desc, effect, nil, err, act))
		}
		return nil, err
	}
	if p, ok := e.ctl.Hold(base.Rules, base.Symbol, now); ok {
		phase("intended", nil)
		return nil, e.ctl.SayPaused(ctx, rep.report(), p, base.Symbol, base.Action, pausedEvent(base, desc, effect, act))
	}
	if err := e.staleSnapshot(e.readStart); err != nil {
		phase("intended", nil)
		phase("skipped", err)
		return nil, err
	}
	v := e.breaker.Take(now, e.cfg.MaxActionsPerMinute, e.cfg.BreakerReset)
	e.dirty = true
	if v.Closed {
		e.emit(ctx, rep, breakerEvent(now, false, "circuit breaker closed: actions resume"))
	}
	if v.Opened {
		e.emit(ctx, rep, breakerEvent(now, true, fmt.Sprintf("circuit breaker OPEN: more than %d actions in a minute; no actions until %s",
			e.cfg.MaxActionsPerMinute, e.breaker.OpenUntil.UTC().Format(time.RFC3339))))
	}
	if !v.Allow {
		phase("intended", nil)
		phase("skipped", ErrBreakerOpen)
		return nil, ErrBreakerOpen
	}
	return &pendingCall{base: base, desc: desc, effect: effect, act: act, call: call, readStart: e.readStart}, nil
}

// staleSnapshot is the error of a call that would go out on a snapshot
// whose read began at readStart, when that is longer ago than
// MaxSnapshotAge; nil otherwise.
func (e *Engine) staleSnapshot(readStart time.Time) error {
	return staleAfter(e.now().Sub(readStart), e.cfg.MaxSnapshotAge)
}

func staleAfter(age, maxAge time.Duration) error {
	if age > maxAge {
		return fmt.Errorf("%w: read %s ago, more than %s (engine.max_snapshot_age); the next tick reads afresh",
			ErrStaleSnapshot, age.Round(time.Millisecond), maxAge)
	}
	return nil
}

// executorCall is pc as the executor sends it, saying each phase as it
// happens (intended, then sent and its result or error), so that the
// audit log tells each call's story in order and a call is on disk as
// sent before it goes out. Just before it goes out, a pause made since the
// tick decided it, or a snapshot grown too old while an earlier call of
// the symbol ran, holds it back, and that is said instead; a pause made
// after that look waits until the call has ended. It runs on the
// executor's goroutine: what it says goes to the tick's report when the
// call is collected (finish).
func (e *Engine) executorCall(ctx context.Context, pc *pendingCall, maxAge time.Duration) act.Call {
	phase := func(name string, resp json.RawMessage, err error) {
		var a *ActionEvent
		if name != "intended" && name != "sent" {
			a = pc.act
		}
		e.emit(ctx, nil, actionPhaseEvent(pc.base, name, pc.desc, pc.effect, resp, err, a))
	}
	// release ends the call's passage through the pauses' gate
	// (control.Store.Check): a pause made meanwhile waits for it.
	release := func() {}
	return act.Call{
		Name: pc.desc,
		Hold: func() error {
			phase("intended", nil, nil)
			// The last look: a leader whose lease is no longer safely
			// held (or that was deposed) starts no call.
			if err := e.lead.MayAct(e.now()); err != nil {
				phase("standby", nil, err)
				return err
			}
			p, rel, held := e.ctl.Check(pc.base.Rules, pc.base.Symbol, pc.desc, e.now())
			if held {
				return e.ctl.SayPaused(ctx, nil, p, pc.base.Symbol, pc.base.Action, pausedEvent(pc.base, pc.desc, pc.effect, pc.act))
			}
			if err := staleAfter(e.now().Sub(pc.readStart), maxAge); err != nil {
				rel()
				phase("skipped", nil, err)
				return err
			}
			release = rel
			phase("sent", nil, nil)
			return nil
		},
		Do: func(ctx context.Context) (json.RawMessage, error) {
			defer release()
			resp, err := pc.call(ctx)
			if err != nil {
				phase("error", resp, err)
			} else {
				phase("result", resp, nil)
			}
			return resp, err
		},
	}
}

// finish takes in a call the executor ended (its result is in pc.result)
// and returns its error. A call that changed nothing on the exchange gives
// its budget back: only the guard's own successful mutations spend it, so
// a symbol that keeps failing backs off on its own (symbolOutcome) instead
// of opening the breaker on every other symbol.
func (e *Engine) finish(rep *TickReport, pc *pendingCall) error {
	if res := pc.result; !res.Sent || res.Err != nil {
		e.breaker.Refund(pc.base.Time)
	}
	if rep != nil && pc.act.Outcome != "" {
		rep.Actions = append(rep.Actions, *pc.act)
	}
	return pc.result.Err
}

// checkPrediction compares the liquidation price the exchange read back
// with the model's: a difference of more than a basis point of the index
// (beyond the rounding to ticks) is reported.
func (e *Engine) checkPrediction(ctx context.Context, now time.Time, symbol string, pred *act.Prediction, got decimal.Decimal) {
	tolerance := pred.Index().Mul(decimal.New(1, -4))
	if got.Sub(pred.LiquidationAfter).Abs().GreaterThan(tolerance) {
		e.emit(ctx, nil, mismatchEvent(now, symbol, pred.LiquidationAfter, got))
		e.noteReadBack(symbol, fmt.Sprintf("read back liquidation %s, %s predicted", got, pred.LiquidationAfter))
		return
	}
	e.noteReadBack(symbol, "")
}

// firstHarmInFiring reports whether no harmful action of the plan's rules
// was notified yet in their current firing, and marks it so.
func (e *Engine) firstHarmInFiring(pl *act.Plan, now time.Time) bool {
	first := false
	for _, d := range pl.Due {
		st := d.St
		if st.HarmNotedAt.Before(st.FiredAt) || st.HarmNotedAt.IsZero() {
			first = true
			st.HarmNotedAt = now
			e.dirty = true
		}
	}
	return first
}

func joinRules(names []string) string { return strings.Join(names, ",") }

// skipEvent says a part of a plan's settings call left out (act.Skip): an
// isolation that would harm, audited and logged each time, notified once
// per firing; or a leverage cut no bound leaves room for.
func (e *Engine) skipEvent(now time.Time, pl *act.Plan, sk act.Skip) event {
	sym, pos := pl.Sym.Name, pl.Pos
	if sk.Kind == rules.SetIsolated {
		prevCross := pos.Cross
		iso := exchange.Settings{Leverage: sk.Want.Leverage, Cross: false}
		base := Record{Time: now, Type: "action", Action: string(rules.SetIsolated), Symbol: sym, Position: pos.ID, Rules: act.Dedupe(pl.IsolateRules),
			Cross: &iso.Cross, Leverage: iso.Leverage, PrevLeverage: pos.Leverage, PrevCross: &prevCross}
		ev := harmEvent(base, sk.Pred, sk.Why, e.firstHarmInFiring(pl, now))
		ev.Action = &ActionEvent{Symbol: sym, Action: string(rules.SetIsolated), Rules: base.Rules, Outcome: "skipped_harmful",
			From: pos.Leverage, To: sk.Want.Leverage, Effect: sk.Pred.String() + "; " + sk.Why, Reason: sk.Why}
		return ev
	}
	base := Record{Time: now, Type: "action", Action: string(rules.LowerLeverage), Symbol: sym, Position: pos.ID, Rules: act.Dedupe(pl.LowerRules),
		Leverage: sk.Asked, PrevLeverage: pos.Leverage, Phase: "skipped", Reason: sk.Why}
	return event{Audit: &base, Level: slog.LevelWarn, Msg: "skipped lower_leverage " + sym + ": " + sk.Why,
		Attrs:  []any{"action", base.Action, "symbol", sym, "rule", joinRules(base.Rules)},
		Action: &ActionEvent{Symbol: sym, Action: string(rules.LowerLeverage), Rules: base.Rules, Outcome: "skipped_bounded", From: pos.Leverage, To: sk.Asked, Effect: sk.Why, Reason: sk.Why}}
}
