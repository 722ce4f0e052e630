package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/act"
	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/engine/control"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/rules"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// recorder is an Emitter that keeps what it is told, and a control.Guard;
// with noAudit, its journal has no audit log.
type recorder struct {
	evs     []journal.Event
	reps    []*journal.Report
	noAudit bool
}

// Emit keeps a copy of ev's record and action, as an Emitter does: a
// step writes them again once it returns.
func (r *recorder) Emit(_ context.Context, rep *journal.Report, ev journal.Event) {
	if ev.Audit != nil {
		a := *ev.Audit
		ev.Audit = &a
	}
	if ev.Action != nil {
		a := *ev.Action
		ev.Action = &a
	}
	r.evs, r.reps = append(r.evs, ev), append(r.reps, rep)
}

// Wants: a recorder takes every output, to keep all of an event, but the
// audit log with noAudit.
func (r *recorder) Wants(context.Context, slog.Level) journal.Outputs {
	return journal.Outputs{Audit: !r.noAudit, Log: true, Metrics: true, Notes: true}
}

func (r *recorder) Rules() *rules.Set     { return &rules.Set{} }
func (r *recorder) Active() []alert.Alert { return nil }

// said names each event: its audit record's phase (or type), else the
// outcome of its action ("action:dry_run").
func (r *recorder) said() []string {
	out := []string{}
	for _, ev := range r.evs {
		switch {
		case ev.Audit != nil && ev.Audit.Phase != "":
			out = append(out, ev.Audit.Phase)
		case ev.Audit != nil:
			out = append(out, ev.Audit.Type+":"+ev.Audit.To)
		case ev.Action != nil:
			out = append(out, "action:"+ev.Action.Outcome)
		}
	}
	return out
}

// leader is a Leader whose answers the test sets.
type leader struct {
	err       error // MayAct's
	say       bool  // SayStandby's
	intentErr error
	asked     []time.Time
	saved     []string
}

func (l *leader) MayAct(now time.Time) error { l.asked = append(l.asked, now); return l.err }
func (l *leader) SayStandby(string) bool     { return l.say }
func (l *leader) SaveIntent(_ context.Context, in act.Intent) error {
	if l.intentErr != nil {
		return l.intentErr
	}
	l.saved = append(l.saved, in.ID)
	return nil
}
func (l *leader) Ended(string)       {}
func (l *leader) KeepsIntents() bool { return true }

// call is a settings call on XBTC decided at t0 by rule r1, on a snapshot
// whose read began at t0.
func call(rep *journal.Report) *Call {
	return &Call{Base: journal.Record{Time: t0, Type: "action", Action: "settings", Symbol: "XBTC", Rules: []string{"r1"}},
		Desc: "set XBTC to 5x isolated", Event: &journal.ActionEvent{Symbol: "XBTC", Action: "settings", Rules: []string{"r1"}},
		Report: rep, ReadStart: t0, MaxAge: 10 * time.Second}
}

func at(t time.Time) func() time.Time { return func() time.Time { return t } }

