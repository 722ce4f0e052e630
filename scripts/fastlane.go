//go:build ignore

// fastlane measures the fast lane (engine.fast_interval): the delay from the
// moment an index price crosses a rule's threshold to the moment the
// exchange receives the action's request, and the requests per hour that
// the polling costs.
//
//	go run scripts/fastlane.go                 # 15 s calm, then 70 s volatile
//	go run scripts/fastlane.go -seed 2 -volatile 40s
//
// Three guards run at once, each the real engine with the real signed
// client against its own simulated exchange served over HTTP on 127.0.0.1,
// on the sim's real-time clock: a fixed 2 s interval, 2 s with a 250 ms fast
// lane (fast_distance 5%), and a fixed 250 ms interval. One driver moves the
// four index prices of all three exchanges together every 10 ms along the
// same seeded paths, so every guard sees the same crossings.
//
// The day: a calm phase (every position 20–30% from liquidation), then a
// volatile phase in which each position, independently, goes through
// episodes drawn from the seeded generator. Most episodes are gradual, as
// danger usually builds up: the distance falls from 12–20% to 4.5% over
// 2–5 s, hovers between 3.2% and 4.8% for 0.5–4 s (inside the fast lane's
// 5%, above the rule's 3%), drops through 3% over 0.1–0.5 s, stays under it
// for 2.5–4 s (so that a 2 s guard sees it too) and recovers. One episode in five is a gap: the distance
// jumps from 12–20% to 1.5–2.5% between two 10 ms steps, with no warning the fast
// lane could use. The crossing time is the driver's step that first
// publishes a price under the threshold; it falls anywhere in the guards'
// tick cycles.
//
// The rule is `liquidationDistance < 0.03` with a cancel_orders action and a
// 5 s cooldown; each crossing's delay runs to the first cancel request for
// that symbol that the exchange logs after it. Requests are every request
// the exchange logs, reads and actions, by phase; per hour is the phase's
// count scaled to an hour. A "day" is extrapolated as 23 calm hours and one
// hour like the volatile phase.
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

const (
	threshold = 0.03 // the rule's liquidation distance
	step      = 10 * time.Millisecond
	rateLimit = 15 // requests per second: 3 per 250 ms tick is 12
)

const ruleYAML = `rules:
  - name: near-liquidation
    when: liquidationDistance < 0.03
    cooldown: 5s
    severity: critical
    actions:
      - action: cancel_orders
`

// guardConfig is one configuration measured.
type guardConfig struct {
	name           string
	interval, fast time.Duration
}

var configs = []guardConfig{
	{"fixed 2s", 2 * time.Second, 0},
	{"2s + fast lane 250ms", 2 * time.Second, 250 * time.Millisecond},
	{"fixed 250ms", 250 * time.Millisecond, 0},
}

// symbolSpec is a position of the scenario and its index.
type symbolSpec struct {
	symbol, index string
	side          float64 // +1 long, -1 short
	scale         int32
}

var symbols = []symbolSpec{
	{"XBTC", "BTC", 1, 1},
	{"XETH", "ETH", -1, 2},
	{"XSOL", "SOL", 1, 3},
	{"XDOGE", "DOGE", 1, 5},
}

// scenario is the default one with every position isolated (so that each
// liquidation price depends on its own index alone) and static indexes,
// which the driver sets.
func scenario() *sim.Scenario {
	d := decimal.RequireFromString
	sc := sim.DefaultScenario()
	sc.Positions = []sim.PositionSpec{
		{Symbol: "XBTC", Direction: exchange.Long, Quantity: d("0.8"), EntryPrice: d("64200"), Leverage: 10},
		{Symbol: "XETH", Direction: exchange.Short, Quantity: d("12"), EntryPrice: d("3050"), Leverage: 20},
		{Symbol: "XSOL", Direction: exchange.Long, Quantity: d("400"), EntryPrice: d("152"), Leverage: 10},
		{Symbol: "XDOGE", Direction: exchange.Long, Quantity: d("20000"), EntryPrice: d("0.16"), Leverage: 5},
	}
	for i := range sc.Indexes {
		ix := &sc.Indexes[i]
		start := map[string]string{"BTC": "65000", "ETH": "3010", "SOL": "150", "DOGE": "0.16"}[ix.Name]
		ix.Walk, ix.Points = nil, []sim.PricePoint{{At: 0, Price: d(start)}}
	}
	return sc
}

