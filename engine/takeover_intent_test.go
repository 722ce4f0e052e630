package engine_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/riskguard/riskguard/rules"
)

// seat is a Leadership a test hands from one engine to another.
type seat struct{ term atomic.Int64 }

func (s *seat) MayAct(time.Time) (bool, string) { return s.term.Load() != 0, "standby (test)" }
func (s *seat) Term() int64                     { return s.term.Load() }

// memShared is a shared state with intents kept as package ha's Seat keeps
// them: SaveState replaces the state's parts but leaves the intents.
type memShared struct {
	mu    sync.Mutex
	parts map[string][]byte
}

func (m *memShared) LoadState(context.Context) (map[string][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]byte{}
	for k, v := range m.parts {
		out[k] = v
	}
	return out, nil
}

func (m *memShared) SaveState(_ context.Context, parts map[string][]byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.parts {
		if !strings.HasPrefix(k, "intents/") {
			delete(m.parts, k)
		}
	}
	for k, v := range parts {
		m.parts[k] = v
	}
	return len(parts), nil
}

func (m *memShared) SaveIntent(_ context.Context, id string, b []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.parts["intents/"+id] = b
	return nil
}

func (m *memShared) DropIntent(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.parts, "intents/"+id)
	return nil
}

// holdCalls passes every request to the exchange, and holds the answer of
// every call whose path has part until release is closed: the leader is
// "killed" while its call is on the wire, after it reached the exchange.
type holdCalls struct {
	ex      *sim.Exchange
	part    string
	release chan struct{}
	calls   atomic.Int32
}

func (h *holdCalls) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && strings.Contains(r.URL.Path, h.part) {
		h.calls.Add(1)
		h.ex.ServeHTTP(w, r)
		<-h.release
		return
	}
	h.ex.ServeHTTP(w, r)
}

// The leader dies right after its call reached the exchange, before it
// saved what became of it: the new leader finds the call's intent in the
// shared state, counts the rule's cooldown from it and does not send the
// call again (issue 30, item 2: the same call 2.1–2.5 s later inside a
// 60 s cooldown, 4 times in 4 kills).
func TestTakeoverDoesNotRepeatTheLastLeadersCall(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, action, part string }{
		{"cancel", "{action: cancel_orders}", "cancel"},
		{"reduce order", "{action: reduce_position, fraction: 0.5}", "/create"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			takeoverOnce(t, c.action, c.part)
		})
	}
}

