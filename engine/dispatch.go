package engine

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

// errBackingOff is the outcome of an action held back because its symbol's
// last calls failed.
var errBackingOff = errors.New("symbol backing off after failed calls")

// errInFlight is the outcome of an action held back because a call on its
// symbol is still in flight: the symbol is acted on again once that call
// has ended and its outcome is known.
var errInFlight = errors.New("a call on the symbol is still in flight")

// dispatcher sends what a tick decided: it passes each mutating call
// through the checks every one passes (a dry run, the leadership, a pause,
// the snapshot's age, the action budget with its circuit breaker), hands
// each symbol's calls to the executor, holds back a symbol whose calls
// keep failing, and says what became of each plan's rules once its calls
// ended. It owns the breaker, the backoff and the executor. It is
// tick-owned, but for the executor's goroutines, which only say what
// happens and ask the leadership and the pauses (executorCall).
type dispatcher struct {
	jr      *journal.Journal
	ctl     *control.Service
	lead    *leader
	act     Actuator
	reader  market.Reader
	log     *slog.Logger
	metrics *journal.Metrics
	now     func() time.Time
	hooks   ruleHooks
	// cfg is the engine's settings as the last reload left them.
	cfg Config
	// tally: a dry run whose actions are only counted (Deps.Tally).
	tally bool
	// sequential runs each plan's calls to their end before the next plan
	// is decided: the reader is in process (a backtest), where nothing can
	// hang.
	sequential bool

	breaker act.Breaker
	// backoff holds the symbols whose actions failed last time they ran.
	backoff *act.Backoff
	// exec sends the mutating calls, each symbol's in the background; what
	// became of them is applied on the tick's goroutine (Collect), so the
	// fields here have one writer.
	exec *act.Executor

	// The tick at hand (begin): its time; when its snapshot read began, on
	// the clock of Deps.Now (the age that MaxSnapshotAge bounds); its
	// report, which collects the calls' outcomes (nil outside a tick:
	// shutdown); and how long it waits for its calls.
	at        time.Time
	readStart time.Time
	rep       *TickReport
	wait      time.Duration
}

// ruleHooks are the engine's, for what a plan's outcome changes beside the
// dispatcher's own: the rule states, whether the state is to be saved, and
// the tick's margin model its steps predict with.
type ruleHooks struct {
	// acted starts the cooldown of rule r (index idx), whose state on key
	// was st under the rule set setAt: its actions succeeded at now.
	acted func(now time.Time, key market.Key, idx int, r *rules.Rule, st *alert.RuleState, setAt *rules.Set)
	// skipped starts it as acted does, its actions all left out as
	// unfunded, bounded or harmful (act.Skipper): it decides again once
	// the account's money changes.
	skipped func(now time.Time, key market.Key, idx int, r *rules.Rule, st *alert.RuleState, setAt *rules.Set)
	// accountSettled says an account rule's last call ended.
	accountSettled func(now time.Time, d *act.AccountDue, setAt *rules.Set)
	// changed marks the state to be saved.
	changed func()
	// model is the tick's margin model of snap; moved moves it on
	// (act.Host's Model and Moved).
	model func(snap *market.Snapshot) *act.Model
	moved func(at time.Time, next margin.Account)
	// readBack marks the model's fit with what a settings call read back
	// ("" when it matched).
	readBack func(symbol, mismatch string)
	// noted says what became of rule's actions on symbol at the attempt
	// at (nextNote), for the status's next text.
	noted func(at time.Time, symbol, rule, note string)
}

// dispatcherOptions are a dispatcher's collaborators and settings.
type dispatcherOptions struct {
	Journal  *journal.Journal
	Control  *control.Service
	Leader   *leader
	Actuator Actuator
	Reader   market.Reader
	Logger   *slog.Logger
	Metrics  *journal.Metrics
	Now      func() time.Time
	Hooks    ruleHooks
	Config   Config
	Tally    bool
	// Breaker is the breaker as the state file left it.
	Breaker act.Breaker
}

