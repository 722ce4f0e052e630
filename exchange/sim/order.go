package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/shopspring/decimal"
)

// Codes of the order endpoint's refusals, listed by /v1/market/errorCodes.
const (
	// CodeReduceOnlyRejected: a reduce-only order that would not reduce
	// the position (no position, the side that grows it, more than it
	// holds).
	CodeReduceOnlyRejected = "REDUCE_ONLY_REJECTED"
	// CodeDuplicateClientOrderID: an order whose client order id an
	// earlier order used (Config.ClientOrderIDField).
	CodeDuplicateClientOrderID = "DUPLICATE_CLIENT_ORDER_ID"
)

// orderRoute is the assumed order-placement endpoint the exchange serves.
const orderRoute = exchange.DefaultOrderPath

// order is the assumed POST /v1/contracts/orders/{symbol}/create (not
// shown by the spec; README, Assumptions): the body {"side": "BUY"|"SELL",
// "type": "MARKET", "quantity": decimal string, "flags": int}, every field
// required and nothing else. The simulated exchange keeps no order book:
// it fills only reduce-only, immediate-or-cancel market orders
// (REDUCE_ONLY|IMMEDIATE_OR_CANCEL, 0x18), at once and wholly, at the
// index price, with no fee. The quantity must be a multiple of the symbol's
// baseMinimumIncrement and at least the position's minQuantity; an order
// on the side that grows the position, or for more than it holds, is
// refused (REDUCE_ONLY_REJECTED), as is one without a position. The fill
// is margin.Account.Reduce: the reduced part's PNL is realised into the
// free balance with its share of the margin; the cross positions'
// liquidation prices are recomputed. The answer is the order, FILLED, with
// the closed orders' fields; it is listed among the closed orders.
func (e *Exchange) order(q *request) response {
	sym := q.params["symbol"]
	c, found := e.contract(sym)
	if !found {
		return fail(http.StatusNotFound, CodeSymbolNotFound, "symbol", "no contract symbol %q", sym)
	}
	var body struct {
		Side     *string          `json:"side"`
		Type     *string          `json:"type"`
		Quantity *decimal.Decimal `json:"quantity"`
		Flags    *int             `json:"flags"`
	}
	raw, clientID, res, bad := e.takeClientID(q.body)
	if bad {
		return res
	}
	if res, bad := strictJSON(raw, &body); bad {
		return res
	}
	switch {
	case body.Side == nil || (*body.Side != exchange.Buy && *body.Side != exchange.Sell):
		return invalid("side", "side is required: BUY or SELL")
	case body.Type == nil || *body.Type != exchange.OrderMarket:
		return invalid("type", "type is required; the simulated exchange fills MARKET orders only")
	case body.Quantity == nil || !body.Quantity.IsPositive():
		return invalid("quantity", "quantity (a positive decimal string) is required")
	case body.Flags == nil:
		return invalid("flags", "flags (integer) is required")
	}
	const want = exchange.ReduceOnly | exchange.ImmediateOrCancel
	if *body.Flags&want != want {
		return invalid("flags", "flags %#x: the simulated exchange fills only reduce-only, immediate-or-cancel orders (%#x)", *body.Flags, want)
	}
	qty := *body.Quantity
	if inc := c.BaseMinimumIncrement; inc.IsPositive() && !qty.Mod(inc).IsZero() {
		return invalid("quantity", "quantity %s is not a multiple of the base minimum increment %s", qty, inc)
	}
	p, held := e.positions[sym]
	if !held || p.Empty || !p.Quantity.IsPositive() {
		return rejected(CodeReduceOnlyRejected, "symbol", "no position on %s to reduce", sym)
	}
	if *body.Side != exchange.CloseSide(p.Direction) {
		return rejected(CodeReduceOnlyRejected, "side", "a %s order would grow the %s position on %s", *body.Side, p.Direction, sym)
	}
	if qty.GreaterThan(p.Quantity) {
		return rejected(CodeReduceOnlyRejected, "quantity", "quantity %s is more than the position's %s", qty, p.Quantity)
	}
	if qty.LessThan(p.MinQuantity) && !qty.Equal(p.Quantity) {
		return invalid("quantity", "quantity %s is under the minimum %s", qty, p.MinQuantity)
	}
	ix, ok := e.indexes[c.BaseName]
	if !ok || !ix.price.IsPositive() {
		return fail(http.StatusBadRequest, CodeIndexNotFound, "symbol", "no index price for %s", sym)
	}
	if id, used := e.clientIDs[clientID]; clientID != "" && used {
		return fail(http.StatusBadRequest, CodeDuplicateClientOrderID, e.clientIDField, "client order id %q was already used by order %d", clientID, id)
	}
	if clientID != "" {
		e.clientIDs[clientID] = e.nextOrderID // the id filled() gives it
	}
	acct, i, _ := e.account(e.balance, p)
	_, r, err := acct.Reduce(i, qty, ix.price)
	if err != nil {
		return rejected(CodeReduceOnlyRejected, "quantity", "%v", err)
	}
	p.Quantity = r.QuantityAfter
	p.EntryValue = r.QuantityAfter.Mul(p.EntryPrice)
	p.Margin = p.Margin.Sub(r.MarginReleased)
	p.RealizedPNL = p.RealizedPNL.Add(r.RealisedPNL)
	if r.QuantityAfter.IsZero() {
		p.EntryPrice, p.EntryValue, p.Margin, p.Empty = decimal.Zero, decimal.Zero, decimal.Zero, true
	}
	e.balance = r.FreeAfter
	return e.filled(c, p, *body.Side, qty, ix.price, *body.Flags, q.now)
}

