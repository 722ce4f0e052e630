package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/riskguard/riskguard/engine/act"
	"github.com/riskguard/riskguard/engine/journal"
)

// ErrBreakerOpen is the error of an action the circuit breaker held back.
var ErrBreakerOpen = errors.New("circuit breaker open: action budget exceeded")

// ErrStaleSnapshot is the error of an action not sent because the snapshot
// it was decided on is older than Config.MaxSnapshotAge.
var ErrStaleSnapshot = errors.New("snapshot too old to act on")

// ErrStandby is the error of a call held back because this process does
// not lead the account (or no longer safely holds its lease). Like a pause
// it starts no cooldown and spends no budget: a takeover acts at its
// first tick.
var ErrStandby = errors.New("standby")

// errBackingOff is the outcome of an action held back because its symbol's
// last calls failed.
var errBackingOff = errors.New("symbol backing off after failed calls")

// errInFlight is the outcome of an action held back because a call on its
// symbol is still in flight: the symbol is acted on again once that call
// has ended and its outcome is known.
var errInFlight = errors.New("a call on the symbol is still in flight")

// errNotSent ends a call's way through the stages without an error: a dry
// run, whose call is said and not sent.
var errNotSent = errors.New("not sent: dry run")

// Point is where on a call's way a stage checks it.
type Point int

// The points, in the order a call passes them.
const (
	// AtSymbol: once per symbol and tick, before its plans decide; a
	// symbol held decides nothing.
	AtSymbol Point = iota
	// AtPlan: once per plan, before its steps decide.
	AtPlan
	// AtDecide: each call, on the tick's goroutine, as its step decides
	// it; a call held is said at once (its intended phase, then why not).
	AtDecide
	// AtSend: each call, on the executor's goroutine, just before it
	// leaves; what is said goes outside any report.
	AtSend
)

// Call is what a stage checks: a mutating call, or at AtSymbol and AtPlan
// the symbol (Base.Symbol, at Base.Time) and its plan.
type Call struct {
	// Base is the call's audit record: its time is the deciding tick's.
	Base journal.Record
	// Desc says the call ("set XBTC to 5x isolated"); Effect the model's
	// prediction of it ("" without one).
	Desc, Effect string
	// Event is the action as the tick's report shows it, completed with
	// its outcome by the stage that holds it.
	Event *journal.ActionEvent
	// Plan is the plan at AtPlan.
	Plan *act.Plan
	// Report is the deciding tick's report; nil at AtSend and outside a
	// tick.
	Report *journal.Report
	// ReadStart is when the snapshot the call was decided on began to be
	// read; MaxAge the age it may reach before the call leaves.
	ReadStart time.Time
	MaxAge    time.Duration

	// intended: the call's intended phase is said.
	intended bool
	// said is the record of the phase said last (actionPhaseEvent),
	// written again by the next: the Emitter keeps copies. A call's phases
	// are said one after the other, on one goroutine at a time.
	said journal.Record
	// release ends the call's passage through the pauses' gate: set by
	// the gate when the call passes it, run when a later stage holds the
	// call or once the call has ended.
	release func()
}

// Stage is one check a call passes. Check returns nil to pass the call on,
// or why it goes no further (errNotSent for a dry run, which is no
// failure), having said so.
type Stage interface {
	Check(ctx context.Context, c *Call) error
}

// Staged is a stage at its point.
type Staged struct {
	At    Point
	Stage Stage
}