// pauses is the real control.Service over a store holding the pauses ps.
func pauses(t *testing.T, jr *recorder, ps ...control.Pause) *control.Service {
	t.Helper()
	st := new(control.Store)
	for _, p := range ps {
		if err := st.AddPause(p, t0); err != nil {
			t.Fatal(err)
		}
	}
	s, err := control.NewService(control.Options{Store: st, Guard: jr, Emitter: jr, Symbols: func() []string { return []string{"XBTC"} }})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var pauseXBTC = control.Pause{ID: "p1", Symbol: "XBTC", StartsAt: t0.Add(-time.Minute), CreatedBy: "ops"}

// check runs one stage on c and compares its error (errors.Is; nil: none)
// and what it said with want, every event in the report c names.
func check(t *testing.T, s Stage, jr *recorder, c *Call, wantErr error, wantSaid []string) {
	t.Helper()
	err := s.Check(context.Background(), c)
	if wantErr == nil && err != nil || wantErr != nil && !errors.Is(err, wantErr) {
		t.Errorf("Check = %v, want %v", err, wantErr)
	}
	if got := jr.said(); !slices.Equal(got, wantSaid) {
		t.Errorf("said %q, want %q", got, wantSaid)
	}
	for i, r := range jr.reps {
		if r != c.Report {
			t.Errorf("event %d went to report %p, want the call's %p", i, r, c.Report)
		}
	}
}

func TestInFlightStage(t *testing.T) {
	x := act.New(1, time.Second, true, at(t0))
	// An ended job's key stays busy until its outcome is collected.
	x.Submit(context.Background(), &act.Job{Key: "XBTC", Done: func(context.Context, []act.Result) {}})
	for _, tc := range []struct {
		symbol string
		want   error
	}{
		{"XBTC", errInFlight},
		{"XETH", nil},
	} {
		t.Run(tc.symbol, func(t *testing.T) {
			jr := new(recorder)
			c := &Call{Base: journal.Record{Time: t0, Symbol: tc.symbol}}
			check(t, inFlight{exec: x, log: discard()}, jr, c, tc.want, []string{})
		})
	}
	x.Collect(context.Background())
	jr := new(recorder)
	check(t, inFlight{exec: x, log: discard()}, jr, &Call{Base: journal.Record{Time: t0, Symbol: "XBTC"}}, nil, []string{})
}

// step is an act.Step that is never run: a plan's steps are only counted
// by the backoff stage.
type step struct{}

func (step) Order() int { return 30 }
func (step) Prepare(context.Context, act.Host, *act.Plan) ([]*act.Pending, error) {
	panic("not run")
}
func (step) Done(context.Context, act.Host, *act.Plan) error { panic("not run") }

func TestBackoffStage(t *testing.T) {
	b := act.NewBackoff(2*time.Second, time.Minute)
	b.Failed("XBTC", t0)
	b.Failed("XBTC", t0.Add(2*time.Second)) // held until t0+2s+1s
	withSteps, notifyOnly := &act.Plan{Steps: []act.Step{step{}}}, &act.Plan{}
	for _, tc := range []struct {
		name   string
		symbol string
		at     time.Time
		plan   *act.Plan
		want   error
		said   []string
	}{
		{"held", "XBTC", t0.Add(2 * time.Second), withSteps, errBackingOff, []string{"action:backoff"}},
		{"its notify actions are not held", "XBTC", t0.Add(2 * time.Second), notifyOnly, nil, []string{}},
		{"another symbol", "XETH", t0.Add(2 * time.Second), withSteps, nil, []string{}},
		{"after its wait", "XBTC", t0.Add(time.Minute), withSteps, nil, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jr := new(recorder)
			rep := new(journal.Report)
			c := &Call{Base: journal.Record{Time: tc.at, Symbol: tc.symbol}, Plan: tc.plan, Report: rep}
			check(t, backoff{backoff: b, say: sayer{jr}}, jr, c, tc.want, tc.said)
		})
	}
}

func TestTallyAndDryRunStages(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stage func(jr *recorder) Stage
		want  error
		said  []string
	}{
		{"tally", func(jr *recorder) Stage { return tally{on: true, say: sayer{jr}} }, errNotSent, []string{"action:dry_run"}},
		{"no tally", func(jr *recorder) Stage { return tally{say: sayer{jr}} }, nil, []string{}},
		{"dry run", func(jr *recorder) Stage { return dryRun{cfg: &Config{DryRun: true}, say: sayer{jr}} }, errNotSent, []string{"intended", "dry_run"}},
		{"live", func(jr *recorder) Stage { return dryRun{cfg: &Config{}, say: sayer{jr}} }, nil, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jr := new(recorder)
			c := call(new(journal.Report))
			check(t, tc.stage(jr), jr, c, tc.want, tc.said)
			if tc.want != nil && c.Event.Outcome != "dry_run" {
				t.Errorf("the action's outcome is %q, want dry_run", c.Event.Outcome)
			}
		})
	}
}

