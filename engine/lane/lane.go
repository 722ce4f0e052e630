// Package lane is the fast lane: it measures, in each tick, the position
// nearest its liquidation price and decides at the tick's end how long
// the engine waits before the next one: engine.fast_interval while a rule
// that can change something is pending or firing, or a position is within
// engine.fast_distance of its liquidation price; engine.interval
// otherwise. The engine owns the loop; the lane only decides its wait.
package lane

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/rules"
)

// Settings are the engine's settings the lane reads: the lane is off when
// FastInterval is 0 or not shorter than Interval.
type Settings struct {
	Interval, FastInterval time.Duration
	// FastDistance is the liquidation distance under which a position
	// holds the guard in the fast lane.
	FastDistance float64
}

// nearest is the position closest to its liquidation price that a tick
// evaluated with valid data.
type nearest struct {
	symbol   string
	distance float64
	ok       bool
}

// Lane is the fast lane's bookkeeping, owned by the tick.
type Lane struct {
	// near is measured by each tick that read a snapshot; a tick whose
	// read failed keeps the last measure, so an outage does not drop the
	// guard out of the fast lane while a position is near danger.
	near nearest
	// cause is why the lane is fast; "" in the normal lane.
	cause string
}

// Begin starts the measure of a tick that read a snapshot: its
// evaluation measures the nearest position afresh.
func (l *Lane) Begin() { l.near = nearest{} }

// Observe takes in one evaluated position's distance; the evaluator calls
// it after filling the environment.
func (l *Lane) Observe(symbol string, env *rules.Env) {
	d := env.LiquidationDistance
	if env.NoData() != "" || math.IsNaN(d) || math.IsInf(d, 0) {
		return
	}
	if !l.near.ok || d < l.near.distance {
		l.near = nearest{symbol: symbol, distance: d, ok: true}
	}
}

// causeOf says why the next tick comes after s.FastInterval rather
// than s.Interval, or "" when it does not: a rule that can change
// something (hot: pending or firing, with an action other than notify, in a
// stable order) on a position or on the account, or a position whose
// liquidation distance is under s.FastDistance. Such a rule pending is
// about to act, and firing may act again once its cooldown ends; a
// position near liquidation may cross a rule's threshold at any moment. A
// rule that only notifies has nothing to act on sooner: a notify-only
// alert, with every position far from liquidation, keeps the normal
// interval for as long as it holds.
func causeOf(s Settings, hot []alert.Alert, near nearest) string {
	if s.FastInterval <= 0 || s.FastInterval >= s.Interval {
		return ""
	}
	for _, a := range hot {
		if a.State == alert.Pending || a.State == alert.Firing {
			return fmt.Sprintf("rule %s %s on %s", a.Rule, a.State, a.Symbol)
		}
	}
	if near.ok && near.distance < s.FastDistance {
		return fmt.Sprintf("%s %.1f%% from liquidation", near.symbol, near.distance*100)
	}
	return ""
}

// Acts reports whether a rule can change something on the exchange: it
// has an action other than notify (on its position, or, for an account
// rule, on its targets). Only such a rule pending or firing holds the
// lane.
func Acts(r *rules.Rule) bool {
	return slices.ContainsFunc(r.Actions, func(a rules.Action) bool { return a.Kind != rules.Notify })
}

// Emitter says an event outside any tick's report (the journal).
type Emitter interface {
	Emit(ctx context.Context, rep *journal.Report, ev journal.Event)
}

// Steer decides the wait before the next tick at the end of a tick, of
// the rules hot (pending or firing rules that Act, sorted; nil without a
// fast lane) and the nearest position the tick measured, and says so in
// jr when the lane changes.
func (l *Lane) Steer(ctx context.Context, s Settings, hot []alert.Alert, jr Emitter) time.Duration {
	cause := causeOf(s, hot, l.near)
	wait := s.Interval
	if cause != "" {
		wait = s.FastInterval
	}
	was := l.cause != ""
	l.cause = cause
	switch {
	case cause != "" && !was:
		jr.Emit(ctx, nil, journal.Event{Level: slog.LevelInfo, Msg: "fast lane on: " + cause,
			Attrs: []any{"interval", s.FastInterval},
			Count: func(m *journal.Metrics) { m.FastLaneOn(true) }})
	case cause == "" && was:
		jr.Emit(ctx, nil, journal.Event{Level: slog.LevelInfo, Msg: "back to the normal interval",
			Attrs: []any{"interval", s.Interval},
			Count: func(m *journal.Metrics) { m.FastLaneOn(false) }})
	}
	return wait
}
