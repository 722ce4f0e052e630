package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/riskguard/riskguard/engine/act"
	"github.com/riskguard/riskguard/engine/control"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/rules"
)

// ErrBreakerOpen is the error of an action the circuit breaker held back.
var ErrBreakerOpen = errors.New("circuit breaker open: action budget exceeded")

// ErrStaleSnapshot is the error of an action not sent because the snapshot
// it was decided on is older than Config.MaxSnapshotAge.
var ErrStaleSnapshot = errors.New("snapshot too old to act on")

// execute decides a position's plan and returns its exchange calls and
// what to do once they have ended: its steps (act.Step), each merged from
// the kinds that asked for it, run in their order (a cancel first: fewer
// open orders is never riskier; then a reduce order; then the settings
// call, decided on the position the reduce leaves), then the rules' notify
// actions. A rule whose parts all succeeded starts its cooldown. It runs
// on the tick's goroutine; the calls are sent by the executor, and done
// runs on the goroutine that collects them (the tick's, this one or a
// later one). held is why the symbol's calls wait (its backoff, or a call
// in flight), nil when they do not. once holds what the tick did once per
// symbol (a cancel shared by a long and a short). setAt is the rule set
// the plan was decided under.
func (d *dispatcher) execute(ctx context.Context, now time.Time, snap *market.Snapshot, pl *act.Plan, once map[string]bool, rep *TickReport, held error, setAt *rules.Set) ([]*act.Pending, func(ctx context.Context, rep *TickReport)) {
	errs := make([]error, len(pl.Steps))
	var calls []*act.Pending
	h := &stepHost{d: d, now: now, snap: snap, rep: rep, once: once}
	for i, st := range pl.Steps {
		if held != nil {
			errs[i] = held
			continue
		}
		ps, err := st.Prepare(ctx, h, pl)
		errs[i] = err
		calls = append(calls, ps...)
	}
	for i := range pl.Due {
		if a := pl.Due[i].Acct; a != nil {
			a.Pending++
		}
	}
	done := func(ctx context.Context, rep *TickReport) {
		if held == nil {
			h := &stepHost{d: d, now: now, rep: rep}
			for i, st := range pl.Steps {
				errs[i] = st.Done(ctx, h, pl)
			}
		}
		d.settle(ctx, now, rep, pl, setAt, func(st act.Step) error {
			return errs[slices.Index(pl.Steps, st)]
		})
	}
	return calls, done
}

// settle says what became of each rule of a plan once its calls ended:
// notify actions run, a rule whose parts all succeeded starts its cooldown,
// an account rule counts its target done. setAt is the rule set the plan
// was decided under: a reload in between moves the states it names.
func (d *dispatcher) settle(ctx context.Context, now time.Time, rep *TickReport, pl *act.Plan, setAt *rules.Set, errOf func(act.Step) error) {
	sym := pl.Sym.Name
	for i := range pl.Due {
		due := &pl.Due[i]
		var refused []error
		for _, st := range due.Asked {
			switch err := errOf(st); {
			case err == nil:
			case act.Refused(err):
				refused = append(refused, err)
			default:
				due.Err = errors.Join(due.Err, err)
			}
		}
		if len(refused) > 0 && due.Err == nil {
			// Sending the same call every tick would only spend the action
			// budget and starve the other rules: wait for the cooldown.
			d.log.Error("the exchange refused the action; retried after the cooldown", "rule", due.Rule.Name, "symbol", sym,
				"cooldown", due.Rule.Cooldown, "err", errors.Join(refused...))
		}
		// A rule deciding again inside its cooldown because the money
		// changed (RuleState.Skipped) told of its firing already: its
		// notify actions wait for the cooldown.
		redecided := due.St != nil && due.St.Skipped && now.Sub(due.St.LastActionAt) < due.Rule.Cooldown
		for _, a := range due.Notify {
			if !redecided {
				d.emit(ctx, rep, ruleNotifyEvent(now, due.Rule, sym, a.Channels, pl.Env))
			}
		}
		if due.Acct == nil {
			d.hooks.noted(now, sym, due.Rule.Name, nextNote(due, refused))
		}
		if due.Acct != nil {
			// An account rule's cooldown starts once every target's part
			// succeeded (accountDone).
			due.Acct.Acted = true
			due.Acct.Failed = due.Acct.Failed || due.Err != nil
			due.Acct.Pending--
			if due.Acct.Pending == 0 && due.Acct.Closed {
				d.hooks.accountSettled(now, due.Acct, setAt)
			}
		}
		if errors.Is(due.Err, errBackingOff) || errors.Is(due.Err, control.ErrPaused) || errors.Is(due.Err, errInFlight) || errors.Is(due.Err, ErrStandby) || errors.Is(due.Err, act.ErrHeld) {
			continue // said by heldBack, symbolOutcome or the kind that held it
		}
		if due.Err != nil {
			d.log.Warn("actions failed; retried next tick", "rule", due.Rule.Name, "symbol", sym, "err", due.Err)
			continue
		}
		if due.Acct == nil {
			if allSkipped(due) && d.hooks.skipped != nil {
				d.hooks.skipped(now, market.KeyOf(pl.Pos), due.Idx, due.Rule, due.St, setAt)
			} else {
				d.hooks.acted(now, market.KeyOf(pl.Pos), due.Idx, due.Rule, due.St, setAt)
			}
		}
	}
}

