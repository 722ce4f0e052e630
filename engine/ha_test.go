package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/engine/control"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/riskguard/riskguard/rules"
)

// fakeLead is a Leadership the test switches: term 0 is a standby; looks
// counts the MayAct calls, and failFrom makes every call from that one
// on refused (a lease that lapses between the decision and the send).
type fakeLead struct {
	mu       sync.Mutex
	term     int64
	looks    int
	failFrom int
}

func (f *fakeLead) MayAct(time.Time) (bool, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.looks++
	if f.term == 0 {
		return false, "standby: account default is led by x"
	}
	if f.failFrom > 0 && f.looks >= f.failFrom {
		return false, "the lease was last renewed 1.4s ago"
	}
	return true, ""
}

func (f *fakeLead) Term() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.term
}

// fakeShared is a SharedState in memory: what a leader wrote, by part.
type fakeShared struct {
	mu    sync.Mutex
	parts map[string][]byte
}

func (f *fakeShared) LoadState(context.Context) (map[string][]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string][]byte{}
	for k, v := range f.parts {
		out[k] = v
	}
	return out, nil
}

func (f *fakeShared) SaveState(_ context.Context, parts map[string][]byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for k, v := range parts {
		if !bytes.Equal(f.parts[k], v) {
			n++
		}
	}
	f.parts = parts
	return n, nil
}

func haEngine(t *testing.T, lead engine.Leadership, shared *fakeShared) (*engine.Engine, *sim.Exchange, *bytes.Buffer) {
	t.Helper()
	return haEngineWith(t, engine.Config{}, lead, shared)
}

