package exchange_test

import (
	"slices"
	"testing"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
)

// readsOnly is a venue made of the signed client's reads and idempotent
// calls, nothing else.
type readsOnly struct{ exchange.Venue }

// TestCapabilities: a venue offers the calls of its method set, in the
// contract's order; a value that is no venue offers none.
func TestCapabilities(t *testing.T) {
	t.Parallel()
	c, err := exchange.New("https://api.example.com", "k", "s")
	if err != nil {
		t.Fatal(err)
	}
	ex, err := sim.New(sim.Config{Key: "k", Secret: "s"})
	if err != nil {
		t.Fatal(err)
	}
	base := exchange.Calls{exchange.CallPositions, exchange.CallIndexPrices, exchange.CallTrades,
		exchange.CallSetPositionSettings, exchange.CallCancelOrders}
	for _, tc := range []struct {
		name string
		v    any
		want exchange.Calls
	}{
		{"signed client", c, exchange.Contract()},
		{"simulated exchange in process", ex.Local(), append(slices.Clone(base), exchange.CallPlaceOrder)},
		{"reads and idempotent calls only", readsOnly{c}, base},
		{"no venue", struct{ exchange.Reader }{c}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := exchange.Capabilities(tc.v)
			if !slices.Equal(got, tc.want) {
				t.Errorf("Capabilities = [%v], want [%v]", got, tc.want)
			}
			for _, call := range exchange.Contract() {
				if got.Has(call) != slices.Contains(tc.want, call) {
					t.Errorf("Has(%s) = %v", call, got.Has(call))
				}
			}
		})
	}
}
