package exchange

import (
	"context"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// The venue contract: what the guard needs of an exchange, as a few small
// interfaces over the domain types of this package (Position, Settings,
// OrderRequest, Order, Trades). Every venue is a Venue (it reads the
// account and changes a position's settings and orders); the other
// interfaces are capabilities a venue may lack, each named by the Call
// its method is. The signed client (Client) offers every call, the
// simulated exchange's in-process client (sim.Local) all but the history
// and the closed orders. The package exchange/conformance is the one
// suite of tests every venue passes.
//
// The consumers keep their own, narrower interfaces (engine/market.Reader,
// engine/act.Exchange, engine/window.HistoryReader, …); each is satisfied
// by the contract, which cmd/riskguard's venues_test.go checks at compile
// time.

// Reader is what a tick reads of the account: its positions, the index
// prices and the listed symbols with their risk limits.
type Reader interface {
	// Positions lists every contract position; one that cannot be
	// decoded is left out and named in a *PartialError returned with
	// the others.
	Positions(ctx context.Context) ([]Position, error)
	// IndexPrices is every index's price by name; a *PartialError names
	// those left out.
	IndexPrices(ctx context.Context) (map[string]decimal.Decimal, error)
	// Trades lists the currencies and the spot and contract symbols
	// (with their risk limits).
	Trades(ctx context.Context) (*Trades, error)
}

// Actuator is what the settings and cancel kinds change: both calls are
// idempotent, so a call whose answer was lost may be made again.
type Actuator interface {
	// SetPositionSettings sets the symbol's margin mode and leverage and
	// answers the position as it is after the change.
	SetPositionSettings(ctx context.Context, symbol string, s Settings) (*Position, error)
	// CancelOrders cancels every open order of the symbol; it succeeds
	// when there is none.
	CancelOrders(ctx context.Context, symbol string) (json.RawMessage, error)
}

// Venue is what every venue offers: the reads and the idempotent calls.
type Venue interface {
	Reader
	Actuator
}

// OrderPlacer is a venue that places orders: reduce_position's
// reduce-only, immediate-or-cancel orders, answered with their fill. An
// order is not idempotent; the caller reads the position back to learn
// what one whose answer was lost did.
type OrderPlacer interface {
	PlaceOrder(ctx context.Context, symbol string, o OrderRequest) (*Order, error)
}

// HistoryReader is a venue that serves an index's past prices, [[time
// ms, price], …] oldest first, stamped with the venue's clock, whose
// offset from ours is ClockOffset (venue minus local). The windows and σ
// are warmed from it.
type HistoryReader interface {
	IndexHistory(ctx context.Context, name string, q url.Values) ([][]decimal.Decimal, error)
	ClockOffset() time.Duration
}

// ClosedOrderReader is a venue that lists the closed orders of a month
// (YYYYMM), page by page: a liquidation's evidence.
type ClosedOrderReader interface {
	ClosedOrders(ctx context.Context, rng string, offsetID int64, limit int) (*ClosedOrdersPage, error)
}

// Call names one call of the contract, as its method is named: what a
// rule's action kind needs (rules.KindSpec.Needs) and what a venue
// offers (Capabilities).
type Call string

// The contract's calls, in the order Contract lists them.
const (
	CallPositions           Call = "Positions"
	CallIndexPrices         Call = "IndexPrices"
	CallTrades              Call = "Trades"
	CallSetPositionSettings Call = "SetPositionSettings"
	CallCancelOrders        Call = "CancelOrders"
	CallPlaceOrder          Call = "PlaceOrder"
	CallIndexHistory        Call = "IndexHistory"
	CallClosedOrders        Call = "ClosedOrders"
)

// Calls is a set of calls, in the contract's order.
type Calls []Call

// Contract lists every call of the contract: what a venue that offers
// everything has.
func Contract() Calls {
	return Calls{CallPositions, CallIndexPrices, CallTrades, CallSetPositionSettings, CallCancelOrders,
		CallPlaceOrder, CallIndexHistory, CallClosedOrders}
}

// Has reports whether c is in the set.
func (cs Calls) Has(c Call) bool { return slices.Contains(cs, c) }

// String lists the calls, comma-separated.
func (cs Calls) String() string {
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = string(c)
	}
	return strings.Join(s, ", ")
}

// Capabilities is the set of calls v's method set offers, in the
// contract's order: nothing for a value that is no Venue, since a venue
// without the reads and the idempotent calls cannot be guarded.
// The registry of venues declares each venue's calls so that the
// configuration can be checked without building one; its test compares
// that declaration with Capabilities of the venue built.
func Capabilities(v any) Calls {
	if _, ok := v.(Venue); !ok {
		return nil
	}
	cs := Calls{CallPositions, CallIndexPrices, CallTrades, CallSetPositionSettings, CallCancelOrders}
	o := OfferOf(v)
	if o.Placer != nil {
		cs = append(cs, CallPlaceOrder)
	}
	if o.History != nil {
		cs = append(cs, CallIndexHistory)
	}
	if o.Closed != nil {
		cs = append(cs, CallClosedOrders)
	}
	return cs
}

// Offer is a venue's capabilities as the values its consumers call, each
// nil when the venue lacks it: asked once, where the venue is handed to
// its consumer (engine.New), which gives each part the one it needs
// instead of each part asking the venue by a type assertion of its own.
type Offer struct {
	Placer  OrderPlacer
	History HistoryReader
	Closed  ClosedOrderReader
}

// OfferOf asks v for each capability of the contract: the one place the
// method set of a venue is asked what it offers.
func OfferOf(v any) Offer {
	var o Offer
	o.Placer, _ = v.(OrderPlacer)
	o.History, _ = v.(HistoryReader)
	o.Closed, _ = v.(ClosedOrderReader)
	return o
}

// The signed client is the first venue and offers every call.
var (
	_ Venue             = (*Client)(nil)
	_ OrderPlacer       = (*Client)(nil)
	_ HistoryReader     = (*Client)(nil)
	_ ClosedOrderReader = (*Client)(nil)
)
