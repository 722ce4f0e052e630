package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// errBackingOff is the outcome of an action held back because its symbol's
// last calls failed.
var errBackingOff = errors.New("symbol backing off after failed calls")

// symbolBackoff is what the engine remembers of a symbol whose action calls
// failed: how many times in a row, and until when its next ones wait.
type symbolBackoff struct {
	failures int
	last     time.Time // the tick of the last failure counted
	until    time.Time
}

// runPlans runs the tick's due plans. The plans of one symbol run in order
// (a hedge-mode long and short share its orders); different symbols run
// concurrently, at most ActionConcurrency at once, so a call that hangs on
// one symbol does not hold back another's. A backtest's in-process reader
// runs them in order, where nothing can hang.
func (e *Engine) runPlans(ctx context.Context, now time.Time, snap *Snapshot, plans []*plan, rep *TickReport) {
	if len(plans) == 0 {
		return
	}
	cancelled := make(map[string]bool)
	var order []string
	bySymbol := make(map[string][]*plan, len(plans))
	for _, pl := range plans {
		name := pl.sym.Name
		if _, ok := bySymbol[name]; !ok {
			order = append(order, name)
		}
		bySymbol[name] = append(bySymbol[name], pl)
	}
	if e.sequential || len(order) == 1 || e.cfg.ActionConcurrency <= 1 {
		for _, pl := range plans {
			e.execute(ctx, now, snap, pl, cancelled, rep)
		}
		return
	}
	slots := make(chan struct{}, e.cfg.ActionConcurrency)
	var wg sync.WaitGroup
	for _, name := range order {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			for _, pl := range bySymbol[name] {
				e.execute(ctx, now, snap, pl, cancelled, rep)
			}
		})
	}
	wg.Wait()
}

// heldBack reports whether the plan's exchange calls wait for its symbol's
// backoff, and says so in the tick's report and the log. Its notify actions
// are not held back.
func (e *Engine) heldBack(ctx context.Context, now time.Time, pl *plan, rep *TickReport) bool {
	b := e.backoff[pl.sym.Name]
	if b == nil || !now.Before(b.until) || (!pl.cancel && pl.lower == 0 && !pl.isolate) {
		return false
	}
	why := fmt.Sprintf("%d failed calls in a row on %s; next attempt at %s", b.failures, pl.sym.Name, b.until.UTC().Format(time.RFC3339))
	e.emit(ctx, rep, event{level: slog.LevelDebug, msg: "actions held back: " + why, attrs: []any{"symbol", pl.sym.Name},
		action: &ActionEvent{Symbol: pl.sym.Name, Action: "settings", Outcome: "backoff", Effect: why}})
	return true
}

// symbolOutcome counts a symbol's call outcome for its backoff. A failure
// the symbol is not to blame for (the breaker, a stale snapshot) or that the
// cooldown already spaces out (a call refused for good) changes nothing;
// any other failure makes its next calls wait interval×2^(n-1) minus half
// an interval (so the first failure is retried at the next tick), at most
// SymbolBackoffMax; a success ends the backoff.
func (e *Engine) symbolOutcome(ctx context.Context, now time.Time, symbol string, err error) {
	b := e.backoff[symbol]
	switch {
	case err == nil:
		if b != nil {
			delete(e.backoff, symbol)
			e.metrics.symbolFailures(symbol, 0)
			e.emit(ctx, nil, event{level: slog.LevelInfo, msg: "actions on " + symbol + " succeed again",
				attrs: []any{"symbol", symbol, "failures", b.failures},
				audit: &Record{Time: now, Type: "backoff", Symbol: symbol, Reason: fmt.Sprintf("a call succeeded after %d failures: backoff ended", b.failures)}})
		}
		return
	case errors.Is(err, ErrBreakerOpen), errors.Is(err, ErrStaleSnapshot), errors.Is(err, ErrPaused), errors.Is(err, errBackingOff), refusedForGood(err):
		return
	}
	if b == nil {
		b = &symbolBackoff{}
		e.backoff[symbol] = b
	}
	if b.last.Equal(now) {
		return // one tick's calls count once
	}
	b.failures++
	b.last = now
	wait := e.cfg.SymbolBackoffMax
	if b.failures <= 20 {
		wait = min(e.cfg.Interval<<(b.failures-1)-e.cfg.Interval/2, wait)
	}
	b.until = now.Add(wait)
	e.metrics.symbolFailures(symbol, b.failures)
	text := fmt.Sprintf("%d failed calls in a row on %s (%v): its actions wait until %s; other symbols are not held back",
		b.failures, symbol, err, b.until.UTC().Format(time.RFC3339))
	e.emit(ctx, nil, event{level: slog.LevelWarn, msg: text, attrs: []any{"symbol", symbol},
		audit: &Record{Time: now, Type: "backoff", Symbol: symbol, Reason: text}})
}
