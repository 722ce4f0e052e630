package exchange

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"github.com/shopspring/decimal"
)

// The market endpoints (spec 4.1) are public: they carry no auth headers.
// Where the spec does not show the shape of data, the data is returned as
// json.RawMessage, exactly as received, for the caller to decode.

// Trades returns the currencies, spot symbols and contract symbols with their
// risk limits (GET /v1/market/trades).
//
// Each currency and symbol is decoded on its own: one that cannot be is
// left out and named in a *PartialError returned with the rest.
func (c *Client) Trades(ctx context.Context) (*Trades, error) {
	var raw struct {
		Currencies       []json.RawMessage `json:"currencies"`
		SpotsSymbols     []json.RawMessage `json:"spotsSymbols"`
		ContractsSymbols []json.RawMessage `json:"contractsSymbols"`
	}
	if err := c.get(ctx, "/v1/market/trades", "/v1/market/trades", nil, &raw); err != nil {
		return nil, fmt.Errorf("trades: %w", err)
	}
	return decodeTrades(raw.Currencies, raw.SpotsSymbols, raw.ContractsSymbols)
}

// ServerTime returns the exchange's clock (GET /v1/market/timestamp, data in
// milliseconds).
func (c *Client) ServerTime(ctx context.Context) (time.Time, error) {
	t, _, err := c.serverTime(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("server time: %w", err)
	}
	return t, nil
}

func (c *Client) serverTime(ctx context.Context) (time.Time, timing, error) {
	var ms int64
	var tm timing
	cl := call{method: "GET", route: "/v1/market/timestamp", path: "/v1/market/timestamp", timing: &tm}
	if err := c.do(ctx, cl, &ms); err != nil {
		return time.Time{}, tm, err
	}
	return time.UnixMilli(ms).UTC(), tm, nil
}

// Ticks returns the ticks of a symbol (GET /v1/market/ticks/{symbol}); the
// spec does not show their shape.
func (c *Client) Ticks(ctx context.Context, symbol string) (json.RawMessage, error) {
	return c.getRaw(ctx, "ticks", "/v1/market/ticks/{symbol}", nil, "/v1/market/ticks", symbol)
}

// Prices returns a map from name to an array of numbers (GET
// /v1/market/prices).
func (c *Client) Prices(ctx context.Context) (map[string][]decimal.Decimal, error) {
	var m map[string][]decimal.Decimal
	if err := c.get(ctx, "/v1/market/prices", "/v1/market/prices", nil, &m); err != nil {
		return nil, fmt.Errorf("prices: %w", err)
	}
	return m, nil
}

// Bars returns the bars of a symbol and bar type (GET
// /v1/market/bars/{symbol}/{type}) with the given query, which the spec
// does not show (nil for none); nor does it show the response shape.
func (c *Client) Bars(ctx context.Context, symbol, barType string, q url.Values) (json.RawMessage, error) {
	return c.getRaw(ctx, "bars", "/v1/market/bars/{symbol}/{type}", q, "/v1/market/bars", symbol, barType)
}

// OrderBook returns the order book of a symbol (GET
// /v1/market/orderBook/{symbol}); the spec does not show its shape.
func (c *Client) OrderBook(ctx context.Context, symbol string) (json.RawMessage, error) {
	return c.getRaw(ctx, "order book", "/v1/market/orderBook/{symbol}", nil, "/v1/market/orderBook", symbol)
}

// Indexes returns the index list (GET /v1/market/indexes); the spec does not
// show its shape.
func (c *Client) Indexes(ctx context.Context) (json.RawMessage, error) {
	return c.getRaw(ctx, "indexes", "/v1/market/indexes", nil, "/v1/market/indexes")
}

// IndexHistory returns the history of an index as arrays of numbers (GET
// /v1/market/indexes/{name}) with the given query (nil for none).
func (c *Client) IndexHistory(ctx context.Context, name string, q url.Values) ([][]decimal.Decimal, error) {
	path, err := joinPath("/v1/market/indexes", name)
	if err != nil {
		return nil, fmt.Errorf("index history: %w", err)
	}
	var h [][]decimal.Decimal
	if err := c.get(ctx, "/v1/market/indexes/{name}", path, q, &h); err != nil {
		return nil, fmt.Errorf("index history %q: %w", name, err)
	}
	return h, nil
}

// IndexValue returns the index value (GET /v1/market/indexes/indexValue).
func (c *Client) IndexValue(ctx context.Context) (decimal.Decimal, error) {
	var d decimal.Decimal
	if err := c.get(ctx, "/v1/market/indexes/indexValue", "/v1/market/indexes/indexValue", nil, &d); err != nil {
		return decimal.Decimal{}, fmt.Errorf("index value: %w", err)
	}
	return d, nil
}

// IndexPrices returns a map from name to index price (GET
// /v1/market/indexPrices).
//
// Each price is decoded on its own: one that is not a finite number is left
// out and named in a *PartialError returned with the others.
func (c *Client) IndexPrices(ctx context.Context) (map[string]decimal.Decimal, error) {
	var raw map[string]json.RawMessage
	if err := c.get(ctx, "/v1/market/indexPrices", "/v1/market/indexPrices", nil, &raw); err != nil {
		return nil, fmt.Errorf("index prices: %w", err)
	}
	return decodeIndexPrices(raw)
}

// ErrorCodes returns the catalogue of error codes, code to text (GET
// /v1/market/errorCodes).
func (c *Client) ErrorCodes(ctx context.Context) (map[string]string, error) {
	var m map[string]string
	if err := c.get(ctx, "/v1/market/errorCodes", "/v1/market/errorCodes", nil, &m); err != nil {
		return nil, fmt.Errorf("error codes: %w", err)
	}
	return m, nil
}

// getRaw GETs prefix/param1/param2… (each escaped) and returns data as raw
// JSON; what names the call in errors.
func (c *Client) getRaw(ctx context.Context, what, route string, q url.Values, prefix string, params ...string) (json.RawMessage, error) {
	path, err := joinPath(prefix, params...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	var raw json.RawMessage
	if err := c.get(ctx, route, path, q, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return raw, nil
}

// joinPath appends path parameters to prefix, each escaped with
// url.PathEscape. An empty, "." or ".." parameter is refused: it would
// address another resource.
func joinPath(prefix string, params ...string) (string, error) {
	p := prefix
	for _, v := range params {
		if v == "" || v == "." || v == ".." {
			return "", fmt.Errorf("invalid path parameter %q", v)
		}
		p += "/" + url.PathEscape(v)
	}
	return p, nil
}