// Stages is the one ordered list of the checks of every mutating call:
// a call passes them in this order, and the first that holds it ends its
// way. It reads the dispatcher's settings, breaker and backoff as they are
// at each call.
func (d *Dispatcher) Stages() []Staged {
	say := sayer{jr: d.jr}
	return []Staged{
		{AtSymbol, inFlight{exec: d.exec, log: d.log}},
		{AtPlan, backoff{backoff: d.backoff, say: say}},
		{AtDecide, tally{on: d.tally, say: say}},
		{AtDecide, dryRun{cfg: &d.cfg, say: say}},
		{AtDecide, leadership{lead: d.lead, say: say}},
		{AtDecide, paused{ctl: d.ctl, say: say}},
		{AtDecide, snapshotAge{now: d.now, say: say}},
		{AtDecide, breaker{breaker: &d.breaker, cfg: &d.cfg, changed: d.out.Changed, say: say}},
		{AtSend, intended{say: say}},
		{AtSend, leadership{lead: d.lead, now: d.now, say: say}},
		{AtSend, pauseGate{ctl: d.ctl, now: d.now, say: say}},
		{AtSend, snapshotAge{now: d.now, say: say}},
		{AtSend, intent{lead: d.lead, say: say}},
	}
}

// pipeline is Stages by point, in their order.
type pipeline struct{ symbol, plan, decide, send []Stage }

func split(all []Staged) pipeline {
	var p pipeline
	for _, s := range all {
		at := [...]*[]Stage{AtSymbol: &p.symbol, AtPlan: &p.plan, AtDecide: &p.decide, AtSend: &p.send}[s.At]
		*at = append(*at, s.Stage)
	}
	return p
}

// pass runs c through stages in order: the first error ends its way, and
// ends its passage through the pauses' gate.
func pass(ctx context.Context, stages []Stage, c *Call) error {
	for _, s := range stages {
		if err := s.Check(ctx, c); err != nil {
			if c.release != nil {
				c.release()
				c.release = nil
			}
			return err
		}
	}
	return nil
}

// sayer says a call's phases.
type sayer struct{ jr Emitter }

// phase says phase of c, with err. The phases but intended and sent carry
// c's Event, the action as the report shows it; those two are only
// audited, and not said at all without an audit log.
func (s sayer) phase(ctx context.Context, c *Call, phase string, err error) {
	var a *journal.ActionEvent
	if phase != "intended" && phase != "sent" {
		a = c.Event
	} else if !s.jr.Wants(ctx, slog.LevelInfo).Audit {
		return
	}
	s.jr.Emit(ctx, c.Report, actionPhaseEvent(ctx, s.jr, &c.said, c.Base, phase, c.Desc, c.Effect, nil, err, a))
}

// intended says c's intended phase, once.
func (s sayer) intended(ctx context.Context, c *Call) {
	if !c.intended {
		c.intended = true
		s.phase(ctx, c, "intended", nil)
	}
}

// inFlight holds a symbol back while a call on it is in flight, or has
// ended without its outcome applied yet.
type inFlight struct {
	exec *act.Executor
	log  *slog.Logger
}

func (s inFlight) Check(_ context.Context, c *Call) error {
	f, ok := s.exec.Busy(c.Base.Symbol)
	if !ok {
		return nil
	}
	s.log.Debug("actions held back: a call is in flight", "symbol", c.Base.Symbol, "call", f.Call, "since", f.Since)
	return errInFlight
}

// backoff holds a plan's exchange calls back while its symbol backs off
// after failed calls, and says so; its notify actions are not held back.
type backoff struct {
	backoff *act.Backoff
	say     sayer
}

func (s backoff) Check(ctx context.Context, c *Call) error {
	sym := c.Base.Symbol
	failures, until, held := s.backoff.Held(sym, c.Base.Time)
	if !held || len(c.Plan.Steps) == 0 {
		return nil
	}
	why := fmt.Sprintf("%d failed calls in a row on %s; next attempt at %s", failures, sym, until.UTC().Format(time.RFC3339))
	s.say.jr.Emit(ctx, c.Report, journal.Event{Level: slog.LevelDebug, Msg: "actions held back: " + why, Attrs: []any{"symbol", sym},
		Action: &journal.ActionEvent{Symbol: sym, Action: "settings", Outcome: "backoff", Effect: why}})
	return errBackingOff
}

// tally counts a dry run's call in the report only (engine.Deps.Tally).
type tally struct {
	on  bool
	say sayer
}

