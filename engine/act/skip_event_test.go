package act

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/rules"
)

// skipHost is the part of a Host a bounded skip's event reads; out is
// what its journal takes.
type skipHost struct {
	Host
	now time.Time
	out journal.Outputs
}

func (h skipHost) Now() time.Time                                    { return h.now }
func (h skipHost) Wants(context.Context, slog.Level) journal.Outputs { return h.out }

// A leverage cut no bound leaves room for is said with its rules once
// each, in order, as the rules merged them, which it leaves as they were;
// its log line only where the journal logs.
func TestBoundedSkipEvent(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	pl := &Plan{Sym: &exchange.ContractSymbol{SpotSymbol: exchange.SpotSymbol{Name: "XBTC"}}, Pos: &exchange.Position{ID: "1_1", Leverage: 10}}
	sk := Skip{Asked: 5, Why: "no room in the margin budget"}
	for _, tt := range []struct {
		name  string
		rules []string
		log   bool
		want  []string
	}{
		{"once each", []string{"a", "b"}, true, []string{"a", "b"}},
		{"repeated", []string{"a", "b", "a", "c", "b"}, true, []string{"a", "b", "c"}},
		{"not logged", []string{"b", "b"}, false, []string{"b"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			merged := slices.Clone(tt.rules)
			c := &SettingsStep{LowerRules: merged, lowerKind: rules.LowerLeverage}
			ev := c.skipEvent(context.Background(), skipHost{now: at, out: journal.Outputs{Log: tt.log}}, pl, sk)
			r, a := ev.Audit, ev.Action
			if r == nil || a == nil {
				t.Fatalf("event %+v: no record or action", ev)
			}
			if !slices.Equal(r.Rules, tt.want) || !slices.Equal(a.Rules, tt.want) {
				t.Errorf("rules %v and %v, want %v", r.Rules, a.Rules, tt.want)
			}
			if !slices.Equal(c.LowerRules, tt.rules) {
				t.Errorf("the merged rules became %v, want %v", c.LowerRules, tt.rules)
			}
			if !r.Time.Equal(at) || r.Type != "action" || r.Action != "lower_leverage" || r.Symbol != "XBTC" || r.Position != "1_1" ||
				r.Phase != "skipped" || r.Reason != sk.Why || r.Leverage != 5 || r.PrevLeverage != 10 {
				t.Errorf("record %+v", r)
			}
			if a.Outcome != "skipped_bounded" || a.From != 10 || a.To != 5 || a.Effect != sk.Why || a.Reason != sk.Why || a.Symbol != "XBTC" {
				t.Errorf("action %+v", a)
			}
			msg, attrs := "", "[]"
			if tt.log {
				msg = "skipped lower_leverage XBTC: " + sk.Why
				attrs = "[action lower_leverage symbol XBTC rule " + strings.Join(tt.want, ",") + "]"
			}
			if ev.Msg != msg || fmt.Sprint(ev.Attrs) != attrs || ev.Level != slog.LevelWarn {
				t.Errorf("logged %v %q %v, want %q %s", ev.Level, ev.Msg, ev.Attrs, msg, attrs)
			}
		})
	}
}

// logHost is the part of a Host a settings call at target reads.
type logHost struct {
	Host
	now time.Time
	log *slog.Logger
}

func (h logHost) Now() time.Time       { return h.now }
func (h logHost) Logger() *slog.Logger { return h.log }

// A settings call already at target says so in its note, and in a debug
// line where the logger logs debug lines (only there are its values made).
func TestSettingsAtTargetLogged(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name  string
		level slog.Level
		want  string
	}{
		{"debug", slog.LevelDebug, `msg="settings already at target" symbol=XBTC leverage=10 cross=true`},
		{"info", slog.LevelInfo, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var buf strings.Builder
			log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: tt.level,
				ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
					if a.Key == slog.TimeKey || a.Key == slog.LevelKey {
						return slog.Attr{}
					}
					return a
				}}))
			pl := &Plan{Sym: &exchange.ContractSymbol{SpotSymbol: exchange.SpotSymbol{Name: "XBTC"}}, Pos: &exchange.Position{ID: "1_1", Leverage: 10, Cross: true}}
			c := &SettingsStep{Lower: 10, LowerRules: []string{"r"}, lowerKind: rules.LowerLeverage}
			ps, err := c.Prepare(context.Background(), logHost{now: at, log: log}, pl)
			if ps != nil || err != nil {
				t.Fatalf("Prepare: %v, %v; want nothing to send", ps, err)
			}
			if c.Note() != "at target: leverage 10x, cross" {
				t.Errorf("note %q", c.Note())
			}
			if got := strings.TrimSpace(buf.String()); !strings.Contains(got, tt.want) || (tt.want == "") != (got == "") {
				t.Errorf("logged %q, want %q", got, tt.want)
			}
		})
	}
}
