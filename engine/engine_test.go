package engine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/act"
	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/rules"
)

var overMax = rules.Rule{
	Name: "over-max-leverage", When: "position.leverage > riskLimit.maxLeverage", Cooldown: 5 * time.Minute,
	Actions: []rules.Action{{Kind: rules.LowerLeverage, Leverage: "riskLimit.maxLeverage"}},
}

var nearLiq = rules.Rule{
	Name: "near-liquidation", When: "liquidationDistance < 0.05", Cooldown: time.Minute,
	Actions: []rules.Action{{Kind: rules.CancelOrders}, {Kind: rules.SetIsolated}},
}

var veryNearLiq = rules.Rule{
	Name: "very-near-liquidation", When: "liquidationDistance < 0.03", Cooldown: time.Minute,
	Actions: []rules.Action{{Kind: rules.LowerLeverage, Leverage: "position.leverage / 2"}, {Kind: rules.Notify}},
}

type harness struct {
	t     *testing.T
	fx    *fakeExchange
	e     *Engine
	audit *bytes.Buffer
	notes *recorder
}

func newHarness(t *testing.T, cfg Config, rs ...rules.Rule) *harness {
	t.Helper()
	return newHarnessWith(t, cfg, Deps{}, rs...)
}

// newHarnessWith is newHarness with d's logger and metrics.
func newHarnessWith(t *testing.T, cfg Config, d Deps, rs ...rules.Rule) *harness {
	t.Helper()
	h := &harness{t: t, fx: newFake(), audit: new(bytes.Buffer), notes: new(recorder)}
	set := &rules.Set{}
	for _, r := range rs {
		set.Rules = append(set.Rules, rule(t, r))
	}
	d.Reader, d.Actuator, d.Notifier, d.Audit = h.fx, h.fx, h.notes, journal.NewAudit(h.audit)
	e, err := New(cfg, set, d)
	if err != nil {
		t.Fatal(err)
	}
	h.e = e
	return h
}

func (h *harness) tick(sec int) *TickReport {
	h.t.Helper()
	rep, err := h.e.Tick(context.Background(), at(sec))
	if err != nil {
		h.t.Fatalf("tick at %ds: %v", sec, err)
	}
	return rep
}