// path is one symbol's liquidation distance over time: piecewise linear
// between knots, with a small seeded wobble on top.
type path struct {
	knots []knot
	// gaps are the knots reached by a jump rather than a slide.
	gaps map[int]bool
}

type knot struct {
	at time.Duration
	d  float64
}

// plan draws a path: calm until calmFor, then episodes until total.
func plan(rng *rand.Rand, calmFor, total time.Duration) path {
	u := func(a, b float64) float64 { return a + rng.Float64()*(b-a) }
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	p := path{gaps: map[int]bool{}}
	t := time.Duration(0)
	add := func(dt time.Duration, d float64) { t += dt; p.knots = append(p.knots, knot{t, d}) }
	p.knots = append(p.knots, knot{0, u(0.2, 0.3)})
	for t < calmFor {
		add(sec(u(1, 3)), u(0.2, 0.3))
	}
	add(sec(u(1, 3)), u(0.12, 0.2))
	for {
		// The longest episode is about 22 s: stop in time.
		if t > total-22*time.Second {
			add(total-t+time.Second, u(0.12, 0.2))
			return p
		}
		add(sec(u(3, 6)), u(0.12, 0.2)) // a calm gap
		if rng.IntN(5) == 0 {
			p.gaps[len(p.knots)] = true
			add(step, u(0.015, 0.025)) // the gap: one step
			add(sec(u(2.5, 4)), u(0.015, 0.025))
		} else {
			add(sec(u(2, 5)), 0.045)          // danger builds up
			for h := sec(u(0.5, 4)); h > 0; { // hovering near it
				dt := min(h, sec(u(0.3, 0.8)))
				add(dt, u(0.032, 0.048))
				h -= dt
			}
			add(sec(u(0.1, 0.5)), u(0.015, 0.025)) // through the threshold
			add(sec(u(2.5, 4)), u(0.015, 0.025))   // long enough for a 2 s guard to see it
		}
		add(sec(u(1, 3)), u(0.12, 0.2)) // recovery
	}
}

// at is the distance at t.
func (p path) at(t time.Duration) float64 {
	i, _ := slices.BinarySearchFunc(p.knots, t, func(k knot, t time.Duration) int { return int(k.at - t) })
	if i == 0 {
		return p.knots[0].d
	}
	if i >= len(p.knots) {
		return p.knots[len(p.knots)-1].d
	}
	a, b := p.knots[i-1], p.knots[i]
	if p.gaps[i] {
		return b.d
	}
	f := float64(t-a.at) / float64(b.at-a.at)
	return a.d + f*(b.d-a.d)
}

// guard is one configuration running.
type guard struct {
	cfg  guardConfig
	ex   *sim.Exchange
	srv  *httptest.Server
	eng  *engine.Engine
	liq  map[string]decimal.Decimal
	mu   sync.Mutex
	fast time.Duration // time spent waiting at the fast interval, by tick
	// crossings per symbol, on this guard's exchange: when, and a gap or not
	crossings []crossing
}

type crossing struct {
	symbol string
	at     time.Time
	gap    bool
	phase  string
}

