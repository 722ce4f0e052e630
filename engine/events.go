package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

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
	Transitions []TransitionEvent
	Actions     []ActionEvent
	// Snapshot is what the tick read, before its actions; nil when the
	// positions could not be read.
	Snapshot *Snapshot
}

// TransitionEvent is one rule changing state on one position.
type TransitionEvent struct {
	Rule, Symbol string
	From, To     State
	Reason       string
}

// ActionEvent is one action decided by the tick, sent or not.
type ActionEvent struct {
	Symbol string
	Action string // lower_leverage, set_isolated, settings, cancel_orders, notify
	Rules  []string
	// Outcome is sent, dry_run, paused, noop, skipped (the breaker), error,
	// skipped_harmful (it would move a liquidation price closer) or
	// skipped_bounded (no cut within the free balance or the margin budget).
	Outcome  string
	From, To int // leverage before and after, for settings
	Cross    bool
	Err      error
	// Effect is the margin model's prediction of a settings call, as the
	// log says it; "" when there is none. Actual is what the exchange read
	// back after it.
	Effect, Actual string
}

// event is one thing the guard saw or did. It is built once, where it
// happens, by one of the constructors in this file, and emit fans it out
// to every output it belongs to: an output it does not belong to is left
// empty. No other code writes the audit log, sends a notification or adds
// to a tick's report.
type event struct {
	audit *Record // the audit log
	// the log: nothing when msg is ""
	level slog.Level
	msg   string
	attrs []any
	note  *notify.Message // the notifications
	// the tick's report
	transition *TransitionEvent
	action     *ActionEvent
	count      func(*Metrics) // the metrics (a nil *Metrics records nothing)
}

// emit fans ev out: the tick's report (when there is one), the audit log,
// the log, the metrics and the notifications, in that order, so that an
// action is on disk before anyone is told of it.
func (e *Engine) emit(ctx context.Context, rep *TickReport, ev event) {
	if rep != nil && ev.transition != nil {
		rep.Transitions = append(rep.Transitions, *ev.transition)
	}
	if rep != nil && ev.action != nil {
		rep.Actions = append(rep.Actions, *ev.action)
	}
	if ev.audit != nil {
		e.record(ctx, *ev.audit)
	}
	e.observe(ctx, &ev) // the status page's recent actions; acknowledgements end on resolution
	if ev.msg != "" {
		e.log.Log(ctx, ev.level, ev.msg, ev.attrs...)
	}
	if ev.count != nil {
		ev.count(e.metrics)
	}
	if ev.note != nil {
		e.send(ctx, *ev.note)
	}
}

// transitionEvent is one rule changing state on one position: audited,
// logged, reported and, for firing, resolved and no data, notified unless
// quiet (the rule's own notify action tells of it). env holds what the rule
// saw; nil when the position is gone.
func transitionEvent(now time.Time, r *rules.Rule, symbol, position string, from, to State, tr Transition, reason string, quiet bool, env *rules.Env) event {
	ev := event{
		transition: &TransitionEvent{Rule: r.Name, Symbol: symbol, From: from, To: to, Reason: reason},
		audit:      &Record{Time: now, Type: "transition", Rule: r.Name, Symbol: symbol, Position: position, From: from.String(), To: to.String(), Reason: reason},
		level:      slog.LevelInfo,
		msg:        "rule " + string(tr),
		attrs:      []any{"rule", r.Name, "symbol", symbol, "state", to.String(), "from", from.String()},
	}
	if to == Firing || to == NoData {
		ev.level = slog.LevelWarn
	}
	var figures *notify.Figures
	if env != nil {
		ev.attrs = append(ev.attrs, "liquidationDistance", env.LiquidationDistance, "leverage", env.Position.Leverage)
		figures = values(env)
	} else if reason != "" {
		ev.attrs = append(ev.attrs, "reason", reason)
	}
	if quiet {
		return ev
	}
	var kind notify.Kind
	var text string
	switch {
	case tr == ToFiring && env != nil:
		kind, text = notify.KindFiring, fmt.Sprintf("%s firing on %s: %s", r.Name, symbol, describe(r, env))
	case tr == ToResolved && env != nil:
		kind, text = notify.KindResolved, fmt.Sprintf("%s resolved on %s", r.Name, symbol)
	case tr == ToResolved:
		kind, text = notify.KindResolved, fmt.Sprintf("%s resolved on %s: %s", r.Name, symbol, reason)
	case tr == ToNoData:
		kind, text = notify.KindNoData, fmt.Sprintf("%s has no data on %s: %s", r.Name, symbol, reason)
	default:
		return ev
	}
	sev := string(r.Severity)
	if tr == ToResolved {
		sev = string(rules.Info) // good news is never an alarm
	}
	m := notify.Message{Time: now, Kind: kind, Severity: sev, Rule: r.Name, Symbol: symbol, Text: text, Values: figures}
	if env != nil {
		m.Template = r.Message
	}
	ev.note = &m
	return ev
}