// auditRecords decodes the audit lines.
func (h *harness) auditRecords() []journal.Record {
	h.t.Helper()
	var out []journal.Record
	sc := bufio.NewScanner(bytes.NewReader(h.audit.Bytes()))
	for sc.Scan() {
		var r journal.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			h.t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

func phases(recs []journal.Record, action string) []string {
	var out []string
	for _, r := range recs {
		if r.Type == "action" && r.Action == action {
			out = append(out, r.Phase)
		}
	}
	return out
}

func TestLeverageAboveMaxIsLowered(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{}, overMax)
	rep := h.tick(0)
	settings, cancels := h.fx.calls()
	want := []settingsCall{{"XBTC", exchange.Settings{Cross: true, Leverage: 20}}}
	if !slices.Equal(settings, want) || len(cancels) != 0 {
		t.Fatalf("calls = %v %v, want %v and no cancel", settings, cancels, want)
	}
	if got := h.fx.position("XBTC").Leverage; got != 20 {
		t.Errorf("XBTC leverage = %d, want 20", got)
	}
	if rep.Positions != 2 {
		t.Errorf("evaluated %d positions, want 2 (the empty one is skipped)", rep.Positions)
	}
	if got := phases(h.auditRecords(), "lower_leverage"); !slices.Equal(got, []string{"intended", "sent", "result"}) {
		t.Errorf("audit phases = %v", got)
	}
	// Next tick: leverage is at the max, the rule resolves and nothing is sent.
	rep = h.tick(2)
	if settings, _ := h.fx.calls(); len(settings) != 1 {
		t.Errorf("settings calls after resolve = %d, want 1", len(settings))
	}
	if len(rep.Transitions) != 1 || rep.Transitions[0].To != alert.Inactive {
		t.Errorf("transitions = %+v, want one resolve", rep.Transitions)
	}
	notes := h.notes.all()
	if !slices.ContainsFunc(notes, func(s string) bool { return strings.HasPrefix(s, "action: lower_leverage XBTC 25→20") }) {
		t.Errorf("notifications = %q", notes)
	}
}

func TestMergedActionsOneSettingsCall(t *testing.T) {
	t.Parallel()
	// σ 0.1%: XBTC's isolation at 20x (4.5% from its liquidation price,
	// 45σ) costs nothing in expectation and goes out as the rules ask;
	// what is tested is how the actions merge, not the decision.
	h := newHarness(t, Config{StressSigmaFloor: 0.001}, overMax, nearLiq, veryNearLiq)
	// XBTC long at 100000 with liquidation at 95500: 4.5% away, so
	// near-liquidation and over-max fire, very-near does not.
	h.tick(0)
	settings, cancels := h.fx.calls()
	want := []settingsCall{{"XBTC", exchange.Settings{Cross: false, Leverage: 20}}}
	if !slices.Equal(settings, want) || !slices.Equal(cancels, []string{"XBTC"}) {
		t.Fatalf("calls = %v %v, want %v and one cancel", settings, cancels, want)
	}
	// The index falls to 2.5% from liquidation: very-near asks for half the
	// leverage; near-liquidation is inside its cooldown.
	h.fx.setIndex("BTC", "98000")
	h.tick(10)
	settings, cancels = h.fx.calls()
	if len(settings) != 2 || settings[1].s != (exchange.Settings{Cross: false, Leverage: 10}) {
		t.Fatalf("second settings = %v, want isolated 10x", settings)
	}
	if len(cancels) != 1 {
		t.Errorf("cancels = %v, want 1 (cooldown)", cancels)
	}
	recs := h.auditRecords()
	var merged *journal.Record
	for i := range recs {
		if recs[i].Type == "action" && recs[i].Phase == "result" && recs[i].Action == "lower_leverage+set_isolated" {
			merged = &recs[i]
		}
	}
	if merged == nil || !slices.Equal(merged.Rules, []string{"over-max-leverage", "near-liquidation"}) {
		t.Errorf("merged audit record = %+v", merged)
	}
}

func TestSafeAndEmptyPositionsLeftAlone(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{}, nearLiq)
	h.fx.positions = h.fx.positions[1:] // keep the safe short and the empty one
	for i := range 5 {
		h.tick(i * 2)
	}
	if settings, cancels := h.fx.calls(); len(settings)+len(cancels) != 0 {
		t.Fatalf("calls on a safe account: %v %v", settings, cancels)
	}
}

func TestForHoldsThenFires(t *testing.T) {
	t.Parallel()
	r := overMax
	r.For = 10 * time.Second
	h := newHarness(t, Config{}, r)
	for _, sec := range []int{0, 2, 4, 6, 8} {
		h.tick(sec)
		if settings, _ := h.fx.calls(); len(settings) != 0 {
			t.Fatalf("acted at %ds while pending", sec)
		}
	}
	rep := h.tick(10)
	if settings, _ := h.fx.calls(); len(settings) != 1 {
		t.Fatalf("no action at for=10s; report %+v", rep)
	}
}

func TestCooldownHolds(t *testing.T) {
	t.Parallel()
	r := rules.Rule{Name: "cancel-near", When: "liquidationDistance < 0.05", Cooldown: 30 * time.Second,
		Actions: []rules.Action{{Kind: rules.CancelOrders}}}
	h := newHarness(t, Config{}, r)
	for sec := 0; sec <= 60; sec += 2 {
		h.tick(sec)
	}
	_, cancels := h.fx.calls()
	if len(cancels) != 3 { // at 0, 30 and 60
		t.Fatalf("cancels over 60s with a 30s cooldown = %d, want 3", len(cancels))
	}
}

func TestDryRunSendsNothing(t *testing.T) {
	t.Parallel()
	// σ 0.1%: the isolation costs nothing and is part of the call (as in
	// TestMergedActionsOneSettingsCall).
	h := newHarness(t, Config{DryRun: true, StressSigmaFloor: 0.001}, overMax, nearLiq)
	h.tick(0)
	if settings, cancels := h.fx.calls(); len(settings)+len(cancels) != 0 {
		t.Fatalf("dry run sent %v %v", settings, cancels)
	}
	recs := h.auditRecords()
	for _, action := range []string{"cancel_orders", "lower_leverage+set_isolated"} {
		if got := phases(recs, action); !slices.Equal(got, []string{"intended", "dry_run"}) {
			t.Errorf("%s audit phases = %v, want intended, dry_run", action, got)
		}
	}
}

