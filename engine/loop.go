package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/engine/dispatch"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/engine/model"
)

// ErrBreakerOpen is the error of an action the circuit breaker held back
// (engine/dispatch).
var ErrBreakerOpen = dispatch.ErrBreakerOpen

// ErrStaleSnapshot is the error of an action not sent because the snapshot
// it was decided on is older than Config.MaxSnapshotAge (engine/dispatch).
var ErrStaleSnapshot = dispatch.ErrStaleSnapshot

// Run ticks until ctx is done, every Interval, or every FastInterval
// while the last tick found the guard near danger (see NextInterval). The
// calls in flight when ctx is cancelled finish (each bounded by
// ActionTimeout), and their outcome is recorded, before Run returns nil.
func (e *Engine) Run(ctx context.Context) error {
	everyOrWake(ctx, e.now, e.NextInterval, e.lead.WonElection(), func(now time.Time) {
		rep, err := e.Tick(ctx, now)
		if err != nil && ctx.Err() == nil {
			e.log.Error("tick failed", "err", err)
		}
		if e.onTick != nil && ctx.Err() == nil {
			e.onTick(rep, err)
		}
	})
	e.tick.Lock()
	defer e.tick.Unlock()
	e.disp.Drain()
	if err := e.saveLocked(); err != nil {
		e.log.Error("save state", "err", err)
	}
	return nil
}

// Every calls step with the time now gives at once, then every interval,
// until ctx is done: the loop of the recorder. ctx only ends the loop
// between two steps; a step that overruns the interval delays the next one
// rather than queueing steps.
func Every(ctx context.Context, interval time.Duration, now func() time.Time, step func(now time.Time)) {
	EveryDynamic(ctx, now, func() time.Duration { return interval }, step)
}

// EveryDynamic is Every with an interval asked for after each step: the
// next step starts next() after the start of the last one (at once when the
// step took longer). It is the loop of Run, whose interval depends on what
// the last tick saw.
func EveryDynamic(ctx context.Context, now func() time.Time, next func() time.Duration, step func(now time.Time)) {
	everyOrWake(ctx, now, next, nil, step)
}

// everyOrWake is EveryDynamic that also steps at once when wake delivers
// (nil: never): a takeover ticks when the election is won, not up to an
// interval later.
func everyOrWake(ctx context.Context, now func() time.Time, next func() time.Duration, wake <-chan struct{}, step func(now time.Time)) {
	t := time.NewTimer(0)
	defer t.Stop()
	<-t.C
	for {
		start := time.Now() // the timer runs on the host clock, whatever now says
		step(now())
		if ctx.Err() != nil {
			return
		}
		wait := next() - time.Since(start)
		if wait <= 0 {
			continue
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
			t.Stop()
		}
	}
}

// Tick runs one evaluation at now: it reads a snapshot, evaluates every rule
// on every non-empty position, steps their states and runs the due actions.
// A failed read is returned wrapped around ErrIncomplete and no action is
// taken for what it left out. Reads are cancelled with ctx; an action that
// has started finishes even when ctx is cancelled.
func (e *Engine) Tick(ctx context.Context, now time.Time) (*TickReport, error) {
	rep := new(TickReport)
	err := e.TickInto(ctx, now, rep)
	return rep, err
}

