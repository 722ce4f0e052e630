package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/notify"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
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
}

// event is one thing the guard saw or did, built once, where it happens,
// by one of the constructors in this file; emit hands it to the journal,
// which fans it out. No other code writes the audit log, sends a
// notification or adds to a tick's report.
type event = journal.Event

// emit hands ev to the journal, with the tick's report when there is one.
func (e *Engine) emit(ctx context.Context, rep *TickReport, ev event) {
	e.jr.Emit(ctx, rep.report(), ev)
}

// report is the part of rep the journal adds to; nil without a report.
func (rep *TickReport) report() *journal.Report {
	if rep == nil {
		return nil
	}
	return &rep.Report
}

// pausedEvent makes the event of an action held back by a pause, of its
// error (see control.Service.SayPaused).
func pausedEvent(base journal.Record, desc, effect string, act *journal.ActionEvent) func(error) event {
	return func(err error) event { return actionPhaseEvent(base, "paused", desc, effect, nil, err, act) }
}

// transitionEvent is one rule changing state on one position: audited,
// logged, reported and, for firing, resolved and no data, notified unless
// quiet (the rule's own notify action tells of it). env holds what the rule
// saw; nil when the position is gone.
func transitionEvent(now time.Time, r *rules.Rule, symbol, position string, from, to alert.State, tr alert.Transition, reason string, quiet bool, env *rules.Env) event {
	ev := event{
		Transition: &journal.TransitionEvent{Rule: r.Name, Symbol: symbol, From: from, To: to, Reason: reason},
		Audit:      &journal.Record{Time: now, Type: "transition", Rule: r.Name, Symbol: symbol, Position: position, From: from.String(), To: to.String(), Reason: reason},
		Level:      slog.LevelInfo,
		Msg:        "rule " + string(tr),
		Attrs:      []any{"rule", r.Name, "symbol", symbol, "state", to.String(), "from", from.String()},
	}
	if to == alert.Firing || to == alert.NoData {
		ev.Level = slog.LevelWarn
	}
	var figures *notify.Figures
	if env != nil {
		ev.Attrs = append(ev.Attrs, "liquidationDistance", env.LiquidationDistance, "leverage", env.Position.Leverage)
		figures = values(env)
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
		kind, text = notify.KindFiring, fmt.Sprintf("%s firing on %s%s: %s", r.Name, symbol, sideOf(env), describe(r, env))
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

// breakerEvent is the circuit breaker opening or closing.
func breakerEvent(now time.Time, open bool, text string) event {
	ev := event{Level: slog.LevelInfo, Msg: text, Audit: &journal.Record{Time: now, Type: "breaker", To: "closed"},
		Note: &notify.Message{Time: now, Kind: notify.KindBreaker, Severity: "warning", Text: text}}
	if open {
		ev.Level, ev.Audit.To, ev.Audit.Reason, ev.Note.Severity = slog.LevelError, "open", text, "critical"
	}
	return ev
}

// actionPhaseEvent is one phase of a mutating call (base.Action): intended,
// dry_run, skipped, sent, error or result. Every phase is audited; the
// outcome phases are logged, counted and notified, and carry act, the
// action as the tick's report shows it.
//
// effect, when set, is the margin model's prediction, said after the action.
func actionPhaseEvent(base journal.Record, phase, desc, effect string, resp json.RawMessage, err error, act *journal.ActionEvent) event {
	said := ""
	if effect != "" {
		said = ": " + effect
	}
	r := base
	r.Phase, r.Response = phase, resp
	if err != nil {
		r.Error = err.Error()
	}
	ev := event{Audit: &r}
	rulesAttr := joinRules(base.Rules)
	attrs := []any{"action", base.Action, "symbol", base.Symbol, "rule", rulesAttr}
	count := func(result string) func(*journal.Metrics) {
		return func(m *journal.Metrics) { m.Action(base.Action, result) }
	}
	switch phase {
	case "dry_run":
		r.Reason = "dry run: not sent"
		ev.Level, ev.Msg, ev.Attrs, ev.Count = slog.LevelWarn, "would "+desc+said, append(attrs, "dry_run", true), count("dry_run")
	case "paused":
		r.Reason = "not sent: " + err.Error()
		ev.Level, ev.Msg, ev.Attrs, ev.Count = slog.LevelWarn, "would "+desc+said+", paused", append(attrs, "paused", true, "err", err), count("paused")
		ev.Note = &notify.Message{Time: base.Time, Kind: notify.KindAction, Severity: "warning", Symbol: base.Symbol, Action: base.Action,
			Rule: rulesAttr, Text: "PAUSED: would " + desc + " (rules: " + strings.Join(base.Rules, ", ") + ")" + said + "; " + err.Error()}
	case "standby":
		r.Reason = "not sent: " + err.Error()
		ev.Level, ev.Msg, ev.Attrs, ev.Count = slog.LevelInfo, "would "+desc+said+", standby", append(attrs, "standby", true, "err", err), count("standby")
	case "skipped":
		ev.Level, ev.Msg, ev.Attrs, ev.Count = slog.LevelWarn, desc+" skipped", append(attrs, "err", err), count("skipped")
	case "error":
		ev.Level, ev.Msg, ev.Attrs, ev.Count = slog.LevelError, desc+" failed", append(attrs, "err", err), count("error")
		ev.Note = &notify.Message{Time: base.Time, Kind: notify.KindActionFailed, Severity: "critical", Symbol: base.Symbol, Action: base.Action,
			Rule: rulesAttr, Text: fmt.Sprintf("FAILED %s: %v%s", desc, err, said)}
	case "result":
		ev.Level, ev.Msg, ev.Attrs, ev.Count = slog.LevelWarn, desc+said, attrs, count("ok")
		ev.Note = &notify.Message{Time: base.Time, Kind: notify.KindAction, Severity: "warning", Symbol: base.Symbol, Action: base.Action,
			Rule: rulesAttr, Text: desc + " done (rules: " + strings.Join(base.Rules, ", ") + ")" + said}
	}
	if act != nil {
		act.Outcome, act.Err = phase, err
		if phase == "result" {
			act.Outcome = "sent"
		}
		ev.Action = act
	}
	return ev
}

// ruleNotifyEvent is a rule's notify Action: audited, notified, reported.
func ruleNotifyEvent(now time.Time, r *rules.Rule, sym string, channels []string, env *rules.Env) event {
	text := fmt.Sprintf("[%s] %s on %s: %s", r.Severity, r.Name, sym, describe(r, env))
	return event{
		Audit: &journal.Record{Time: now, Type: "action", Action: string(rules.Notify), Symbol: sym, Rules: []string{r.Name}, Phase: "result", Reason: text},
		Note: &notify.Message{Time: now, Kind: notify.KindRule, Severity: string(r.Severity), Rule: r.Name, Symbol: sym,
			Action: string(rules.Notify), Text: text, Values: values(env), Channels: channels, Template: r.Message},
		Action: &journal.ActionEvent{Symbol: sym, Action: string(rules.Notify), Rules: []string{r.Name}, Outcome: "sent"},
	}
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

// describe is the default one-line account of what a rule saw.
func describe(r *rules.Rule, env *rules.Env) string {
	s := r.Description
	if s == "" {
		s = r.When
	}
	if r.Account() {
		a := &env.Account
		return fmt.Sprintf("%s (margin ratio %.3f, equity %s, %d positions, the riskiest %s at %.2f%%)", s,
			a.MarginRatio, fmtFloat(a.Equity), a.Positions, a.RiskiestSymbol, a.MinLiquidationDistance*100)
	}
	return fmt.Sprintf("%s (index %s, liquidation %s, distance %.2f%%, leverage %gx of max %gx)", s,
		fmtFloat(env.IndexPrice), fmtFloat(env.Position.LiquidationPrice), env.LiquidationDistance*100,
		float64(env.Position.Leverage), float64(env.RiskLimit.MaxLeverage))
}

func fmtFloat(f float64) string { return decimal.NewFromFloat(f).String() }

// values are the figures a message carries.
func values(env *rules.Env) *notify.Figures {
	if env.Position.ID == "" {
		// An account rule's environment: the account's figures.
		return &notify.Figures{MarginRatio: env.Account.MarginRatio, Equity: env.Account.Equity, Distance: env.Account.MinLiquidationDistance}
	}
	return &notify.Figures{
		Index:            env.IndexPrice,
		LiquidationPrice: env.Position.LiquidationPrice,
		Distance:         env.LiquidationDistance,
		Leverage:         float64(env.Position.Leverage),
		MaxLeverage:      float64(env.RiskLimit.MaxLeverage),
		Notional:         env.Notional,
	}
}

// ReopenAudit closes and reopens the audit log at its path (SIGHUP, after
// logrotate moved it) and writes the records kept meanwhile.
func (e *Engine) ReopenAudit(ctx context.Context, now time.Time) error {
	return e.jr.Reopen(ctx, now)
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

// mismatchEvent is the exchange reading back a liquidation price the
// model did not predict: the live test of the model's assumptions.
func mismatchEvent(now time.Time, symbol string, predicted, got decimal.Decimal) event {
	text := fmt.Sprintf("the margin model disagrees with the exchange on %s: predicted liquidation %s, got %s", symbol, predicted, got)
	return event{Level: slog.LevelWarn, Msg: text, Attrs: []any{"symbol", symbol},
		Audit: &journal.Record{Time: now, Type: "model", Symbol: symbol, Reason: text},
		Count: func(m *journal.Metrics) { m.ModelMismatch(symbol) }}
}
