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
// contract's order, and OfferOf the same capabilities as values; a value
// that is no venue offers none.
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
			// OfferOf hands over as values the capabilities Capabilities
			// names, nil where the venue lacks one.
			o := exchange.OfferOf(tc.v)
			for call, offered := range map[exchange.Call]bool{exchange.CallPlaceOrder: o.Placer != nil,
				exchange.CallIndexHistory: o.History != nil, exchange.CallClosedOrders: o.Closed != nil} {
				if offered != tc.want.Has(call) {
					t.Errorf("OfferOf offers %s: %v, want %v", call, offered, tc.want.Has(call))
				}
			}
		})
	}
}