func haEngineWith(t *testing.T, cfg engine.Config, lead engine.Leadership, shared *fakeShared) (*engine.Engine, *sim.Exchange, *bytes.Buffer) {
	t.Helper()
	ex, err := sim.New(sim.Config{Key: "k", Secret: "s", Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ex)
	t.Cleanup(srv.Close)
	client, err := exchange.New(srv.URL, "k", "s", exchange.WithRateLimit(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	set, err := rules.Parse("r.yaml", []byte(`rules:
  - name: over-max
    when: position.leverage > riskLimit.maxLeverage
    cooldown: 5m
    allow_closer_liquidation: true
    actions:
      - action: lower_leverage
        leverage: riskLimit.maxLeverage
`))
	if err != nil {
		t.Fatal(err)
	}
	audit := new(bytes.Buffer)
	e, err := engine.New(cfg, set, engine.Deps{Reader: client, Actuator: client, Leadership: lead, Shared: shared, Host: "h1", Audit: journal.NewAudit(audit)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e, ex, audit
}

func settingsCalls(ex *sim.Exchange) int {
	n := 0
	for _, c := range ex.Calls() {
		if c.Mutating && strings.HasSuffix(c.Path, "/settings") {
			n++
		}
	}
	return n
}

func auditRecords(t *testing.T, b *bytes.Buffer) []journal.Record {
	t.Helper()
	var out []journal.Record
	for _, line := range bytes.Split(b.Bytes(), []byte("\n")) {
		var r journal.Record
		if json.Unmarshal(line, &r) == nil {
			out = append(out, r)
		}
	}
	return out
}

// A standby evaluates and holds its calls (audited standby once, no
// cooldown started); at its first tick as leader it loads the shared
// state and acts; the records say host and term; a leader's state goes
// to the shared store, and a takeover honours its cooldowns.
func TestLeadershipStandbyAndTakeover(t *testing.T) {
	t.Parallel()
	lead, shared := &fakeLead{}, &fakeShared{}
	e, ex, audit := haEngine(t, lead, shared)
	ctx := context.Background()
	now := time.Now()
	for i := range 3 {
		if _, err := e.Tick(ctx, now.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if n := settingsCalls(ex); n != 0 {
		t.Fatalf("a standby sent %d settings calls", n)
	}
	standby := 0
	for _, r := range auditRecords(t, audit) {
		if r.Phase == "standby" {
			standby++
			if r.Host != "h1" || r.Term != 0 {
				t.Errorf("standby record host %q term %d", r.Host, r.Term)
			}
		}
	}
	if standby != 1 {
		t.Errorf("%d standby records over three ticks, want one (said once per role)", standby)
	}
	if len(shared.parts) != 0 {
		t.Error("a standby wrote the shared state")
	}

	lead.mu.Lock()
	lead.term = 7
	lead.mu.Unlock()
	if _, err := e.Tick(ctx, now.Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	e.Close() // the call collected, the state saved
	if n := settingsCalls(ex); n != 1 {
		t.Fatalf("the takeover's first tick sent %d settings calls, want 1", n)
	}
	var result *journal.Record
	for _, r := range auditRecords(t, audit) {
		if r.Phase == "result" {
			result = &r
		}
	}
	if result == nil || result.Host != "h1" || result.Term != 7 {
		t.Fatalf("the result record = %+v, want host h1 term 7", result)
	}
	if !strings.Contains(string(shared.parts["rules/over-max"]), "lastActionAt") {
		t.Errorf("the leader's cooldown is not in the shared state: %s", shared.parts["rules/over-max"])
	}

	// A second process takes over from that state, against an exchange
	// where XSOL is over its maximum again (a fresh one, same seed, same
	// position ids): inside the old leader's cooldown, it does not act.
	lead2 := &fakeLead{term: 9}
	e2, ex2, _ := haEngine(t, lead2, shared)
	if _, err := e2.Tick(ctx, now.Add(4*time.Second)); err != nil {
		t.Fatal(err)
	}
	e2.Close()
	if n := settingsCalls(ex2); n != 0 {
		t.Errorf("the takeover acted inside the old leader's cooldown (%d calls)", n)
	}
	// Without the shared state, the same takeover acts at its first tick.
	e3, ex3, _ := haEngine(t, &fakeLead{term: 11}, &fakeShared{})
	if _, err := e3.Tick(ctx, now.Add(4*time.Second)); err != nil {
		t.Fatal(err)
	}
	e3.Close()
	if n := settingsCalls(ex3); n != 1 {
		t.Errorf("a takeover with no shared state sent %d calls, want 1", n)
	}
}

// The last look: a leader whose lease lapses between the tick's decision
// and the send starts no call; it is audited standby and retried later.
func TestLeadershipLastLook(t *testing.T) {
	t.Parallel()
	lead := &fakeLead{term: 3, failFrom: 2}
	e, ex, audit := haEngine(t, lead, &fakeShared{})
	if _, err := e.Tick(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	e.Close()
	if n := settingsCalls(ex); n != 0 {
		t.Fatalf("%d settings calls went out after the lease lapsed", n)
	}
	var phases []string
	for _, r := range auditRecords(t, audit) {
		if r.Type == "action" {
			phases = append(phases, r.Phase)
		}
	}
	if strings.Join(phases, ",") != "intended,standby" {
		t.Errorf("phases %v, want intended,standby", phases)
	}
}

// A standby refuses control changes (Telegram reaches the engine
// directly): they would be lost at the next takeover.
func TestLeadershipControlOnStandby(t *testing.T) {
	t.Parallel()
	e, _, _ := haEngine(t, &fakeLead{}, &fakeShared{})
	now := time.Now()
	_, err := e.Control().Pause(context.Background(), now, control.Pause{Symbol: "XSOL", CreatedBy: "t", AllowUnknown: true})
	if !errors.Is(err, engine.ErrStandby) || !strings.Contains(err.Error(), "led by x") {
		t.Fatalf("pause on a standby: %v, want ErrStandby naming the leader", err)
	}
	if _, err := e.Control().AddSilence(context.Background(), now, control.Silence{Symbol: "XSOL", CreatedBy: "t", EndsAt: now.Add(time.Hour), AllowUnknown: true}); !errors.Is(err, engine.ErrStandby) {
		t.Fatalf("silence on a standby: %v", err)
	}
	if len(e.Control().Pauses(now)) != 0 {
		t.Fatal("a standby kept a pause")
	}
}

// wakingLead is a fakeLead that says when it wins, as ha's Seat does.
type wakingLead struct {
	fakeLead
	won chan struct{}
}

func (w *wakingLead) Won() <-chan struct{} { return w.won }

// A won election wakes Run: the takeover's first tick comes at once, not
// an interval later (an hour here), and acts on the warm state.
func TestLeadershipWonTicksAtOnce(t *testing.T) {
	t.Parallel()
	lead := &wakingLead{won: make(chan struct{}, 1)}
	cfg := engine.Config{Interval: time.Hour, FastInterval: time.Hour}
	e, ex, _ := haEngineWith(t, cfg, lead, &fakeShared{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for range 500 { // 10 s at most
			if ok() {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("never: %s", what)
	}
	// The first tick asked whether it may act (a standby: no).
	waitFor("the first tick, as a standby", func() bool { lead.mu.Lock(); defer lead.mu.Unlock(); return lead.looks > 0 })
	if n := settingsCalls(ex); n != 0 {
		t.Fatalf("a standby sent %d settings calls", n)
	}
	lead.mu.Lock()
	lead.term = 4
	lead.mu.Unlock()
	lead.won <- struct{}{}
	waitFor("the takeover's call, an hour before the next interval", func() bool { return settingsCalls(ex) == 1 })
}
