package engine

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/rules"
)

// gatedActuator holds XBTC's settings calls until released.
type gatedActuator struct {
	*fakeExchange
	release chan struct{}
	started chan string
}

func (g *gatedActuator) SetPositionSettings(ctx context.Context, symbol string, s exchange.Settings) (*exchange.Position, error) {
	if symbol == "XBTC" {
		g.started <- symbol
		select {
		case <-g.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.fakeExchange.SetPositionSettings(ctx, symbol, s)
}

func (g *gatedActuator) CancelOrders(ctx context.Context, symbol string) (json.RawMessage, error) {
	return g.fakeExchange.CancelOrders(ctx, symbol)
}

// While XBTC's settings call hangs, the next ticks read and act on XETH,
// never send XBTC a second call, show the call in flight, and do not trust
// the free balance a snapshot read during the call implies; the hung
// call's outcome is applied by the tick that collects it.
//
// The interval is long (a tick waits up to half of it for its own calls,
// so the first waits that long for XBTC's) so that XETH's call, run by a
// goroutine, is said by the tick that decided it on a loaded machine: with
// 100ms, one run in twenty under -race beside
// TestConcurrentControlReloadAndTicks on a loaded CPU missed the 50ms wait.
// The second tick must still not wait for XBTC's hung call.
func TestCallInFlightHoldsOnlyItsSymbol(t *testing.T) {
	t.Parallel()
	fx := newFake()
	g := &gatedActuator{fakeExchange: fx, release: make(chan struct{}), started: make(chan string, 4)}
	set := &rules.Set{Rules: []*rules.Rule{rule(t, overMax)}}
	var audit strings.Builder
	e, err := New(Config{Interval: 2 * time.Second, ActionTimeout: time.Minute}, set, Deps{Reader: fx, Actuator: g, Audit: journal.NewAudit(&auditWriter{b: &audit})})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := e.Tick(ctx, at(0)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.started:
	case <-time.After(5 * time.Second):
		t.Fatal("XBTC's call never started")
	}
	if fl := e.InFlight(at(1)); len(fl) != 1 || fl[0].Symbol != "XBTC" || !strings.Contains(fl[0].Call, "lower_leverage XBTC") {
		t.Fatalf("InFlight = %+v, want XBTC's lower_leverage", fl)
	}
	// XETH goes over its maximum while XBTC's call hangs.
	fx.mu.Lock()
	fx.positions[1].Leverage = 30
	fx.mu.Unlock()
	start := time.Now()
	rep, err := e.Tick(ctx, at(1))
	if err != nil {
		t.Fatal(err)
	}
	// Not a speed target: a tick that waited for XBTC's hung call (not its
	// own) would take its whole budget, half the interval.
	if took := time.Since(start); took >= time.Second {
		t.Errorf("the tick took %s: it waited for XBTC's hung call, not only for its own", took)
	}
	var xeth *journal.ActionEvent
	for i, a := range rep.Actions {
		if a.Symbol == "XBTC" {
			t.Errorf("XBTC acted on again while its call is in flight: %+v", a)
		}
		if a.Symbol == "XETH" {
			xeth = &rep.Actions[i]
		}
	}
	if xeth == nil || xeth.Outcome != "sent" {
		t.Fatalf("XETH not acted on while XBTC hangs: %+v", rep.Actions)
	}
	if !strings.Contains(xeth.Effect, "free balance unknown (a call on XBTC was in flight while the positions were read)") {
		t.Errorf("XETH's prediction trusts a free balance read during XBTC's call: %s", xeth.Effect)
	}
	close(g.release)
	if !e.disp.Wait(5 * time.Second) {
		t.Fatal("XBTC's call did not end once released")
	}
	rep, err = e.Tick(ctx, at(2))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, a := range rep.Actions {
		found = found || a.Symbol == "XBTC" && a.Outcome == "sent"
	}
	if !found {
		t.Errorf("XBTC's outcome not applied by the tick that collected it: %+v", rep.Actions)
	}
	settings, _ := fx.calls()
	n := 0
	for _, c := range settings {
		if c.symbol == "XBTC" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("XBTC settings calls = %d, want 1", n)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

// auditWriter is a strings.Builder safe for the executor's goroutines.
type auditWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *auditWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// A plan whose call is still in flight when its tick ends is not reused by
// a later tick's plan (evaluator.finish gives the tick's plans back only
// when the dispatcher holds none): XBTC's plan, settled two ticks later,
// still says XBTC's rule notification with what its rule saw, though XETH
// acted in between.
func TestPlanInFlightIsNotReused(t *testing.T) {
	t.Parallel()
	fx := newFake()
	g := &gatedActuator{fakeExchange: fx, release: make(chan struct{}), started: make(chan string, 4)}
	r := overMax
	r.Actions = append(slices.Clone(r.Actions), rules.Action{Kind: rules.Notify})
	set := &rules.Set{Rules: []*rules.Rule{rule(t, r)}}
	var audit strings.Builder
	e, err := New(Config{Interval: 2 * time.Second, ActionTimeout: time.Minute}, set, Deps{Reader: fx, Actuator: g, Audit: journal.NewAudit(&auditWriter{b: &audit})})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := e.Tick(ctx, at(0)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.started:
	case <-time.After(5 * time.Second):
		t.Fatal("XBTC's call never started")
	}
	fx.mu.Lock()
	fx.positions[1].Leverage = 30 // XETH over its maximum while XBTC's call hangs
	fx.index["BTC"] = dec("99000")
	fx.mu.Unlock()
	rep, err := e.Tick(ctx, at(1))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rep.Actions, func(a journal.ActionEvent) bool { return a.Symbol == "XETH" && a.Action == "notify" }) {
		t.Fatalf("XETH did not act while XBTC's call hung: %+v", rep.Actions)
	}
	close(g.release)
	if !e.disp.Wait(5 * time.Second) {
		t.Fatal("XBTC's call did not end once released")
	}
	if rep, err = e.Tick(ctx, at(2)); err != nil {
		t.Fatal(err)
	}
	var notes []journal.ActionEvent
	for _, a := range rep.Actions {
		if a.Action == "notify" {
			notes = append(notes, a)
		}
	}
	if len(notes) != 1 || notes[0].Symbol != "XBTC" {
		t.Fatalf("the tick that collected XBTC's call said the notifications %+v, want XBTC's", notes)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// Each plan's notification, said when its calls ended, with what its
	// rule saw in its tick: XBTC's of the first tick (its call collected in
	// the third), XBTC's held and XETH's of the second.
	want := map[string]int{
		`"time":"2026-11-21T12:00:00Z" XBTC (index 100000, liquidation 95500, distance 4.50%, leverage 25x of max 20x)`: 1,
		`"time":"2026-11-21T12:00:01Z" XBTC (index 99000, liquidation 95500, distance 3.54%, leverage 25x of max 20x)`:  1,
		`"time":"2026-11-21T12:00:01Z" XETH (index 3000, liquidation 3585, distance 19.50%, leverage 30x of max 20x)`:   1,
	}
	got := map[string]int{}
	for _, line := range strings.Split(audit.String(), "\n") {
		if !strings.Contains(line, `"action":"notify"`) {
			continue
		}
		sym := "XETH"
		if strings.Contains(line, `"symbol":"XBTC"`) {
			sym = "XBTC"
		}
		got[line[1:len(`"time":"2026-11-21T12:00:00Z"`)+1]+" "+sym+" "+line[strings.LastIndex(line, " (")+1:len(line)-2]]++
	}
	if !maps.Equal(got, want) {
		t.Errorf("notifications %v, want %v", got, want)
	}
}
