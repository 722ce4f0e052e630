package exchange_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
)

// A server clock that jumps while the client runs: the first refused call
// measures the offset again and succeeds, instead of failing until the
// next scheduled measurement. A wrong secret is refused with no storm: at
// most one extra timestamp call per remeasurement window.
func TestClockJumpRemeasured(t *testing.T) {
	t.Parallel()
	ex, err := sim.New(sim.Config{Key: "k", Secret: "s", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ex)
	t.Cleanup(srv.Close)
	count := func(route string) int {
		n := 0
		for _, c := range ex.Calls() {
			if c.Route == route {
				n++
			}
		}
		return n
	}
	ctx := context.Background()

	c, err := exchange.New(srv.URL, "k", "s", exchange.WithClockSync(time.Hour), exchange.WithRateLimit(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Positions(ctx); err != nil {
		t.Fatal(err)
	}
	ex.SetClockOffset(-5 * time.Minute)
	// The offset was measured just now: the refusal is returned as is.
	var ae *exchange.APIError
	if _, err := c.Positions(ctx); !errors.As(err, &ae) || ae.Status != 401 {
		t.Fatalf("a call right after the measurement: %v, want the 401", err)
	}
	// Later, the refusal measures the clock again and the call goes through.
	now := time.Now().Add(10 * time.Second)
	c2, err := exchange.New(srv.URL, "k", "s", exchange.WithClockSync(time.Hour), exchange.WithRateLimit(0, 0),
		exchange.WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	ex.SetClockOffset(0)
	if _, err := c2.Positions(ctx); err != nil {
		t.Fatal(err)
	}
	ex.SetClockOffset(5 * time.Minute)
	now = now.Add(10 * time.Second)
	if _, err := c2.Positions(ctx); err != nil {
		t.Fatalf("after a 5-minute jump: %v", err)
	}
	if off := c2.ClockOffset(); off < 4*time.Minute {
		t.Errorf("offset %s after the jump, want about 5m", off)
	}

	// A wrong secret: refused, one timestamp call per window at most.
	ex.ResetCalls()
	bad, err := exchange.New(srv.URL, "k", "wrong", exchange.WithRateLimit(0, 0), exchange.WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := bad.Positions(ctx); !errors.As(err, &ae) || ae.Status != 401 {
			t.Fatalf("wrong secret: %v, want a 401", err)
		}
	}
	if n := count("/v1/contracts/positions"); n != 5 {
		t.Errorf("%d positions calls for 5 refused reads, want 5", n)
	}
	if n := count("/v1/market/timestamp"); n != 1 {
		t.Errorf("%d timestamp calls, want 1 (the first measurement; the clock has not moved)", n)
	}
}
