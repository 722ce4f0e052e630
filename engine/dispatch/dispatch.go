package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/riskguard/riskguard/engine/act"
	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/engine/control"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/riskguard/riskguard/rules"
)

// Emitter says an event: the tick's report r (nil: none), the audit log,
// the log, the metrics and the notifications (journal.Journal). Emit
// copies what it keeps of what ev points to (its audit record, its
// action): a step writes them again once it returns (act.Host.Emit).
type Emitter interface {
	Emit(ctx context.Context, r *journal.Report, ev journal.Event)
	// Wants reports the outputs an event at level reaches beside the
	// report and the audit log: an event is built without the others.
	Wants(ctx context.Context, level slog.Level) journal.Outputs
}

// Leader says whether this process may send the account's mutating calls
// (the engine's standing under ha; always without it) and keeps each
// call's intent where a new leader finds it.
type Leader interface {
	// MayAct is nil when a call may start at now, else why not (wrapping
	// ErrStandby). Safe from the executor's goroutines.
	MayAct(now time.Time) error
	// SayStandby reports whether a call held on a standby is to be said
	// (once per call and role).
	SayStandby(call string) bool
	// SaveIntent makes a call's intent durable before it leaves; an error
	// (wrapping ErrStandby) holds it back. Safe from the executor's
	// goroutines.
	SaveIntent(ctx context.Context, in act.Intent) error
	// Ended records that the call of intent id ended.
	Ended(id string)
	// KeepsIntents reports whether the intents are kept at all (under ha,
	// with a shared state that stores them): without, SaveIntent and
	// Ended do nothing, and no intent is worked out for them.
	KeepsIntents() bool
}

// Pauses are the pauses a call is held back by (control.Service).
type Pauses interface {
	// Hold returns the pause in force at t holding back an action of
	// rules on symbol.
	Hold(rules []string, symbol string, t time.Time) (control.Pause, bool)
	// Check is the last look before a call leaves: a pause in force, or
	// the gate's release, which a pause made meanwhile waits for.
	Check(rules []string, symbol, name string, t time.Time) (control.Pause, func(), bool)
	// SayPaused says an action held back by p and returns its error.
	SayPaused(ctx context.Context, r *journal.Report, p control.Pause, symbol, action string, paused func(error) journal.Event) error
}

// Outcomes is what the end of a plan's calls changes beside the
// dispatcher's own state: the rule states, the state to be saved, the
// status's next texts.
type Outcomes interface {
	// Acted starts the cooldown of rule r (index idx), whose state on key
	// was st under the rule set setAt: its actions succeeded at now.
	Acted(now time.Time, key market.Key, idx int, r *rules.Rule, st *alert.RuleState, setAt *rules.Set)
	// Skipped starts it as Acted does, its actions all left out as
	// unfunded, bounded or harmful (act.Skipper): it decides again once
	// the account's money changes.
	Skipped(now time.Time, key market.Key, idx int, r *rules.Rule, st *alert.RuleState, setAt *rules.Set)
	// AccountSettled says an account rule's last call ended.
	AccountSettled(now time.Time, d *act.AccountDue, setAt *rules.Set)
	// Noted says what became of rule's actions on symbol at the attempt
	// at (nextNote), for the status's next text.
	Noted(at time.Time, symbol, rule, note string)
	// Changed marks the state to be saved.
	Changed()
}

// Model is the tick's margin model, as a plan's steps predict with it
// (act.Host's Model and Moved).
type Model interface {
	// Model is the tick's margin model of snap.
	Model(snap *market.Snapshot) *act.Model
	// Moved moves it on to next when the tick that decided at is the
	// current one.
	Moved(at time.Time, next margin.Account)
	// ReadBack marks the model's fit with what a settings call on symbol
	// read back ("" when it matched).
	ReadBack(symbol, mismatch string)
}