// reachabilityEvent is the exchange found unreachable (down) or back.
func reachabilityEvent(now time.Time, down bool, text string) event {
	ev := event{level: slog.LevelWarn, msg: text, audit: &Record{Time: now, Type: "exchange", To: "reachable", Reason: text},
		note: &notify.Message{Time: now, Kind: notify.KindExchange, Severity: "warning", Text: text}}
	if down {
		ev.level, ev.audit.To, ev.note.Severity = slog.LevelError, "unreachable", "critical"
	}
	return ev
}

// breakerEvent is the circuit breaker opening or closing.
func breakerEvent(now time.Time, open bool, text string) event {
	ev := event{level: slog.LevelInfo, msg: text, audit: &Record{Time: now, Type: "breaker", To: "closed"},
		note: &notify.Message{Time: now, Kind: notify.KindBreaker, Severity: "warning", Text: text}}
	if open {
		ev.level, ev.audit.To, ev.audit.Reason, ev.note.Severity = slog.LevelError, "open", text, "critical"
	}
	return ev
}

// actionPhaseEvent is one phase of a mutating call (base.Action): intended,
// dry_run, skipped, sent, error or result. Every phase is audited; the
// outcome phases are logged, counted and notified, and carry act, the
// action as the tick's report shows it.
//
// effect, when set, is the margin model's prediction, said after the action.
func actionPhaseEvent(base Record, phase, desc, effect string, resp json.RawMessage, err error, act *ActionEvent) event {
	said := ""
	if effect != "" {
		said = ": " + effect
	}
	r := base
	r.Phase, r.Response = phase, resp
	if err != nil {
		r.Error = err.Error()
	}
	ev := event{audit: &r}
	rulesAttr := joinRules(base.Rules)
	attrs := []any{"action", base.Action, "symbol", base.Symbol, "rule", rulesAttr}
	count := func(result string) func(*Metrics) { return func(m *Metrics) { m.action(base.Action, result) } }
	switch phase {
	case "dry_run":
		r.Reason = "dry run: not sent"
		ev.level, ev.msg, ev.attrs, ev.count = slog.LevelWarn, "would "+desc+said, append(attrs, "dry_run", true), count("dry_run")
	case "paused":
		r.Reason = "not sent: " + err.Error()
		ev.level, ev.msg, ev.attrs, ev.count = slog.LevelWarn, "would "+desc+said+", paused", append(attrs, "paused", true, "err", err), count("paused")
		ev.note = &notify.Message{Time: base.Time, Kind: notify.KindAction, Severity: "warning", Symbol: base.Symbol, Action: base.Action,
			Rule: rulesAttr, Text: "PAUSED: would " + desc + " (rules: " + strings.Join(base.Rules, ", ") + ")" + said + "; " + err.Error()}
	case "skipped":
		ev.level, ev.msg, ev.attrs, ev.count = slog.LevelWarn, desc+" skipped", append(attrs, "err", err), count("skipped")
	case "error":
		ev.level, ev.msg, ev.attrs, ev.count = slog.LevelError, desc+" failed", append(attrs, "err", err), count("error")
		ev.note = &notify.Message{Time: base.Time, Kind: notify.KindActionFailed, Severity: "critical", Symbol: base.Symbol, Action: base.Action,
			Rule: rulesAttr, Text: fmt.Sprintf("FAILED %s: %v%s", desc, err, said)}
	case "result":
		ev.level, ev.msg, ev.attrs, ev.count = slog.LevelWarn, desc+said, attrs, count("ok")
		ev.note = &notify.Message{Time: base.Time, Kind: notify.KindAction, Severity: "warning", Symbol: base.Symbol, Action: base.Action,
			Rule: rulesAttr, Text: desc + " done (rules: " + strings.Join(base.Rules, ", ") + ")" + said}
	}
	if act != nil {
		act.Outcome, act.Err = phase, err
		if phase == "result" {
			act.Outcome = "sent"
		}
		ev.action = act
	}
	return ev
}

