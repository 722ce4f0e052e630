package engine

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/notify"
	"github.com/riskguard/riskguard/rules"
)

// TickReport says what one tick saw and did.
type TickReport struct {
	Time time.Time
	// Positions is the number of non-empty positions evaluated.
	Positions   int
	Evaluations int
	// Transitions and Actions are what the tick's events said.
	journal.Report
	// Snapshot is what the tick read, before its actions; nil when the
	// positions could not be read.
	Snapshot *market.Snapshot
	// snap is where the tick reads its snapshot (Snapshot points to it):
	// made with the report, and reused with it (TickInto).
	snap market.Snapshot
}

// event is one thing the guard saw or did, built once, where it happens,
// by one of the constructors in this file (the dispatcher's in
// engine/dispatch, a rule's notify action in engine/journal); the journal
// (Engine.jr) fans it out. No other code writes the audit log, sends a
// notification or adds to a tick's report.
type event = journal.Event

// reset empties rep for the tick at now, keeping its lists' arrays, and
// the last snapshot read into it until the tick reads the next (the view
// the engine keeps between ticks is of it).
func (rep *TickReport) reset(now time.Time) {
	*rep = TickReport{Time: now, Report: journal.Report{
		Transitions: rep.Transitions[:0], Actions: rep.Actions[:0], Liquidated: rep.Liquidated[:0]}, snap: rep.snap}
}

// report is the part of rep the journal adds to; nil without a report.
func (rep *TickReport) report() *journal.Report {
	if rep == nil {
		return nil
	}
	return &rep.Report
}

// transitionEvent is one rule changing state on one position: audited,
// logged, reported and, for firing, resolved and no data, notified unless
// quiet (the rule's own notify action tells of it). env holds what the rule
// saw; nil when the position is gone.
func transitionEvent(now time.Time, r *rules.Rule, symbol, position string, from, to alert.State, tr alert.Transition, reason string, quiet bool, env *rules.Env) event {
	// The log's attributes, made once at their length (below).
	n := 8
	switch {
	case env != nil:
		n = 12
	case reason != "":
		n = 10
	}
	ev := event{
		Transition: &journal.TransitionEvent{Rule: r.Name, Symbol: symbol, From: from, To: to, Reason: reason},
		Audit:      &journal.Record{Time: now, Type: "transition", Rule: r.Name, Symbol: symbol, Position: position, From: from.String(), To: to.String(), Reason: reason},
		Level:      slog.LevelInfo,
		Msg:        "rule " + string(tr),
		Attrs:      append(make([]any, 0, n), "rule", r.Name, "symbol", symbol, "state", to.String(), "from", from.String()),
	}
	if to == alert.Firing || to == alert.NoData {
		ev.Level = slog.LevelWarn
	}
	var figures *notify.Figures
	if env != nil {
		ev.Attrs = append(ev.Attrs, "liquidationDistance", env.LiquidationDistance, "leverage", env.Position.Leverage)
		figures = journal.Values(env)
	} else if reason != "" {
		ev.Attrs = append(ev.Attrs, "reason", reason)
	}
	if quiet {
		return ev
	}
	var kind notify.Kind
	var text string
	switch {
	case tr == alert.ToFiring && env != nil:
		kind, text = notify.KindFiring, fmt.Sprintf("%s firing on %s%s: %s", r.Name, symbol, sideOf(env), journal.Describe(r, env))
	case tr == alert.ToResolved && env != nil:
		kind, text = notify.KindResolved, fmt.Sprintf("%s resolved on %s", r.Name, symbol)
	case tr == alert.ToResolved:
		kind, text = notify.KindResolved, fmt.Sprintf("%s resolved on %s: %s", r.Name, symbol, reason)
	case tr == alert.ToNoData:
		kind, text = notify.KindNoData, fmt.Sprintf("%s has no data on %s: %s", r.Name, symbol, reason)
	default:
		return ev
	}
	sev := string(r.Severity)
	if tr == alert.ToResolved {
		sev = string(rules.Info) // good news is never an alarm
	}
	m := notify.Message{Time: now, Kind: kind, Severity: sev, Rule: r.Name, Symbol: symbol, Text: text, Values: figures}
	if env != nil {
		m.Template = r.Message
	}
	ev.Note = &m
	return ev
}

// reachabilityEvent is the exchange found unreachable (down) or back.
func reachabilityEvent(now time.Time, down bool, text string) event {
	ev := event{Level: slog.LevelWarn, Msg: text, Audit: &journal.Record{Time: now, Type: "exchange", To: "reachable", Reason: text},
		Note: &notify.Message{Time: now, Kind: notify.KindExchange, Severity: "warning", Text: text}}
	if down {
		ev.Level, ev.Audit.To, ev.Note.Severity = slog.LevelError, "unreachable", "critical"
	}
	return ev
}

// reloadEvent is a new rule set taking effect.
func reloadEvent(now time.Time, n, kept int) event {
	return event{Level: slog.LevelInfo, Msg: "rules reloaded", Attrs: []any{"rules", n, "kept", kept},
		Audit: &journal.Record{Time: now, Type: "reload", Reason: fmt.Sprintf("%d rules, %d kept their state", n, kept)}}
}

// ruleErrorEvent is a rule failing at run time for a reason other than
// missing data; logged once until it evaluates again, counted every time.
func ruleErrorEvent(r *rules.Rule, symbol string, err error, first bool) event {
	ev := event{Count: func(m *journal.Metrics) { m.RuleError(r.Name) }}
	if first {
		ev.Level, ev.Msg, ev.Attrs = slog.LevelError, "rule failed at run time; marked unhealthy", []any{"rule", r.Name, "symbol", symbol, "err", err}
	}
	return ev
}

// sideOf names the side of the position a rule fires on (" LONG"), so that
// a position that turned over is told anew rather than grouped as a repeat
// of the other side's alert; "" for the account.
func sideOf(env *rules.Env) string {
	if d := env.Position.Direction; d != "" {
		return " " + d
	}
	return ""
}