// newDispatcher makes the dispatcher; its calls run one after another when
// the reader is in process.
func newDispatcher(o dispatcherOptions) *dispatcher {
	d := &dispatcher{jr: o.Journal, ctl: o.Control, lead: o.Leader, act: o.Actuator, reader: o.Reader, log: o.Logger,
		metrics: o.Metrics, now: o.Now, hooks: o.Hooks, cfg: o.Config, tally: o.Tally, breaker: o.Breaker}
	if ip, ok := o.Reader.(market.InProcessReader); ok && ip.InProcess() {
		d.sequential = true
	}
	d.exec = act.New(o.Config.ActionConcurrency, o.Config.ActionTimeout, d.sequential, o.Now)
	d.backoff = act.NewBackoff(o.Config.Interval, o.Config.SymbolBackoffMax)
	return d
}

// setConfig applies the settings of a reload.
func (d *dispatcher) setConfig(cfg Config) {
	d.cfg = cfg
	d.exec.SetLimits(cfg.ActionConcurrency, cfg.ActionTimeout)
	d.backoff.SetLimits(cfg.Interval, cfg.SymbolBackoffMax)
}

// begin starts the tick at now whose snapshot read began at readStart:
// the calls' outcomes collected from now on are said in rep, and the
// tick waits wait/2 at most for the calls it sends. It applies what became
// of the calls that were still in flight when their tick ended.
func (d *dispatcher) begin(ctx context.Context, now, readStart time.Time, rep *TickReport, wait time.Duration) {
	d.at, d.readStart, d.rep, d.wait = now, readStart, rep, wait
	d.exec.Collect(ctx)
}

// end ends the tick at hand: what is collected later is said outside any
// report.
func (d *dispatcher) end() { d.rep = nil }

// drain waits for the calls in flight (each bounded by ActionTimeout) and
// applies their outcomes: shutdown.
func (d *dispatcher) drain() {
	if n := len(d.exec.InFlight()); n > 0 {
		d.log.Info("waiting for the calls in flight", "calls", n, "timeout", d.cfg.ActionTimeout)
	}
	d.rep = nil
	d.exec.Drain(context.Background())
}

// inFlight lists the mutating calls still running at now, oldest first.
// Safe from any goroutine.
func (d *dispatcher) inFlight(now time.Time) []CallInFlight {
	out := []CallInFlight{}
	for _, f := range d.exec.InFlight() {
		out = append(out, CallInFlight{Symbol: f.Key, Call: f.Call, Since: f.Since, Running: max(now.Sub(f.Since), 0).Seconds()})
	}
	return out
}

// busy names the symbol of the oldest call in flight, "" when none.
func (d *dispatcher) busy() string {
	if fl := d.exec.InFlight(); len(fl) > 0 {
		return fl[0].Key
	}
	return ""
}

// Breaker is the action budget's breaker as it is now, sharing nothing.
func (d *dispatcher) Breaker() act.Breaker { return d.breaker.Clone() }

// breakerOpen reports whether the breaker is open at now.
func (d *dispatcher) breakerOpen(now time.Time) bool { return d.breaker.Open(now) }

// setBreaker replaces the breaker (a takeover's, the last leader's).
func (d *dispatcher) setBreaker(b act.Breaker) { d.breaker = b }

// emit hands ev to the journal, with the tick's report when there is one.
func (d *dispatcher) emit(ctx context.Context, rep *TickReport, ev event) {
	d.jr.Emit(ctx, rep.report(), ev)
}

