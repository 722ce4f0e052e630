package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/engine/control"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/web"
	"github.com/shopspring/decimal"
)

// Compile-time checks that the engine and its control service are what
// the server reads and actuates.
var (
	_ web.Guard    = (*engine.Engine)(nil)
	_ web.Controls = (*control.Service)(nil)
)

// t0 is the fixed clock of these tests.
var t0 = time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC)

const testToken = "s3cret-control-token"

// fakeGuard is a Guard with a fixed status.
type fakeGuard struct {
	mu       sync.Mutex
	status   *engine.Status
	last     time.Time
	inFlight []engine.CallInFlight
	// liquidated are the symbols kept marked as liquidated, and by whom
	// each acknowledgement was made.
	liquidated map[string]bool
	ackedBy    []string
}

func (g *fakeGuard) AckLiquidation(_ context.Context, _ time.Time, symbol, by string) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.liquidated[symbol] {
		return 0, fmt.Errorf("%w of %s", engine.ErrNoLiquidation, symbol)
	}
	delete(g.liquidated, symbol)
	g.ackedBy = append(g.ackedBy, by)
	return 1, nil
}

func (g *fakeGuard) Status(now time.Time) *engine.Status {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.status == nil {
		return &engine.Status{Time: now, Positions: []engine.PositionStatus{}, Actions: []journal.RecentAction{},
			Silences: []control.Silence{}, Pauses: []control.Pause{}, InFlight: []engine.CallInFlight{}, Liquidations: []engine.LiquidationStatus{}}
	}
	return g.status
}

func (g *fakeGuard) LastSuccess() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.last
}

func (g *fakeGuard) InFlight(time.Time) []engine.CallInFlight {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inFlight
}

// call is one call of fakeControls: its method, clock and arguments
// (without the context).
type call struct {
	method string
	now    time.Time
	args   []any
}

// fakeControls records its calls and answers them with its lists, or
// with err when set.
type fakeControls struct {
	mu       sync.Mutex
	silences []control.Silence
	pauses   []control.Pause
	err      error
	calls    []call
}

func (c *fakeControls) record(method string, now time.Time, args ...any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, call{method, now, args})
	return c.err
}

func (c *fakeControls) recorded() []call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

func (c *fakeControls) Silences(time.Time) []control.Silence {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.silences
}

func (c *fakeControls) Pauses(time.Time) []control.Pause {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pauses
}

func (c *fakeControls) AddSilence(_ context.Context, now time.Time, s control.Silence) (control.Silence, error) {
	if err := c.record("AddSilence", now, s); err != nil {
		return control.Silence{}, err
	}
	s.ID, s.CreatedAt = "s1", now
	if s.StartsAt.IsZero() {
		s.StartsAt = now
	}
	return s, nil
}

func (c *fakeControls) ExpireSilence(_ context.Context, now time.Time, id, by string) error {
	return c.record("ExpireSilence", now, id, by)
}

func (c *fakeControls) Ack(_ context.Context, now time.Time, rule, symbol, by, comment string, until time.Time) (control.Silence, error) {
	if err := c.record("Ack", now, rule, symbol, by, comment, until); err != nil {
		return control.Silence{}, err
	}
	return control.Silence{ID: "a1", Rule: rule, Symbol: symbol, StartsAt: now, EndsAt: until, Ack: true, Comment: comment, CreatedBy: by, CreatedAt: now}, nil
}

func (c *fakeControls) Pause(_ context.Context, now time.Time, p control.Pause) (control.Pause, error) {
	if err := c.record("Pause", now, p); err != nil {
		return control.Pause{}, err
	}
	p.ID, p.StartsAt = "p1", now
	return p, nil
}

func (c *fakeControls) Resume(_ context.Context, now time.Time, rule, symbol, by string) ([]control.Pause, error) {
	if err := c.record("Resume", now, rule, symbol, by); err != nil {
		return nil, err
	}
	return []control.Pause{{ID: "p1", Rule: rule, Symbol: symbol, StartsAt: t0.Add(-time.Hour), CreatedBy: "grace@desk"}}, nil
}

// fakeExchange is fixed exchange figures.
type fakeExchange web.ExchangeStatus

func (e fakeExchange) Snapshot() web.ExchangeStatus { return web.ExchangeStatus(e) }

// env is a server over fakes, with the clock at t0.
type env struct {
	srv      *web.Server
	guard    *fakeGuard
	controls *fakeControls
}

// newEnv builds a server with token ("" disables the control API) and
// opts' other fields filled with fakes where unset.
func newEnv(t *testing.T, token string) *env {
	t.Helper()
	e := &env{guard: &fakeGuard{last: t0.Add(-1500 * time.Millisecond)}, controls: &fakeControls{}}
	srv, err := web.New(web.Options{
		Guard: e.guard, Controls: e.controls,
		Exchange: fakeExchange{Requests: 41, Errors: 1, LastLatencyMs: 12.5, AvgLatencyMs: 20.25,
			LastError: "GET /v1/contracts/positions: Service Unavailable", LastErrorAt: t0.Add(-time.Minute)},
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("riskguard_up 1\n")) }),
		Token:   token, HealthMaxAge: 10 * time.Second,
		Now: func() time.Time { return t0 },
	})
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	return e
}

const (
	loopback = "127.0.0.1:40000"
	remote   = "192.0.2.7:40000"
)