// TickInto is Tick writing its report into rep, which the caller owns: rep
// is emptied first, its lists (Transitions, Actions, Liquidated) are
// refilled in the arrays they had, and the snapshot is read into rep
// itself (Snapshot points there). A replay reads each tick's report before
// the next and keeps none of it, so one report serves every tick (a
// report made per tick is garbage once read). The engine writes rep only
// during TickInto: the dispatcher lets go of it when the tick ends
// (Dispatcher.End; a call still in flight then is said outside any
// report). Its view of the tick reads the snapshot until the next tick,
// as it read Tick's: the caller reads rep between ticks, never writes it.
func (e *Engine) TickInto(ctx context.Context, now time.Time, rep *TickReport) error {
	e.tick.Lock()
	defer e.tick.Unlock()
	e.applyPending()
	start := e.now() // for the duration metric and the snapshot's age; decisions use now
	rep.reset(now)
	e.lastTick = now
	// What became of the calls that were still in flight when their tick
	// ended: said in this tick's report.
	e.disp.Begin(ctx, now, start, rep.report(), e.board.NextInterval())
	defer e.disp.End()
	// Records kept from a failed write go out as soon as the log takes
	// them, not at the next event.
	e.jr.Flush(ctx, now)
	inFlight := ""
	if key := e.disp.Busy(); key != "" {
		inFlight = fmt.Sprintf("a call on %s was in flight while the positions were read", key)
	}
	e.model.Begin(now, inFlight)
	snap, err := e.snaps.ReadInto(ctx, now, &rep.snap)
	if snap != nil {
		rep.Snapshot = snap
		e.board.setListed(snap.Symbols)
	}
	e.reach.observe(ctx, now, err, e.cfg.UnreachableAfter, e.jr)
	if e.ctl.Expire(ctx, now) {
		e.file.changed()
	}
	e.syncLeadership(ctx, now)
	if snap != nil {
		e.lane.Begin() // this tick's evaluation measures it afresh
		rows := e.join(snap)
		e.model.Observe(now, &e.view, model.Settings{Stress: e.cfg.stress(), Orders: e.cfg.orders(), Rules: e.eval.ruleSet(), FastDistance: e.cfg.laneDistance()})
		for _, ev := range e.recon.Observe(now, &e.view) {
			e.jr.Emit(ctx, rep.report(), ev)
		}
		if f, fresh := e.model.CheckFit(ctx, now, &e.view, e.cfg.ModelTolerance, e.jr); fresh {
			e.metrics.ModelFit(f)
			e.board.setFit(f) // for Status; allocated only for a fresh fit
		}
		plans, due := e.eval.evaluate(ctx, now, &e.view, rows, rep)
		e.disp.Run(ctx, now, snap, plans, rep.report(), e.eval.ruleSet())
		e.recon.Acted(now, rep.Actions)
		e.eval.finish(ctx, now, due, rep, e.disp.Idle())
		e.model.Warm(ctx, now)
	}
	e.publishStatus(snap, err) // what Status shows
	if err == nil {
		// Healthy only once the positions it read are what Status shows:
		// a status read in between said healthy over an empty table.
		e.board.succeeded(now)
	}
	if serr := e.saveLocked(); serr != nil {
		e.log.Error("save state", "err", serr)
		if err == nil {
			err = serr
		}
	}
	var counts map[string]*[4]int
	if e.metrics != nil {
		counts = e.eval.counts()
	}
	e.metrics.TickDone(err, e.now().Sub(start), now.Sub(e.board.LastSuccess()), counts, e.disp.BreakerOpen(now))
	if err != nil {
		e.jr.Emit(ctx, nil, event{Audit: &journal.Record{Time: now, Type: "tick", Error: err.Error()}})
	}
	if e.eval.takeActed() || len(rep.Transitions) > 0 {
		e.publishActive() // the cooldowns too: Status's next texts count from them
	}
	e.applyPending() // a reload that arrived during the tick
	var hot []alert.Alert
	if e.cfg.FastInterval > 0 {
		hot = e.eval.hot()
	}
	e.board.setWait(e.lane.Steer(ctx, e.cfg.lane(), hot, e.jr))
	return err
}

// join joins snap once for the tick: the view (engine/market), then its
// rows with the rule states.
func (e *Engine) join(snap *market.Snapshot) []tickRow {
	e.view.Join(snap, e.snaps, e.cfg.IndexNames)
	return e.eval.join(&e.view)
}

// rowsFor returns the tick's rows of snap, joining them if the tick has
// not.
func (e *Engine) rowsFor(snap *market.Snapshot) []tickRow {
	return e.eval.rowsFor(snap, &e.view, e.snaps, e.cfg.IndexNames)
}

// reachability notifies when reads have failed for a while, and once more
// when they succeed again (tick-owned).
type reachability struct {
	failSince time.Time // first failed read of the current outage
	down      bool      // the unreachable notification was sent
}

// observe takes in the tick's read at now, which failed with err (nil: it
// succeeded): after failing for after, it says the exchange is down.
func (r *reachability) observe(ctx context.Context, now time.Time, err error, after time.Duration, jr *journal.Journal) {
	if err == nil {
		if r.down {
			jr.Emit(ctx, nil, reachabilityEvent(now, false, fmt.Sprintf("exchange reachable again after %s", now.Sub(r.failSince).Round(time.Second))))
		}
		r.failSince, r.down = time.Time{}, false
		return
	}
	if ctx.Err() != nil {
		return
	}
	if r.failSince.IsZero() {
		r.failSince = now
	}
	if !r.down && now.Sub(r.failSince) >= after {
		r.down = true
		text := fmt.Sprintf("exchange unreachable for %s: no action is taken without fresh data (%v)", now.Sub(r.failSince).Round(time.Second), err)
		jr.Emit(ctx, nil, reachabilityEvent(now, true, text))
	}
}
