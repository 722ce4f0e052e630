package backtest_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/backtest"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/shopspring/decimal"
)

// snapshots reads n ticks of the default scenario's exchange, one a second.
func snapshots(t *testing.T, n int) []backtest.Snapshot {
	t.Helper()
	at := t0
	ex, err := sim.New(sim.Config{Key: "k", Secret: "s", Seed: 5, Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	var out []backtest.Snapshot
	for i := range n {
		at = t0.Add(time.Duration(i) * time.Second)
		ex.Step(at)
		tr := ex.Trades()
		out = append(out, backtest.Snapshot{Time: at, Positions: ex.Positions(), IndexPrices: ex.IndexPrices(), Symbols: &tr})
	}
	return out
}

func writeData(t *testing.T, path string, snaps []backtest.Snapshot) {
	t.Helper()
	rec, err := backtest.CreateRecorder(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range snaps {
		if err := rec.Write(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
}

func readAll(t *testing.T, path string) ([]backtest.Step, *backtest.DataReader) {
	t.Helper()
	d, err := backtest.OpenData(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	var steps []backtest.Step
	for {
		st, err := d.Next()
		if errors.Is(err, io.EOF) {
			return steps, d
		}
		if err != nil {
			t.Fatal(err)
		}
		steps = append(steps, st)
	}
}

func TestRecorderRoundTrip(t *testing.T) {
	t.Parallel()
	snaps := snapshots(t, 5)
	for _, name := range []string{"data.jsonl", "data.jsonl.gz"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), name)
			writeData(t, path, snaps)
			steps, d := readAll(t, path)
			if d.Truncated {
				t.Error("a complete file reads as truncated")
			}
			if len(steps) != len(snaps) {
				t.Fatalf("%d steps, want %d", len(steps), len(snaps))
			}
			for i, st := range steps {
				s := snaps[i]
				if !st.Time.Equal(s.Time) {
					t.Errorf("step %d at %s, want %s", i, st.Time, s.Time)
				}
				// Symbols are written once: they did not change.
				if (st.Symbols != nil) != (i == 0) {
					t.Errorf("step %d: symbols present = %t", i, st.Symbols != nil)
				}
				if len(st.Prices) != len(s.IndexPrices) {
					t.Errorf("step %d: %d prices, want %d", i, len(st.Prices), len(s.IndexPrices))
				}
				for n, p := range s.IndexPrices {
					if !st.Prices[n].Equal(p) {
						t.Errorf("step %d: %s = %s, want %s", i, n, st.Prices[n], p)
					}
				}
				if len(st.Positions) != len(s.Positions) {
					t.Fatalf("step %d: %d positions, want %d", i, len(st.Positions), len(s.Positions))
				}
				for j, p := range st.Positions {
					w := s.Positions[j]
					if p.ID != w.ID || p.Leverage != w.Leverage || !p.LiquidationPrice.Equal(w.LiquidationPrice) || !p.Quantity.Equal(w.Quantity) || p.Empty != w.Empty {
						t.Errorf("step %d position %d = %+v, want %+v", i, j, p, w)
					}
				}
			}
			first := steps[0].Symbols
			if len(first.ContractsSymbols) != 4 || first.ContractsSymbols[2].Name != "XSOL" || first.ContractsSymbols[2].RiskLimit.MaxLeverage != 10 {
				t.Errorf("symbols = %+v", first.ContractsSymbols)
			}
		})
	}
}

// A recorder killed mid-write leaves a cut last line (or a gzip stream
// without its end): the ticks written before it are all read.
func TestTruncatedData(t *testing.T) {
	t.Parallel()
	snaps := snapshots(t, 4)
	tests := []struct {
		name string
		gz   bool
		cut  func(b []byte) []byte
		want int
	}{
		{"line cut in half", false, func(b []byte) []byte { return b[:len(b)-40] }, 3},
		{"missing final newline only", false, func(b []byte) []byte { return b[:len(b)-1] }, 4},
		{"gzip without its end", true, nil, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			name := "data.jsonl"
			if tt.gz {
				name += ".gz"
			}
			path := filepath.Join(t.TempDir(), name)
			rec, err := backtest.CreateRecorder(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range snaps {
				if err := rec.Write(s); err != nil {
					t.Fatal(err)
				}
			}
			// No Close: the process was killed. Each Write flushed.
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if tt.cut != nil {
				if err := os.WriteFile(path, tt.cut(b), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			steps, d := readAll(t, path)
			if len(steps) != tt.want {
				t.Errorf("%d steps read, want %d", len(steps), tt.want)
			}
			if wantTrunc := tt.want < len(snaps) || tt.gz; d.Truncated != wantTrunc {
				t.Errorf("Truncated = %t, want %t", d.Truncated, wantTrunc)
			}
		})
	}
}

func TestDataErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, data, want string
	}{
		{"bad json mid-file", "{\"v\":1,\"time\":\"2026-03-02T09:00:00Z\"}\n{nope\n{\"v\":1,\"time\":\"2026-03-02T09:00:01Z\"}\n", "in.jsonl:2: "},
		{"version", "{\"v\":2,\"time\":\"2026-03-02T09:00:00Z\"}\n", "in.jsonl:1: record version 2 is not supported"},
		{"no time", "\n{\"v\":1}\n", "in.jsonl:2: time is missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := backtest.NewDataReader("in.jsonl", strings.NewReader(tt.data))
			var err error
			for range 10 {
				if _, err = d.Next(); err != nil {
					break
				}
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

// A recorded session replays with the state built from its first tick: the
// positions, symbols and balance of the exchange that was recorded.
func TestReplayRecorded(t *testing.T) {
	t.Parallel()
	// Record the default scenario with its SOL path for 100 s.
	at := t0
	ex, err := sim.New(sim.Config{Key: "k", Secret: "s", Seed: 5, Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "session.jsonl.gz")
	rec, err := backtest.CreateRecorder(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		at = t0.Add(time.Duration(i) * time.Second)
		ex.Step(at)
		tr := ex.Trades()
		if err := rec.Write(backtest.Snapshot{Time: at, Positions: ex.Positions(), IndexPrices: ex.IndexPrices(), Symbols: &tr}); err != nil {
			t.Fatal(err)
		}
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if len(ex.Liquidations()) != 1 {
		t.Fatalf("the recorded exchange liquidated %+v, want XSOL", ex.Liquidations())
	}

	d, err := backtest.OpenData(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	res, err := backtest.Run(context.Background(), d, backtest.Options{Rules: parseRules(t, overMaxLeverage)})
	if err != nil {
		t.Fatal(err)
	}
	// The replay without the guard liquidates what the exchange did, when
	// it did; the guard saves XSOL.
	want := ex.Liquidations()[0]
	if len(res.Unguarded.Liquidations) != 1 || res.Unguarded.Liquidations[0].Symbol != "XSOL" || !res.Unguarded.Liquidations[0].Time.Equal(want.Time) {
		t.Errorf("unguarded replay liquidations = %+v, want XSOL at %s", res.Unguarded.Liquidations, want.Time)
	}
	if len(res.Guarded.Liquidations) != 0 {
		t.Errorf("guarded replay liquidations = %+v", res.Guarded.Liquidations)
	}
	// The free balance was inferred from XBTC, the cross position.
	if !res.Unguarded.Balance.Equal(decimal.NewFromInt(20000)) {
		t.Errorf("inferred balance %s, want 20000", res.Unguarded.Balance)
	}
}

func TestScenarioFromInfersBalance(t *testing.T) {
	t.Parallel()
	ex, err := sim.New(sim.Config{Key: "k", Secret: "s"})
	if err != nil {
		t.Fatal(err)
	}
	tr := ex.Trades()
	sc, err := backtest.ScenarioFrom(&tr, ex.Positions(), decimal.Zero)
	if err != nil {
		t.Fatal(err)
	}
	if !sc.Balance.Equal(decimal.NewFromInt(20000)) {
		t.Errorf("balance = %s, want 20000", sc.Balance)
	}
	got := []string{}
	for _, p := range sc.Positions {
		got = append(got, p.Symbol)
	}
	if !reflect.DeepEqual(got, []string{"XBTC", "XETH", "XSOL", "XDOGE"}) {
		t.Errorf("positions %v", got)
	}
	bad := []exchange.Position{{ID: "x", SymbolID: 999}}
	if _, err := backtest.ScenarioFrom(&tr, bad, decimal.Zero); err == nil || !strings.Contains(err.Error(), "symbol id 999") {
		t.Errorf("unknown symbol: err = %v", err)
	}
}