func takeoverOnce(t *testing.T, action, part string) {
	set, err := rules.Parse("once.yaml", []byte(`rules:
  - name: over-max
    when: position.leverage > riskLimit.maxLeverage
    symbols: [XSOL]
    cooldown: 60s
    actions: [`+action+`]
`))
	if err != nil {
		t.Fatal(err)
	}
	ex, err := sim.New(sim.Config{Key: "k", Secret: "s", Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	h := &holdCalls{ex: ex, part: part, release: make(chan struct{})}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { close(h.release); srv.Close() })
	shared := &memShared{parts: map[string][]byte{}}
	newEngine := func(s *seat) *engine.Engine {
		client, err := exchange.New(srv.URL, "k", "s", exchange.WithRateLimit(0, 0))
		if err != nil {
			t.Fatal(err)
		}
		e, err := engine.New(engine.Config{Interval: 200 * time.Millisecond}, set, engine.Deps{Reader: client, Actuator: client, Leadership: s, Shared: shared})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	sa, sb := &seat{}, &seat{}
	sa.term.Store(1)
	a, b := newEngine(sa), newEngine(sb)
	now := time.Now()
	if _, err := a.Tick(context.Background(), now); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for h.calls.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if h.calls.Load() != 1 {
		t.Fatalf("the leader's call did not reach the exchange")
	}
	// a is killed: it never ticks, collects or saves again. b leads.
	sa.term.Store(0)
	sb.term.Store(2)
	for i := range 5 {
		if _, err := b.Tick(context.Background(), now.Add(time.Duration(2+i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if n := h.calls.Load(); n != 1 {
		t.Fatalf("%d calls reached the exchange inside the 60 s cooldown, want the dead leader's one", n)
	}
}

// loseFirstOrder passes every request to the exchange, and closes the
// connection instead of answering the first order, which the exchange
// filled: a lost answer.
type loseFirstOrder struct {
	ex   *sim.Exchange
	lost atomic.Bool
}

func (l *loseFirstOrder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/create") || l.lost.Swap(true) {
		l.ex.ServeHTTP(w, r)
		return
	}
	l.ex.ServeHTTP(httptest.NewRecorder(), r) // the exchange fills it
	if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
		conn.Close()
	}
}

// The leader's order is filled, its answer lost, and the positions listing
// lags: the read-back shows the position unchanged, so the outcome is
// unknown when the call ends. The leader dies before a read settles it.
// Its intent stays in the shared state until a read settles the order, so
// the new leader takes it as sent and does not decide it afresh on the
// lagging listing. Before, the intent was dropped when the call ended, and
// the new leader sent the order again: two fills (issue 37).
func TestTakeoverKeepsTheIntentOfAnUnknownOutcome(t *testing.T) {
	t.Parallel()
	set, err := rules.Parse("once.yaml", []byte(`rules:
  - name: halve
    when: position.leverage > 1
    symbols: [XSOL]
    cooldown: 60s
    actions: [{action: reduce_position, fraction: 0.5}]
`))
	if err != nil {
		t.Fatal(err)
	}
	ex, err := sim.New(sim.Config{Key: "k", Secret: "s", Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	ex.InjectFault(exchange.DefaultOrderPath, sim.Fault{ListingLags: 3, Times: 1})
	srv := httptest.NewServer(&loseFirstOrder{ex: ex})
	t.Cleanup(srv.Close)
	shared := &memShared{parts: map[string][]byte{}}
	newEngine := func(s *seat) *engine.Engine {
		client, err := exchange.New(srv.URL, "k", "s", exchange.WithRateLimit(0, 0), exchange.WithRetry(exchange.RetryPolicy{MaxAttempts: 1}))
		if err != nil {
			t.Fatal(err)
		}
		e, err := engine.New(engine.Config{Interval: 2 * time.Second}, set, engine.Deps{Reader: client, Actuator: client, Leadership: s, Shared: shared})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	sa, sb := &seat{}, &seat{}
	sa.term.Store(1)
	a, b := newEngine(sa), newEngine(sb)
	now := time.Now()
	rep, err := a.Tick(context.Background(), now)
	if err != nil {
		t.Fatal(err)
	}
	unknown := false
	for _, x := range rep.Actions {
		unknown = unknown || x.Action == "reduce_position" && x.Outcome == "error" && strings.Contains(x.Err.Error(), "outcome unknown")
	}
	if !unknown {
		t.Fatalf("the leader's order did not end with an unknown outcome: %+v", rep.Actions)
	}
	// a dies: it never ticks again. b leads.
	sa.term.Store(0)
	sb.term.Store(2)
	for i := range 4 {
		if _, err := b.Tick(context.Background(), now.Add(time.Duration(1+i)*2*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	orders := 0
	for _, c := range ex.Calls() {
		if c.Method == http.MethodPost && strings.HasSuffix(c.Path, "/create") {
			orders++
		}
	}
	if orders != 1 {
		t.Fatalf("%d orders reached the exchange inside the 60 s cooldown, want the dead leader's one", orders)
	}
}

// The same order settled by the leader's own later read: its intent is
// dropped then, none is left in the shared state.
func TestSettledUnknownOutcomeDropsItsIntent(t *testing.T) {
	t.Parallel()
	set, err := rules.Parse("once.yaml", []byte(`rules:
  - name: halve
    when: position.leverage > 1
    symbols: [XSOL]
    cooldown: 60s
    actions: [{action: reduce_position, fraction: 0.5}]
`))
	if err != nil {
		t.Fatal(err)
	}
	ex, err := sim.New(sim.Config{Key: "k", Secret: "s", Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	ex.InjectFault(exchange.DefaultOrderPath, sim.Fault{ListingLags: 2, Times: 1})
	srv := httptest.NewServer(&loseFirstOrder{ex: ex})
	t.Cleanup(srv.Close)
	shared := &memShared{parts: map[string][]byte{}}
	client, err := exchange.New(srv.URL, "k", "s", exchange.WithRateLimit(0, 0), exchange.WithRetry(exchange.RetryPolicy{MaxAttempts: 1}))
	if err != nil {
		t.Fatal(err)
	}
	s := &seat{}
	s.term.Store(1)
	e, err := engine.New(engine.Config{Interval: 2 * time.Second}, set, engine.Deps{Reader: client, Actuator: client, Leadership: s, Shared: shared})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	intents := func() int {
		shared.mu.Lock()
		defer shared.mu.Unlock()
		n := 0
		for k := range shared.parts {
			if strings.HasPrefix(k, "intents/") {
				n++
			}
		}
		return n
	}
	if _, err := e.Tick(context.Background(), now); err != nil {
		t.Fatal(err)
	}
	if n := intents(); n != 1 {
		t.Fatalf("%d intents after the order of unknown outcome, want its one", n)
	}
	for i := range 3 {
		if _, err := e.Tick(context.Background(), now.Add(time.Duration(1+i)*2*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if n := intents(); n != 0 {
		t.Errorf("%d intents left once a read settled the order", n)
	}
}
