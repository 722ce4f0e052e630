package main

import (
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/shopspring/decimal"
)

// exchangeClock is the simulated exchange's clock: fixed while a test
// writes the index history of the past, then ours plus offset (an
// exchange ahead of us, or behind).
type exchangeClock struct {
	mu     sync.Mutex
	fixed  time.Time
	offset time.Duration
}

func (c *exchangeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.fixed.IsZero() {
		return c.fixed
	}
	return time.Now().Add(c.offset)
}

func (c *exchangeClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fixed = t
}

// newHistoryEnv is a guard whose exchange runs offset from our clock and
// holds BTC's index history of the span before now, one sample a second at
// price(age), age being how long before now the sample is, by our clock.
func newHistoryEnv(t *testing.T, offset, span time.Duration, price func(age time.Duration) float64, rulesYAML string) *guardEnv {
	t.Helper()
	now := time.Now().Truncate(time.Second)
	clk := &exchangeClock{fixed: now.Add(offset - span - time.Second), offset: offset}
	ex, err := sim.New(sim.Config{Key: sim.DefaultKey, Secret: sim.DefaultSecret, Seed: 7, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	for age := span; age > 0; age -= time.Second {
		clk.set(now.Add(offset - age))
		ex.SetIndexPrice("BTC", decimal.NewFromFloat(price(age)).Round(2))
	}
	clk.set(time.Time{}) // from here on: our clock plus offset
	srv := httptest.NewServer(ex)
	t.Cleanup(srv.Close)
	g := &guardEnv{t: t, ex: ex, url: srv.URL, dir: t.TempDir()}
	g.config = filepath.Join(g.dir, "riskguard.yaml")
	// The warm-up reads the history after the tick's snapshot, and its
	// pages (5 of them for 6h) took more than the default 3s
	// max_snapshot_age under -race on a loaded CPU: the first tick's
	// action was then skipped on a snapshot too old. These tests are about
	// the windows being warm; TestFaultNoActionOnOldSnapshot is about age.
	g.writeConfig("  max_snapshot_age: 1m\n", rulesYAML)
	return g
}

// transitions maps each rule to the states it went to on sym, in order.
func (g *guardEnv) transitions(sym string) map[string][]string {
	out := map[string][]string{}
	for _, r := range g.audit() {
		if r.Type == "transition" && r.Symbol == sym {
			out[r.Rule] = append(out[r.Rule], r.To)
		}
	}
	return out
}

// fall is BTC flat at 64,000, then down 4% over the minute that ends at
// endAge before now, then flat again.
func fall(endAge time.Duration) func(time.Duration) float64 {
	return func(age time.Duration) float64 {
		switch {
		case age >= endAge+time.Minute:
			return 64000
		case age <= endAge:
			return 61440
		}
		return 64000 * (1 - 0.04*(endAge+time.Minute-age).Seconds()/60)
	}
}

// After a restart the windows over indexPrice are warmed from the index
// history read by the exchange's clock (the offset measured for signing),
// not ours: with the exchange 5 minutes behind the warm-up still reads the
// last minute and the velocity rule acts at the first tick; with it 5
// minutes ahead, a fall that ended 5.5 minutes ago is outside a 5m window
// (and inside a 10m one), so it does not fire now.
func TestRunWarmUpFollowsTheExchangeClock(t *testing.T) {
	t.Parallel()
	const rulesYAML = `
  - name: btc-falling-1m
    when: change(indexPrice, "1m") < -0.03
    symbols: [XBTC]
    actions:
      - action: cancel_orders
  - name: btc-fell-5m
    when: change(indexPrice, "5m") < -0.03
    symbols: [XBTC]
    actions:
      - action: cancel_orders
  - name: btc-fell-10m
    when: change(indexPrice, "10m") < -0.03
    symbols: [XBTC]
    actions:
      - action: notify
`
	cases := []struct {
		name   string
		offset time.Duration
		endAge time.Duration // when the fall ended, before now
		want   map[string][]string
		cancel bool
	}{
		// The fall is in the last minute: every window sees it.
		{name: "exchange 5m behind", offset: -5 * time.Minute, endAge: 0, cancel: true,
			want: map[string][]string{"btc-falling-1m": {"firing"}, "btc-fell-5m": {"firing"}, "btc-fell-10m": {"firing"}}},
		// The fall ended 5.5 minutes ago: flat over the last 1m and 5m.
		{name: "exchange 5m ahead", offset: 5 * time.Minute, endAge: 5*time.Minute + 30*time.Second, cancel: false,
			want: map[string][]string{"btc-fell-10m": {"firing"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			g := newHistoryEnv(t, c.offset, 12*time.Minute, fall(c.endAge), rulesYAML)
			code, stderr := g.once()
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, stderr)
			}
			got := g.transitions("XBTC")
			for _, rule := range []string{"btc-falling-1m", "btc-fell-5m", "btc-fell-10m"} {
				if strings.Join(got[rule], ",") != strings.Join(c.want[rule], ",") {
					t.Errorf("%s went to %v at the first tick, want %v", rule, got[rule], c.want[rule])
				}
			}
			if n := len(g.mutatingOn("XBTC")); (n > 0) != c.cancel {
				t.Errorf("%d mutating calls on XBTC, want cancel %v", n, c.cancel)
			}
			if strings.Contains(stderr, "index history not read") {
				t.Errorf("the warm-up failed:\n%s", stderr)
			}
		})
	}
}

// A 6h window over one-second history (21,600 rows, more than a page of
// 5,000) is warm at the first tick: the warm-up pages forward until the
// window is covered. BTC was flat for 5h and fell 4% in the last hour.
func TestRunSixHourWindowWarmAtStart(t *testing.T) {
	t.Parallel()
	price := func(age time.Duration) float64 {
		if age >= time.Hour {
			return 64000
		}
		return 64000 * (1 - 0.04*(time.Hour-age).Seconds()/3600)
	}
	g := newHistoryEnv(t, 0, 6*time.Hour+time.Minute, price, `
  - name: btc-down-6h
    when: change(indexPrice, "6h") < -0.03
    symbols: [XBTC]
    actions:
      - action: cancel_orders
`)
	code, stderr := g.once()
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if got := g.transitions("XBTC")["btc-down-6h"]; strings.Join(got, ",") != "firing" {
		t.Errorf("btc-down-6h went to %v at the first tick, want firing", got)
	}
	if n := len(g.mutatingOn("XBTC")); n != 1 {
		t.Errorf("%d mutating calls on XBTC, want the cancel\n%s", n, stderr)
	}
	// The window's pages come before the tick acts (the stress grid's σ
	// reads its own hour after it, when it comes within its bound).
	var pages int
	for _, c := range g.ex.Calls() {
		if c.Mutating {
			break
		}
		if c.Path == "/v1/market/indexes/BTC" {
			pages++
		}
	}
	if pages != 5 {
		t.Errorf("%d pages of BTC's history read before the action, want 5 (21,660 rows at 5,000 a page)", pages)
	}
}
