package engine

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

// nearest is the position closest to its liquidation price that a tick
// evaluated with valid data.
type nearest struct {
	symbol   string
	distance float64
	ok       bool
}

// laneState is the fast lane's bookkeeping, owned by the tick.
type laneState struct {
	// near is measured by each tick that read a snapshot; a tick whose
	// read failed keeps the last measure, so an outage does not drop the
	// guard out of the fast lane while a position is near danger.
	near nearest
	// cause is why the lane is fast; "" in the normal lane.
	cause string
}

// observe takes in one evaluated position's distance; evaluate calls it
// after filling the environment.
func (l *laneState) observe(symbol string, env *rules.Env) {
	d := env.LiquidationDistance
	if env.NoData() != "" || math.IsNaN(d) || math.IsInf(d, 0) {
		return
	}
	if !l.near.ok || d < l.near.distance {
		l.near = nearest{symbol: symbol, distance: d, ok: true}
	}
}

// fastLaneCause says why the next tick comes after cfg.FastInterval rather
// than cfg.Interval, or "" when it does not: a rule that can change
// something (hot: pending or firing, with an action other than notify, in a
// stable order) on a position or on the account, or a position whose
// liquidation distance is under cfg.FastDistance. Such a rule pending is
// about to act, and firing may act again once its cooldown ends; a
// position near liquidation may cross a rule's threshold at any moment. A
// rule that only notifies has nothing to act on sooner: a notify-only
// alert, with every position far from liquidation, keeps the normal
// interval for as long as it holds.
func fastLaneCause(cfg Config, hot []alert.Alert, near nearest) string {
	if cfg.FastInterval <= 0 || cfg.FastInterval >= cfg.Interval {
		return ""
	}
	for _, a := range hot {
		if a.State == alert.Pending || a.State == alert.Firing {
			return fmt.Sprintf("rule %s %s on %s", a.Rule, a.State, a.Symbol)
		}
	}
	if near.ok && near.distance < cfg.FastDistance {
		return fmt.Sprintf("%s %.1f%% from liquidation", near.symbol, near.distance*100)
	}
	return ""
}

// acts reports whether a rule can change something on the exchange: it
// has an action other than notify (on its position, or, for an account
// rule, on its targets).
func acts(r *rules.Rule) bool {
	return slices.ContainsFunc(r.Actions, func(a rules.Action) bool { return a.Kind != rules.Notify })
}

// hot lists the rules that can change something and are pending or
// firing on a position or the account, sorted by symbol and rule.
func (v *evaluator) hot() []alert.Alert {
	out := v.book.Alerts(v.names, func(s alert.State) bool { return s == alert.Pending || s == alert.Firing })
	acting := make(map[string]bool, len(v.set.Rules))
	for _, r := range v.set.Rules {
		acting[r.Name] = acts(r)
	}
	out = slices.DeleteFunc(out, func(a alert.Alert) bool { return !acting[a.Rule] })
	for i := range out {
		out[i].Since = time.Time{} // the lane reads the states only
	}
	return out
}

// steer decides the wait before the next tick at the end of a tick, of
// the rules hot (evaluator.hot; nil without a fast lane) and the nearest
// position the tick measured, and says so in jr when the lane changes.
func (l *laneState) steer(ctx context.Context, cfg Config, hot []alert.Alert, jr *journal.Journal) time.Duration {
	cause := fastLaneCause(cfg, hot, l.near)
	wait := cfg.Interval
	if cause != "" {
		wait = cfg.FastInterval
	}
	was := l.cause != ""
	l.cause = cause
	switch {
	case cause != "" && !was:
		jr.Emit(ctx, nil, event{Level: slog.LevelInfo, Msg: "fast lane on: " + cause,
			Attrs: []any{"interval", cfg.FastInterval},
			Count: func(m *journal.Metrics) { m.FastLaneOn(true) }})
	case cause == "" && was:
		jr.Emit(ctx, nil, event{Level: slog.LevelInfo, Msg: "back to the normal interval",
			Attrs: []any{"interval", cfg.Interval},
			Count: func(m *journal.Metrics) { m.FastLaneOn(false) }})
	}
	return wait
}