// A tallied dry run reports its actions as a dry run does, outcome and
// leverages included, without their effect, and says nothing else.
func TestTallyReportsWithoutSaying(t *testing.T) {
	t.Parallel()
	told := newHarness(t, Config{DryRun: true}, overMax, nearLiq)
	tallied := newHarnessWith(t, Config{DryRun: true}, Deps{Tally: true}, overMax, nearLiq)
	a, b := told.tick(0), tallied.tick(0)
	if len(a.Actions) < 2 {
		t.Fatalf("the dry run reported %d actions, want the cancel and the settings call", len(a.Actions))
	}
	for i := range a.Actions {
		if a.Actions[i].Effect == "" && a.Actions[i].Action != "cancel_orders" {
			t.Errorf("the dry run's %s has no effect", a.Actions[i].Action)
		}
		// The prediction is said only by the dry run that tells: its
		// text and its expected loss.
		a.Actions[i].Effect, a.Actions[i].ExpectedLossBefore, a.Actions[i].ExpectedLossAfter = "", nil, nil
	}
	if !reflect.DeepEqual(a.Actions, b.Actions) {
		t.Errorf("tallied actions\n%+v\nwant (effects aside)\n%+v", b.Actions, a.Actions)
	}
	for _, r := range tallied.auditRecords() {
		if r.Type == "action" {
			t.Errorf("a tallied dry run audited %+v", r)
		}
	}
	if n := len(phases(told.auditRecords(), "cancel_orders")); n != 2 {
		t.Errorf("the dry run audited %d phases of its cancel, want 2", n)
	}
	if settings, cancels := tallied.fx.calls(); len(settings)+len(cancels) != 0 {
		t.Fatalf("a tallied dry run sent %v %v", settings, cancels)
	}
}

func TestIndexOutageTakesNoAction(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{}, overMax, nearLiq)
	h.fx.idxErr = errDown
	rep, err := h.e.Tick(context.Background(), at(0))
	if !errors.Is(err, market.ErrIncomplete) || !errors.Is(err, errDown) {
		t.Fatalf("err = %v, want ErrIncomplete wrapping the read error", err)
	}
	if settings, cancels := h.fx.calls(); len(settings)+len(cancels) != 0 {
		t.Fatalf("acted without index prices: %v %v", settings, cancels)
	}
	for _, tr := range rep.Transitions {
		if tr.To != alert.NoData {
			t.Errorf("transition %+v, want nodata only", tr)
		}
	}
	if len(rep.Transitions) != 4 {
		t.Errorf("transitions = %d, want 4 (2 rules × 2 positions)", len(rep.Transitions))
	}
	// Prices are back: the rules act in the same tick.
	h.fx.idxErr = nil
	h.tick(2)
	if settings, _ := h.fx.calls(); len(settings) != 1 {
		t.Errorf("no action once prices returned: %v", settings)
	}
}

func TestMissingIndexSkipsOnlyThatSymbol(t *testing.T) {
	t.Parallel()
	r := rules.Rule{Name: "cancel-all", When: "true", Cooldown: time.Hour, Actions: []rules.Action{{Kind: rules.CancelOrders}}}
	h := newHarness(t, Config{}, r)
	delete(h.fx.index, "BTC")
	h.tick(0)
	if _, cancels := h.fx.calls(); !slices.Equal(cancels, []string{"XETH"}) {
		t.Fatalf("cancels = %v, want XETH only", cancels)
	}
}

func TestPositionsOutage(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{}, overMax)
	h.fx.posErr = errDown
	rep, err := h.e.Tick(context.Background(), at(0))
	if !errors.Is(err, market.ErrIncomplete) {
		t.Fatalf("err = %v", err)
	}
	if len(rep.Transitions) != 0 || rep.Positions != 0 {
		t.Errorf("report %+v, want nothing evaluated", rep)
	}
}

