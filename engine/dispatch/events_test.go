package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"testing"

	"github.com/riskguard/riskguard/engine/journal"
)

// Each phase of a call says what it always said: the intended and sent
// phases are only audited; the others are logged with the call's action,
// symbol and rules (and their own attributes), counted, and the paused,
// error and result phases notified.
func TestActionPhaseEvent(t *testing.T) {
	t.Parallel()
	base := journal.Record{Time: t0, Type: "action", Action: "cancel_orders", Symbol: "XBTC", Rules: []string{"r1", "r2"}}
	fail := errors.New("boom")
	for _, tt := range []struct {
		phase, effect string
		err           error
		// want: the log line (level, message, attributes), the audit's
		// reason and error, the note's text ("": none), the outcome.
		level                      slog.Level
		msg, attrs                 string
		reason, auditErr, note, to string
		counted                    bool
	}{
		{phase: "intended", to: "intended"},
		{phase: "sent", to: "sent"},
		{phase: "dry_run", effect: "less risk", level: slog.LevelWarn, msg: "would cancel XBTC: less risk",
			attrs: "[action cancel_orders symbol XBTC rule r1,r2 dry_run true]", reason: "dry run: not sent", to: "dry_run", counted: true},
		{phase: "paused", err: fail, level: slog.LevelWarn, msg: "would cancel XBTC, paused",
			attrs: "[action cancel_orders symbol XBTC rule r1,r2 paused true err boom]", reason: "not sent: boom", auditErr: "boom",
			note: "PAUSED: would cancel XBTC (rules: r1, r2); boom", to: "paused", counted: true},
		{phase: "standby", err: fail, level: slog.LevelInfo, msg: "would cancel XBTC, standby",
			attrs: "[action cancel_orders symbol XBTC rule r1,r2 standby true err boom]", reason: "not sent: boom", auditErr: "boom", to: "standby", counted: true},
		{phase: "skipped", err: fail, level: slog.LevelWarn, msg: "cancel XBTC skipped",
			attrs: "[action cancel_orders symbol XBTC rule r1,r2 err boom]", auditErr: "boom", to: "skipped", counted: true},
		{phase: "error", err: fail, effect: "less risk", level: slog.LevelError, msg: "cancel XBTC failed",
			attrs: "[action cancel_orders symbol XBTC rule r1,r2 err boom]", auditErr: "boom", note: "FAILED cancel XBTC: boom: less risk", to: "error", counted: true},
		{phase: "result", effect: "less risk", level: slog.LevelWarn, msg: "cancel XBTC: less risk",
			attrs: "[action cancel_orders symbol XBTC rule r1,r2]", note: "cancel XBTC done (rules: r1, r2): less risk", to: "sent", counted: true},
	} {
		t.Run(tt.phase, func(t *testing.T) {
			t.Parallel()
			a := &journal.ActionEvent{Symbol: "XBTC", Action: "cancel_orders"}
			resp := json.RawMessage(`{"ok":1}`)
			ev := actionPhaseEvent(context.Background(), nil, nil, base, tt.phase, "cancel XBTC", tt.effect, resp, tt.err, a)
			attrs := ""
			if ev.Attrs != nil {
				attrs = fmt.Sprint(ev.Attrs)
			}
			if ev.Level != tt.level || ev.Msg != tt.msg || attrs != tt.attrs {
				t.Errorf("logged %v %q %s, want %v %q %s", ev.Level, ev.Msg, attrs, tt.level, tt.msg, tt.attrs)
			}
			r := ev.Audit
			if r == nil || r.Phase != tt.phase || r.Reason != tt.reason || r.Error != tt.auditErr || string(r.Response) != string(resp) ||
				r.Action != base.Action || r.Symbol != base.Symbol || !r.Time.Equal(t0) {
				t.Errorf("audited %+v", r)
			}
			note := ""
			if ev.Note != nil {
				note = ev.Note.Text
				if ev.Note.Rule != "r1,r2" || ev.Note.Symbol != "XBTC" || ev.Note.Action != "cancel_orders" {
					t.Errorf("note %+v", ev.Note)
				}
			}
			if note != tt.note {
				t.Errorf("note %q, want %q", note, tt.note)
			}
			if (ev.Count != nil) != tt.counted {
				t.Errorf("counted %v, want %v", ev.Count != nil, tt.counted)
			}
			if ev.Action != a || a.Outcome != tt.to || !errors.Is(a.Err, tt.err) {
				t.Errorf("action %+v, want outcome %s", ev.Action, tt.to)
			}
			if base.Phase != "" || base.Error != "" {
				t.Errorf("the base record changed: %+v", base)
			}
		})
	}
}

