package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/notify"
	"github.com/shopspring/decimal"
)

// The events the dispatcher says, each built here, once, and handed to
// the Emitter, which fans it out.

// pausedEvent makes the event of an action held back by a pause, of its
// error (see control.Service.SayPaused), whole: the pauses say it through
// their own emitter.
func pausedEvent(base journal.Record, desc, effect string, act *journal.ActionEvent) func(error) journal.Event {
	return func(err error) journal.Event {
		return actionPhaseEvent(context.Background(), nil, nil, base, "paused", desc, effect, nil, err, act)
	}
}

// BreakerEvent is the circuit breaker opening or closing.
func BreakerEvent(now time.Time, open bool, text string) journal.Event {
	ev := journal.Event{Level: slog.LevelInfo, Msg: text, Audit: &journal.Record{Time: now, Type: "breaker", To: "closed"},
		Note: &notify.Message{Time: now, Kind: notify.KindBreaker, Severity: "warning", Text: text}}
	if open {
		ev.Level, ev.Audit.To, ev.Audit.Reason, ev.Note.Severity = slog.LevelError, "open", text, "critical"
	}
	return ev
}

// wants is what jr takes of an event at level (Emitter.Wants); a nil jr
// takes every output.
func wants(ctx context.Context, jr Emitter, level slog.Level) journal.Outputs {
	if jr == nil {
		return journal.Outputs{Audit: true, Log: true, Metrics: true, Notes: true}
	}
	return jr.Wants(ctx, level)
}

// actionPhaseEvent is one phase of a mutating call (base.Action): intended,
// dry_run, skipped, sent, error or result. Every phase is audited; the
// outcome phases are logged, counted and notified, and carry act, the
// action as the tick's report shows it. What jr, which says it, would
// drop is left out (wants).
//
// effect, when set, is the margin model's prediction, said after the action.
// The phase's record is written in r, the call's own (Call.said: jr keeps
// copies, Emitter), or a new one when r is nil.
func actionPhaseEvent(ctx context.Context, jr Emitter, r *journal.Record, base journal.Record, phase, desc, effect string, resp json.RawMessage, err error, act *journal.ActionEvent) journal.Event {
	said := ""
	if effect != "" {
		said = ": " + effect
	}
	if r == nil {
		r = new(journal.Record)
	}
	*r = base
	r.Phase, r.Response = phase, resp
	if err != nil {
		r.Error = err.Error()
	}
	ev := journal.Event{Audit: r}
	switch phase {
	case "dry_run", "paused", "skipped", "result":
		ev.Level = slog.LevelWarn
	case "standby":
		ev.Level = slog.LevelInfo
	case "error":
		ev.Level = slog.LevelError
	}
	// The intended and sent phases are only audited.
	var out journal.Outputs
	if phase != "intended" && phase != "sent" {
		out = wants(ctx, jr, ev.Level)
	}
	rulesAttr := func() string { return strings.Join(base.Rules, ",") }
	attrs := func(more ...any) []any {
		a := make([]any, 0, 6+len(more))
		return append(append(a, "action", base.Action, "symbol", base.Symbol, "rule", rulesAttr()), more...)
	}
	action := base.Action // the count's closures hold this, not base: base stays on the stack
	count := func(result string) func(*journal.Metrics) {
		if !out.Metrics {
			return nil
		}
		return func(m *journal.Metrics) { m.Action(action, result) }
	}
	switch phase {
	case "dry_run":
		r.Reason = "dry run: not sent"
		if out.Log {
			ev.Msg, ev.Attrs = "would "+desc+said, attrs("dry_run", true)
		}
		ev.Count = count("dry_run")
	case "paused":
		r.Reason = "not sent: " + err.Error()
		if out.Log {
			ev.Msg, ev.Attrs = "would "+desc+said+", paused", attrs("paused", true, "err", err)
		}
		ev.Count = count("paused")
		if out.Notes {
			ev.Note = &notify.Message{Time: base.Time, Kind: notify.KindAction, Severity: "warning", Symbol: base.Symbol, Action: base.Action,
				Rule: rulesAttr(), Text: "PAUSED: would " + desc + " (rules: " + strings.Join(base.Rules, ", ") + ")" + said + "; " + err.Error()}
		}
	case "standby":
		r.Reason = "not sent: " + err.Error()
		if out.Log {
			ev.Msg, ev.Attrs = "would "+desc+said+", standby", attrs("standby", true, "err", err)
		}
		ev.Count = count("standby")
	case "skipped":
		if out.Log {
			ev.Msg, ev.Attrs = desc+" skipped", attrs("err", err)
		}
		ev.Count = count("skipped")
	case "error":
		if out.Log {
			ev.Msg, ev.Attrs = desc+" failed", attrs("err", err)
		}
		ev.Count = count("error")
		if out.Notes {
			ev.Note = &notify.Message{Time: base.Time, Kind: notify.KindActionFailed, Severity: "critical", Symbol: base.Symbol, Action: base.Action,
				Rule: rulesAttr(), Text: fmt.Sprintf("FAILED %s: %v%s", desc, err, said)}
		}
	case "result":
		if out.Log {
			ev.Msg, ev.Attrs = desc+said, attrs()
		}
		ev.Count = count("ok")
		if out.Notes {
			ev.Note = &notify.Message{Time: base.Time, Kind: notify.KindAction, Severity: "warning", Symbol: base.Symbol, Action: base.Action,
				Rule: rulesAttr(), Text: desc + " done (rules: " + strings.Join(base.Rules, ", ") + ")" + said}
		}
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

// mismatchEvent is the exchange reading back a liquidation price the
// model did not predict: the live test of the model's assumptions.
func mismatchEvent(now time.Time, symbol string, predicted, got decimal.Decimal) journal.Event {
	text := fmt.Sprintf("the margin model disagrees with the exchange on %s: predicted liquidation %s, got %s", symbol, predicted, got)
	return journal.Event{Level: slog.LevelWarn, Msg: text, Attrs: []any{"symbol", symbol},
		Audit: &journal.Record{Time: now, Type: "model", Symbol: symbol, Reason: text},
		Count: func(m *journal.Metrics) { m.ModelMismatch(symbol) }}
}
