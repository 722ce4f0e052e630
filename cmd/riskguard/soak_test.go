package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// soakRules keep actions coming: XSOL is put back at 15x over a max of 10x
// every so often, XETH's orders are cancelled every 30 s, and positions
// near liquidation are isolated.
const soakRules = `rules:
  - name: over-max-leverage
    when: position.leverage > riskLimit.maxLeverage
    cooldown: 10s
    actions:
      - action: lower_leverage
        leverage: riskLimit.maxLeverage
  - name: eth-orders
    when: position.symbol == "XETH"
    cooldown: 30s
    actions:
      - action: cancel_orders
  - name: near-liquidation
    when: liquidationDistance < 0.03
    cooldown: 1m
    actions:
      - action: cancel_orders
      - action: set_isolated
`

// simClock is the soak's clock: the engine's tick time, the client's
// signing clock and the exchange's clock all read it.
type simClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *simClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *simClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// soakFault draws one fault for the seeded schedule.
func soakFault(r *rand.Rand) (string, sim.Fault, string) {
	routes := []string{"/v1/contracts/positions", "/v1/market/indexPrices", "/v1/market/trades", "/v1/market/timestamp",
		"/v1/contracts/positions/{symbol}/settings", "/v1/contracts/orders/{symbol}/cancel", "*"}
	route := routes[r.IntN(len(routes))]
	times := 1 + r.IntN(3)
	kinds := []struct {
		name string
		f    sim.Fault
	}{
		{"500", sim.Fault{Status: 500}},
		{"502", sim.Fault{Status: 502}},
		{"503", sim.Fault{Status: 503}},
		{"429", sim.Fault{Status: 429}},
		{"429+Retry-After", sim.Fault{Status: 429, RetryAfter: time.Second}},
		{"malformed", sim.Fault{Malformed: true}},
		{"truncated", sim.Fault{Truncated: true}},
		{"html", sim.Fault{HTML: true}},
		{"success:false", sim.Fault{Body: `{"success":false,"error":"INTERNAL_ERROR","errorMessage":"busy","data":null}`}},
		{"400", sim.Fault{Status: 400}},
		{"stale", sim.Fault{Stale: true}},
		{"timeout", sim.Fault{Latency: 150 * time.Millisecond}},
	}
	k := kinds[r.IntN(len(kinds))]
	if k.name == "timeout" && r.IntN(4) != 0 {
		k = kinds[0] // timeouts cost real time: keep them rarer
	}
	f := k.f
	f.Times = times
	return route, f, k.name
}

// partialFault is a fault on part of an answer or on one symbol: the
// issue-12 faults the soak injects besides the whole-call ones.
type partialFault struct {
	name   string
	route  string
	fault  sim.Fault
	symbol string // the symbol it blinds: no action on it while it lasts ("" for none)
	empty  bool   // the positions answer is empty: no action at all
}

// soakPartial draws one partial fault: one unreadable position, one NaN
// index, one unreadable spot symbol, an empty positions answer, one
// symbol's settings failing or answered not applied, one symbol's cancel
// hanging past the client's timeout.
func soakPartial(r *rand.Rand, ex *sim.Exchange) partialFault {
	times := 1 + r.IntN(3)
	syms := []string{"XBTC", "XETH", "XSOL"}
	sym := syms[r.IntN(len(syms))]
	base := map[string]string{"XBTC": "BTC", "XETH": "ETH", "XSOL": "SOL"}
	switch r.IntN(7) {
	case 0:
		k := -1
		if p, ok := ex.Position(sym); ok {
			for i, q := range ex.Positions() {
				if q.ID == p.ID {
					k = i
				}
			}
		}
		if k < 0 {
			break
		}
		return partialFault{name: "bad position", route: "/v1/contracts/positions", symbol: sym,
			fault: sim.Fault{Item: &sim.ItemFault{Path: fmt.Sprintf("%d.riskLevel", k), Value: `"x"`}, Times: times}}
	case 1:
		return partialFault{name: "NaN index", route: "/v1/market/indexPrices", symbol: sym,
			fault: sim.Fault{Item: &sim.ItemFault{Path: base[sym], Value: `"NaN"`}, Times: times}}
	case 2:
		return partialFault{name: "bad spot symbol", route: "/v1/market/trades",
			fault: sim.Fault{Item: &sim.ItemFault{Path: "spotsSymbols.0.baseScale", Value: `"x"`}, Times: times}}
	case 3:
		return partialFault{name: "empty positions", route: "/v1/contracts/positions", empty: true, fault: sim.Fault{Empty: true, Times: 1}}
	case 4:
		return partialFault{name: "one symbol's settings failing", route: "/v1/contracts/positions/" + sym + "/settings",
			fault: sim.Fault{Status: 503, Times: 1 + r.IntN(5)}}
	case 5:
		return partialFault{name: "one symbol's settings not applied", route: "/v1/contracts/positions/" + sym + "/settings",
			fault: sim.Fault{NotApplied: true, Times: times}}
	}
	return partialFault{name: "one symbol's cancel hanging", route: "/v1/contracts/orders/" + sym + "/cancel",
		fault: sim.Fault{Latency: 150 * time.Millisecond, Times: 1}}
}