// allSkipped reports whether every call a due rule asked for was left
// out as unfunded, bounded or harmful (act.Skipper), and it asked for one.
func allSkipped(due *act.Due) bool {
	n := 0
	for _, st := range due.Asked {
		s, ok := st.(act.Skipper)
		if !ok || !s.Skipped() {
			return false
		}
		n++
	}
	return n > 0
}

// nextNote is what became of a due rule's actions at one attempt, in a
// few words, as the status's next text says it: "" when they did what was
// asked (the cooldown says the rest), else why nothing (more) went out.
// refused are its parts the exchange refused for good (they start the
// cooldown all the same).
func nextNote(due *act.Due, refused []error) string {
	oneLine := func(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }
	// said is err's text after word, once: a marked error may say it.
	said := func(word string, err error) string {
		return word + ": " + strings.TrimPrefix(oneLine(err), word+": ")
	}
	switch err := due.Err; {
	case err == nil && len(refused) > 0:
		return said("refused", errors.Join(refused...))
	case err == nil:
		var notes []string
		for _, st := range due.Asked {
			if n, ok := st.(act.Noter); ok && n.Note() != "" && !slices.Contains(notes, n.Note()) {
				notes = append(notes, n.Note())
			}
		}
		if len(notes) == 0 && len(due.Asked) == 0 && len(due.Notify) > 0 {
			return "notified"
		}
		return strings.Join(notes, "; ")
	case errors.Is(err, control.ErrPaused):
		return "paused: nothing sent"
	case errors.Is(err, errInFlight):
		return "waits: a call on the symbol is still in flight"
	case errors.Is(err, errBackingOff):
		return "held: the symbol backs off after failed calls"
	case errors.Is(err, ErrStandby):
		return "standby: the leader acts"
	case errors.Is(err, act.ErrHeld):
		return said("held", err)
	case errors.Is(err, ErrBreakerOpen), errors.Is(err, ErrStaleSnapshot):
		return "skipped: " + oneLine(err)
	default:
		return "failed: " + oneLine(err) + "; tried again at the next tick"
	}
}

// prepare is the part of one mutating call that happens when the tick
// decides it: the checks that can hold it (a dry run, a pause, an old
// snapshot, the action budget with its breaker). A call held back is said
// at once (its intended phase, then why not), and prepare returns why (nil
// for a dry run); a call to send is returned, to be said by the executor
// as it goes (executorCall). act is the action as the tick's report shows
// it, completed with its outcome.
func (d *dispatcher) prepare(ctx context.Context, rep *TickReport, base journal.Record, desc, effect string, ev *journal.ActionEvent, call func(context.Context) (json.RawMessage, error)) (*act.Pending, error) {
	now := base.Time
	phase := func(name string, err error) {
		var a *journal.ActionEvent
		if name != "intended" {
			a = ev
		}
		d.emit(ctx, rep, actionPhaseEvent(base, name, desc, effect, nil, err, a))
	}
	if d.tally {
		ev.Outcome = "dry_run"
		d.emit(ctx, rep, event{Action: ev})
		return nil, nil
	}
	if d.cfg.DryRun {
		phase("intended", nil)
		phase("dry_run", nil)
		return nil, nil
	}
	if err := d.lead.MayAct(now); err != nil {
		if d.lead.SayStandby(desc) {
			phase("intended", nil)
			d.emit(ctx, rep, actionPhaseEvent(base, "standby", desc, effect, nil, err, ev))
		}
		return nil, err
	}
	if p, ok := d.ctl.Hold(base.Rules, base.Symbol, now); ok {
		phase("intended", nil)
		return nil, d.ctl.SayPaused(ctx, rep.report(), p, base.Symbol, base.Action, pausedEvent(base, desc, effect, ev))
	}
	if err := d.staleSnapshot(d.readStart); err != nil {
		phase("intended", nil)
		phase("skipped", err)
		return nil, err
	}
	v := d.breaker.Take(now, d.cfg.MaxActionsPerMinute, d.cfg.BreakerReset)
	d.hooks.changed()
	if v.Closed {
		d.emit(ctx, rep, breakerEvent(now, false, "circuit breaker closed: actions resume"))
	}
	if v.Opened {
		d.emit(ctx, rep, breakerEvent(now, true, fmt.Sprintf("circuit breaker OPEN: more than %d actions in a minute; no actions until %s",
			d.cfg.MaxActionsPerMinute, d.breaker.OpenUntil.UTC().Format(time.RFC3339))))
	}
	if !v.Allow {
		phase("intended", nil)
		phase("skipped", ErrBreakerOpen)
		return nil, ErrBreakerOpen
	}
	return &act.Pending{Base: base, Desc: desc, Effect: effect, Event: ev, Do: call, ReadStart: d.readStart}, nil
}

