package dispatch

import (
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
// error (see control.Service.SayPaused).
func pausedEvent(base journal.Record, desc, effect string, act *journal.ActionEvent) func(error) journal.Event {
	return func(err error) journal.Event { return actionPhaseEvent(base, "paused", desc, effect, nil, err, act) }
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

// actionPhaseEvent is one phase of a mutating call (base.Action): intended,
// dry_run, skipped, sent, error or result. Every phase is audited; the
// outcome phases are logged, counted and notified, and carry act, the
// action as the tick's report shows it.
//
// effect, when set, is the margin model's prediction, said after the action.
func actionPhaseEvent(base journal.Record, phase, desc, effect string, resp json.RawMessage, err error, act *journal.ActionEvent) journal.Event {
	said := ""
	if effect != "" {
		said = ": " + effect
	}
	r := base
	r.Phase, r.Response = phase, resp
	if err != nil {
		r.Error = err.Error()
	}
	ev := journal.Event{Audit: &r}
	// The intended and sent phases are only audited: what the log, the
	// metrics and the notifications take is made for the phases they say.
	rulesAttr := func() string { return strings.Join(base.Rules, ",") }
	attrs := func(rulesAttr string, more ...any) []any {
		a := make([]any, 0, 6+len(more))
		return append(append(a, "action", base.Action, "symbol", base.Symbol, "rule", rulesAttr), more...)
	}
	action := base.Action // the count's closures hold this, not base: base stays on the stack
	count := func(result string) func(*journal.Metrics) {
		return func(m *journal.Metrics) { m.Action(action, result) }
	}
	switch phase {
	case "dry_run":
		r.Reason = "dry run: not sent"
		ev.Level, ev.Msg, ev.Attrs, ev.Count = slog.LevelWarn, "would "+desc+said, attrs(rulesAttr(), "dry_run", true), count("dry_run")
	case "paused":
		r.Reason = "not sent: " + err.Error()
		ra := rulesAttr()
		ev.Level, ev.Msg, ev.Attrs, ev.Count = slog.LevelWarn, "would "+desc+said+", paused", attrs(ra, "paused", true, "err", err), count("paused")
		ev.Note = &notify.Message{Time: base.Time, Kind: notify.KindAction, Severity: "warning", Symbol: base.Symbol, Action: base.Action,
			Rule: ra, Text: "PAUSED: would " + desc + " (rules: " + strings.Join(base.Rules, ", ") + ")" + said + "; " + err.Error()}
	case "standby":
		r.Reason = "not sent: " + err.Error()
		ev.Level, ev.Msg, ev.Attrs, ev.Count = slog.LevelInfo, "would "+desc+said+", standby", attrs(rulesAttr(), "standby", true, "err", err), count("standby")
	case "skipped":
		ev.Level, ev.Msg, ev.Attrs, ev.Count = slog.LevelWarn, desc+" skipped", attrs(rulesAttr(), "err", err), count("skipped")
	case "error":
		ra := rulesAttr()
		ev.Level, ev.Msg, ev.Attrs, ev.Count = slog.LevelError, desc+" failed", attrs(ra, "err", err), count("error")
		ev.Note = &notify.Message{Time: base.Time, Kind: notify.KindActionFailed, Severity: "critical", Symbol: base.Symbol, Action: base.Action,
			Rule: ra, Text: fmt.Sprintf("FAILED %s: %v%s", desc, err, said)}
	case "result":
		ra := rulesAttr()
		ev.Level, ev.Msg, ev.Attrs, ev.Count = slog.LevelWarn, desc+said, attrs(ra), count("ok")
		ev.Note = &notify.Message{Time: base.Time, Kind: notify.KindAction, Severity: "warning", Symbol: base.Symbol, Action: base.Action,
			Rule: ra, Text: desc + " done (rules: " + strings.Join(base.Rules, ", ") + ")" + said}
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