// Config is the engine's settings the dispatcher reads, as the last
// reload left them.
type Config struct {
	// DryRun: nothing is sent (engine.dry_run).
	DryRun bool
	// MaxActionsPerMinute is the action budget; BreakerReset how long
	// the breaker stays open once it is spent.
	MaxActionsPerMinute int
	BreakerReset        time.Duration
	// MaxSnapshotAge bounds the age of the snapshot a call goes out on.
	MaxSnapshotAge time.Duration
	// ActionConcurrency and ActionTimeout are the executor's limits.
	ActionConcurrency int
	ActionTimeout     time.Duration
	// Interval and SymbolBackoffMax bound a failing symbol's backoff.
	Interval         time.Duration
	SymbolBackoffMax time.Duration
	// ListingLag is engine.listing_lag (act.Host's ListingLag).
	ListingLag time.Duration
}

// Options are a dispatcher's collaborators and settings.
type Options struct {
	Journal  Emitter
	Pauses   Pauses
	Leader   Leader
	Outcomes Outcomes
	Model    Model
	// Actuator is the venue's idempotent calls; Placer its orders, nil
	// when the venue places none.
	Actuator act.Exchange
	Placer   act.OrderPlacer
	// Reader reads the account's positions back.
	Reader market.Reader
	// Logger; nil discards. Metrics; nil records none.
	Logger  *slog.Logger
	Metrics *journal.Metrics
	// Now is the clock of the snapshot's age and the executor.
	Now    func() time.Time
	Config Config
	// Tally: a dry run whose actions are only counted (engine.Deps.Tally).
	Tally bool
	// Sequential runs each plan's calls to their end before the next plan
	// is decided: the reader is in process (a backtest), where nothing can
	// hang.
	Sequential bool
	// Breaker is the breaker as the state file left it.
	Breaker act.Breaker
}

// Dispatcher sends what a tick decided: see the package's doc.
type Dispatcher struct {
	jr       Emitter
	ctl      Pauses
	lead     Leader
	out      Outcomes
	model    Model
	act      act.Exchange
	placer   act.OrderPlacer
	reader   market.Reader
	log      *slog.Logger
	metrics  *journal.Metrics
	now      func() time.Time
	cfg      Config
	tally    bool
	sequent  bool
	breaker  act.Breaker
	backoff  *act.Backoff
	exec     *act.Executor
	pipeline pipeline

	// The tick at hand (Begin): its time; when its snapshot read began, on
	// the clock of Now (the age that MaxSnapshotAge bounds); its report,
	// which collects the calls' outcomes (nil outside a tick: shutdown);
	// and how long it waits for its calls.
	at        time.Time
	readStart time.Time
	rep       *journal.Report
	wait      time.Duration
	// call is the stages' scratch on the tick's goroutine (AtSymbol,
	// AtPlan, AtDecide), so that checking a call allocates nothing.
	call Call
	// Run's scratch (group), emptied at each Run and let go of at its
	// end: the symbols of its plans in order, the index of each, their
	// plans, and what the Run did once per symbol (stepHost.Once). Only
	// the Run's own execute reads it, on the tick's goroutine.
	order    []string
	index    map[string]int
	bySymbol [][]*act.Plan
	once     map[onceKey]bool
	// seq is a sequential dispatcher's one plan at a time (execute).
	seq struct {
		run   planRun
		calls []*act.Pending
		job   symbolJob
		ended func(context.Context, []act.Result) // job.ended
		// pend holds the plan's calls (prepare), npend of them taken: a
		// plan makes a call or two, at most one a step.
		pend  [3]act.Pending
		npend int
	}
}