// staleSnapshot is the error of a call that would go out on a snapshot
// whose read began at readStart, when that is longer ago than
// MaxSnapshotAge; nil otherwise.
func (d *dispatcher) staleSnapshot(readStart time.Time) error {
	return staleAfter(d.now().Sub(readStart), d.cfg.MaxSnapshotAge)
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
func (d *dispatcher) executorCall(ctx context.Context, pc *act.Pending, maxAge time.Duration) act.Call {
	phase := func(name string, resp json.RawMessage, err error) {
		var a *journal.ActionEvent
		if name != "intended" && name != "sent" {
			a = pc.Event
		}
		d.emit(ctx, nil, actionPhaseEvent(pc.Base, name, pc.Desc, pc.Effect, resp, err, a))
	}
	// release ends the call's passage through the pauses' gate
	// (control.Store.Check): a pause made meanwhile waits for it.
	release := func() {}
	return act.Call{
		Name: pc.Desc,
		Hold: func() error {
			phase("intended", nil, nil)
			// The last look: a leader whose lease is no longer safely
			// held (or that was deposed) starts no call.
			if err := d.lead.MayAct(d.now()); err != nil {
				phase("standby", nil, err)
				return err
			}
			p, rel, held := d.ctl.Check(pc.Base.Rules, pc.Base.Symbol, pc.Desc, d.now())
			if held {
				return d.ctl.SayPaused(ctx, nil, p, pc.Base.Symbol, pc.Base.Action, pausedEvent(pc.Base, pc.Desc, pc.Effect, pc.Event))
			}
			if err := staleAfter(d.now().Sub(pc.ReadStart), maxAge); err != nil {
				rel()
				phase("skipped", nil, err)
				return err
			}
			// Under ha the intent is durable before the call leaves: a new
			// leader finds it if this process dies before saving what
			// became of the call.
			if err := d.lead.SaveIntent(ctx, act.IntentOf(pc.Base)); err != nil {
				rel()
				phase("standby", nil, err)
				return err
			}
			release = rel
			phase("sent", nil, nil)
			return nil
		},
		Do: func(ctx context.Context) (json.RawMessage, error) {
			defer release()
			resp, err := pc.Do(ctx)
			if err != nil {
				phase("error", resp, err)
			} else {
				phase("result", resp, nil)
			}
			return resp, err
		},
	}
}

// finish takes in a call the executor ended (its result is in pc.Result)
// and returns its error. A call that changed nothing on the exchange gives
// its budget back: only the guard's own successful mutations spend it, so
// a symbol that keeps failing backs off on its own (symbolOutcome) instead
// of opening the breaker on every other symbol.
func (d *dispatcher) finish(rep *TickReport, pc *act.Pending) error {
	if res := pc.Result; !res.Sent || res.Err != nil {
		d.breaker.Refund(pc.Base.Time)
	}
	if pc.Result.Sent && !errors.Is(pc.Result.Err, act.ErrUnknownOutcome) {
		// An order of unknown outcome keeps its intent until a read
		// settles it (act.Host.Settled): a leader taking over meanwhile
		// takes it as sent, never decides it afresh.
		d.lead.Ended(act.IntentID(pc.Base.Symbol, pc.Base.Action, pc.Base.Time))
	}
	if rep != nil && pc.Event.Outcome != "" {
		a := *pc.Event
		a.Predicted(&pc.Base)
		rep.Actions = append(rep.Actions, a)
	}
	return pc.Result.Err
}

func joinRules(names []string) string { return strings.Join(names, ",") }
