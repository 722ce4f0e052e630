package engine_test

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// noHistory hides the client's index history: an engine that cannot warm
// its windows.
type noHistory struct{ *exchange.Client }

func (noHistory) IndexHistory() {} // shadows the method with another signature

// A restart does not blind a velocity rule: its window over indexPrice is
// warmed from the exchange's index history, and it fires at the first
// tick. Without the history the window is empty: no data, no action.
func TestWindowWarmedFromIndexHistory(t *testing.T) {
	t.Parallel()
	for _, warm := range []bool{true, false} {
		clk := &clock{t: time.Now().Truncate(time.Second)}
		ex, err := sim.New(sim.Config{Key: "k", Secret: "s", Seed: 3, Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(ex)
		defer srv.Close()
		// The two minutes before the start: BTC falls 4% in the last one.
		for s := range 120 {
			p := 64000.0
			if s >= 60 {
				p = 64000 * (1 - 0.04*float64(s-59)/60)
			}
			ex.SetIndexPrice("BTC", decimal.NewFromFloat(p).Round(2))
			clk.add(time.Second)
		}
		client, err := exchange.New(srv.URL, "k", "s", exchange.WithRateLimit(0, 0), exchange.WithClock(clk.Now))
		if err != nil {
			t.Fatal(err)
		}
		set, err := rules.Parse("r.yaml", []byte(`rules:
  - name: btc-falling-fast
    when: change(indexPrice, "1m") < -0.03
    symbols: [XBTC]
    actions:
      - action: cancel_orders
`))
		if err != nil {
			t.Fatal(err)
		}
		var reader market.Reader = client
		if !warm {
			reader = noHistory{client}
		}
		e, err := engine.New(engine.Config{}, set, engine.Deps{Reader: reader, Actuator: client, Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := e.Tick(context.Background(), clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		want := alert.Firing
		if !warm {
			want = alert.NoData
		}
		if len(rep.Transitions) != 1 || rep.Transitions[0].To != want {
			t.Errorf("warm %t: transitions %+v, want one to %s", warm, rep.Transitions, want)
		}
		if got := len(mutatedSymbols(ex)); (got == 1) != warm {
			t.Errorf("warm %t: %d mutating calls", warm, got)
		}
	}
}
