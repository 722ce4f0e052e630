package engine_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
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

// A history read the exchange stalls does not hold up the tick: it is
// given up after a second, said, and not tried again; σ stays the floor
// until the index's own returns are enough.
func TestStalledIndexHistoryDoesNotHoldTheTick(t *testing.T) {
	t.Parallel()
	set, err := rules.Parse("watch.yaml", []byte("rules:\n  - name: watch\n    when: liquidationDistance < 0.001\n    actions: [{action: notify}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	ex, err := sim.New(sim.Config{Key: "k", Secret: "s", Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	var stalled atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/market/indexes/") && r.URL.Path != "/v1/market/indexes/indexValue" {
			stalled.Add(1)
			select { // held until the guard gives up (a minute at most)
			case <-r.Context().Done():
			case <-time.After(time.Minute):
			}
			return
		}
		ex.ServeHTTP(w, r)
	}))
	defer srv.Close()
	client, err := exchange.New(srv.URL, "k", "s", exchange.WithRateLimit(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer // the ticks log from this goroutine
	e, err := engine.New(engine.Config{}, set, engine.Deps{Reader: client, Actuator: client, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	start := time.Now()
	for i := range 3 {
		if _, err := e.Tick(context.Background(), start.Add(time.Duration(i)*2*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("three ticks took %s behind stalled history reads", took)
	}
	if n := stalled.Load(); n != 3 {
		t.Errorf("%d history reads, want 3 (one index a tick, none tried again)", n)
	}
	if !strings.Contains(logs.String(), "index history for the stress grid's σ not read in full") {
		t.Errorf("the stalled read was not said:\n%s", logs.String())
	}
	now := start.Add(4 * time.Second)
	e.Status(now)
	if _, err := e.Tick(context.Background(), now.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if s := e.Status(now.Add(2 * time.Second)).Stress; s == nil || len(s.Sigma) == 0 || s.Sigma[0].Sigma != 0.02 {
		t.Errorf("stress after stalled reads = %+v, want σ at the floor", s)
	}
}
