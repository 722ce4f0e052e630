package engine

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
