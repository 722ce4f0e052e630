package backtest_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/backtest"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/shopspring/decimal"
)

// failingHistory proves the cache is read: any request fails.
type failingHistory struct{}

func (failingHistory) IndexHistory(context.Context, string, url.Values) ([][]decimal.Decimal, error) {
	return nil, errors.New("no network in this test")
}

func TestFetchHistoryPagesAndCaches(t *testing.T) {
	t.Parallel()
	at := t0
	ex, err := sim.New(sim.Config{Key: "k", Secret: "s", Seed: 9, Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 31 {
		at = t0.Add(time.Duration(i) * time.Second)
		ex.Step(at)
	}
	srv := httptest.NewServer(ex)
	t.Cleanup(srv.Close)
	c, err := exchange.New(srv.URL, "k", "s", exchange.WithRateLimit(0, 0), exchange.WithClock(func() time.Time { return at }))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	from, to := t0.Add(5*time.Second), t0.Add(25*time.Second)
	var progress []int
	dir := t.TempDir()
	opt := backtest.HistoryOptions{CacheDir: dir, PageSize: 7, Progress: func(name string, n int, _ time.Time) {
		if name == "BTC" {
			progress = append(progress, n)
		}
	}}
	read := func(hc backtest.HistoryClient) []backtest.Step {
		t.Helper()
		hs, err := backtest.FetchHistory(ctx, hc, []string{"BTC", "SOL"}, from, to, opt)
		if err != nil {
			t.Fatal(err)
		}
		defer hs.Close()
		var steps []backtest.Step
		for {
			st, err := hs.Next()
			if err != nil {
				break
			}
			steps = append(steps, st)
		}
		return steps
	}
	steps := read(c)
	if len(steps) != 21 {
		t.Fatalf("%d steps, want 21 (5 s..25 s)", len(steps))
	}
	if want := []int{7, 14, 21}; len(progress) != 3 || progress[2] != 21 {
		t.Errorf("progress %v, want %v", progress, want)
	}
	all, err := c.IndexHistory(ctx, "BTC", url.Values{"from": {"0"}, "limit": {"100"}})
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range steps {
		w := all[i+5]
		if st.Time.UnixMilli() != w[0].IntPart() || !st.Prices["BTC"].Equal(w[1]) || len(st.Prices) != 2 {
			t.Errorf("step %d = %s %v, want %s BTC %s and SOL", i, st.Time, st.Prices, w[0], w[1])
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("cache holds %d files, want 2", len(entries))
	}
	// The second read comes from the cache.
	again := read(failingHistory{})
	if len(again) != len(steps) || !again[20].Prices["SOL"].Equal(steps[20].Prices["SOL"]) {
		t.Errorf("cached read differs: %d steps", len(again))
	}
	// A failed fetch leaves no partial cache file behind.
	if _, err := backtest.FetchHistory(ctx, failingHistory{}, []string{"ETH"}, from, to, opt); err == nil {
		t.Error("a failing fetch returned no error")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("cache holds %d files after a failed fetch, want 2", len(entries))
	}
}
