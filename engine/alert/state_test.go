package alert

import (
	"strings"
	"testing"
	"time"
)

func TestStep(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	timing := Timing{For: 10 * time.Second, KeepFiringFor: 30 * time.Second}
	tests := []struct {
		name     string
		prev     RuleState
		cond     Condition
		now      time.Time
		timing   Timing
		want     State
		wantTr   Transition
		wantFire time.Time
	}{
		{"inactive stays on false", RuleState{}, False, at(0), timing, Inactive, "", time.Time{}},
		{"inactive to pending", RuleState{}, True, at(0), timing, Pending, ToPending, time.Time{}},
		{"inactive to firing without for", RuleState{}, True, at(0), Timing{}, Firing, ToFiring, at(0)},
		{"pending holds before for", RuleState{State: Pending, ActiveAt: at(0)}, True, at(9), timing, Pending, "", time.Time{}},
		{"pending fires at for", RuleState{State: Pending, ActiveAt: at(0)}, True, at(10), timing, Firing, ToFiring, at(10)},
		{"pending cancelled", RuleState{State: Pending, ActiveAt: at(0)}, False, at(5), timing, Inactive, ToInactive, time.Time{}},
		{"firing held by keep_firing_for", RuleState{State: Firing, FiredAt: at(0), LastTrueAt: at(10)}, False, at(39), timing, Firing, "", at(0)},
		{"firing resolves after keep_firing_for", RuleState{State: Firing, FiredAt: at(0), LastTrueAt: at(10)}, False, at(40), timing, Inactive, ToResolved, at(0)},
		{"firing resolves at once without hysteresis", RuleState{State: Firing, FiredAt: at(0), LastTrueAt: at(10)}, False, at(11), Timing{}, Inactive, ToResolved, at(0)},
		{"firing stays firing", RuleState{State: Firing, FiredAt: at(0)}, True, at(50), timing, Firing, "", at(0)},
		{"invalid holds firing within keep_firing_for", RuleState{State: Firing, FiredAt: at(0)}, Invalid, at(5), timing, Firing, "", at(0)},
		{"invalid from firing without for or hysteresis", RuleState{State: Firing, FiredAt: at(0)}, Invalid, at(5), Timing{}, NoData, ToNoData, at(0)},
		{"invalid stays nodata", RuleState{State: NoData}, Invalid, at(5), timing, NoData, "", time.Time{}},
		{"nodata to inactive", RuleState{State: NoData}, False, at(5), timing, Inactive, ToInactive, time.Time{}},
		{"nodata to pending", RuleState{State: NoData}, True, at(5), timing, Pending, ToPending, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, tr := Step(tt.prev, tt.cond, tt.now, tt.timing)
			if got.State != tt.want || tr != tt.wantTr {
				t.Errorf("Step = %v/%q, want %v/%q", got.State, tr, tt.want, tt.wantTr)
			}
			if !got.FiredAt.Equal(tt.wantFire) {
				t.Errorf("FiredAt = %v, want %v", got.FiredAt, tt.wantFire)
			}
			if tt.cond == True && !got.LastTrueAt.Equal(tt.now) {
				t.Errorf("LastTrueAt = %v, want %v", got.LastTrueAt, tt.now)
			}
		})
	}
}

func TestActionDue(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	cool := 60 * time.Second
	tests := []struct {
		name string
		s    RuleState
		now  time.Time
		want bool
	}{
		{"entering firing", RuleState{State: Firing, LastTrueAt: at(0)}, at(0), true},
		{"inside cooldown", RuleState{State: Firing, LastTrueAt: at(30), LastActionAt: at(0)}, at(30), false},
		{"after cooldown", RuleState{State: Firing, LastTrueAt: at(60), LastActionAt: at(0)}, at(60), true},
		{"refired inside cooldown of an earlier episode", RuleState{State: Firing, LastTrueAt: at(20), LastActionAt: at(0)}, at(20), false},
		{"kept firing by hysteresis only", RuleState{State: Firing, LastTrueAt: at(50), LastActionAt: at(0)}, at(90), false},
		{"pending never acts", RuleState{State: Pending, LastTrueAt: at(0)}, at(0), false},
		{"nodata never acts", RuleState{State: NoData}, at(0), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := ActionDue(tt.s, tt.now, cool); got != tt.want {
				t.Errorf("ActionDue = %v, want %v", got, tt.want)
			}
		})
	}
}

// A rule walks its whole life on a made-up clock: the sequence of
// transitions is what an operator reads in the audit log.
func TestStepSequence(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	timing := Timing{For: 4 * time.Second, KeepFiringFor: 4 * time.Second}
	conds := []Condition{False, True, True, True, True, False, False, True, False, False, False, Invalid, False}
	var got []Transition
	var s RuleState
	for i, c := range conds {
		var tr Transition
		s, tr = Step(s, c, t0.Add(time.Duration(i*2)*time.Second), timing)
		if tr != "" {
			got = append(got, tr)
		}
	}
	want := []Transition{ToPending, ToFiring, ToResolved, ToPending, ToInactive, ToNoData, ToInactive}
	if len(got) != len(want) {
		t.Fatalf("transitions = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("transitions = %v, want %v", got, want)
		}
	}
}

func TestStateText(t *testing.T) {
	t.Parallel()
	for _, s := range []State{Inactive, Pending, Firing, NoData} {
		b, _ := s.MarshalText()
		var back State
		if err := back.UnmarshalText(b); err != nil || back != s {
			t.Errorf("round trip of %v = %v, %v", s, back, err)
		}
	}
	var s State
	if err := s.UnmarshalText([]byte("bogus")); err == nil {
		t.Error("want error for unknown state")
	}
}

// Unknown is neither true nor false: a pending rule whose data goes
// missing one tick in four neither resets nor advances; it fires once the
// condition has held for `for` over the ticks that had data. Data missing
// longer than `for` ends pending.
func TestPendingThroughMissingData(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	timing := Timing{For: 5 * time.Second}
	tests := []struct {
		name    string
		conds   string // one a second: T true, F false, ? no data
		firesAt int    // the second it fires; -1 never
		want    []Transition
	}{
		// Data every tick: fires 5 s after it first held.
		{"no gap", "TTTTTTT", 5, []Transition{ToPending, ToFiring}},
		// One truncated answer in four: 5 s of data-bearing time at 6 s
		// (0–3 and 4–6); the next gap neither resolves nor re-fires.
		{"one in four missing", "TTT?TTT?TTT", 6, []Transition{ToPending, ToFiring}},
		// Data missing longer than for: pending ends, then starts again.
		{"missing longer than for", "TT???????TTTTTT", 14, []Transition{ToPending, ToNoData, ToPending, ToFiring}},
		// False after a gap still resets.
		{"false after a gap", "TT?FTT", -1, []Transition{ToPending, ToInactive, ToPending}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var s RuleState
			var got []Transition
			fired := -1
			for i, c := range tt.conds {
				cond := map[rune]Condition{'T': True, 'F': False, '?': Invalid}[c]
				var tr Transition
				s, tr = Step(s, cond, t0.Add(time.Duration(i)*time.Second), timing)
				if tr != "" {
					got = append(got, tr)
				}
				if tr == ToFiring && fired < 0 {
					fired = i
				}
			}
			if fired != tt.firesAt || strings.Join(trs(got), " ") != strings.Join(trs(tt.want), " ") {
				t.Errorf("fired at %ds with %v, want %ds with %v", fired, got, tt.firesAt, tt.want)
			}
		})
	}
}

func trs(ts []Transition) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = string(t)
	}
	return out
}
