package control

import (
	"context"
	"errors"
	"slices"
	"strings"
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

func TestCheckTimes(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 23, 18, 0, 0, 0, time.UTC)
	never := time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name         string
		start, end   time.Time
		wantErrorHas string // "" accepted
	}{
		{"now for an hour", now, now.Add(time.Hour), ""},
		{"until resolved or resumed", now, time.Time{}, ""},
		{"starts in a day", now.Add(MaxLead), now.Add(MaxLead + time.Hour), ""},
		{"started a day ago", now.Add(-MaxLead), now.Add(time.Hour), ""},
		{"lasts 90 days", now, now.Add(MaxDuration), ""},
		{"starts at year 9999", never, never.Add(48 * time.Hour), "must start within 24h of now"},
		{"starts at year 1", time.Time{}.Add(time.Hour), now.Add(time.Hour), "must start within 24h of now"},
		{"starts tomorrow and a second", now.Add(MaxLead + time.Second), now.Add(48 * time.Hour), "must start within 24h of now"},
		{"lasts 90 days and a second", now, now.Add(MaxDuration + time.Second), "may last at most 90 days"},
		{"ends at year 9999", now, never, "may last at most 90 days"},
		{"ends past year 9999", now, never.Add(1000 * 24 * time.Hour), "year 10002"},
		{"ends before it starts", now.Add(time.Hour), now.Add(time.Minute), "before it starts"},
		{"has ended", now.Add(-2 * time.Hour), now.Add(-time.Hour), "has ended already"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckTimes("silence", tc.start, tc.end, now)
			switch {
			case tc.wantErrorHas == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.wantErrorHas != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErrorHas)):
				t.Errorf("err = %v, want one saying %q", err, tc.wantErrorHas)
			}
		})
	}
}

func TestCheckText(t *testing.T) {
	t.Parallel()
	if err := CheckText(strings.Repeat("é", MaxComment), "alice"); err != nil {
		t.Errorf("a comment of %d characters refused: %v", MaxComment, err)
	}
	if err := CheckText(strings.Repeat("x", MaxComment+1), "alice"); err == nil || !strings.Contains(err.Error(), "at most 1000") {
		t.Errorf("a comment of %d characters: %v", MaxComment+1, err)
	}
	if err := CheckText("", strings.Repeat("x", MaxName+1)); err == nil {
		t.Error("an author of 201 characters accepted")
	}
	if err := CheckText("bad \xff utf-8", "alice"); err == nil {
		t.Error("a comment that is not UTF-8 accepted")
	}
}

func TestPrintable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"hedged elsewhere", "hedged elsewhere"},
		{"naïve 日本", "naïve 日本"},
		{"\x1b[2J\x1b[31mSAFE\x1b[0m", `\x1b[2J\x1b[31mSAFE\x1b[0m`},
		{"line\r\nover\ttab", `line\x0d\x0aover\x09tab`},
		{"\u009b31m C1 CSI", `\x9b31m C1 CSI`},
		{"evil\u202egnp.exe", `evil\u202egnp.exe`},
		{"bad \xff byte", `bad \ufffd byte`},
	} {
		if got := Printable(tc.in); got != tc.want {
			t.Errorf("Printable(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// The store keeps at most MaxSilences silences and MaxPauses pauses in
// force; ended ones do not count.
func TestStoreLimits(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 23, 18, 0, 0, 0, time.UTC)
	var c Store
	for i := range MaxSilences {
		if err := c.AddSilence(Silence{ID: NewID(), Symbol: "XBTC", StartsAt: now, EndsAt: now.Add(time.Duration(i+1) * time.Minute)}, now); err != nil {
			t.Fatalf("silence %d: %v", i+1, err)
		}
		if err := c.AddPause(Pause{ID: NewID(), StartsAt: now, EndsAt: now.Add(time.Duration(i+1) * time.Minute)}, now); err != nil {
			t.Fatalf("pause %d: %v", i+1, err)
		}
	}
	if err := c.AddSilence(Silence{ID: NewID(), Symbol: "XBTC", StartsAt: now, EndsAt: now.Add(time.Hour)}, now); !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "at most 100") {
		t.Errorf("silence 101: %v", err)
	}
	if err := c.AddPause(Pause{ID: NewID(), StartsAt: now}, now); !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "at most 100") {
		t.Errorf("pause 101: %v", err)
	}
	// A minute later the first of each has ended: room for one more.
	later := now.Add(time.Minute)
	if err := c.AddSilence(Silence{ID: NewID(), Symbol: "XBTC", StartsAt: later, EndsAt: later.Add(time.Hour)}, later); err != nil {
		t.Errorf("a silence once one ended: %v", err)
	}
	if err := c.AddPause(Pause{ID: NewID(), StartsAt: later}, later); err != nil {
		t.Errorf("a pause once one ended: %v", err)
	}
}

