package journal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riskguard/riskguard/notify"
	"github.com/shopspring/decimal"
)

// Emit writes the audit record stamped (Options.Stamp) and with the
// account, leaves the caller's record as it was, and reports the action
// with its record's prediction and the recent actions with their own
// copy of its rules; without an audit log the rest is said all the same.
func TestEmitFansOut(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	before, after := decimal.NewFromInt(7), decimal.NewFromInt(3)
	for _, tt := range []struct {
		name    string
		audited bool
	}{{"audited", true}, {"without an audit log", false}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			o := Options{Account: "main", Stamp: func(r *Record) { r.Host, r.Term = "h1", 4 }}
			if tt.audited {
				o.Audit = NewAudit(&buf)
			}
			j := New(o)
			rules := []string{"r1", "r2"}
			rec := &Record{Time: at, Type: "action", Action: "lower_leverage", Symbol: "XBTC", Phase: "result", Rules: rules,
				Prediction: &Prediction{ExpectedLossBefore: &before, ExpectedLossAfter: &after}}
			want := *rec
			var rep Report
			j.Emit(context.Background(), &rep, Event{Audit: rec, Msg: "lowered",
				Action: &ActionEvent{Symbol: "XBTC", Action: "lower_leverage", Rules: rules, Outcome: "sent", Err: errors.New("late")}})
			if !reflect.DeepEqual(*rec, want) {
				t.Errorf("the caller's record changed:\n got %+v\nwant %+v", *rec, want)
			}
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			if !tt.audited {
				if buf.Len() != 0 {
					t.Errorf("written without an audit log: %q", buf.String())
				}
			} else {
				if len(lines) != 1 {
					t.Fatalf("%d lines written, want 1: %q", len(lines), buf.String())
				}
				w := want
				w.Account, w.Host, w.Term = "main", "h1", 4
				wb, err := json.Marshal(w)
				if err != nil {
					t.Fatal(err)
				}
				if lines[0] != string(wb) {
					t.Errorf("written:\n got %s\nwant %s", lines[0], wb)
				}
			}
			if len(rep.Actions) != 1 || rep.Actions[0].ExpectedLossBefore != &before || rep.Actions[0].ExpectedLossAfter != &after {
				t.Errorf("reported %+v, want the action with its record's expected losses", rep.Actions)
			}
			recent := j.Recent()
			if len(recent) != 1 || recent[0].Error != "late" || !reflect.DeepEqual(recent[0].Rules, []string{"r1", "r2"}) || !recent[0].Time.Equal(at) {
				t.Fatalf("recent %+v", recent)
			}
			rules[0] = "changed"
			if got := j.Recent()[0].Rules[0]; got != "r1" {
				t.Errorf("the recent action shares its rules with the caller: %q", got)
			}
		})
	}
}

// sink is a Notifier that keeps nothing.
type sink struct{}

func (sink) Send(context.Context, notify.Message) error { return nil }

// Wants says the outputs as Emit would reach them: the audit log, the
// metrics and the notifications when set, the log at the levels its
// handler is enabled for.
func TestWants(t *testing.T) {
	t.Parallel()
	warn := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		o     Options
		level slog.Level
		want  Outputs
	}{
		{"none", Options{}, slog.LevelError, Outputs{}},
		{"below the log's level", Options{Logger: warn, Metrics: m, Notifier: sink{}}, slog.LevelInfo, Outputs{Metrics: true, Notes: true}},
		{"at the log's level", Options{Logger: warn}, slog.LevelWarn, Outputs{Log: true}},
		{"audited", Options{Audit: NewAudit(io.Discard)}, slog.LevelError, Outputs{Audit: true}},
	} {
		if got := New(tt.o).Wants(context.Background(), tt.level); got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// Emit keeps no pointer of its event's, only copies (a settings step says
// each bounded cut it skips from one record and action it writes again):
// an event said from the same record and action as the last leaves the
// last one's report, recent action and audit line as they were.
func TestEmitKeepsCopies(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var buf bytes.Buffer
	j := New(Options{Audit: NewAudit(&buf)})
	var rep Report
	var rec Record
	var act ActionEvent
	for i, to := range []int{10, 5} {
		rec = Record{Time: at.Add(time.Duration(i) * time.Second), Type: "action", Action: "lower_leverage", Symbol: "XBTC",
			Phase: "skipped", Leverage: to, Rules: []string{"r"}}
		act = ActionEvent{Symbol: "XBTC", Action: "lower_leverage", Rules: rec.Rules, Outcome: "skipped_bounded", From: 20, To: to}
		j.Emit(context.Background(), &rep, Event{Audit: &rec, Action: &act})
	}
	if len(rep.Actions) != 2 || rep.Actions[0].To != 10 || rep.Actions[1].To != 5 {
		t.Errorf("report's actions: %+v, want to 10 then to 5", rep.Actions)
	}
	if got := j.Recent(); len(got) != 2 || got[0].To == got[1].To {
		t.Errorf("recent actions: %+v, want one to 10 and one to 5", got)
	}
	if got := buf.String(); !strings.Contains(got, `"leverage":10`) || !strings.Contains(got, `"leverage":5`) {
		t.Errorf("audit lines %q, want one at leverage 10 and one at 5", got)
	}
}
