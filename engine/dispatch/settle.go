package dispatch

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/riskguard/riskguard/engine/act"
	"github.com/riskguard/riskguard/engine/control"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/rules"
)

// execute decides a position's plan and returns its exchange calls and
// its run, whose done says what became of them once they have ended: its
// steps (act.Step), each merged from the kinds that asked for it, run in
// their order (a cancel first: fewer open orders is never riskier; then a
// reduce order; then the settings call, decided on the position the
// reduce leaves), then the rules' notify actions. A rule whose parts all
// succeeded starts its cooldown. It runs on the tick's goroutine; the
// calls are sent by the executor, and done runs on the goroutine that
// collects them (the tick's, this one or a later one). held is why the
// symbol's calls wait (its backoff, or a call in flight), nil when they
// do not. once holds what the tick did once per symbol (a cancel shared
// by a long and a short). setAt is the rule set the plan was decided
// under. A sequential dispatcher decides each plan in its own run, kept
// (seq): the plan's calls have ended and it is said before the next plan
// is decided, and what holds the run (the job, the steps' hosts, a call
// that reads back through its host) holds it no longer.
func (d *Dispatcher) execute(ctx context.Context, now time.Time, snap *market.Snapshot, pl *act.Plan, once map[onceKey]bool, rep *journal.Report, held error, setAt *rules.Set) ([]*act.Pending, *planRun) {
	var r *planRun
	var calls []*act.Pending
	if d.sequent {
		r, calls = &d.seq.run, d.seq.calls[:0]
		d.seq.npend = 0 // the last plan's calls ended, and it was said
	} else {
		r = new(planRun)
	}
	*r = planRun{d: d, pl: pl, now: now, held: held, setAt: setAt}
	r.alone[0] = r
	r.errs = r.errs0[:0]
	if len(pl.Steps) > len(r.errs0) {
		r.errs = make([]error, 0, len(pl.Steps))
	}
	r.errs = r.errs[:len(pl.Steps)]
	r.host = stepHost{d: d, now: now, snap: snap, rep: rep, once: once}
	for i, st := range pl.Steps {
		if held != nil {
			r.errs[i] = held
			continue
		}
		ps, err := st.Prepare(ctx, &r.host, pl)
		r.errs[i] = err
		calls = append(calls, ps...)
	}
	for i := range pl.Due {
		if a := pl.Due[i].Acct; a != nil {
			a.Pending++
		}
	}
	if d.sequent {
		d.seq.calls = calls
	}
	return calls, r
}

// planRun is one plan's way through the dispatcher (execute): the errors
// of its steps, and the hosts its steps are decided and collected with.
type planRun struct {
	d     *Dispatcher
	pl    *act.Plan
	now   time.Time
	held  error
	setAt *rules.Set
	errs  []error
	// errs0 holds the errors of a plan of up to three steps (a cancel, a
	// reduce order, a settings call), in the run itself.
	errs0 [3]error
	// host is the deciding tick's (execute), collect the collecting one's
	// (done).
	host, collect stepHost
	// alone is this run as the only one of its symbol's job (a sequential
	// dispatcher's).
	alone [1]*planRun
}

// done says what became of the plan's calls once they ended: each step
// takes its outcome in (with a host for the collecting tick, whose report
// is rep), then settle.
func (r *planRun) done(ctx context.Context, rep *journal.Report) {
	d, pl := r.d, r.pl
	if r.held == nil {
		r.collect = stepHost{d: d, now: r.now, rep: rep}
		for i, st := range pl.Steps {
			r.errs[i] = st.Done(ctx, &r.collect, pl)
		}
	}
	d.settle(ctx, r.now, rep, pl, r.setAt, func(st act.Step) error {
		return r.errs[slices.Index(pl.Steps, st)]
	})
}

// settle says what became of each rule of a plan once its calls ended:
// notify actions run, a rule whose parts all succeeded starts its cooldown,
// an account rule counts its target done. setAt is the rule set the plan
// was decided under: a reload in between moves the states it names.
func (d *Dispatcher) settle(ctx context.Context, now time.Time, rep *journal.Report, pl *act.Plan, setAt *rules.Set, errOf func(act.Step) error) {
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
				d.emit(ctx, rep, journal.RuleNotifyEvent(now, due.Rule, sym, a.Channels, pl.Env))
			}
		}
		if due.Acct == nil {
			d.out.Noted(now, sym, due.Rule.Name, nextNote(due, refused))
		}
		if due.Acct != nil {
			// An account rule's cooldown starts once every target's part
			// succeeded (accountDone).
			due.Acct.Acted = true
			due.Acct.Failed = due.Acct.Failed || due.Err != nil
			due.Acct.Pending--
			if due.Acct.Pending == 0 && due.Acct.Closed {
				d.out.AccountSettled(now, due.Acct, setAt)
			}
		}
		if errors.Is(due.Err, errBackingOff) || errors.Is(due.Err, control.ErrPaused) || errors.Is(due.Err, errInFlight) || errors.Is(due.Err, ErrStandby) || errors.Is(due.Err, act.ErrHeld) {
			continue // said by the backoff stage, symbolOutcome or the kind that held it
		}
		if due.Err != nil {
			d.log.Warn("actions failed; retried next tick", "rule", due.Rule.Name, "symbol", sym, "err", due.Err)
			continue
		}
		if due.Acct == nil {
			if allSkipped(due) {
				d.out.Skipped(now, market.KeyOf(pl.Pos), due.Idx, due.Rule, due.St, setAt)
			} else {
				d.out.Acted(now, market.KeyOf(pl.Pos), due.Idx, due.Rule, due.St, setAt)
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

// finish takes in a call the executor ended (its result is in pc.Result)
// and returns its error. A call that changed nothing on the exchange gives
// its budget back: only the guard's own successful mutations spend it, so
// a symbol that keeps failing backs off on its own (symbolOutcome) instead
// of opening the breaker on every other symbol.
func (d *Dispatcher) finish(rep *journal.Report, pc *act.Pending) error {
	if res := pc.Result; !res.Sent || res.Err != nil {
		d.breaker.Refund(pc.Base.Time)
	}
	if pc.Result.Sent && !errors.Is(pc.Result.Err, act.ErrUnknownOutcome) && d.lead.KeepsIntents() {
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