func (s tally) Check(ctx context.Context, c *Call) error {
	if !s.on {
		return nil
	}
	c.Event.Outcome = "dry_run"
	s.say.jr.Emit(ctx, c.Report, journal.Event{Action: c.Event})
	return errNotSent
}

// dryRun says a call and sends nothing (engine.dry_run).
type dryRun struct {
	cfg *Config
	say sayer
}

func (s dryRun) Check(ctx context.Context, c *Call) error {
	if !s.cfg.DryRun {
		return nil
	}
	s.say.intended(ctx, c)
	s.say.phase(ctx, c, "dry_run", nil)
	return errNotSent
}

// leadership holds a call back where this process may not act. When the
// call is decided (now nil: at the deciding tick's time) a call held is
// said once per call and role; at the last look (now the clock) always.
type leadership struct {
	lead Leader
	now  func() time.Time
	say  sayer
}

func (s leadership) Check(ctx context.Context, c *Call) error {
	at := c.Base.Time
	if s.now != nil {
		at = s.now()
	}
	err := s.lead.MayAct(at)
	if err == nil {
		return nil
	}
	if s.now != nil || s.lead.SayStandby(c.Desc) {
		s.say.intended(ctx, c)
		s.say.phase(ctx, c, "standby", err)
	}
	return err
}

// paused holds a call back that a pause in force covers, as the tick
// decides it.
type paused struct {
	ctl Pauses
	say sayer
}

func (s paused) Check(ctx context.Context, c *Call) error {
	p, ok := s.ctl.Hold(c.Base.Rules, c.Base.Symbol, c.Base.Time)
	if !ok {
		return nil
	}
	s.say.intended(ctx, c)
	return s.ctl.SayPaused(ctx, c.Report, p, c.Base.Symbol, c.Base.Action, pausedEvent(c.Base, c.Desc, c.Effect, c.Event))
}

// pauseGate is the last look at the pauses: a pause made since the tick
// decided the call holds it back; one made after this look waits until
// the call has ended (the gate's release).
type pauseGate struct {
	ctl Pauses
	now func() time.Time
	say sayer
}

func (s pauseGate) Check(ctx context.Context, c *Call) error {
	p, rel, held := s.ctl.Check(c.Base.Rules, c.Base.Symbol, c.Desc, s.now())
	if held {
		return s.ctl.SayPaused(ctx, c.Report, p, c.Base.Symbol, c.Base.Action, pausedEvent(c.Base, c.Desc, c.Effect, c.Event))
	}
	c.release = rel
	return nil
}

// snapshotAge holds back a call whose snapshot was read longer ago than
// c.MaxAge: as the tick decides it, or grown too old while an earlier call
// of the symbol ran.
type snapshotAge struct {
	now func() time.Time
	say sayer
}

func (s snapshotAge) Check(ctx context.Context, c *Call) error {
	err := staleAfter(s.now().Sub(c.ReadStart), c.MaxAge)
	if err != nil {
		s.say.intended(ctx, c)
		s.say.phase(ctx, c, "skipped", err)
	}
	return err
}

func staleAfter(age, maxAge time.Duration) error {
	if age > maxAge {
		return fmt.Errorf("%w: read %s ago, more than %s (engine.max_snapshot_age); the next tick reads afresh",
			ErrStaleSnapshot, age.Round(time.Millisecond), maxAge)
	}
	return nil
}

// breaker spends the action budget: a call over it opens the circuit
// breaker, and none goes out until it resets.
type breaker struct {
	breaker *act.Breaker
	cfg     *Config
	changed func()
	say     sayer
}

func (s breaker) Check(ctx context.Context, c *Call) error {
	now := c.Base.Time
	v := s.breaker.Take(now, s.cfg.MaxActionsPerMinute, s.cfg.BreakerReset)
	s.changed()
	if v.Closed {
		s.say.jr.Emit(ctx, c.Report, BreakerEvent(now, false, "circuit breaker closed: actions resume"))
	}
	if v.Opened {
		s.say.jr.Emit(ctx, c.Report, BreakerEvent(now, true, fmt.Sprintf("circuit breaker OPEN: more than %d actions in a minute; no actions until %s",
			s.cfg.MaxActionsPerMinute, s.breaker.OpenUntil.UTC().Format(time.RFC3339))))
	}
	if v.Allow {
		return nil
	}
	s.say.intended(ctx, c)
	s.say.phase(ctx, c, "skipped", ErrBreakerOpen)
	return ErrBreakerOpen
}

