package exchange

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
)

// The private endpoints (spec 4.2) are signed (spec 5) with the clock
// offset measured against the server.

// Routes of the mutating calls the spec shows (4.2), as an *APIError's
// Route names them; the order route is the client's order path
// (DefaultOrderPath unless WithOrderPath).
const (
	RouteSettings = "/v1/contracts/positions/{symbol}/settings"
	RouteCancel   = "/v1/contracts/orders/{symbol}/cancel"
)

// Positions lists the contract positions (GET on the positions path,
// default /v1/contracts/positions). The spec shows no listing: the path and
// a data array of contract positions (2.6) are assumptions.
//
// Each position is decoded on its own: one that cannot be is left out and
// named in a *PartialError returned with the others.
func (c *Client) Positions(ctx context.Context) ([]Position, error) {
	var raw []json.RawMessage
	if err := c.get(ctx, c.positionsPath, c.positionsPath, nil, &raw); err != nil {
		return nil, fmt.Errorf("list positions: %w", err)
	}
	return decodePositions(raw)
}

// ClosedOrders returns one page of closed contract orders of the month rng
// (YYYYMM), starting at offsetID (0 for the first page) (GET
// /v1/contracts/orders/closed).
func (c *Client) ClosedOrders(ctx context.Context, rng string, offsetID int64, limit int) (*ClosedOrdersPage, error) {
	if !validRange(rng) {
		return nil, fmt.Errorf("closed orders: range %q: want YYYYMM", rng)
	}
	if limit < 1 {
		return nil, fmt.Errorf("closed orders: limit %d: must be positive", limit)
	}
	q := url.Values{
		"range":    {rng},
		"offsetId": {strconv.FormatInt(offsetID, 10)},
		"limit":    {strconv.Itoa(limit)},
	}
	var p ClosedOrdersPage
	if err := c.get(ctx, "/v1/contracts/orders/closed", "/v1/contracts/orders/closed", q, &p); err != nil {
		return nil, fmt.Errorf("closed orders %s offset %d: %w", rng, offsetID, err)
	}
	return &p, nil
}

// ClosedOrdersAll yields every closed order of the month rng, page by page,
// following nextOffsetId until hasMore is false. It stops with an error
// wrapping ErrPageLimit when more than maxPages pages would be needed, and
// with an error when the exchange hands out an offset it already served (the
// listing would loop). An error is yielded once, last.
func (c *Client) ClosedOrdersAll(ctx context.Context, rng string, limit, maxPages int) iter.Seq2[json.RawMessage, error] {
	return func(yield func(json.RawMessage, error) bool) {
		if maxPages < 1 {
			yield(nil, fmt.Errorf("closed orders: max pages %d: must be positive", maxPages))
			return
		}
		var offset int64
		served := make(map[int64]bool, maxPages)
		for range maxPages {
			p, err := c.ClosedOrders(ctx, rng, offset, limit)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, r := range p.Results {
				if !yield(r, nil) {
					return
				}
			}
			if !p.HasMore {
				return
			}
			served[offset] = true
			if served[p.NextOffsetID] {
				yield(nil, fmt.Errorf("closed orders %s: next offset %d was already served, listing does not advance", rng, p.NextOffsetID))
				return
			}
			offset = p.NextOffsetID
		}
		yield(nil, fmt.Errorf("closed orders %s: more than %d pages: %w", rng, maxPages, ErrPageLimit))
	}
}

// SetPositionSettings sets margin mode and leverage of the position in symbol
// and returns the position as the exchange now holds it (POST
// /v1/contracts/positions/{symbol}/settings, body {"cross":…,"leverage":…}).
// It is idempotent and so retried like a GET.
func (c *Client) SetPositionSettings(ctx context.Context, symbol string, s Settings) (*Position, error) {
	path, err := joinPath("/v1/contracts/positions", symbol)
	if err != nil {
		return nil, fmt.Errorf("position settings: %w", err)
	}
	body, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("position settings %s: %w", symbol, err)
	}
	var p Position
	cl := call{method: http.MethodPost, route: RouteSettings, path: path + "/settings", body: body}
	if err := c.do(ctx, cl, &p); err != nil {
		return nil, fmt.Errorf("position settings %s: %w", symbol, err)
	}
	return &p, nil
}

// CancelOrders cancels the contract orders of symbol (POST
// /v1/contracts/orders/{symbol}/cancel) and returns data as received (the
// spec does not show it; nil when absent). The spec shows no body either:
// the request is sent with none (Content-Length 0, signed body line empty)
// and Content-Type application/json like every POST. Cancelling twice
// cancels nothing more, so it is retried like a GET.
func (c *Client) CancelOrders(ctx context.Context, symbol string) (json.RawMessage, error) {
	path, err := joinPath("/v1/contracts/orders", symbol)
	if err != nil {
		return nil, fmt.Errorf("cancel orders: %w", err)
	}
	var raw json.RawMessage
	cl := call{method: http.MethodPost, route: RouteCancel, path: path + "/cancel"}
	if err := c.do(ctx, cl, &raw); err != nil {
		return nil, fmt.Errorf("cancel orders %s: %w", symbol, err)
	}
	return raw, nil
}

// SpotBalances returns the spot balances as received (GET
// /v1/spots/balances); the spec does not show their fields.
func (c *Client) SpotBalances(ctx context.Context) (json.RawMessage, error) {
	var raw json.RawMessage
	if err := c.get(ctx, "/v1/spots/balances", "/v1/spots/balances", nil, &raw); err != nil {
		return nil, fmt.Errorf("spot balances: %w", err)
	}
	return raw, nil
}

func validRange(rng string) bool {
	if len(rng) != 6 {
		return false
	}
	for _, r := range rng {
		if r < '0' || r > '9' {
			return false
		}
	}
	m, _ := strconv.Atoi(rng[4:])
	return m >= 1 && m <= 12
}