// soakFigures are what a soak measured.
type soakFigures struct {
	ticks, failedTicks, faults, actions, mutating int
	partial                                       int
	heapStart, heapEnd                            uint64
	goroutinesStart, goroutinesEnd                int
	fdsStart, fdsEnd                              int
}

func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

// actionKey ties a mutating call to its audit record: the tick time (the
// exchange's clock is the engine's), the symbol and the endpoint.
type actionKey struct {
	t        int64
	symbol   string
	endpoint string // settings or cancel
}

func endpointOf(action string) string {
	if action == "cancel_orders" {
		return "cancel"
	}
	return "settings"
}

// TestSoak runs the engine and the client against the simulated exchange
// for many ticks of a simulated clock (1 s per tick) with random faults on
// a seeded schedule. It checks that no tick whose snapshot was incomplete
// acted, that every mutating call the exchange saw is in the audit log, and
// that goroutines, heap and file descriptors come back to their baseline.
// 1,500 ticks by default; RISKGUARD_SOAK=long runs 10,000.
func TestSoak(t *testing.T) {
	ticks := 1500
	if os.Getenv("RISKGUARD_SOAK") == "long" {
		ticks = 10_000
	}
	seed := uint64(20260301)
	fig := soak(t, ticks, seed)
	t.Logf("soak (seed %d): %d ticks (%d incomplete), %d faults injected (%d partial), %d actions (%d mutating calls seen by the exchange)",
		seed, fig.ticks, fig.failedTicks, fig.faults, fig.partial, fig.actions, fig.mutating)
	t.Logf("heap after GC: %.1f MiB at start, %.1f MiB at end; goroutines %d → %d; open fds %d → %d",
		float64(fig.heapStart)/(1<<20), float64(fig.heapEnd)/(1<<20), fig.goroutinesStart, fig.goroutinesEnd, fig.fdsStart, fig.fdsEnd)
}

