package backtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/backtest"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/shopspring/decimal"
)

// Compile-time: the real client serves bars.
var _ backtest.BarsClient = (*exchange.Client)(nil)

// barsSim is a simulated exchange that has lived 20 minutes, a sample
// every 10 s from t0, and the real client to it.
func barsSim(t *testing.T) (*sim.Exchange, *exchange.Client) {
	t.Helper()
	at := t0
	ex, err := sim.New(sim.Config{Key: "k", Secret: "s", Seed: 9, Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 121 {
		at = t0.Add(time.Duration(i) * 10 * time.Second)
		ex.Step(at)
	}
	srv := httptest.NewServer(ex)
	t.Cleanup(srv.Close)
	c, err := exchange.New(srv.URL, "k", "s", exchange.WithRateLimit(0, 0), exchange.WithClock(func() time.Time { return at }))
	if err != nil {
		t.Fatal(err)
	}
	return ex, c
}

// drainHistory drains a history source.
func drainHistory(t *testing.T, hs *backtest.HistorySource) []backtest.Step {
	t.Helper()
	defer hs.Close()
	var steps []backtest.Step
	for range 100_000 {
		st, err := hs.Next()
		if errors.Is(err, io.EOF) {
			return steps
		}
		if err != nil {
			t.Fatal(err)
		}
		steps = append(steps, st)
	}
	t.Fatal("the source never ends")
	return nil
}

// barCalls counts the bars requests the simulated exchange served.
func barCalls(ex *sim.Exchange) map[string]int {
	n := map[string]int{}
	for _, c := range ex.Calls() {
		if c.Route == "/v1/market/bars/{symbol}/{type}" {
			n[c.Path]++
		}
	}
	return n
}

// Bars paged four at a time from 2m30s to 12m59s: eleven one-minute bars
// (from the one holding from), each a step at its
// open time with its close under the index; one symbol per index; the
// second fetch reads the cache and asks nothing.
func TestFetchBarsPagesAndCaches(t *testing.T) {
	t.Parallel()
	ex, c := barsSim(t)
	ctx := context.Background()
	from, to := t0.Add(150*time.Second), t0.Add(12*time.Minute+59*time.Second)
	var progress []string
	dir := t.TempDir()
	opt := backtest.HistoryOptions{CacheDir: dir, PageSize: 4, Progress: func(name string, n int, reached time.Time) {
		progress = append(progress, fmt.Sprintf("%s %d %s", name, n, reached.Sub(t0)))
	}}
	symbols := map[string]string{"XBTC": "BTC", "BTC_USDT": "BTC", "XSOL": "SOL"}
	hs, err := backtest.FetchBars(ctx, c, symbols, "1m", from, to, opt)
	if err != nil {
		t.Fatal(err)
	}
	steps := drainHistory(t, hs)
	if len(steps) != 11 {
		t.Fatalf("%d steps, want 11 (2m..12m)", len(steps))
	}
	wantProgress := []string{"BTC_USDT 4 5m0s", "BTC_USDT 8 9m0s", "BTC_USDT 11 12m0s", "XSOL 4 5m0s", "XSOL 8 9m0s", "XSOL 11 12m0s"}
	if fmt.Sprint(progress) != fmt.Sprint(wantProgress) {
		t.Errorf("progress %v, want %v", progress, wantProgress)
	}
	if got := barCalls(ex); len(got) != 2 || got["/v1/market/bars/BTC_USDT/1m"] != 3 || got["/v1/market/bars/XSOL/1m"] != 3 {
		t.Errorf("bars calls %v, want 3 pages of BTC_USDT and of XSOL", got)
	}
	for _, sym := range []string{"BTC_USDT", "XSOL"} {
		raw, err := c.Bars(ctx, sym, "1m", url.Values{"from": {"0"}, "limit": {"100"}})
		if err != nil {
			t.Fatal(err)
		}
		var all [][]decimal.Decimal
		if err := json.Unmarshal(raw, &all); err != nil {
			t.Fatal(err)
		}
		index := symbols[sym]
		for i, st := range steps {
			w := all[i+2]
			if st.Time.UnixMilli() != w[0].IntPart() || !st.Prices[index].Equal(w[4]) || len(st.Prices) != 2 {
				t.Errorf("step %d = %s %v, want %s %s %s (close) and one other", i, st.Time, st.Prices, w[0], index, w[4])
			}
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("cache holds %d files, want 2", len(entries))
	}

	ex.ResetCalls()
	progress = nil
	hs, err = backtest.FetchBars(ctx, c, symbols, "1m", from, to, opt)
	if err != nil {
		t.Fatal(err)
	}
	again := drainHistory(t, hs)
	if n := len(barCalls(ex)); n != 0 || progress != nil {
		t.Errorf("the second fetch asked for bars %d times, progress %v", n, progress)
	}
	if len(again) != len(steps) || !again[10].Prices["SOL"].Equal(steps[10].Prices["SOL"]) {
		t.Errorf("cached read differs: %d steps", len(again))
	}

	// Another bar type or price mode is another cache file.
	opt.BarPrices = backtest.BarOHLC
	hs, err = backtest.FetchBars(ctx, c, map[string]string{"XSOL": "SOL"}, "5m", from, to, opt)
	if err != nil {
		t.Fatal(err)
	}
	if ohlc := drainHistory(t, hs); len(ohlc) <= 3 || ohlc[0].Time != t0 {
		t.Errorf("5m ohlc gave %d steps from %v, want more than its 3 bars from t0", len(ohlc), ohlc)
	}
	if got := barCalls(ex); got["/v1/market/bars/XSOL/5m"] != 1 {
		t.Errorf("bars calls %v, want one page of XSOL 5m", got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 3 {
		t.Errorf("cache holds %d files, want 3", len(entries))
	}
}

// fixedBars serves the same bars whatever the query.
type fixedBars string

func (b fixedBars) Bars(context.Context, string, string, url.Values) (json.RawMessage, error) {
	return json.RawMessage(b), nil
}

// What a bar becomes in each price mode, with the times inside the bar.
func TestFetchBarsPrices(t *testing.T) {
	t.Parallel()
	m := func(min int) int64 { return t0.Add(time.Duration(min) * time.Minute).UnixMilli() }
	bars := fixedBars(fmt.Sprintf(`[[%d,100,110,90,105,7],[%d,105,106,95,96,3],[%d,96,96,96,96,1],[%d,96,99,96,99,2]]`, m(0), m(4), m(8), m(12)))
	for _, tc := range []struct {
		mode backtest.BarPrices
		want string
	}{
		{"", "0s 105, 4m0s 96, 8m0s 96, 12m0s 99"},
		{backtest.BarClose, "0s 105, 4m0s 96, 8m0s 96, 12m0s 99"},
		{backtest.BarOHLC, "0s 100, 1m0s 90, 2m0s 110, 3m0s 105, " + // up bar: low first
			"4m0s 105, 5m0s 106, 6m0s 95, 7m0s 96, " + // down bar: high first
			"8m0s 96, " + // flat: one step
			"12m0s 96, 14m0s 99"}, // low = open and close = high: left out
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			t.Parallel()
			hs, err := backtest.FetchBars(context.Background(), bars, map[string]string{"XSOL": "SOL"}, "4m", t0, t0.Add(12*time.Minute),
				backtest.HistoryOptions{CacheDir: t.TempDir(), BarPrices: tc.mode})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, st := range drainHistory(t, hs) {
				got = append(got, fmt.Sprintf("%s %s", st.Time.Sub(t0), st.Prices["SOL"]))
			}
			if g := strings.Join(got, ", "); g != tc.want {
				t.Errorf("got  %s\nwant %s", g, tc.want)
			}
		})
	}
}

func TestBarPeriod(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"1m", time.Minute}, {"15m", 15 * time.Minute}, {"4h", 4 * time.Hour}, {"1d", 24 * time.Hour}, {"1w", 7 * 24 * time.Hour},
		{"", 0}, {"m", 0}, {"1", 0}, {"0m", 0}, {"-1m", 0}, {"+1m", 0}, {"1M", 0}, {"1s", 0}, {"x1m", 0}, {"9999d", 0},
	} {
		got, err := backtest.BarPeriod(tc.in)
		if got != tc.want || (err == nil) != (tc.want != 0) {
			t.Errorf("BarPeriod(%q) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}

// A bar type the exchange does not serve fails the fetch and caches
// nothing; a malformed one, or rows that are not bars, fail too.
func TestFetchBarsErrors(t *testing.T) {
	t.Parallel()
	ex, c := barsSim(t)
	ctx := context.Background()
	dir := t.TempDir()
	opt := backtest.HistoryOptions{CacheDir: dir}
	from, to := t0, t0.Add(10*time.Minute)
	one := map[string]string{"XSOL": "SOL"}

	_, err := backtest.FetchBars(ctx, c, one, "2m", from, to, opt)
	var apiErr *exchange.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 400 || apiErr.Field != "type" || !strings.Contains(err.Error(), "fetch bars XSOL 2m") {
		t.Errorf("bar type 2m: %v, want the exchange's 400 on type", err)
	}
	if _, err := backtest.FetchBars(ctx, c, map[string]string{"NOPE": "SOL"}, "1m", from, to, opt); !errors.As(err, &apiErr) || apiErr.Status != 404 {
		t.Errorf("unknown symbol: %v, want a 404", err)
	}
	ex.ResetCalls()
	if _, err := backtest.FetchBars(ctx, c, one, "1x", from, to, opt); err == nil || !strings.Contains(err.Error(), `bar type "1x"`) {
		t.Errorf("bar type 1x: %v", err)
	}
	if _, err := backtest.FetchBars(ctx, c, one, "1m", from, to, backtest.HistoryOptions{CacheDir: dir, BarPrices: "mid"}); err == nil {
		t.Error("bar prices mid: no error")
	}
	if n := len(barCalls(ex)); n != 0 {
		t.Errorf("malformed options made %d calls", n)
	}
	for _, tc := range []struct{ name, body, want string }{
		{"short row", `[[1,2,3]]`, "a bar has 3 fields"},
		{"not numbers", `[["a"]]`, "decode bars"},
		{"out of order", `[[60000,1,1,1,1,1],[0,1,1,1,1,1]]`, "out of order"},
	} {
		if _, err := backtest.FetchBars(ctx, fixedBars(tc.body), one, "1m", from, to, opt); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("failed fetches left %d cache files", len(entries))
	}
}