// wanting is an Emitter whose journal has the outputs out, at levels from
// min up, and counts what it was asked.
type wanting struct {
	out   journal.Outputs
	min   slog.Level
	asked []slog.Level
}

func (w *wanting) Emit(context.Context, *journal.Report, journal.Event) {}
func (w *wanting) Wants(_ context.Context, level slog.Level) journal.Outputs {
	w.asked = append(w.asked, level)
	out := w.out
	out.Log = out.Log && level >= w.min
	return out
}

// An event leaves out what its emitter's journal would drop, and only
// that: the log below the journal's level, the count without metrics, the
// note without a notifier; the audit record and the action are whole.
func TestActionPhaseEventWants(t *testing.T) {
	t.Parallel()
	base := journal.Record{Time: t0, Type: "action", Action: "cancel_orders", Symbol: "XBTC", Rules: []string{"r1"}}
	for _, tt := range []struct {
		name, phase      string
		jr               *wanting
		log, count, note bool
		asked            []slog.Level
	}{
		{"nothing", "result", &wanting{}, false, false, false, []slog.Level{slog.LevelWarn}},
		{"log", "result", &wanting{out: journal.Outputs{Log: true}}, true, false, false, []slog.Level{slog.LevelWarn}},
		{"log above", "standby", &wanting{out: journal.Outputs{Log: true}, min: slog.LevelWarn}, false, false, false, []slog.Level{slog.LevelInfo}},
		{"error logged", "error", &wanting{out: journal.Outputs{Log: true}, min: slog.LevelWarn}, true, false, false, []slog.Level{slog.LevelError}},
		{"metrics", "result", &wanting{out: journal.Outputs{Metrics: true}}, false, true, false, []slog.Level{slog.LevelWarn}},
		{"notes", "result", &wanting{out: journal.Outputs{Notes: true}}, false, false, true, []slog.Level{slog.LevelWarn}},
		{"intended: not asked", "intended", &wanting{out: journal.Outputs{Log: true, Metrics: true, Notes: true}}, false, false, false, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := &journal.ActionEvent{}
			ev := actionPhaseEvent(context.Background(), tt.jr, nil, base, tt.phase, "cancel XBTC", "", nil, errors.New("x"), a)
			whole := actionPhaseEvent(context.Background(), nil, nil, base, tt.phase, "cancel XBTC", "", nil, errors.New("x"), &journal.ActionEvent{})
			if (ev.Msg != "") != tt.log || (ev.Attrs != nil) != tt.log || (ev.Count != nil) != tt.count || (ev.Note != nil) != tt.note {
				t.Errorf("msg %q, attrs %v, count %v, note %v; want log %v, count %v, note %v", ev.Msg, ev.Attrs, ev.Count != nil, ev.Note, tt.log, tt.count, tt.note)
			}
			if tt.log && (ev.Msg != whole.Msg || fmt.Sprint(ev.Attrs) != fmt.Sprint(whole.Attrs)) {
				t.Errorf("logged %q %v, whole %q %v", ev.Msg, ev.Attrs, whole.Msg, whole.Attrs)
			}
			if tt.note && !reflect.DeepEqual(*ev.Note, *whole.Note) {
				t.Errorf("note %+v, whole %+v", ev.Note, whole.Note)
			}
			if ev.Level != whole.Level || fmt.Sprint(*ev.Audit) != fmt.Sprint(*whole.Audit) || ev.Action != a || a.Outcome != whole.Action.Outcome {
				t.Errorf("level %v, audit %+v, action %+v; whole %v, %+v, %+v", ev.Level, ev.Audit, ev.Action, whole.Level, whole.Audit, whole.Action)
			}
			if fmt.Sprint(tt.jr.asked) != fmt.Sprint(tt.asked) {
				t.Errorf("asked at %v, want %v", tt.jr.asked, tt.asked)
			}
		})
	}
}
