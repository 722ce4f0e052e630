package model

import (
	"math"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/engine/window"
)

// seed counts the history's returns as observe would have: an index
// whose price alternates ±1% every 10 s has σ = 1% per √10 s, about
// 19% over the hour, from its history alone; samples closer than 10 s,
// not prices, at or after the first read, or across a gap of more than
// 10 minutes add no return; the returns watched since the first read
// stay counted; a bad print counts as a move of ±0.2 at most.
func TestSeedFromHistory(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	alternating := func(from time.Time, n int, every time.Duration) []window.Sample {
		var out []window.Sample
		p := 100.0
		for i := range n {
			out = append(out, window.Sample{At: from.Add(time.Duration(i) * every), Price: p})
			if i%2 == 0 {
				p *= 1.01
			} else {
				p /= 1.01
			}
		}
		return out
	}
	first := t0.Add(time.Hour)
	want := math.Log(1.01) * math.Sqrt(3600.0/10)
	tests := []struct {
		name  string
		hist  []window.Sample
		n     int     // returns counted
		sigma float64 // 0: the floor
	}{
		{"every 10 s", alternating(first.Add(-600*time.Second), 60, 10*time.Second), 60, want},
		{"every 5 s: every other sample", alternating(first.Add(-600*time.Second), 120, 5*time.Second), 60, 0},
		{"too few", alternating(first.Add(-100*time.Second), 10, 10*time.Second), 10, 0},
		{"a gap of an hour", append(alternating(t0.Add(-time.Hour), 20, 10*time.Second), alternating(first.Add(-100*time.Second), 10, 10*time.Second)...), 29, 0},
		{"not prices, and after the first read", append(alternating(first.Add(-600*time.Second), 60, 10*time.Second),
			window.Sample{At: first, Price: 50}, window.Sample{At: first.Add(time.Second), Price: math.NaN()}, window.Sample{At: first.Add(-time.Second), Price: -1}), 60, want},
		{"none", nil, 0, 0},
		// One print of 1e9 among prices of 100: its two returns count as
		// ±0.2 each, σ about 72% over the hour from these ten minutes (19%
		// without it) instead of 5,600% (checked below).
		{"a bad print", func() []window.Sample {
			h := alternating(first.Add(-600*time.Second), 60, 10*time.Second)
			h[50].Price = 1e9
			return h
		}(), 60, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v volatility
			v.observe(first, []market.Row{{Open: true, HasIndex: true, IndexName: "BTC", IndexF: 100}})
			if len(v.cold) != 1 || v.cold[0] != "BTC" {
				t.Fatalf("cold = %v", v.cold)
			}
			v.seed("BTC", tt.hist)
			x := v.ix["BTC"]
			if x.n != tt.n {
				t.Errorf("returns counted = %d, want %d", x.n, tt.n)
			}
			got := v.sigma("BTC", time.Hour, 0.02)
			if tt.sigma < 0 {
				if got > 1 || got < want {
					t.Errorf("σ with a bad print = %.4f, want it bounded (over %.4f, under 1)", got, want)
				}
				return
			}
			if tt.sigma == 0 {
				if tt.n < volMinReturns && got != 0.02 {
					t.Errorf("σ = %v, want the floor", got)
				}
				return
			}
			if math.Abs(got-tt.sigma) > tt.sigma*0.02 {
				t.Errorf("σ = %.4f, want %.4f", got, tt.sigma)
			}
		})
	}
}

// A fast move is the span of the prices sampled within the window and the
// tick's own: a wick that came back is still one while it is in the
// window; a move spread over more than the window is not; nothing sampled
// is no fast move.
func TestFastMove(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		prices []float64 // one every 10 s from t0
		now    float64   // the tick's price, 10 s after the last
		want   string
	}{
		{"quiet", []float64{100, 100.2, 99.9, 100.1}, 100, ""},
		{"a wick down", []float64{100, 99, 97.5}, 97.9, "BTC moved 2.56% within 5m (100 → 97.5)"},
		{"a wick up and back", []float64{100, 103, 100}, 100, "BTC moved 3.00% within 5m (103 → 100)"},
		{"the tick's own price", []float64{100, 100}, 97, "BTC moved 3.09% within 5m (100 → 97)"},
		{"nothing sampled", nil, 90, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v volatility
			at := t0
			for _, p := range tc.prices {
				v.observe(at, []market.Row{{Open: true, HasIndex: true, IndexName: "BTC", IndexF: p}})
				at = at.Add(volSample)
			}
			if got := v.fast("BTC", at, tc.now, 5*time.Minute, 0.02); got != tc.want {
				t.Errorf("fast = %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("slower than the window", func(t *testing.T) {
		var v volatility
		at := t0
		for i := range 60 { // −0.1% every 10 s: 6% over 10 minutes, 3% over any 5
			v.observe(at, []market.Row{{Open: true, HasIndex: true, IndexName: "BTC", IndexF: 100 * (1 - 0.001*float64(i))}})
			at = at.Add(volSample)
		}
		if got := v.fast("BTC", at, 94, 5*time.Minute, 0.04); got != "" {
			t.Errorf("a 3%% move over any 5 minutes is no 4%% fast move: %q", got)
		}
		if got := v.fast("BTC", at, 94, 5*time.Minute, 0.02); got == "" {
			t.Error("a 3% move within 5 minutes is a 2% fast move")
		}
	})
}