func newGuard(c guardConfig, seed int64, set *rules.Set) (*guard, error) {
	ex, err := sim.New(sim.Config{Key: sim.DefaultKey, Secret: sim.DefaultSecret, Seed: seed, Scenario: scenario()})
	if err != nil {
		return nil, err
	}
	g := &guard{cfg: c, ex: ex, srv: httptest.NewServer(ex), liq: map[string]decimal.Decimal{}}
	for _, s := range symbols {
		p, ok := ex.Position(s.symbol)
		if !ok || p.LiquidationPrice.IsZero() {
			return nil, fmt.Errorf("scenario: no liquidation price for %s", s.symbol)
		}
		g.liq[s.symbol] = p.LiquidationPrice
	}
	client, err := exchange.New(g.srv.URL, sim.DefaultKey, sim.DefaultSecret,
		exchange.WithTimeout(5*time.Second), exchange.WithRateLimit(rateLimit, 5))
	if err != nil {
		return nil, err
	}
	ecfg := engine.Config{Interval: c.interval, FastInterval: c.fast, FastDistance: 0.05, MaxActionsPerMinute: 10000}
	g.eng, err = engine.New(ecfg, set, engine.Deps{Reader: client, Actuator: client, Now: time.Now,
		OnTick: func(*engine.TickReport, error) {
			g.mu.Lock()
			defer g.mu.Unlock()
			if c.fast > 0 && g.eng.NextInterval() == c.fast {
				g.fast += c.fast
			}
		}})
	return g, err
}

// price is the index price that puts the symbol's position at distance d.
func (g *guard) price(s symbolSpec, d float64) (decimal.Decimal, float64) {
	liq, _ := g.liq[s.symbol].Float64()
	p := liq / (1 - s.side*d) // long: liq/(1-d); short: liq/(1+d)
	dp := decimal.NewFromFloat(p).Round(s.scale)
	pf, _ := dp.Float64()
	return dp, s.side * (pf - liq) / pf
}

func main() {
	calm := flag.Duration("calm", 15*time.Second, "calm phase")
	volatile := flag.Duration("volatile", 70*time.Second, "volatile phase")
	seed := flag.Int64("seed", 1, "seed of the price paths")
	flag.Parse()
	if err := run(*calm, *volatile, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "fastlane:", err)
		os.Exit(1)
	}
}