// takeClientID takes the client order id out of an order's body when the
// exchange takes one (Config.ClientOrderIDField): the body without it, for
// the strict decoding of the other fields, and the id ("" when absent). A
// body that is not a JSON object is returned as it is, for strictJSON to
// name what is wrong.
func (e *Exchange) takeClientID(body []byte) (rest []byte, id string, res response, bad bool) {
	if e.clientIDField == "" {
		return body, "", response{}, false
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return body, "", response{}, false
	}
	v, present := fields[e.clientIDField]
	if !present {
		return body, "", response{}, false
	}
	if json.Unmarshal(v, &id) != nil || id == "" || len(id) > 64 {
		return nil, "", invalid(e.clientIDField, "%s must be a string of 1 to 64 characters", e.clientIDField), true
	}
	delete(fields, e.clientIDField)
	rest, err := json.Marshal(fields)
	if err != nil {
		return nil, "", invalid("body", "body: %v", err), true
	}
	return rest, id, response{}, false
}

// filled bumps the reduced (or, under the Grows fault, grown) position,
// recomputes the liquidation prices, records the order as closed and
// answers it. Call with e.mu held.
func (e *Exchange) filled(c *exchange.ContractSymbol, p *exchange.Position, side string, qty, price decimal.Decimal, flags int, now time.Time) response {
	p.Version++
	p.UpdatedAt = now.UnixMilli()
	p.LiquidationPrice = e.liquidationPrice(p, e.balance)
	e.refreshCross(now)
	ms := now.UnixMilli()
	o := closedOrder{id: e.nextOrderID, symbol: c.Name, symbolID: c.ID, side: side, typ: exchange.OrderMarket, price: price,
		quantity: qty, filled: qty, fee: decimal.Zero, status: "FILLED", flags: flags, createdAt: ms, updatedAt: ms}
	e.nextOrderID++
	e.closed = append(e.closed, o)
	return success(closedOrderWire{ID: o.id, Symbol: o.symbol, SymbolID: o.symbolID, Side: o.side, Type: o.typ, Price: str(o.price),
		Quantity: str(o.quantity), FilledQuantity: str(o.filled), Fee: str(o.fee), Status: o.status, Flags: o.flags,
		CreatedAt: o.createdAt, UpdatedAt: o.updatedAt})
}

// grownOrder is the Grows fault: an exchange that ignored REDUCE_ONLY. The
// order is answered FILLED but adds its quantity to the position at the
// index price, the extra margin taken from the free balance. Call with
// e.mu held.
func (e *Exchange) grownOrder(q *request) response {
	sym := q.params["symbol"]
	c, found := e.contract(sym)
	p, held := e.positions[sym]
	ix, ok := e.indexes[c.BaseName]
	var body exchange.OrderRequest
	if !found || !held || p.Empty || !ok || json.Unmarshal(q.body, &body) != nil || !body.Quantity.IsPositive() {
		return e.order(q)
	}
	p.Quantity = p.Quantity.Add(body.Quantity)
	p.EntryValue = p.EntryValue.Add(body.Quantity.Mul(ix.price))
	p.EntryPrice = p.EntryValue.DivRound(p.Quantity, int32(c.QuoteScale))
	margin := p.EntryValue.DivRound(decimal.NewFromInt(int64(max(p.Leverage, 1))), 8)
	e.balance = e.balance.Sub(margin.Sub(p.Margin))
	p.Margin = margin
	return e.filled(c, p, body.Side, body.Quantity, ix.price, body.Flags, q.now)
}

// PlaceOrder places an order on the symbol, as the order endpoint does,
// and returns it. A refusal is an *exchange.APIError with the status and
// code the HTTP API answers with.
func (e *Exchange) PlaceOrder(symbol string, o exchange.OrderRequest) (exchange.Order, error) {
	body, err := json.Marshal(o)
	if err != nil {
		return exchange.Order{}, fmt.Errorf("place order: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	res := e.order(&request{params: map[string]string{"symbol": symbol}, body: body, now: e.now()})
	if err := directError(res, orderRoute); err != nil {
		return exchange.Order{}, err
	}
	var env struct {
		Data exchange.Order `json:"data"`
	}
	if err := json.Unmarshal(res.body, &env); err != nil {
		return exchange.Order{}, fmt.Errorf("place order: %w", err)
	}
	return env.Data, nil
}

// PlaceOrder places an order, with the HTTP endpoint's refusals as
// *exchange.APIError.
func (l Local) PlaceOrder(_ context.Context, symbol string, o exchange.OrderRequest) (*exchange.Order, error) {
	got, err := l.ex.PlaceOrder(symbol, o)
	if err != nil {
		return nil, err
	}
	return &got, nil
}