// intended says the call's intended phase as it is about to leave, so
// that the audit log tells each call's story in order.
type intended struct{ say sayer }

func (s intended) Check(ctx context.Context, c *Call) error {
	s.say.intended(ctx, c)
	return nil
}

// intent makes the call's intent durable before it leaves (under ha): a
// new leader finds it if this process dies before saving what became of
// the call.
type intent struct {
	lead Leader
	say  sayer
}

func (s intent) Check(ctx context.Context, c *Call) error {
	if !s.lead.KeepsIntents() {
		return nil
	}
	err := s.lead.SaveIntent(ctx, act.IntentOf(c.Base))
	if err != nil {
		s.say.phase(ctx, c, "standby", err)
	}
	return err
}

// prepare is the part of one mutating call that happens when the tick
// decides it: the AtDecide stages. A call held back is said at once (its
// intended phase, then why not), and prepare returns why (nil for a dry
// run); a call to send is returned, to be said by the executor as it goes
// (executorCall). ev is the action as the tick's report shows it,
// completed with its outcome.
func (d *Dispatcher) prepare(ctx context.Context, rep *journal.Report, base journal.Record, desc, effect string, ev *journal.ActionEvent, call func(context.Context) (json.RawMessage, error)) (*act.Pending, error) {
	c := &d.call
	*c = Call{Base: base, Desc: desc, Effect: effect, Event: ev, Report: rep, ReadStart: d.readStart, MaxAge: d.cfg.MaxSnapshotAge}
	switch err := pass(ctx, d.pipeline.decide, c); {
	case errors.Is(err, errNotSent):
		return nil, nil
	case err != nil:
		return nil, err
	}
	var p *act.Pending
	if d.sequent && d.seq.npend < len(d.seq.pend) {
		p = &d.seq.pend[d.seq.npend] // its plan's run ends before the next plan's is decided (execute)
		d.seq.npend++
	} else {
		p = new(act.Pending)
	}
	*p = act.Pending{Base: base, Desc: desc, Effect: effect, Event: ev, Do: call, ReadStart: d.readStart}
	return p, nil
}

// executorCall is pc as the executor sends it, saying each phase as it
// happens (intended, then sent and its result or error), so that the
// audit log tells each call's story in order and a call is on disk as
// sent before it goes out. Just before it goes out the AtSend stages look
// at it last; a pause made after that look waits until the call has ended.
// It runs on the executor's goroutine: what it says goes to the tick's
// report when the call is collected (finish). c is where the call is kept
// for the AtSend stages, the call's own.
func (d *Dispatcher) executorCall(ctx context.Context, pc *act.Pending, maxAge time.Duration, c *Call) act.Call {
	*c = Call{Base: pc.Base, Desc: pc.Desc, Effect: pc.Effect, Event: pc.Event, ReadStart: pc.ReadStart, MaxAge: maxAge}
	say := sayer{jr: d.jr}
	return act.Call{
		Name: pc.Desc,
		Hold: func() error {
			if err := pass(ctx, d.pipeline.send, c); err != nil {
				return err
			}
			say.phase(ctx, c, "sent", nil)
			return nil
		},
		Do: func(callCtx context.Context) (json.RawMessage, error) {
			if c.release != nil {
				defer c.release()
			}
			resp, err := pc.Do(callCtx)
			phase := "result"
			if err != nil {
				phase = "error"
			}
			d.emit(ctx, nil, actionPhaseEvent(ctx, d.jr, &c.said, pc.Base, phase, pc.Desc, pc.Effect, resp, err, pc.Event))
			return resp, err
		},
	}
}