// New makes the dispatcher.
func New(o Options) (*Dispatcher, error) {
	if o.Journal == nil || o.Pauses == nil || o.Leader == nil || o.Outcomes == nil || o.Model == nil || o.Actuator == nil || o.Reader == nil {
		return nil, errors.New("dispatch: journal, pauses, leader, outcomes, model, actuator and reader are required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	d := &Dispatcher{jr: o.Journal, ctl: o.Pauses, lead: o.Leader, out: o.Outcomes, model: o.Model, act: o.Actuator, placer: o.Placer,
		reader: o.Reader, log: o.Logger, metrics: o.Metrics, now: o.Now, cfg: o.Config, tally: o.Tally, sequent: o.Sequential, breaker: o.Breaker}
	d.exec = act.New(o.Config.ActionConcurrency, o.Config.ActionTimeout, d.sequent, o.Now)
	d.backoff = act.NewBackoff(o.Config.Interval, o.Config.SymbolBackoffMax)
	d.pipeline = split(d.Stages())
	return d, nil
}

// SetConfig applies the settings of a reload.
func (d *Dispatcher) SetConfig(cfg Config) {
	d.cfg = cfg
	d.exec.SetLimits(cfg.ActionConcurrency, cfg.ActionTimeout)
	d.backoff.SetLimits(cfg.Interval, cfg.SymbolBackoffMax)
}

// Begin starts the tick at now whose snapshot read began at readStart:
// the calls' outcomes collected from now on are said in rep, and the
// tick waits wait/2 at most for the calls it sends. It applies what became
// of the calls that were still in flight when their tick ended.
func (d *Dispatcher) Begin(ctx context.Context, now, readStart time.Time, rep *journal.Report, wait time.Duration) {
	d.at, d.readStart, d.rep, d.wait = now, readStart, rep, wait
	d.exec.Collect(ctx)
}

// End ends the tick at hand: what is collected later is said outside any
// report.
func (d *Dispatcher) End() { d.rep = nil }

// Drain waits for the calls in flight (each bounded by ActionTimeout) and
// applies their outcomes: shutdown.
func (d *Dispatcher) Drain() {
	if n := len(d.exec.InFlight()); n > 0 {
		d.log.Info("waiting for the calls in flight", "calls", n, "timeout", d.cfg.ActionTimeout)
	}
	d.rep = nil
	d.exec.Drain(context.Background())
}

// Wait waits at most t for the calls in flight to end, without applying
// their outcomes, and reports whether they did.
func (d *Dispatcher) Wait(t time.Duration) bool { return d.exec.Wait(t) }

// InFlight lists the mutating calls still running, oldest first. Safe
// from any goroutine.
func (d *Dispatcher) InFlight() []act.Flight { return d.exec.InFlight() }

// Idle reports whether the dispatcher holds no plan: every call it was
// given ended and was collected, so every plan's outcome was said (settle).
// Asked on the tick's goroutine, where the calls are collected.
func (d *Dispatcher) Idle() bool { return d.exec.Idle() }

// Busy names the symbol of the oldest call in flight, "" when none.
func (d *Dispatcher) Busy() string {
	if fl := d.exec.InFlight(); len(fl) > 0 {
		return fl[0].Key
	}
	return ""
}

// Breaker is the action budget's breaker as it is now, sharing nothing.
func (d *Dispatcher) Breaker() act.Breaker { return d.breaker.Clone() }

// BreakerIs reports whether the breaker is still b, a copy Breaker
// returned: its holder need not take another.
func (d *Dispatcher) BreakerIs(b *act.Breaker) bool { return d.breaker.Same(b) }

// BreakerOpen reports whether the breaker is open at now.
func (d *Dispatcher) BreakerOpen(now time.Time) bool { return d.breaker.Open(now) }

// SetBreaker replaces the breaker (a takeover's, the last leader's).
func (d *Dispatcher) SetBreaker(b act.Breaker) { d.breaker = b }

// emit hands ev to the journal, with the tick's report r when there is one.
func (d *Dispatcher) emit(ctx context.Context, r *journal.Report, ev journal.Event) {
	d.jr.Emit(ctx, r, ev)
}

// Run decides the tick's due plans and hands their calls to the executor:
// one job per symbol (a hedge-mode long and short share its orders),
// which sends them in order while other symbols' jobs run beside it. The
// tick waits for its jobs for half its interval at most (so the outcome
// of an ordinary call is said in the tick that decided it); a job still
// running then goes on in the background, its symbol is not acted on
// again until it ends, and its outcome is applied by a later tick. A
// backtest's in-process exchange runs each plan to its end before the next
// is decided, where nothing can hang. rep is the tick's report; setAt is
// the rule set the plans were decided under.
func (d *Dispatcher) Run(ctx context.Context, now time.Time, snap *market.Snapshot, plans []*act.Plan, rep *journal.Report, setAt *rules.Set) {
	if len(plans) == 0 {
		return
	}
	d.group(plans)
	defer d.ungroup()
	maxAge := d.cfg.MaxSnapshotAge
	var submitted []string // the symbols whose jobs this tick waits for
	for i, name := range d.order {
		busy := d.check(ctx, d.pipeline.symbol, now, name, nil, rep)
		var calls []*act.Pending
		var runs []*planRun
		for _, pl := range d.bySymbol[i] {
			held := busy
			if held == nil {
				held = d.check(ctx, d.pipeline.plan, now, name, pl, rep)
			}
			pcs, run := d.execute(ctx, now, snap, pl, d.once, rep, held, setAt)
			if d.sequent {
				d.submit(ctx, name, pcs, run.alone[:], maxAge)
				d.exec.Collect(ctx)
				continue
			}
			calls, runs = append(calls, pcs...), append(runs, run)
		}
		if !d.sequent && d.submit(ctx, name, calls, runs, maxAge) {
			submitted = append(submitted, name)
		}
	}
	if len(submitted) > 0 && !d.exec.WaitKeys(d.wait/2, submitted) {
		d.log.Debug("calls still in flight at the end of the tick; their outcome is applied when they end", "calls", len(d.exec.InFlight()))
	}
	d.exec.Collect(ctx)
}

// group sorts plans by symbol into the Run's scratch, emptied first: the
// symbols in the order of their first plan (order), each one's plans in
// their order (bySymbol), and no symbol's cancel done yet (once).
func (d *Dispatcher) group(plans []*act.Plan) {
	if d.index == nil {
		d.index, d.once = make(map[string]int), make(map[onceKey]bool)
	}
	clear(d.index)
	clear(d.once)
	d.order = d.order[:0]
	for _, pl := range plans {
		name := pl.Sym.Name
		i, ok := d.index[name]
		if !ok {
			i = len(d.order)
			d.index[name], d.order = i, append(d.order, name)
			if i == len(d.bySymbol) {
				d.bySymbol = append(d.bySymbol, nil)
			}
			d.bySymbol[i] = d.bySymbol[i][:0]
		}
		d.bySymbol[i] = append(d.bySymbol[i], pl)
	}
}

// ungroup lets go of the plans the Run's scratch holds.
func (d *Dispatcher) ungroup() {
	for i := range d.order {
		clear(d.bySymbol[i])
	}
}

// check passes the symbol's plan pl (nil: the symbol itself) through
// stages, on the tick's goroutine: why it is held back, nil when it is not.
func (d *Dispatcher) check(ctx context.Context, stages []Stage, now time.Time, symbol string, pl *act.Plan, rep *journal.Report) error {
	if len(stages) == 0 {
		return nil
	}
	c := &d.call
	*c = Call{Base: journal.Record{Time: now, Symbol: symbol}, Plan: pl, Report: rep}
	return pass(ctx, stages, c)
}

// submit hands one symbol's calls to the executor; dones say what became
// of them once they ended, in order. Without a call they run at once. It
// reports whether a job was submitted.
func (d *Dispatcher) submit(ctx context.Context, symbol string, calls []*act.Pending, runs []*planRun, maxAge time.Duration) bool {
	if len(calls) == 0 {
		d.settleRuns(ctx, runs)
		return false
	}
	var j *symbolJob
	var ended func(context.Context, []act.Result)
	if d.sequent { // its job ends and is collected before the next plan is decided (execute)
		j = &d.seq.job
		if d.seq.ended == nil {
			d.seq.ended = j.ended
		}
		ended = d.seq.ended
	} else {
		j = new(symbolJob)
		ended = j.ended
	}
	*j = symbolJob{d: d, calls: calls, runs: runs}
	j.job = act.Job{Key: symbol, Calls: j.calls0[:0], Done: ended}
	for i, pc := range calls {
		var c *Call
		if i < len(j.send0) {
			c = &j.send0[i]
		} else {
			c = new(Call)
		}
		j.job.Calls = append(j.job.Calls, d.executorCall(ctx, pc, maxAge, c))
	}
	if !d.exec.Submit(ctx, &j.job) {
		// Not reached: Run holds back a symbol in flight.
		for _, pc := range calls {
			pc.Result = act.Result{Err: errInFlight}
		}
		d.settleRuns(ctx, runs)
		return false
	}
	return true
}

// settleRuns says what became of the plans runs, in order, in the report
// at hand.
func (d *Dispatcher) settleRuns(ctx context.Context, runs []*planRun) {
	for _, r := range runs {
		r.done(ctx, d.rep)
	}
}

// symbolJob is one symbol's calls handed to the executor (job), and the
// runs of the plans they came from.
type symbolJob struct {
	d     *Dispatcher
	calls []*act.Pending
	runs  []*planRun
	job   act.Job
	// calls0 holds the job's call when it has one (most often a cancel),
	// send0 what the AtSend stages check of it (executorCall).
	calls0 [1]act.Call
	send0  [1]Call
}

// ended takes the job's results in and says what became of its plans.
func (j *symbolJob) ended(ctx context.Context, results []act.Result) {
	for i, pc := range j.calls {
		pc.Result = results[i]
	}
	j.d.settleRuns(context.WithoutCancel(ctx), j.runs) // what was sent is said, stopping or not
}

// symbolOutcome counts a symbol's call outcome for its backoff. A failure
// the symbol is not to blame for (the breaker, a stale snapshot) or that the
// cooldown already spaces out (a call refused for good) changes nothing;
// any other failure makes its next calls wait interval×2^(n-1) minus half
// an interval (so the first failure is retried at the next tick), at most
// SymbolBackoffMax; a success ends the backoff.
func (d *Dispatcher) symbolOutcome(ctx context.Context, now time.Time, symbol string, err error) {
	switch {
	case err == nil:
		if n := d.backoff.Succeeded(symbol); n > 0 {
			d.metrics.SymbolFailures(symbol, 0)
			d.emit(ctx, nil, journal.Event{Level: slog.LevelInfo, Msg: "actions on " + symbol + " succeed again",
				Attrs: []any{"symbol", symbol, "failures", n},
				Audit: &journal.Record{Time: now, Type: "backoff", Symbol: symbol, Reason: fmt.Sprintf("a call succeeded after %d failures: backoff ended", n)}})
		}
		return
	case errors.Is(err, ErrBreakerOpen), errors.Is(err, ErrStaleSnapshot), errors.Is(err, control.ErrPaused), errors.Is(err, ErrStandby), errors.Is(err, errBackingOff), errors.Is(err, errInFlight), act.Refused(err):
		return
	}
	failures, until, counted := d.backoff.Failed(symbol, now)
	if !counted {
		return
	}
	d.metrics.SymbolFailures(symbol, failures)
	text := fmt.Sprintf("%d failed calls in a row on %s (%v): its actions wait until %s; other symbols are not held back",
		failures, symbol, err, until.UTC().Format(time.RFC3339))
	d.emit(ctx, nil, journal.Event{Level: slog.LevelWarn, Msg: text, Attrs: []any{"symbol", symbol},
		Audit: &journal.Record{Time: now, Type: "backoff", Symbol: symbol, Reason: text}})
}