func soak(t *testing.T, ticks int, seed uint64) soakFigures {
	dir := t.TempDir()
	clk := &simClock{t: time.Now().Truncate(time.Second)}
	// Index paths sampled every minute, not every second: the exchange
	// keeps each sample for its history endpoint, and its growth would hide
	// the guard's in the heap figures.
	scen := sim.DefaultScenario()
	for i := range scen.Indexes {
		scen.Indexes[i].Interval = sim.Duration(time.Minute)
		if w := scen.Indexes[i].Walk; w != nil {
			w.Volatility *= 8 // about the same moves per hour as at 1 s
		}
	}
	ex, err := sim.New(sim.Config{Key: "soak-key", Secret: "soak-secret", Seed: int64(seed), Now: clk.Now, Scenario: scen})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ex)
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 4}
	hc := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	client, err := exchange.New(srv.URL, "soak-key", "soak-secret",
		exchange.WithHTTPClient(hc), exchange.WithClock(clk.Now), exchange.WithTimeout(100*time.Millisecond),
		exchange.WithRetry(exchange.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond, MaxElapsed: 500 * time.Millisecond}),
		exchange.WithRateLimit(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	set, err := rules.Parse("soak.yaml", []byte(soakRules))
	if err != nil {
		t.Fatal(err)
	}
	auditPath := filepath.Join(dir, "audit.jsonl")
	eng, err := engine.New(engine.Config{Interval: time.Second, AuditLog: auditPath, StateFile: filepath.Join(dir, "state.json"),
		StaleAfter: 5 * time.Minute, MaxActionsPerMinute: 10, BreakerReset: time.Minute},
		set, engine.Deps{Reader: client, Actuator: client, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sched := rand.New(rand.NewPCG(seed, 0x50a4))
	var (
		fig       soakFigures
		sent      = map[actionKey]bool{} // what the exchange saw
		warmup    = max(ticks/10, 100)
		lastReput int
		// the partial faults in force: by symbol, and until which tick
		blind       = map[string]partialFault{}
		blindUntil  = map[string]int{}
		emptyTick   = -1
		ethReopened []time.Time // XETH liquidated and reopened: a new position, a new cooldown
	)
	tick := func(i int, faults bool) {
		clk.advance(time.Second)
		now := clk.Now()
		ex.Step(now)
		if faults && sched.Float64() < 0.15 {
			// A fault replaces the one on its route: what that one blinded
			// is seen again.
			replaced := func(route string) {
				for sym, pf := range blind {
					if pf.route == route {
						delete(blind, sym)
					}
				}
				if route == "/v1/contracts/positions" {
					emptyTick = -1
				}
			}
			if sched.IntN(2) == 0 {
				route, f, _ := soakFault(sched)
				replaced(route)
				ex.InjectFault(route, f)
			} else if pf := soakPartial(sched, ex); pf.route != "" {
				replaced(pf.route)
				ex.InjectFault(pf.route, pf.fault)
				fig.partial++
				if pf.symbol != "" {
					blind[pf.symbol] = pf
					blindUntil[pf.symbol] = i + pf.fault.Times - 1
				}
				if pf.empty {
					emptyTick = i
				}
			}
			fig.faults++
		}
		// Keep something to do: XSOL back over its max, XETH with orders,
		// liquidated positions reopened at the index.
		if i-lastReput >= 45 {
			lastReput = i
			if p, ok := ex.Position("XETH"); ok && p.Empty {
				ethReopened = append(ethReopened, now)
			}
			sol, _ := ex.IndexPrice("SOL")
			if err := ex.PutPosition(sim.PositionSpec{Symbol: "XSOL", Direction: exchange.Long, Quantity: decimal.NewFromInt(400), EntryPrice: sol, Leverage: 15}); err != nil {
				t.Fatal(err)
			}
			if p, ok := ex.Position("XETH"); ok && p.Empty {
				eth, _ := ex.IndexPrice("ETH")
				if err := ex.PutPosition(sim.PositionSpec{Symbol: "XETH", Direction: exchange.Short, Quantity: decimal.NewFromInt(12), EntryPrice: eth, Leverage: 20}); err != nil {
					t.Fatal(err)
				}
			}
			ex.SetBalance(decimal.NewFromInt(20000))
		}
		if ex.OpenOrders("XETH") == 0 {
			ex.AddOrders("XETH", 2)
		}
		rep, err := eng.Tick(ctx, now)
		calls := ex.Calls()
		ex.ResetCalls()
		mutating := 0
		for _, c := range calls {
			if !c.Mutating {
				continue
			}
			mutating++
			parts := strings.Split(strings.TrimPrefix(c.Path, "/v1/contracts/"), "/")
			if len(parts) != 3 || !c.Time.Equal(now) {
				t.Fatalf("tick %d: unexpected mutating call %+v", i, c)
			}
			sent[actionKey{now.UnixNano(), parts[1], parts[2]}] = true
			// No action on missing data: a symbol whose position could
			// not be read is not acted on, nor any when the answer was
			// empty. (A NaN index blinds the rules that read it; the audit
			// check below holds those.)
			if pf, ok := blind[parts[1]]; ok && i <= blindUntil[parts[1]] && pf.name == "bad position" {
				t.Fatalf("tick %d: %s on %s while its position was unreadable", i, parts[2], parts[1])
			}
			if emptyTick == i {
				t.Fatalf("tick %d: %s on %s on an empty positions answer", i, parts[2], parts[1])
			}
		}
		for sym, pf := range blind {
			if pf.name != "NaN index" || i > blindUntil[sym] {
				continue
			}
			for _, a := range rep.Actions {
				if a.Symbol == sym && (a.Outcome == "sent" || a.Outcome == "error") && slices.Contains(a.Rules, "near-liquidation") {
					t.Fatalf("tick %d: near-liquidation acted on %s while its index was NaN: %+v", i, sym, a)
				}
			}
		}
		fig.mutating += mutating
		fig.ticks++
		for _, a := range rep.Actions {
			if a.Outcome == "sent" || a.Outcome == "error" {
				fig.actions++
			}
		}
		if err != nil {
			if !errors.Is(err, market.ErrIncomplete) {
				t.Fatalf("tick %d: %v", i, err)
			}
			fig.failedTicks++
			if mutating > 0 {
				t.Fatalf("tick %d acted on an incomplete snapshot (%v): %d mutating calls, actions %+v", i, err, mutating, rep.Actions)
			}
			for _, a := range rep.Actions {
				if a.Action != "notify" {
					t.Fatalf("tick %d reported an action on an incomplete snapshot: %+v", i, a)
				}
			}
		}
	}
	for i := range warmup {
		tick(i, false)
	}
	tr.CloseIdleConnections()
	fig.heapStart, fig.goroutinesStart, fig.fdsStart = heapAfterGC(), runtime.NumGoroutine(), openFDs(t)
	for i := warmup; i < ticks; i++ {
		tick(i, true)
	}
	ex.ClearFaults()
	for i := ticks; i < ticks+20; i++ { // the faults end: a clean finish
		tick(i, false)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}

	// Every mutating call the exchange saw was sent by an action the audit
	// log has, at the same tick time; and every sent action reached it.
	audited := map[actionKey]bool{}
	var lastEthCancel time.Time
	f, err := os.Open(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r journal.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		if r.Type == "action" && r.Phase == "sent" {
			audited[actionKey{r.Time.UnixNano(), r.Symbol, endpointOf(r.Action)}] = true
		}
		// Cooldowns hold through empty answers and unreadable items: two
		// cancels by eth-orders on one XETH position are 30 s apart.
		if r.Type == "action" && r.Phase == "result" && r.Symbol == "XETH" && slices.Contains(r.Rules, "eth-orders") {
			reopened := slices.ContainsFunc(ethReopened, func(t time.Time) bool { return t.After(lastEthCancel) && !t.After(r.Time) })
			if !lastEthCancel.IsZero() && !reopened && r.Time.Sub(lastEthCancel) < 30*time.Second {
				t.Errorf("eth-orders cancelled XETH at %s and again at %s, within its 30 s cooldown", lastEthCancel, r.Time)
			}
			lastEthCancel = r.Time
		}
	}
	f.Close()
	for k := range sent {
		if !audited[k] {
			t.Errorf("the exchange saw %s on %s at %s; the audit log has no such action", k.endpoint, k.symbol, time.Unix(0, k.t).UTC())
		}
	}
	for k := range audited {
		if !sent[k] {
			t.Errorf("the audit log sent %s on %s at %s; the exchange never saw it", k.endpoint, k.symbol, time.Unix(0, k.t).UTC())
		}
	}
	if fig.actions == 0 || fig.faults == 0 || fig.partial == 0 {
		t.Errorf("a soak with %d actions and %d faults proves little", fig.actions, fig.faults)
	}

	// Goroutines and descriptors settle once idle connections are closed.
	tr.CloseIdleConnections()
	deadline := time.After(5 * time.Second)
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
settle:
	for {
		fig.goroutinesEnd, fig.fdsEnd = runtime.NumGoroutine(), openFDs(t)
		if fig.goroutinesEnd <= fig.goroutinesStart+2 && fig.fdsEnd <= fig.fdsStart+2 {
			break
		}
		select {
		case <-deadline:
			break settle
		case <-poll.C:
		}
	}
	fig.heapEnd = heapAfterGC()
	if fig.goroutinesEnd > fig.goroutinesStart+2 {
		buf := make([]byte, 1<<20)
		t.Errorf("goroutines %d at the end, %d at the start:\n%s", fig.goroutinesEnd, fig.goroutinesStart, buf[:runtime.Stack(buf, true)])
	}
	if fig.fdsEnd > fig.fdsStart+2 {
		t.Errorf("open file descriptors %d at the end, %d at the start", fig.fdsEnd, fig.fdsStart)
	}
	if limit := fig.heapStart + 2<<20; fig.heapEnd > limit {
		t.Errorf("heap %s at the end, %s at the start (limit %s)", mib(fig.heapEnd), mib(fig.heapStart), mib(limit))
	}
	return fig
}

func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