func TestBreakerOpens(t *testing.T) {
	t.Parallel()
	r := rules.Rule{Name: "cancel-always", When: "true", Cooldown: 0, Actions: []rules.Action{{Kind: rules.CancelOrders}}}
	h := newHarness(t, Config{MaxActionsPerMinute: 3, BreakerReset: time.Minute}, r)
	for sec := 0; sec < 20; sec += 2 {
		h.tick(sec)
	}
	_, cancels := h.fx.calls()
	if len(cancels) != 3 {
		t.Fatalf("cancels = %d, want 3 (the budget)", len(cancels))
	}
	notes := h.notes.all()
	if !slices.ContainsFunc(notes, func(s string) bool { return strings.HasPrefix(s, "breaker: circuit breaker OPEN") }) {
		t.Errorf("no breaker notification in %q", notes)
	}
	// After the reset the breaker closes and actions resume.
	h.tick(80)
	if _, cancels := h.fx.calls(); len(cancels) != 5 {
		t.Errorf("cancels after reset = %d, want 5", len(cancels))
	}
}

func TestRestartKeepsCooldown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := rules.Rule{Name: "cancel-near", When: "liquidationDistance < 0.05", Cooldown: time.Minute,
		Actions: []rules.Action{{Kind: rules.CancelOrders}}}
	cfg := Config{StateFile: filepath.Join(dir, "state.json")}
	fx := newFake()
	start := func() *Engine {
		e, err := New(cfg, &rules.Set{Rules: []*rules.Rule{rule(t, r)}}, Deps{Reader: fx, Actuator: fx})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := start()
	if _, err := e.Tick(context.Background(), at(0)); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = start()
	for _, sec := range []int{10, 30, 59} {
		if _, err := e.Tick(context.Background(), at(sec)); err != nil {
			t.Fatal(err)
		}
	}
	if _, cancels := fx.calls(); len(cancels) != 1 {
		t.Fatalf("cancels across a restart inside the cooldown = %d, want 1", len(cancels))
	}
	if _, err := e.Tick(context.Background(), at(60)); err != nil {
		t.Fatal(err)
	}
	if _, cancels := fx.calls(); len(cancels) != 2 {
		t.Fatalf("cancels after the cooldown = %d, want 2", len(cancels))
	}
}

func TestSettingsNotAppliedIsAnError(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{}, overMax)
	h.fx.ignoreSettings = true
	rep := h.tick(0)
	if len(rep.Actions) != 1 || !errors.Is(rep.Actions[0].Err, act.ErrNotApplied) {
		t.Fatalf("actions = %+v, want one ErrNotApplied", rep.Actions)
	}
	if got := phases(h.auditRecords(), "lower_leverage"); !slices.Equal(got, []string{"intended", "sent", "error"}) {
		t.Errorf("audit phases = %v", got)
	}
	if !slices.ContainsFunc(h.notes.all(), func(s string) bool { return strings.HasPrefix(s, "action_failed: FAILED lower_leverage") }) {
		t.Errorf("no failure notification: %q", h.notes.all())
	}
	// Retried on the next tick, not in a tight loop.
	h.tick(2)
	if settings, _ := h.fx.calls(); len(settings) != 2 {
		t.Errorf("settings calls = %d, want a retry on the next tick", len(settings))
	}
}

func TestReloadKeepsStateOfUnchangedRules(t *testing.T) {
	t.Parallel()
	r := rules.Rule{Name: "cancel-near", When: "liquidationDistance < 0.05", Cooldown: time.Hour,
		Actions: []rules.Action{{Kind: rules.CancelOrders}}}
	h := newHarness(t, Config{}, r)
	h.tick(0)
	h.e.Update(at(1), &rules.Set{Rules: []*rules.Rule{rule(t, r)}})
	h.tick(2)
	if _, cancels := h.fx.calls(); len(cancels) != 1 {
		t.Fatalf("an unchanged rule acted again after reload: %v", cancels)
	}
	changed := r
	changed.When = "liquidationDistance < 0.06"
	h.e.Update(at(3), &rules.Set{Rules: []*rules.Rule{rule(t, changed)}})
	h.tick(4)
	if _, cancels := h.fx.calls(); len(cancels) != 2 {
		t.Fatalf("a changed rule starts afresh: cancels = %v, want 2", cancels)
	}
}

func TestStaleIndexIsNoData(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{StaleAfter: 5 * time.Second}, nearLiq)
	h.fx.positions = h.fx.positions[1:]
	h.tick(0)
	h.tick(4)
	rep := h.tick(8)
	if len(rep.Transitions) != 1 || rep.Transitions[0].To != alert.NoData || !strings.Contains(rep.Transitions[0].Reason, "unchanged") {
		t.Fatalf("transitions = %+v, want nodata for a stale index", rep.Transitions)
	}
	h.fx.setIndex("ETH", "3001")
	rep = h.tick(10)
	if len(rep.Transitions) != 1 || rep.Transitions[0].To != alert.Inactive {
		t.Fatalf("transitions = %+v, want back to inactive", rep.Transitions)
	}
}