// runPlans decides the tick's due plans and hands their calls to the
// executor: one job per symbol (a hedge-mode long and short share its
// orders), which sends them in order while other symbols' jobs run beside
// it. The tick waits for its jobs for half its interval at most (so the
// outcome of an ordinary call is said in the tick that decided it); a job
// still running then goes on in the background, its symbol is not acted on
// again until it ends, and its outcome is applied by a later tick. A
// backtest's in-process exchange runs each plan to its end before the next
// is decided, where nothing can hang. setAt is the rule set the plans were
// decided under.
func (d *dispatcher) runPlans(ctx context.Context, now time.Time, snap *market.Snapshot, plans []*act.Plan, rep *TickReport, setAt *rules.Set) {
	if len(plans) == 0 {
		return
	}
	once := make(map[string]bool)
	var order []string
	bySymbol := make(map[string][]*act.Plan, len(plans))
	for _, pl := range plans {
		name := pl.Sym.Name
		if _, ok := bySymbol[name]; !ok {
			order = append(order, name)
		}
		bySymbol[name] = append(bySymbol[name], pl)
	}
	maxAge := d.cfg.MaxSnapshotAge
	var submitted []string // the symbols whose jobs this tick waits for
	for _, name := range order {
		var busy error
		if f, ok := d.exec.Busy(name); ok {
			busy = errInFlight
			d.log.Debug("actions held back: a call is in flight", "symbol", name, "call", f.Call, "since", f.Since)
		}
		var calls []*act.Pending
		var dones []func(context.Context, *TickReport)
		for _, pl := range bySymbol[name] {
			held := busy
			if held == nil && d.heldBack(ctx, now, pl, rep) {
				held = errBackingOff
			}
			pcs, done := d.execute(ctx, now, snap, pl, once, rep, held, setAt)
			if d.sequential {
				d.submit(ctx, name, pcs, []func(context.Context, *TickReport){done}, maxAge)
				d.exec.Collect(ctx)
				continue
			}
			calls, dones = append(calls, pcs...), append(dones, done)
		}
		if !d.sequential && d.submit(ctx, name, calls, dones, maxAge) {
			submitted = append(submitted, name)
		}
	}
	if len(submitted) > 0 && !d.exec.WaitKeys(d.wait/2, submitted) {
		d.log.Debug("calls still in flight at the end of the tick; their outcome is applied when they end", "calls", len(d.exec.InFlight()))
	}
	d.exec.Collect(ctx)
}

// submit hands one symbol's calls to the executor; dones say what became
// of them once they ended, in order. Without a call they run at once. It
// reports whether a job was submitted.
func (d *dispatcher) submit(ctx context.Context, symbol string, calls []*act.Pending, dones []func(context.Context, *TickReport), maxAge time.Duration) bool {
	settle := func(ctx context.Context) {
		for _, done := range dones {
			done(ctx, d.rep)
		}
	}
	if len(calls) == 0 {
		settle(ctx)
		return false
	}
	job := &act.Job{Key: symbol, Done: func(ctx context.Context, results []act.Result) {
		for i, pc := range calls {
			pc.Result = results[i]
		}
		settle(context.WithoutCancel(ctx)) // what was sent is said, stopping or not
	}}
	for _, pc := range calls {
		job.Calls = append(job.Calls, d.executorCall(ctx, pc, maxAge))
	}
	if !d.exec.Submit(ctx, job) {
		// Not reached: runPlans holds back a symbol in flight.
		for _, pc := range calls {
			pc.Result = act.Result{Err: errInFlight}
		}
		settle(ctx)
		return false
	}
	return true
}

// heldBack reports whether the plan's exchange calls wait for its symbol's
// backoff, and says so in the tick's report and the log. Its notify actions
// are not held back.
func (d *dispatcher) heldBack(ctx context.Context, now time.Time, pl *act.Plan, rep *TickReport) bool {
	failures, until, held := d.backoff.Held(pl.Sym.Name, now)
	if !held || len(pl.Steps) == 0 {
		return false
	}
	why := fmt.Sprintf("%d failed calls in a row on %s; next attempt at %s", failures, pl.Sym.Name, until.UTC().Format(time.RFC3339))
	d.emit(ctx, rep, event{Level: slog.LevelDebug, Msg: "actions held back: " + why, Attrs: []any{"symbol", pl.Sym.Name},
		Action: &journal.ActionEvent{Symbol: pl.Sym.Name, Action: "settings", Outcome: "backoff", Effect: why}})
	return true
}

// symbolOutcome counts a symbol's call outcome for its backoff. A failure
// the symbol is not to blame for (the breaker, a stale snapshot) or that the
// cooldown already spaces out (a call refused for good) changes nothing;
// any other failure makes its next calls wait interval×2^(n-1) minus half
// an interval (so the first failure is retried at the next tick), at most
// SymbolBackoffMax; a success ends the backoff.
func (d *dispatcher) symbolOutcome(ctx context.Context, now time.Time, symbol string, err error) {
	switch {
	case err == nil:
		if n := d.backoff.Succeeded(symbol); n > 0 {
			d.metrics.SymbolFailures(symbol, 0)
			d.emit(ctx, nil, event{Level: slog.LevelInfo, Msg: "actions on " + symbol + " succeed again",
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
	d.emit(ctx, nil, event{Level: slog.LevelWarn, Msg: text, Attrs: []any{"symbol", symbol},
		Audit: &journal.Record{Time: now, Type: "backoff", Symbol: symbol, Reason: text}})
}