// do serves one request from the client at from, with token ("" for
// none) and body ("" for none).
func (e *env) do(t *testing.T, method, target, from, token, body string) *httptest.ResponseRecorder {
	t.Helper()
	auth := ""
	if token != "" {
		auth = "Bearer " + token
	}
	return e.request(t, method, target, from, auth, body)
}

// request serves one request from the client at from, with the
// Authorization header auth ("" for none) and body ("" for none).
func (e *env) request(t *testing.T, method, target, from, auth, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	req.RemoteAddr = from
	req.Host = "localhost:9464" // httptest's example.com is a foreign name
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	e.srv.ServeHTTP(rec, req)
	return rec
}

// demoStatus is what the engine says of the demo's positions (as
// `riskguard demo` and the simulated exchange start) a few ticks in: the
// XSOL leverage cut, XETH firing a watch rule, XBTC paused.
func demoStatus(now time.Time) *engine.Status {
	dec := decimal.RequireFromString
	dist := func(f float64) *float64 { return &f }
	return &engine.Status{
		Time: now, LastSuccess: now.Add(-1500 * time.Millisecond), SnapshotAge: dist(1.5), LastTick: now.Add(-1500 * time.Millisecond),
		Breaker: engine.BreakerStatus{Sent: 1, Budget: 10},
		Positions: []engine.PositionStatus{
			{Symbol: "XBTC", ID: "1_101", Side: "LONG", Size: dec("0.8"), Leverage: 10, MaxLeverage: 20, MarginMode: "cross",
				Margin: dec("5136"), Index: dec("64911.9"), LiquidationPrice: dec("33101"), Distance: dist(0.49),
				Rules:      []engine.RuleStatus{{Rule: "watch-xeth", State: "inactive"}, {Rule: "over-max-leverage", State: "inactive"}},
				Thresholds: []engine.DistanceThreshold{}},
			{Symbol: "XETH", ID: "1_102", Side: "SHORT", Size: dec("12"), Leverage: 20, MaxLeverage: 25, MarginMode: "isolated",
				Margin: dec("1830"), Index: dec("3005.92"), LiquidationPrice: dec("3172"), Distance: dist(0.0552),
				Rules: []engine.RuleStatus{{Rule: "watch-xeth", State: "firing", Since: now.Add(-40 * time.Second), Next: "notified; cooling down until 09:28:13 UTC"},
					{Rule: "over-max-leverage", State: "inactive"}},
				Thresholds: []engine.DistanceThreshold{{Rule: "watch-xeth", Severity: "critical", Below: 0.06}}},
			{Symbol: "XSOL", ID: "1_103", Side: "LONG", Size: dec("400"), Leverage: 10, MaxLeverage: 10, MarginMode: "isolated",
				Margin: dec("6080"), Index: dec("149.85"), LiquidationPrice: dec("136.4"), Distance: dist(0.0897),
				Rules:      []engine.RuleStatus{{Rule: "watch-xeth", State: "inactive"}, {Rule: "over-max-leverage", State: "inactive"}},
				Thresholds: []engine.DistanceThreshold{}},
		},
		Actions: []journal.RecentAction{
			{Time: now.Add(-39 * time.Second), Symbol: "XETH", Action: "notify", Rules: []string{"watch-xeth"}, Outcome: "sent"},
			{Time: now.Add(-40 * time.Second), Symbol: "XSOL", Action: "lower_leverage", Rules: []string{"over-max-leverage"}, Outcome: "sent",
				From: 15, To: 10, Effect: "liquidation 144.907 → 136.4", Actual: "liquidation 136.4"},
		},
		Silences: []control.Silence{{ID: "a1", Rule: "watch-xeth", Symbol: "XETH", StartsAt: now.Add(-30 * time.Second), Ack: true,
			Comment: "known", CreatedBy: "frank@desk", CreatedAt: now.Add(-30 * time.Second)}},
		Pauses:       []control.Pause{{ID: "p1", Symbol: "XBTC", StartsAt: now.Add(-20 * time.Second), Comment: "rolling", CreatedBy: "grace@desk"}},
		InFlight:     []engine.CallInFlight{{Symbol: "XSOL", Call: "POST /v1/contracts/positions/XSOL/margin", Since: now.Add(-2 * time.Second), Running: 2}},
		Liquidations: []engine.LiquidationStatus{},
		Stress: &engine.StressStatus{Time: now.Add(-5 * time.Second), ExpectedLoss: 84.3, Likely: 3,
			Sigma: []engine.SigmaStatus{{Symbol: "XBTC", Sigma: 0.02}, {Symbol: "XETH", Sigma: 0.02}, {Symbol: "XSOL", Sigma: 0.02}},
			Fatal: []string{"+5.40% (+2.7σ, every index together) liquidates XETH SHORT <b>"},
			Moves: []engine.StressMove{
				{Sigma: -2, Together: 3253.33, TogetherLost: []string{"XSOL LONG"}, Alone: 3253.33, AloneSymbol: "XSOL", AloneLost: []string{"XSOL LONG"}},
				{Sigma: -1, TogetherLost: []string{}, AloneLost: []string{}},
				{Sigma: 3, Together: 2310, TogetherLost: []string{"XETH SHORT <b>"}, Alone: 2310, AloneSymbol: "XETH <i>", AloneLost: []string{"XETH SHORT <b>"}}}},
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.After(d)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("timed out after %s waiting for %s", d, what)
		case <-tick.C:
		}
	}
}
