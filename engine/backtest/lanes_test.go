package backtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

var lanesT0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// memSource replays steps held in memory; fail, when set, is returned
// instead of the step at that index; cancel is called before it.
type memSource struct {
	steps  []Step
	i      int
	fail   map[int]error
	cancel map[int]context.CancelFunc
}

func (s *memSource) Next() (Step, error) {
	if s.i == len(s.steps) {
		return Step{}, io.EOF
	}
	i := s.i
	s.i++
	if c := s.cancel[i]; c != nil {
		c()
	}
	if err := s.fail[i]; err != nil {
		return Step{}, err
	}
	st := s.steps[i]
	// The step is the caller's: a fresh map each time.
	st.Prices = make(map[string]decimal.Decimal, len(s.steps[i].Prices))
	for k, v := range s.steps[i].Prices {
		st.Prices[k] = v
	}
	return st, nil
}

// walkSteps are n steps, three minutes apart, of seeded random walks of
// the default scenario's indexes, wide enough that rules fire, act and
// resolve, and now and then a position is liquidated.
func walkSteps(n int) []Step {
	r := rand.New(rand.NewPCG(7, 11))
	level := map[string]float64{"BTC": 65000, "ETH": 3000, "SOL": 150, "DOGE": 0.15}
	scale := map[string]int32{"BTC": 1, "ETH": 2, "SOL": 3, "DOGE": 5}
	var out []Step
	for i := range n {
		st := Step{Time: lanesT0.Add(time.Duration(3*i) * time.Minute), Prices: map[string]decimal.Decimal{}}
		// In a fixed order: each name draws its own numbers, run after run.
		for _, name := range []string{"BTC", "DOGE", "ETH", "SOL"} {
			v := level[name]
			if i%7 == 3 && name == "DOGE" {
				continue // a name missing keeps its last price
			}
			v *= math.Exp(0.004*r.NormFloat64() - 0.002*math.Log(v/startOf(name)))
			level[name] = v
			st.Prices[name] = decimal.NewFromFloat(v).Round(scale[name])
		}
		out = append(out, st)
	}
	return out
}

func startOf(name string) float64 {
	return map[string]float64{"BTC": 65000, "ETH": 3000, "SOL": 150, "DOGE": 0.15}[name]
}

const lanesRules = `
rules:
  - name: near
    when: liquidationDistance < 0.06
    keep_firing_for: 6m
    cooldown: 9m
    actions:
      - action: cancel_orders
      - action: lower_leverage
        leverage: position.leverage - 1
  - name: cross-near
    when: position.cross && liquidationDistance < 0.2
    for: 3m
    actions:
      - action: set_isolated
  - name: watch
    when: liquidationDistance < 0.1
    actions:
      - action: notify
`

