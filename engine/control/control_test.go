package control

import (
	"testing"
	"time"

	"github.com/riskguard/riskguard/notify"
)

func TestSilenceMatches(t *testing.T) {
	t.Parallel()
	msg := func(rule, symbol, sev string) *notify.Message {
		return &notify.Message{Rule: rule, Symbol: symbol, Severity: sev}
	}
	for _, tc := range []struct {
		name string
		s    Silence
		m    *notify.Message
		want bool
	}{
		{"rule", Silence{Rule: "r1"}, msg("r1", "XBTC", "critical"), true},
		{"other rule", Silence{Rule: "r1"}, msg("r2", "XBTC", "critical"), false},
		{"one of a merged action's rules", Silence{Rule: "r2"}, msg("r1,r2", "XBTC", "critical"), true},
		{"symbol", Silence{Symbol: "XBTC"}, msg("r1", "XBTC", "warning"), true},
		{"symbol and rule, one differs", Silence{Rule: "r1", Symbol: "XETH"}, msg("r1", "XBTC", "warning"), false},
		{"severity", Silence{Severity: "warning"}, msg("r1", "XBTC", "warning"), true},
		{"never a message about no rule", Silence{Symbol: "XBTC"}, msg("", "XBTC", "critical"), false},
	} {
		if got := tc.s.Matches(tc.m); got != tc.want {
			t.Errorf("%s: %t, want %t", tc.name, got, tc.want)
		}
	}
}

func TestSilenceAndPauseTimes(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	s := Silence{StartsAt: t0, EndsAt: t0.Add(time.Hour)}
	for _, tc := range []struct {
		at            time.Time
		active, ended bool
	}{
		{t0.Add(-time.Second), false, false}, {t0, true, false}, {t0.Add(59 * time.Minute), true, false}, {t0.Add(time.Hour), false, true},
	} {
		if s.ActiveAt(tc.at) != tc.active || s.Ended(tc.at) != tc.ended {
			t.Errorf("at %s: active %t ended %t, want %t %t", tc.at, s.ActiveAt(tc.at), s.Ended(tc.at), tc.active, tc.ended)
		}
	}
	if ack := (Silence{StartsAt: t0, Ack: true}); !ack.ActiveAt(t0.Add(24*time.Hour)) || ack.Ended(t0.Add(24*time.Hour)) {
		t.Error("an acknowledgement without an end lasts until its alert resolves")
	}
	for _, tc := range []struct {
		p      Pause
		rules  []string
		symbol string
		want   bool
	}{
		{Pause{}, []string{"r1"}, "XBTC", true},
		{Pause{Rule: "r1"}, []string{"r2", "r1"}, "XBTC", true},
		{Pause{Rule: "r1"}, []string{"r2"}, "XBTC", false},
		{Pause{Symbol: "XETH"}, []string{"r1"}, "XBTC", false},
		{Pause{Rule: "r1", Symbol: "XBTC"}, []string{"r1"}, "XBTC", true},
	} {
		if got := tc.p.Holds(tc.rules, tc.symbol); got != tc.want {
			t.Errorf("%+v holds %v on %s = %t, want %t", tc.p, tc.rules, tc.symbol, got, tc.want)
		}
	}
}

// The record of the paused actions already notified is as small as the
// pauses in force.
func TestPauseSaidForgotten(t *testing.T) {
	t.Parallel()
	c := &Store{pauses: []Pause{{ID: "p1"}}, said: map[string]bool{"p1\x00XBTC\x00cancel_orders": true, "p0\x00XBTC\x00cancel_orders": true}}
	c.forgetSaid()
	if len(c.said) != 1 || !c.said["p1\x00XBTC\x00cancel_orders"] {
		t.Errorf("said = %v, want p1's only", c.said)
	}
}