// The gate: a call that passed Check is on its way until released, and a
// pause of its scope settles only then; a call checked after the pause is
// held, whatever time its tick started at.
func TestStoreCheckAndSettle(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 23, 18, 0, 0, 0, time.UTC)
	var c Store
	_, releaseXBTC, held := c.Check([]string{"near-liquidation"}, "XBTC", "cancel_orders XBTC", now)
	if held {
		t.Fatal("held with no pause")
	}
	_, releaseXETH, _ := c.Check([]string{"near-liquidation"}, "XETH", "cancel_orders XETH", now)
	p := Pause{ID: "p1", Symbol: "XBTC", StartsAt: now.Add(time.Second)}
	if err := c.AddPause(p, p.StartsAt); err != nil {
		t.Fatal(err)
	}
	// A call decided on a tick that started before the pause is held.
	if got, _, held := c.Check([]string{"over-max-leverage"}, "XBTC", "set_leverage XBTC", now); !held || got.ID != "p1" {
		t.Errorf("a call checked after the pause (tick time before it) not held: %v %+v", held, got)
	}
	if _, ok := c.Hold([]string{"r"}, "XBTC", now); !ok {
		t.Error("Hold at a time before the pause's start: not held")
	}
	// Settle gives up while the XBTC call is on its way, naming it; the
	// XETH call, out of the pause's scope, does not count.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	left := c.Settle(ctx, p)
	cancel()
	if !slices.Equal(left, []string{"cancel_orders XBTC"}) {
		t.Errorf("Settle with a call on its way = %v", left)
	}
	done := make(chan []string, 1)
	go func() { done <- c.Settle(context.Background(), p) }()
	select {
	case got := <-done:
		t.Fatalf("Settle returned %v while the call is on its way", got)
	case <-time.After(20 * time.Millisecond):
	}
	releaseXBTC()
	releaseXBTC() // twice is once
	select {
	case got := <-done:
		if len(got) != 0 {
			t.Errorf("Settle after the release = %v", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Settle did not return after the call ended")
	}
	releaseXETH()
}

// A state file from a clock that ran ahead: the pause listed as in force
// holds, and the counts agree.
func TestRestoreClampsFutureTimes(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 23, 18, 0, 0, 0, time.UTC)
	ahead := now.Add(20 * time.Minute)
	var c Store
	n := c.Restore([]Silence{{ID: "s1", Symbol: "XBTC", StartsAt: ahead, EndsAt: ahead.Add(time.Hour), CreatedAt: ahead}},
		[]Pause{{ID: "p1", StartsAt: ahead}}, now)
	if n != 3 {
		t.Errorf("clamped %d times, want 3", n)
	}
	if _, ok := c.Hold([]string{"r"}, "XBTC", now); !ok {
		t.Error("the restored pause does not hold")
	}
	if s, p := c.Counts(now); s != 1 || p != 1 {
		t.Errorf("counts = %d silences, %d pauses; want 1, 1", s, p)
	}
	if m, ok := c.Mutes(&notify.Message{Rule: "r", Symbol: "XBTC"}, now); !ok || !m.StartsAt.Equal(now) {
		t.Errorf("the restored silence does not mute now: %v %+v", ok, m)
	}
	if !c.Changed() {
		t.Error("clamped times not marked to save")
	}
}