func lanesSet(t *testing.T) *rules.Set {
	t.Helper()
	set, err := rules.Parse("lanes.yaml", []byte(lanesRules))
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// both runs the same data serially and with the unguarded run on its own
// goroutine, and fails unless the results are the same.
func both(t *testing.T, opt Options, src func() Source) *Result {
	t.Helper()
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	opt.serial = true
	serial, err := Run(context.Background(), src(), opt)
	if err != nil {
		t.Fatalf("serial: %v", err)
	}
	opt.serial = false
	r := &replay{opt: opt}
	if !r.concurrent() {
		t.Fatal("the runs would not be concurrent")
	}
	conc, err := Run(context.Background(), src(), opt)
	if err != nil {
		t.Fatalf("concurrent: %v", err)
	}
	if !reflect.DeepEqual(serial, conc) {
		t.Errorf("the results differ:\nserial:     %s\nconcurrent: %s", Summary(serial), Summary(conc))
		for i := range min(len(serial.Warnings), len(conc.Warnings)) {
			if serial.Warnings[i] != conc.Warnings[i] {
				t.Errorf("warning %d: %q vs %q", i, serial.Warnings[i], conc.Warnings[i])
				break
			}
		}
		if !reflect.DeepEqual(serial.Equity, conc.Equity) {
			t.Errorf("equity points differ (%d vs %d)", len(serial.Equity), len(conc.Equity))
		}
	}
	if Summary(serial) != Summary(conc) {
		t.Error("the summaries differ")
	}
	return conc
}

// TestConcurrentRunsMatchSerial: the unguarded run on its own goroutine
// (with the data read ahead) gives the result of the runs taking turns,
// field for field: over many batches, with ticks between data steps
// (Interval), points thinned many times (a small MaxPoints), and actions,
// firings and liquidations on both sides.
func TestConcurrentRunsMatchSerial(t *testing.T) {
	steps := walkSteps(3 * batchOps)
	for _, tc := range []struct {
		name string
		opt  Options
	}{
		{"one tick a step", Options{MaxPoints: 9}},
		{"ticks between steps", Options{MaxPoints: 50, Interval: time.Minute}},
		{"default bounds", Options{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opt := tc.opt
			opt.Rules, opt.Scenario = lanesSet(t), sim.DefaultScenario()
			res := both(t, opt, func() Source { return &memSource{steps: steps} })
			g := res.Guarded
			acted := 0
			for _, rs := range g.Rules {
				acted += rs.Actions + rs.Firings
			}
			if acted == 0 || len(res.Equity) == 0 || res.Ticks < len(steps) {
				t.Errorf("the data did not exercise the runs: %d actions and firings, %d equity points, %d ticks", acted, len(res.Equity), res.Ticks)
			}
		})
	}
}

// Recorded data changes the positions (puts on every run) and names a
// symbol the exchange does not list (a warning said between ticks): the
// warnings come in the same order as when the runs take turns.
func TestConcurrentRunsMatchSerialOnRecordedData(t *testing.T) {
	at := lanesT0
	ex, err := sim.New(sim.Config{Key: "k", Secret: "s", Seed: 5, Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "session.jsonl.gz")
	rec, err := CreateRecorder(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2*batchOps + 40 {
		at = lanesT0.Add(time.Duration(i) * time.Second)
		ex.Step(at)
		tr := ex.Trades()
		ps := ex.Positions()
		if i%50 == 25 {
			// A position on a symbol not listed (said between ticks), then
			// the trader's own changes: larger positions (put on every
			// run), and one the runs refuse (each run says so).
			ghost := exchange.Position{ID: fmt.Sprintf("ghost-%d", i), SymbolID: 999, Direction: exchange.Long,
				Quantity: decimal.NewFromInt(1), EntryPrice: decimal.NewFromInt(1), Leverage: 2}
			ps = append([]exchange.Position{ghost}, ps...)
			for j := range ps {
				if p := &ps[j]; p.Quantity.IsPositive() && p.SymbolID != 999 {
					p.Quantity = p.Quantity.Add(decimal.New(1, -1))
					if i%100 == 25 {
						p.Direction = "SIDEWAYS"
					}
				}
			}
		}
		if err := rec.Write(Snapshot{Time: at, Positions: ps, IndexPrices: ex.IndexPrices(), Symbols: &tr}); err != nil {
			t.Fatal(err)
		}
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	res := both(t, Options{Rules: lanesSet(t), MaxPoints: 20}, func() Source {
		d, err := OpenData(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	})
	ghosts, refused := 0, 0
	for _, w := range res.Warnings {
		switch {
		case strings.Contains(w, "symbol id 999"):
			ghosts++
		case strings.Contains(w, "SIDEWAYS"):
			refused++
		}
	}
	if ghosts < 2 || refused < 4 {
		t.Errorf("warnings %q: want the unlisted symbol said at least twice, and refused puts on both runs", res.Warnings)
	}
}

// A cancelled backtest and a source failing mid-way end with their error,
// and leave no goroutine of the runs or of the reading ahead behind.
func TestConcurrentRunsStop(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	steps := walkSteps(4 * batchOps)
	before := runtime.NumGoroutine()
	boom := errors.New("disk read error")
	for _, tc := range []struct {
		name string
		src  func(cancel context.CancelFunc) *memSource
		want error
	}{
		{"cancelled", func(c context.CancelFunc) *memSource {
			return &memSource{steps: steps, cancel: map[int]context.CancelFunc{2*batchOps + 10: c}}
		}, context.Canceled},
		{"source error", func(context.CancelFunc) *memSource {
			return &memSource{steps: steps, fail: map[int]error{batchOps + 3: boom}}
		}, boom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			_, err := Run(ctx, tc.src(cancel), Options{Rules: lanesSet(t), Scenario: sim.DefaultScenario()})
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	// The goroutines end as Run returns; give the scheduler a moment.
	n := runtime.NumGoroutine()
	for i := 0; i < 100 && n > before; i++ {
		time.Sleep(10 * time.Millisecond)
		n = runtime.NumGoroutine()
	}
	if n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}