// ruleNotifyEvent is a rule's notify action: audited, notified, reported.
func ruleNotifyEvent(now time.Time, r *rules.Rule, sym string, channels []string, env *rules.Env) event {
	text := fmt.Sprintf("[%s] %s on %s: %s", r.Severity, r.Name, sym, describe(r, env))
	return event{
		audit: &Record{Time: now, Type: "action", Action: string(rules.Notify), Symbol: sym, Rules: []string{r.Name}, Phase: "result", Reason: text},
		note: &notify.Message{Time: now, Kind: notify.KindRule, Severity: string(r.Severity), Rule: r.Name, Symbol: sym,
			Action: string(rules.Notify), Text: text, Values: values(env), Channels: channels, Template: r.Message},
		action: &ActionEvent{Symbol: sym, Action: string(rules.Notify), Rules: []string{r.Name}, Outcome: "sent"},
	}
}

// reloadEvent is a new rule set taking effect.
func reloadEvent(now time.Time, n, kept int) event {
	return event{level: slog.LevelInfo, msg: "rules reloaded", attrs: []any{"rules", n, "kept", kept},
		audit: &Record{Time: now, Type: "reload", Reason: fmt.Sprintf("%d rules, %d kept their state", n, kept)}}
}

// ruleErrorEvent is a rule failing at run time for a reason other than
// missing data; logged once until it evaluates again, counted every time.
func ruleErrorEvent(r *rules.Rule, symbol string, err error, first bool) event {
	ev := event{count: func(m *Metrics) { m.ruleError(r.Name) }}
	if first {
		ev.level, ev.msg, ev.attrs = slog.LevelError, "rule failed at run time; marked unhealthy", []any{"rule", r.Name, "symbol", symbol, "err", err}
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

// send delivers a notification; only emit and the audit failure in record
// call it.
func (e *Engine) send(ctx context.Context, m notify.Message) {
	if e.notifier == nil {
		return
	}
	if s, ok := e.muted(&m); ok {
		e.log.Debug("notification silenced", "kind", m.Kind, "rule", m.Rule, "symbol", m.Symbol, "silence", s.ID)
		return
	}
	if err := e.notifier.Send(ctx, m); err != nil {
		e.log.Warn("notification not delivered", "kind", m.Kind, "err", err)
	}
}

// record writes an audit record. A failing audit log is itself an event:
// logged every time, counted, and notified when it starts failing and when
// it works again (a guard that cannot keep its audit trail must say so).
func (e *Engine) record(ctx context.Context, r Record) {
	e.audited(ctx, r.Time, e.audit.Write(r))
}

// audited reports the outcome of an audit write or flush: a failure is
// logged and counted every time and notified once; the first success after
// it is said too. The metric shows the records waiting.
func (e *Engine) audited(ctx context.Context, now time.Time, err error) {
	e.metrics.auditBacklog(e.audit.Backlog())
	if err != nil {
		e.log.Error("audit write failed", "err", err)
		e.metrics.auditError()
	}
	// The tick, the executor's calls and the control API all write the
	// audit log: whether it was failing is theirs together.
	e.auditMu.Lock()
	was := e.auditFailing
	e.auditFailing = err != nil
	e.auditMu.Unlock()
	switch {
	case err != nil && !was:
		e.send(ctx, notify.Message{Time: now, Kind: notify.KindAudit, Severity: "critical",
			Text: fmt.Sprintf("the audit log cannot be written (%v); the records are kept in memory (up to %d) and written when it can; actions continue", err, MaxAuditBacklog)})
	case err == nil && was:
		e.log.Info("audit log writes again; the records kept were written")
		e.send(ctx, notify.Message{Time: now, Kind: notify.KindAudit, Severity: "warning", Text: "audit log writes again; the records kept meanwhile were written"})
	}
}

// ReopenAudit closes and reopens the audit log at its path (SIGHUP, after
// logrotate moved it) and writes the records kept meanwhile.
func (e *Engine) ReopenAudit(ctx context.Context, now time.Time) error {
	err := e.audit.Reopen()
	e.audited(ctx, now, err)
	return err
}