func TestSteadyStateReads(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{}, overMax)
	for i := range 10 {
		h.tick(i * 2)
	}
	if h.fx.trades != 1 || h.fx.reads != 10 {
		t.Fatalf("trades = %d, positions reads = %d; want 1 and 10", h.fx.trades, h.fx.reads)
	}
	// A position on a new symbol triggers one refresh.
	h.fx.symbols = append(h.fx.symbols, symbol(4, "XDOG", "DOG", 10))
	h.fx.positions = append(h.fx.positions, position(4, exchange.Long, 3, true, "1000", "0.2", "0.1"))
	h.fx.index["DOG"] = dec("0.2")
	rep := h.tick(30)
	if h.fx.trades != 2 || rep.Positions != 3 {
		t.Fatalf("trades = %d, positions = %d; want a refresh and 3 positions", h.fx.trades, rep.Positions)
	}
	h.tick(32)
	if h.fx.trades != 2 {
		t.Fatalf("trades = %d after a steady tick, want 2", h.fx.trades)
	}
	// So does a new symbol at the place of a known one (the reader keeps
	// the ids it found by place).
	h.fx.symbols = append(h.fx.symbols, symbol(5, "XPEP", "PEP", 10))
	h.fx.positions[len(h.fx.positions)-1] = position(5, exchange.Long, 3, true, "1000", "0.2", "0.1")
	h.fx.index["PEP"] = dec("0.2")
	rep = h.tick(34)
	if h.fx.trades != 3 || rep.Positions != 3 {
		t.Fatalf("trades = %d, positions = %d; want a refresh and 3 positions", h.fx.trades, rep.Positions)
	}
}

func TestRuntimeErrorMarksRuleUnhealthy(t *testing.T) {
	t.Parallel()
	bad := rules.Rule{Name: "bad", When: `int(position.direction) > 0`, Cooldown: time.Minute, Actions: []rules.Action{{Kind: rules.CancelOrders}}}
	h := newHarness(t, Config{}, bad, overMax)
	h.tick(0)
	settings, cancels := h.fx.calls()
	if len(cancels) != 0 || len(settings) != 1 {
		t.Fatalf("calls = %v %v; the healthy rule must still act", settings, cancels)
	}
}

// A call the exchange refuses for good (4xx) waits for the cooldown instead
// of spending the budget every tick; a transient failure is retried on the
// next tick, then backs off: ticks 0 and 2 send, 4 waits, 6 sends.
func TestRefusedActionWaitsForCooldown(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		err       error
		wantCalls int
	}{
		{"refused", &exchange.APIError{Status: 400, Code: "INSUFFICIENT_MARGIN"}, 1},
		{"rate limited", &exchange.APIError{Status: 429, Code: "RATE_LIMITED"}, 3},
		{"server error", &exchange.APIError{Status: 503, Code: "SERVICE_UNAVAILABLE"}, 3},
		{"network", errDown, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, Config{}, overMax)
			h.fx.settingsErr = tt.err
			for _, sec := range []int{0, 2, 4, 6} {
				h.tick(sec)
			}
			if settings, _ := h.fx.calls(); len(settings) != tt.wantCalls {
				t.Fatalf("settings calls over 4 ticks = %d, want %d", len(settings), tt.wantCalls)
			}
		})
	}
}

func TestUnreachableNotifiesOnceAndRecovers(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{UnreachableAfter: 10 * time.Second}, overMax)
	h.fx.posErr = errDown
	for sec := 0; sec <= 20; sec += 2 {
		h.e.Tick(context.Background(), at(sec))
	}
	count := func(prefix string) int {
		n := 0
		for _, m := range h.notes.all() {
			if strings.HasPrefix(m, prefix) {
				n++
			}
		}
		return n
	}
	if n := count("exchange: exchange unreachable for 10s"); n != 1 {
		t.Fatalf("unreachable notifications = %d, want 1: %q", n, h.notes.all())
	}
	h.fx.posErr = nil
	h.tick(22)
	if n := count("exchange: exchange reachable again after 22s"); n != 1 {
		t.Fatalf("recovery notifications = %d: %q", n, h.notes.all())
	}
}

