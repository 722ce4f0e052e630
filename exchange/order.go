package exchange

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"

	"github.com/shopspring/decimal"
)

// DefaultOrderPath is the assumed order-placement endpoint: the spec
// defines the order flags (2.8) but not the operation that carries them.
// It follows the cancel endpoint's shape, POST
// /v1/contracts/orders/{symbol}/cancel, with {symbol} the contract symbol.
const DefaultOrderPath = "/v1/contracts/orders/{symbol}/create"

// Order sides.
const (
	Buy  = "BUY"
	Sell = "SELL"
)

// OrderMarket is the order type of a market order, the only type the guard
// sends.
const OrderMarket = "MARKET"

// OrderRequest is the body of the assumed order-placement call. Field
// order is the wire order:
// {"side":"SELL","type":"MARKET","quantity":"0.5","flags":24}. The
// quantity is a decimal string, as the spec's private responses write
// decimals; flags are the spec's bit flags (2.8).
type OrderRequest struct {
	Side     string          `json:"side"`
	Type     string          `json:"type"`
	Quantity decimal.Decimal `json:"quantity"`
	Flags    int             `json:"flags"`
	// ClientOrderID is the caller's id of the order, sent only by a
	// client configured with WithClientOrderIDField (the spec shows no
	// such field), as that field, after flags.
	ClientOrderID string `json:"-"`
}

// ReduceOnlyIOC is the guard's only order: a reduce-only,
// immediate-or-cancel market order of quantity on side.
func ReduceOnlyIOC(side string, quantity decimal.Decimal) OrderRequest {
	return OrderRequest{Side: side, Type: OrderMarket, Quantity: quantity, Flags: ReduceOnly | ImmediateOrCancel}
}

// CloseSide is the order side that reduces a position of direction: SELL
// for a long, BUY for a short.
func CloseSide(direction string) string {
	if direction == Short {
		return Buy
	}
	return Sell
}

// Order is the assumed answer of the order-placement call: the order as
// the exchange holds it after the immediate-or-cancel fill, with the fields
// the closed-orders listing carries (README, Assumptions).
type Order struct {
	ID             int64           `json:"id"`
	Symbol         string          `json:"symbol"`
	Side           string          `json:"side"`
	Type           string          `json:"type"`
	Price          decimal.Decimal `json:"price"`
	Quantity       decimal.Decimal `json:"quantity"`
	FilledQuantity decimal.Decimal `json:"filledQuantity"`
	Fee            decimal.Decimal `json:"fee"`
	Status         string          `json:"status"`
	Flags          int             `json:"flags"`
	CreatedAt      int64           `json:"createdAt"`
	UpdatedAt      int64           `json:"updatedAt"`
}

// ErrNotReduceOnly is the error of an order PlaceOrder refuses to send
// because it lacks the REDUCE_ONLY flag: the guard never opens or grows a
// position.
var ErrNotReduceOnly = errors.New("order is not reduce-only")

// WithOrderPath sets the assumed order-placement path (default
// DefaultOrderPath). It must be a signed path (under /v1/, not /v1/market/)
// holding {symbol} once, where the contract symbol goes.
func WithOrderPath(path string) Option {
	return func(c *Client) error {
		if err := CheckOrderPath(path); err != nil {
			return err
		}
		c.orderPath = path
		return nil
	}
}

// WithClientOrderIDField makes PlaceOrder send an order's ClientOrderID
// under the JSON field name (e.g. "clientOrderId"). The spec shows no
// client order id, so none is sent by default; an exchange that takes one
// may refuse a second order with the same id, which guards against a
// repeat the guard never intends to send, but the guard does not rely on
// it: an unknown outcome is settled by reading the account.
func WithClientOrderIDField(name string) Option {
	return func(c *Client) error {
		if err := CheckClientOrderIDField(name); err != nil {
			return err
		}
		c.clientIDField = name
		return nil
	}
}

// CheckClientOrderIDField reports what is wrong with the name of a client
// order id field; the configuration loader checks it with the same words.
func CheckClientOrderIDField(name string) error {
	valid := len(name) > 0 && len(name) <= 64 && !strings.ContainsFunc(name, func(r rune) bool {
		return !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	})
	switch {
	case !valid:
		return fmt.Errorf("client order id field %q: 1 to 64 letters, digits, _ or -", name)
	case name == "side" || name == "type" || name == "quantity" || name == "flags":
		return fmt.Errorf("client order id field %q: names a field the order already has", name)
	}
	return nil
}

// CheckOrderPath reports what is wrong with an order-placement path; the
// configuration loader checks it with the same words.
func CheckOrderPath(p string) error {
	switch {
	case strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f || r == ' ' || r == '\\' || r == '%' }):
		// A CR LF would forge a header line; an escape (%2e%2e) or a
		// backslash would reach another path once the server decodes it.
		return fmt.Errorf("order path %q: no control character, space, backslash or %%-escape is allowed in it", p)
	case path.Clean(p) != p:
		return fmt.Errorf("order path %q: no dot segments (. or ..), empty segments or trailing slash: it must name the order endpoint itself", p)
	case !strings.HasPrefix(p, "/v1/") || strings.HasPrefix(p, marketPrefix) || strings.ContainsAny(p, "?#") ||
		strings.Count(p, "{symbol}") != 1:
		return fmt.Errorf("order path %q: must start with /v1/, not be a market path, have no query and hold {symbol} once", p)
	}
	return nil
}

// PlaceOrder sends an order on symbol (POST on the order path, default
// /v1/contracts/orders/{symbol}/create, body OrderRequest) and returns the
// order as answered. An order is not idempotent: it is sent again only
// after a 429, which says it was not processed; any other failure is
// returned, and the caller reads the position back to learn what happened.
// An order without REDUCE_ONLY is refused before it is sent
// (ErrNotReduceOnly).
func (c *Client) PlaceOrder(ctx context.Context, symbol string, o OrderRequest) (*Order, error) {
	if o.Flags&ReduceOnly == 0 {
		return nil, fmt.Errorf("place order %s: %w", symbol, ErrNotReduceOnly)
	}
	if !o.Quantity.IsPositive() {
		return nil, fmt.Errorf("place order %s: quantity %s: must be positive", symbol, o.Quantity)
	}
	seg, err := joinPath("", symbol)
	if err != nil {
		return nil, fmt.Errorf("place order: %w", err)
	}
	path := strings.Replace(c.orderPath, "/{symbol}", seg, 1)
	if !strings.Contains(c.orderPath, "/{symbol}") {
		path = strings.Replace(c.orderPath, "{symbol}", seg[1:], 1)
	}
	body, err := c.orderBody(o)
	if err != nil {
		return nil, fmt.Errorf("place order %s: %w", symbol, err)
	}
	var got Order
	cl := call{method: http.MethodPost, route: c.orderPath, path: path, body: body, once: true}
	if err := c.do(ctx, cl, &got); err != nil {
		return nil, fmt.Errorf("place order %s: %w", symbol, err)
	}
	return &got, nil
}

// orderBody is the order's wire form: OrderRequest's fields, then the
// client order id under the configured field when both are set.
func (c *Client) orderBody(o OrderRequest) ([]byte, error) {
	body, err := json.Marshal(o)
	if err != nil || c.clientIDField == "" || o.ClientOrderID == "" {
		return body, err
	}
	id, err := json.Marshal(o.ClientOrderID)
	if err != nil {
		return nil, err
	}
	// body is a JSON object with fields: its closing brace is the last byte.
	out := append(body[:len(body)-1:len(body)-1], fmt.Sprintf(",%q:", c.clientIDField)...)
	return append(append(out, id...), '}'), nil
}
