package backtest_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/backtest"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// generator is a stream of one-minute index prices for n symbols: seeded
// geometric random walks, made as they are read, never stored.
type generator struct {
	n, left int
	at      time.Time
	level   []float64
	names   []string
	rng     *rand.Rand
}

func newGenerator(symbols, minutes int) *generator {
	g := &generator{n: symbols, left: minutes, at: t0, rng: rand.New(rand.NewPCG(42, 7))}
	for i := range symbols {
		g.level = append(g.level, 100)
		g.names = append(g.names, fmt.Sprintf("C%d", i))
	}
	return g
}

func (g *generator) Next() (backtest.Step, error) {
	if g.left == 0 {
		return backtest.Step{}, io.EOF
	}
	g.left--
	st := backtest.Step{Time: g.at, Prices: make(map[string]decimal.Decimal, g.n)}
	for i := range g.n {
		// 0.1% a minute, with a mean pull so a year stays in range.
		g.level[i] *= math.Exp(0.001*g.rng.NormFloat64() - 0.0005*math.Log(g.level[i]/100))
		// In cents, as a recorded or CSV source parses "123.45": one
		// integer, not a float's digits rounded in big integers.
		st.Prices[g.names[i]] = decimal.New(int64(math.Round(g.level[i]*100)), -2)
	}
	g.at = g.at.Add(time.Minute)
	return st, nil
}

// genScenario holds one long position on each generated symbol, isolated at
// 5× (liquidation near 80.5, about 20% below the start), with open orders.
func genScenario(symbols int) *sim.Scenario {
	sc := &sim.Scenario{Currencies: []string{"USDT"}, Balance: decimal.NewFromInt(1_000_000), OpenOrders: map[string]int{}}
	two := 2
	for i := range symbols {
		base := fmt.Sprintf("C%d", i)
		sym := fmt.Sprintf("X%d", i)
		sc.Currencies = append(sc.Currencies, base)
		sc.Contracts = append(sc.Contracts, sim.ContractSpec{
			SymbolSpec: sim.SymbolSpec{Name: sym, Base: base, Quote: "USDT", BaseScale: 2, QuoteScale: 2},
			RiskLimit:  sim.RiskLimitSpec{MaxLeverage: 20, MaintenanceMarginRate: decimal.RequireFromString("0.005")},
		})
		sc.Positions = append(sc.Positions, sim.PositionSpec{Symbol: sym, Direction: exchange.Long,
			Quantity: decimal.NewFromInt(100), EntryPrice: decimal.NewFromInt(100), Leverage: 5})
		sc.Indexes = append(sc.Indexes, sim.IndexSpec{Name: base, Scale: &two, Points: []sim.PricePoint{{Price: decimal.NewFromInt(100)}}})
		sc.OpenOrders[sym] = 3
	}
	return sc
}

// genRules are ten rules of the kinds users write; most evaluations are
// false, as in a calm market.
func genRules(t testing.TB) *rules.Set {
	var b strings.Builder
	b.WriteString("rules:\n")
	for i := range 10 {
		fmt.Fprintf(&b, `  - name: distance-%d
    when: liquidationDistance < 0.%02d && position.leverage >= 2
    for: %dm
    keep_firing_for: 1m
    actions:
      - action: cancel_orders
      - action: lower_leverage
        leverage: position.leverage - 1
`, i, 5+i, i%3)
	}
	return parseRules(t, b.String())
}

// BenchmarkReplay replays b.N one-minute steps of 10 symbols × 10 rules
// through the guarded and unguarded runs. evals/s counts the position-rule
// evaluations of both runs.
func BenchmarkReplay(b *testing.B) {
	set := genRules(b)
	b.ReportAllocs()
	b.ResetTimer()
	res, err := backtest.Run(context.Background(), newGenerator(10, b.N), backtest.Options{Rules: set, Scenario: genScenario(10)})
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	evals := res.Guarded.Evaluations + res.Unguarded.Evaluations
	b.ReportMetric(float64(evals)/b.Elapsed().Seconds(), "evals/s")
	b.ReportMetric(float64(evals)/float64(b.N), "evals/step")
}

// heapProbe wraps a source and reads the live heap every `every` steps.
type heapProbe struct {
	backtest.Source
	every, n int
	heap     []uint64
}

func (h *heapProbe) Next() (backtest.Step, error) {
	if h.n++; h.n%h.every == 0 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		h.heap = append(h.heap, m.HeapAlloc)
	}
	return h.Source.Next()
}

// BenchmarkStreamingMemory checks that streaming keeps memory flat: the live
// heap during the second half of a 140,000-step replay (10 symbols ×
// 10 rules) stays within 8 MiB of the heap at its middle, and the result is
// bounded. (The exchanges' index histories are bounded to a few samples;
// scripts/replay-year.sh measures the RSS of a whole year.) It is a benchmark, not a test, because it takes tens
// of seconds; it reports the heap in KiB.
func BenchmarkStreamingMemory(b *testing.B) {
	set := genRules(b)
	const steps = 140_000
	for range b.N {
		probe := &heapProbe{Source: newGenerator(10, steps), every: 10_000}
		res, err := backtest.Run(context.Background(), probe, backtest.Options{Rules: set, Scenario: genScenario(10)})
		if err != nil {
			b.Fatal(err)
		}
		mid := probe.heap[len(probe.heap)/2]
		peak := slices.Max(probe.heap[len(probe.heap)/2:])
		b.ReportMetric(float64(mid>>10), "heap-KiB-mid")
		b.ReportMetric(float64(peak>>10), "heap-KiB-peak-2nd-half")
		if peak > mid+8<<20 {
			b.Errorf("heap grew from %d KiB to %d KiB: %v", mid>>10, peak>>10, probe.heap)
		}
		for _, s := range res.Symbols {
			if len(s.Points) > 2000 || len(s.Points) < 1000 {
				b.Errorf("%s: %d points, want 1000..2000", s.Symbol, len(s.Points))
			}
		}
		if res.Steps != steps {
			b.Errorf("%d steps, want %d", res.Steps, steps)
		}
	}
}