// A rule with a notify action sends one message when it fires, not a firing
// message and its notify action's message.
func TestOneMessagePerFiring(t *testing.T) {
	t.Parallel()
	r := overMax
	r.Actions = append(slices.Clone(r.Actions), rules.Action{Kind: rules.Notify})
	h := newHarness(t, Config{}, r, nearLiq)
	h.tick(0)
	var overMaxMsgs, nearLiqFiring int
	for _, m := range h.notes.all() {
		if strings.Contains(m, "over-max-leverage on XBTC") || strings.Contains(m, "over-max-leverage firing on XBTC") {
			overMaxMsgs++
		}
		if strings.HasPrefix(m, "firing: near-liquidation firing on XBTC") {
			nearLiqFiring++
		}
	}
	if overMaxMsgs != 1 {
		t.Errorf("messages about over-max-leverage firing = %d, want 1: %q", overMaxMsgs, h.notes.all())
	}
	if nearLiqFiring != 1 {
		t.Errorf("a rule without a notify action still announces its firing: %q", h.notes.all())
	}
}

// A dry run must not start cooldowns a live guard would read from the
// state file: the live run acts at once.
func TestDryRunDoesNotPersistCooldowns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fx := newFake()
	start := func(dry bool) *Engine {
		e, err := New(Config{DryRun: dry, StateFile: filepath.Join(dir, "state.json")}, &rules.Set{Rules: []*rules.Rule{rule(t, overMax)}},
			Deps{Reader: fx, Actuator: fx})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := start(true)
	if _, err := e.Tick(context.Background(), at(0)); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = start(false)
	if _, err := e.Tick(context.Background(), at(1)); err != nil {
		t.Fatal(err)
	}
	if settings, _ := fx.calls(); len(settings) != 1 {
		t.Fatalf("live run after a dry run: %d settings calls, want 1", len(settings))
	}
}

// A target the exchange refused is never sent again unchanged: after the
// cooldown a smaller cut, halfway, is tried.
func TestRefusedTargetNotResentUnchanged(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{}, overMax) // overMax: cooldown 5m
	h.fx.settingsErr = &exchange.APIError{Status: 400, Code: "INSUFFICIENT_BALANCE"}
	h.tick(0)
	h.tick(301) // after the cooldown
	settings, _ := h.fx.calls()
	if len(settings) != 2 || settings[0].s.Leverage != 20 || settings[1].s.Leverage != 23 {
		t.Fatalf("settings calls = %v, want 25→20 refused, then 23 (halfway)", settings)
	}
	if !strings.Contains(strings.Join(h.notes.all(), "\n"), "the exchange refused 20x from 25x before: trying 23x") {
		t.Errorf("notifications do not say why 23x: %q", h.notes.all())
	}
}

// Status shows the breaker as the last tick left it, tick after tick: as
// calls are taken, while it is open and sends nothing, and once it closed
// (the tick copies the breaker only when it changed).
func TestStatusBreakerFollowsTheTicks(t *testing.T) {
	t.Parallel()
	r := rules.Rule{Name: "cancel-always", When: "true", Cooldown: 0, Actions: []rules.Action{{Kind: rules.CancelOrders}}}
	h := newHarness(t, Config{MaxActionsPerMinute: 3, BreakerReset: time.Minute}, r)
	sent, open, closed := map[int]bool{}, false, false
	for _, sec := range []int{0, 2, 4, 6, 8, 10, 70, 72, 80, 82} {
		h.tick(sec)
		now := at(sec)
		want := h.e.disp.Breaker()
		want.Prune(now)
		got := h.e.Status(now).Breaker
		if got.Sent != len(want.Sent) || got.Open != want.Open(now) || !got.OpenUntil.Equal(want.OpenUntil) && got.Open {
			t.Errorf("at %ds: Status's breaker %+v, the dispatcher's %d sent, open %t until %s", sec, got, len(want.Sent), want.Open(now), want.OpenUntil)
		}
		sent[got.Sent], closed, open = true, closed || open && !got.Open, open || got.Open
	}
	// Two positions: two calls in the first tick, the third opens it; it
	// closes after the reset.
	if !sent[2] || !sent[3] || !open || !closed {
		t.Errorf("the breaker's counts %v, open %t, closed again %t: want 2, 3, open, then closed", sent, open, closed)
	}
}