func run(calmFor, volFor time.Duration, seed int64) error {
	set, err := rules.Parse("fastlane.yaml", []byte(ruleYAML))
	if err != nil {
		return err
	}
	total := calmFor + volFor
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	paths := make([]path, len(symbols))
	for i := range symbols {
		paths[i] = plan(rng, calmFor, total)
	}
	var guards []*guard
	for _, c := range configs {
		g, err := newGuard(c, seed, set)
		if err != nil {
			return err
		}
		defer g.srv.Close()
		guards = append(guards, g)
	}
	// prev is each symbol's last published distance: a crossing from
	// outside the fast lane's 5% is a gap, one the lane could not see coming.
	prev := make([]float64, len(symbols))
	setAll := func(t time.Duration, start time.Time) {
		for i, s := range symbols {
			price, actual := guards[0].price(s, paths[i].at(t)) // one scenario: one liquidation price
			crossed := actual < threshold && prev[i] >= threshold && !start.IsZero()
			phase := "volatile"
			if t < calmFor {
				phase = "calm"
			}
			for _, g := range guards {
				g.ex.SetIndexPrice(s.index, price)
				if crossed {
					g.crossings = append(g.crossings, crossing{symbol: s.symbol, at: time.Now(), gap: prev[i] >= 0.05, phase: phase})
				}
			}
			prev[i] = actual
		}
	}
	setAll(0, time.Time{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, g := range guards {
		wg.Go(func() { g.eng.Run(ctx) })
	}
	time.Sleep(time.Second) // warm-up: the first ticks read the symbols and the clock offset
	start := time.Now()
	fmt.Fprintf(os.Stderr, "fastlane: %s calm then %s volatile, seed %d, %d symbols, guards on 127.0.0.1…\n", calmFor, volFor, seed, len(symbols))
	tk := time.NewTicker(step)
	for range tk.C {
		t := time.Since(start)
		if t >= total {
			break
		}
		setAll(t, start)
	}
	tk.Stop()
	cancel()
	wg.Wait()
	end := time.Now()
	for _, g := range guards {
		g.eng.Close()
	}
	report(guards, start, start.Add(calmFor), end)
	return nil
}

// delays matches each crossing with the first cancel request for its
// symbol logged at or after it.
func (g *guard) delays() (gradual, gaps []time.Duration, missed int) {
	calls := g.ex.Calls()
	for _, c := range g.crossings {
		found := false
		for _, call := range calls {
			if call.Mutating && strings.Contains(call.Path, "/"+c.symbol+"/cancel") && !call.Time.Before(c.at) {
				d := call.Time.Sub(c.at)
				if c.gap {
					gaps = append(gaps, d)
				} else {
					gradual = append(gradual, d)
				}
				found = true
				break
			}
		}
		if !found {
			missed++
		}
	}
	return gradual, gaps, missed
}

func pct(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(i, 0)]
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%d ms", d.Round(time.Millisecond).Milliseconds())
}

func report(guards []*guard, start, volStart, end time.Time) {
	calmH := volStart.Sub(start).Hours()
	volH := end.Sub(volStart).Hours()
	type row struct {
		name                                string
		p50, p99, max, gapP50, gapMax       time.Duration
		n, gapN, missed                     int
		calmRate, volRate, runRate, dayRate float64
		fastShare                           float64
	}
	var rows []row
	for _, g := range guards {
		gradual, gaps, missed := g.delays()
		var calmN, volN int
		for _, c := range g.ex.Calls() {
			switch {
			case c.Time.Before(start):
			case c.Time.Before(volStart):
				calmN++
			default:
				volN++
			}
		}
		r := row{name: g.cfg.name, p50: pct(gradual, 0.5), p99: pct(gradual, 0.99), max: pct(gradual, 1),
			gapP50: pct(gaps, 0.5), gapMax: pct(gaps, 1), n: len(gradual), gapN: len(gaps), missed: missed,
			calmRate: float64(calmN) / calmH, volRate: float64(volN) / volH}
		r.runRate = float64(calmN+volN) / (calmH + volH)
		r.dayRate = (23*r.calmRate + r.volRate) / 24
		g.mu.Lock()
		r.fastShare = g.fast.Hours() / volH
		g.mu.Unlock()
		rows = append(rows, r)
	}
	base := rows[0]
	fmt.Printf("%-21s | %-30s | %-20s | %-37s | %s\n", "", "gradual crossings → request", "gap crossings", "requests per hour", "")
	fmt.Printf("%-21s | %3s %8s %8s %8s | %3s %7s %7s | %6s %6s %6s %6s %7s | %s\n",
		"guard", "n", "p50", "p99", "max", "n", "p50", "max", "calm", "volat", "run", "×2s", "day×2s", "fast lane")
	for _, r := range rows {
		fmt.Printf("%-21s | %3d %8s %8s %8s | %3d %7s %7s | %6.0f %6.0f %6.0f %5.2f× %6.2f× | %4.0f%%",
			r.name, r.n, ms(r.p50), ms(r.p99), ms(r.max), r.gapN, ms(r.gapP50), ms(r.gapMax),
			r.calmRate, r.volRate, r.runRate, r.runRate/base.runRate, r.dayRate/base.dayRate, 100*r.fastShare)
		if r.missed > 0 {
			fmt.Printf("  (%d crossings without an action)", r.missed)
		}
		fmt.Println()
	}
	fmt.Printf("calm, volat: the phases (%s, %s); run: the whole run; ×2s: vs fixed 2s; day: 23 calm hours + 1 like the volatile phase; fast lane: share of the volatile phase\n",
		volStart.Sub(start).Round(time.Second), end.Sub(volStart).Round(time.Second))
}