func TestLeadershipStage(t *testing.T) {
	standby := fmt.Errorf("%w: another process leads", ErrStandby)
	later := t0.Add(3 * time.Second)
	for _, tc := range []struct {
		name     string
		lead     leader
		now      func() time.Time // nil: as the tick decides
		intended bool             // said before the stage
		want     error
		said     []string
		asked    time.Time
	}{
		{"leads", leader{}, nil, false, nil, []string{}, t0},
		{"standby, said once", leader{err: standby, say: true}, nil, false, ErrStandby, []string{"intended", "standby"}, t0},
		{"standby, said already", leader{err: standby}, nil, false, ErrStandby, []string{}, t0},
		{"last look leads", leader{}, at(later), true, nil, []string{}, later},
		{"last look on standby: always said", leader{err: standby}, at(later), true, ErrStandby, []string{"standby"}, later},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jr := new(recorder)
			c := call(nil)
			c.intended = tc.intended
			check(t, leadership{lead: &tc.lead, now: tc.now, say: sayer{jr}}, jr, c, tc.want, tc.said)
			if !slices.Equal(tc.lead.asked, []time.Time{tc.asked}) {
				t.Errorf("asked at %v, want %v", tc.lead.asked, tc.asked)
			}
		})
	}
}

func TestPauseStages(t *testing.T) {
	for _, tc := range []struct {
		name     string
		last     bool // the gate, at the last look
		paused   []control.Pause
		want     error
		said     []string
		released bool // the gate's release is left to run
	}{
		{"not paused", false, nil, nil, []string{}, false},
		{"paused", false, []control.Pause{pauseXBTC}, control.ErrPaused, []string{"intended", "paused"}, false},
		{"another symbol paused", false, []control.Pause{{ID: "p2", Symbol: "XETH", StartsAt: t0.Add(-time.Minute), CreatedBy: "ops"}}, nil, []string{}, false},
		{"gate open", true, nil, nil, []string{}, true},
		{"gate: paused since the tick decided", true, []control.Pause{pauseXBTC}, control.ErrPaused, []string{"paused"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jr := new(recorder)
			ctl := pauses(t, jr, tc.paused...)
			c := call(new(journal.Report))
			var s Stage = paused{ctl: ctl, say: sayer{jr}}
			if tc.last {
				c.Report, c.intended = nil, true
				s = pauseGate{ctl: ctl, now: at(t0.Add(time.Second)), say: sayer{jr}}
			}
			check(t, s, jr, c, tc.want, tc.said)
			if (c.release != nil) != tc.released {
				t.Errorf("release left %v, want %v", c.release != nil, tc.released)
			}
			if c.release != nil {
				c.release()
			}
		})
	}
}

func TestSnapshotAgeStage(t *testing.T) {
	for _, tc := range []struct {
		name     string
		age      time.Duration
		intended bool
		want     error
		said     []string
	}{
		{"fresh", 3 * time.Second, false, nil, []string{}},
		{"at the bound", 10 * time.Second, false, nil, []string{}},
		{"too old as decided", 10*time.Second + time.Millisecond, false, ErrStaleSnapshot, []string{"intended", "skipped"}},
		{"grown too old before it left", 11 * time.Second, true, ErrStaleSnapshot, []string{"skipped"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jr := new(recorder)
			c := call(new(journal.Report))
			c.intended = tc.intended
			check(t, snapshotAge{now: at(t0.Add(tc.age)), say: sayer{jr}}, jr, c, tc.want, tc.said)
		})
	}
}

func TestBreakerStage(t *testing.T) {
	cfg := &Config{MaxActionsPerMinute: 2, BreakerReset: 5 * time.Minute}
	var b act.Breaker
	changed := 0
	s := breaker{breaker: &b, cfg: cfg, changed: func() { changed++ }}
	for i, tc := range []struct {
		at   time.Time
		want error
		said []string
	}{
		{t0, nil, []string{}},
		{t0.Add(time.Second), nil, []string{}},
		{t0.Add(2 * time.Second), ErrBreakerOpen, []string{"breaker:open", "intended", "skipped"}},
		{t0.Add(time.Minute), ErrBreakerOpen, []string{"intended", "skipped"}},
		{t0.Add(6 * time.Minute), nil, []string{"breaker:closed"}},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			jr := new(recorder)
			s.say = sayer{jr}
			c := call(new(journal.Report))
			c.Base.Time = tc.at
			check(t, s, jr, c, tc.want, tc.said)
			if changed != i+1 {
				t.Errorf("the state was marked changed %d times, want %d (every budget taken)", changed, i+1)
			}
		})
	}
}

