package engine_test

import (
	"context"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/riskguard/riskguard/rules"
)

// historyless hides the client's index history: an adapter without the
// call.
type historyless struct{ market.Reader }

// The stress grid's σ starts from the index history: an engine started on
// an exchange whose indexes have walked for three hours reads their last
// hour, an index a tick, and the status's σ of XBTC is the walk's own (0.0008 per
// √second: 4.8% over the hour's horizon), not the 2% floor it keeps
// without the history until it has watched 30 returns of its own.
func TestSigmaWarmedFromIndexHistory(t *testing.T) {
	t.Parallel()
	set, err := rules.Parse("watch.yaml", []byte("rules:\n  - name: watch\n    when: liquidationDistance < 0.001\n    actions: [{action: notify}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	start := t0.Add(3 * time.Hour)
	sigmaOf := func(hide bool) float64 {
		var clock atomic.Int64 // the exchange's, the client's and the engine's
		clock.Store(t0.UnixNano())
		at := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
		ex, err := sim.New(sim.Config{Key: "k", Secret: "s", Seed: 3, Now: at})
		if err != nil {
			t.Fatal(err)
		}
		for at().Before(start) {
			clock.Add(int64(10 * time.Minute))
			ex.Step(at())
		}
		srv := httptest.NewServer(ex)
		defer srv.Close()
		client, err := exchange.New(srv.URL, "k", "s", exchange.WithRateLimit(0, 0), exchange.WithClock(at))
		if err != nil {
			t.Fatal(err)
		}
		d := engine.Deps{Reader: client, Actuator: client, Now: at}
		if hide {
			d.Reader = historyless{client}
		}
		e, err := engine.New(engine.Config{}, set, d)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		ctx := context.Background()
		var now time.Time
		for i := range 4 { // one index's history a tick: BTC, ETH, SOL
			now = start.Add(time.Duration(i) * 2 * time.Second)
			clock.Store(now.UnixNano())
			ex.Step(now)
			if _, err := e.Tick(ctx, now); err != nil {
				t.Fatal(err)
			}
			e.Status(now) // the grid is worked out once the status is read
		}
		s := e.Status(now).Stress
		if s == nil {
			t.Fatal("no stress grid in the status")
		}
		for _, sg := range s.Sigma {
			if sg.Symbol == "XBTC" {
				return sg.Sigma
			}
		}
		t.Fatalf("no σ of XBTC: %+v", s.Sigma)
		return 0
	}
	got := sigmaOf(false)
	t.Logf("σ of XBTC over 1h from its history: %.4f", got)
	if got < 0.040 || got > 0.056 {
		t.Errorf("σ of XBTC after reading its history = %.4f, want the walk's 0.048 (±1/6)", got)
	}
	if got := sigmaOf(true); got != 0.02 {
		t.Errorf("σ of XBTC without a history = %.4f, want the floor 0.02", got)
	}
}
