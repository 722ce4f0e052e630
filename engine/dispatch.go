package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/riskguard/riskguard/engine/act"
	"github.com/riskguard/riskguard/engine/control"
)

// errBackingOff is the outcome of an action held back because its symbol's
// last calls failed.
var errBackingOff = errors.New("symbol backing off after failed calls")

// errInFlight is the outcome of an action held back because a call on its
// symbol is still in flight: the symbol is acted on again once that call
// has ended and its outcome is known.
var errInFlight = errors.New("a call on the symbol is still in flight")

// runPlans decides the tick's due plans and hands their calls to the
// executor: one job per symbol (a hedge-mode long and short share its
// orders), which sends them in order while other symbols' jobs run beside
// it. The tick waits for its jobs for half its interval at most (so the
// outcome of an ordinary call is said in the tick that decided it); a job
// still running then goes on in the background, its symbol is not acted on
// again until it ends, and its outcome is applied by a later tick. A
// backtest's in-process exchange runs each plan to its end before the next
// is decided, where nothing can hang.
func (e *Engine) runPlans(ctx context.Context, now time.Time, snap *Snapshot, plans []*act.Plan, rep *TickReport) {
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
	maxAge := e.cfg.MaxSnapshotAge
	var submitted []string // the symbols whose jobs this tick waits for
	for _, name := range order {
		var busy error
		if f, ok := e.exec.Busy(name); ok {
			busy = errInFlight
			e.log.Debug("actions held back: a call is in flight", "symbol", name, "call", f.Call, "since", f.Since)
		}
		var calls []*act.Pending
		var dones []func(context.Context, *TickReport)
		for _, pl := range bySymbol[name] {
			held := busy
			if held == nil && e.heldBack(ctx, now, pl, rep) {
				held = errBackingOff
			}
			pcs, done := e.execute(ctx, now, snap, pl, once, rep, held)
			if e.sequential {
				e.submit(ctx, name, pcs, []func(context.Context, *TickReport){done}, maxAge)
				e.exec.Collect(ctx)
				continue
			}
			calls, dones = append(calls, pcs...), append(dones, done)
		}
		if !e.sequential && e.submit(ctx, name, calls, dones, maxAge) {
			submitted = append(submitted, name)
		}
	}
	if len(submitted) > 0 && !e.exec.WaitKeys(e.wait/2, submitted) {
		e.log.Debug("calls still in flight at the end of the tick; their outcome is applied when they end", "calls", len(e.exec.InFlight()))
	}
	e.exec.Collect(ctx)
}

// submit hands one symbol's calls to the executor; dones say what became
// of them once they ended, in order. Without a call they run at once. It
// reports whether a job was submitted.
func (e *Engine) submit(ctx context.Context, symbol string, calls []*act.Pending, dones []func(context.Context, *TickReport), maxAge time.Duration) bool {
	settle := func(ctx context.Context) {
		for _, done := range dones {
			done(ctx, e.curRep)
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
		job.Calls = append(job.Calls, e.executorCall(ctx, pc, maxAge))
	}
	if !e.exec.Submit(ctx, job) {
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
func (e *Engine) heldBack(ctx context.Context, now time.Time, pl *act.Plan, rep *TickReport) bool {
	failures, until, held := e.backoff.Held(pl.Sym.Name, now)
	if !held || len(pl.Steps) == 0 {
		return false
	}
	why := fmt.Sprintf("%d failed calls in a row on %s; next attempt at %s", failures, pl.Sym.Name, until.UTC().Format(time.RFC3339))
	e.emit(ctx, rep, event{Level: slog.LevelDebug, Msg: "actions held back: " + why, Attrs: []any{"symbol", pl.Sym.Name},
		Action: &ActionEvent{Symbol: pl.Sym.Name, Action: "settings", Outcome: "backoff", Effect: why}})
	return true
}

// symbolOutcome counts a symbol's call outcome for its backoff. A failure
// the symbol is not to blame for (the breaker, a stale snapshot) or that the
// cooldown already spaces out (a call refused for good) changes nothing;
// any other failure makes its next calls wait interval×2^(n-1) minus half
// an interval (so the first failure is retried at the next tick), at most
// SymbolBackoffMax; a success ends the backoff.
func (e *Engine) symbolOutcome(ctx context.Context, now time.Time, symbol string, err error) {
	switch {
	case err == nil:
		if n := e.backoff.Succeeded(symbol); n > 0 {
			e.metrics.SymbolFailures(symbol, 0)
			e.emit(ctx, nil, event{Level: slog.LevelInfo, Msg: "actions on " + symbol + " succeed again",
				Attrs: []any{"symbol", symbol, "failures", n},
				Audit: &Record{Time: now, Type: "backoff", Symbol: symbol, Reason: fmt.Sprintf("a call succeeded after %d failures: backoff ended", n)}})
		}
		return
	case errors.Is(err, ErrBreakerOpen), errors.Is(err, ErrStaleSnapshot), errors.Is(err, control.ErrPaused), errors.Is(err, ErrStandby), errors.Is(err, errBackingOff), errors.Is(err, errInFlight), act.Refused(err):
		return
	}
	failures, until, counted := e.backoff.Failed(symbol, now)
	if !counted {
		return
	}
	e.metrics.SymbolFailures(symbol, failures)
	text := fmt.Sprintf("%d failed calls in a row on %s (%v): its actions wait until %s; other symbols are not held back",
		failures, symbol, err, until.UTC().Format(time.RFC3339))
	e.emit(ctx, nil, event{Level: slog.LevelWarn, Msg: text, Attrs: []any{"symbol", symbol},
		Audit: &Record{Time: now, Type: "backoff", Symbol: symbol, Reason: text}})
}