func TestIntendedAndIntentStages(t *testing.T) {
	for _, tc := range []struct {
		name     string
		stage    func(jr *recorder, l *leader) Stage
		lead     leader
		intended bool
		noAudit  bool
		want     error
		said     []string
		saved    int
	}{
		{"intended", func(jr *recorder, _ *leader) Stage { return intended{sayer{jr}} }, leader{}, false, false, nil, []string{"intended"}, 0},
		{"intended once", func(jr *recorder, _ *leader) Stage { return intended{sayer{jr}} }, leader{}, true, false, nil, []string{}, 0},
		// Only audited: without an audit log nothing is said.
		{"intended without an audit log", func(jr *recorder, _ *leader) Stage { return intended{sayer{jr}} }, leader{}, false, true, nil, []string{}, 0},
		{"intent saved", func(jr *recorder, l *leader) Stage { return intent{lead: l, say: sayer{jr}} }, leader{}, true, false, nil, []string{}, 1},
		{"intent not saved", func(jr *recorder, l *leader) Stage { return intent{lead: l, say: sayer{jr}} },
			leader{intentErr: fmt.Errorf("%w: etcd away", ErrStandby)}, true, false, ErrStandby, []string{"standby"}, 0},
		// An outcome is said without an audit log as with one.
		{"intent not saved without an audit log", func(jr *recorder, l *leader) Stage { return intent{lead: l, say: sayer{jr}} },
			leader{intentErr: fmt.Errorf("%w: etcd away", ErrStandby)}, true, true, ErrStandby, []string{"standby"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jr := &recorder{noAudit: tc.noAudit}
			c := call(nil)
			c.intended = tc.intended
			check(t, tc.stage(jr, &tc.lead), jr, c, tc.want, tc.said)
			if !c.intended {
				t.Error("the call's intended phase is not marked said")
			}
			if len(tc.lead.saved) != tc.saved {
				t.Errorf("intents saved %q, want %d", tc.lead.saved, tc.saved)
			}
		})
	}
}

// held is a stage that holds every call.
type held struct{}

func (held) Check(context.Context, *Call) error { return ErrBreakerOpen }

func TestPassReleasesTheGate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		after    []Stage
		want     error
		released int
	}{
		{"every stage passes: the gate stays held until the call ends", nil, nil, 0},
		{"a later stage holds the call: the gate is released", []Stage{held{}}, ErrBreakerOpen, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := call(nil)
			c.intended = true
			released := 0
			gate := stageFunc(func(_ context.Context, c *Call) error {
				c.release = func() { released++ }
				return nil
			})
			err := pass(context.Background(), append([]Stage{gate}, tc.after...), c)
			if !errors.Is(err, tc.want) || tc.want == nil && err != nil {
				t.Errorf("pass = %v, want %v", err, tc.want)
			}
			if released != tc.released {
				t.Errorf("released %d times, want %d", released, tc.released)
			}
		})
	}
}

type stageFunc func(context.Context, *Call) error

func (f stageFunc) Check(ctx context.Context, c *Call) error { return f(ctx, c) }

// TestStagesOrder holds the one list to the order the package's doc gives.
func TestStagesOrder(t *testing.T) {
	jr := new(recorder)
	d, err := New(Options{Journal: jr, Pauses: pauses(t, jr), Leader: &leader{}, Outcomes: nopOutcomes{}, Model: nopOutcomes{},
		Actuator: nopExchange{}, Reader: nopExchange{}})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		At    Point
		Stage string
	}
	var got []row
	for _, s := range d.Stages() {
		got = append(got, row{s.At, reflect.TypeOf(s.Stage).Name()})
	}
	want := []row{
		{AtSymbol, "inFlight"}, {AtPlan, "backoff"},
		{AtDecide, "tally"}, {AtDecide, "dryRun"}, {AtDecide, "leadership"}, {AtDecide, "paused"}, {AtDecide, "snapshotAge"}, {AtDecide, "breaker"},
		{AtSend, "intended"}, {AtSend, "leadership"}, {AtSend, "pauseGate"}, {AtSend, "snapshotAge"}, {AtSend, "intent"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Stages =\n%v\nwant\n%v", got, want)
	}
	p := d.pipeline
	if len(p.symbol) != 1 || len(p.plan) != 1 || len(p.decide) != 6 || len(p.send) != 5 {
		t.Errorf("split by point into %d, %d, %d, %d stages, want 1, 1, 6, 5", len(p.symbol), len(p.plan), len(p.decide), len(p.send))
	}
}
