package sim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/shopspring/decimal"
)

// Private endpoints (spec 4.2, and the assumed positions listing).
// Decimals are JSON strings.

// Page bounds of the closed-orders listing.
const (
	defaultClosedLimit = 50
	maxClosedLimit     = 100
)

// positionsList is the assumed GET /v1/contracts/positions: every
// position, empty ones included, in symbol order.
func (e *Exchange) positionsList(*request) response {
	ps := e.positionList(make([]exchange.Position, 0, len(e.positions)))
	out := make([]positionWire, 0, len(ps))
	for _, p := range ps {
		out = append(out, positionWireOf(p))
	}
	return success(out)
}

// openPositionsList is the positions listing without its empty positions
// (Fault.LeaveOutEmpty).
func (e *Exchange) openPositionsList() response {
	ps := e.positionList(make([]exchange.Position, 0, len(e.positions)))
	out := make([]positionWire, 0, len(ps))
	for _, p := range ps {
		if !p.Empty {
			out = append(out, positionWireOf(p))
		}
	}
	return success(out)
}

// spotBalancesList (response not shown by the spec): one record per
// currency, in currency order, {"currency": name, "available": decimal
// string, "frozen": "0"}.
func (e *Exchange) spotBalancesList(*request) response {
	type balance struct {
		Currency  string `json:"currency"`
		Available str    `json:"available"`
		Frozen    str    `json:"frozen"`
	}
	out := make([]balance, 0, len(e.currencies))
	for _, c := range e.currencies {
		out = append(out, balance{Currency: c.Name, Available: str(e.spotBalances[c.Name]), Frozen: str(decimal.Zero)})
	}
	return success(out)
}

// settings is POST /v1/contracts/positions/{symbol}/settings: the body
// {"cross": bool, "leverage": int} (both required, nothing else) sets the
// margin mode and leverage of the symbol's position, creating an empty one
// when there is none. The leverage must be in 1..maxLeverage of the
// symbol's risk limit — or equal to the position's current leverage, which
// may be above a risk limit lowered since. The margin becomes EV/leverage,
// the difference moving from or to the free balance (INSUFFICIENT_BALANCE
// when it cannot), and the liquidation price is recomputed (see
// LiquidationPrice); a change that would put it past the current index is
// refused with INSUFFICIENT_MARGIN. A change bumps version and updatedAt;
// the same values again change nothing. The answer is the position.
func (e *Exchange) settings(q *request) response {
	sym := q.params["symbol"]
	c, found := e.contract(sym)
	if !found {
		return fail(http.StatusNotFound, CodeSymbolNotFound, "symbol", "no contract symbol %q", sym)
	}
	var body struct {
		Cross    *bool `json:"cross"`
		Leverage *int  `json:"leverage"`
	}
	if res, bad := strictJSON(q.body, &body); bad {
		return res
	}
	switch {
	case body.Cross == nil:
		return invalid("cross", "cross (boolean) is required")
	case body.Leverage == nil:
		return invalid("leverage", "leverage (integer) is required")
	}
	cross, lev := *body.Cross, *body.Leverage
	p, held := e.positions[sym]
	if !held {
		p = e.newPosition(PositionSpec{Symbol: sym, Direction: exchange.Long, Leverage: 1, Empty: true}, q.now)
	}
	maxLev := c.RiskLimit.MaxLeverage
	if lev != p.Leverage && (lev < 1 || lev > maxLev) {
		return invalid("leverage", "leverage %d is outside 1..%d", lev, maxLev)
	}
	if held && lev == p.Leverage && cross == p.Cross {
		return success(positionWireOf(e.snapshot(p)))
	}
	next := *p
	next.Cross = cross
	next.Leverage = lev
	next.Version++
	next.UpdatedAt = q.now.UnixMilli()
	balance := e.balance
	if !p.Empty {
		next.Margin = margin.Margin(p.EntryValue, lev)
		delta := next.Margin.Sub(p.Margin)
		if delta.GreaterThan(e.balance) {
			return rejected(CodeInsufficientBalance, "leverage",
				"leverage %d needs %s more margin; the free balance is %s", lev, delta, e.balance)
		}
		balance = e.balance.Sub(delta)
		next.LiquidationPrice = e.liquidationPrice(&next, balance)
		if ix, ok := e.indexes[c.BaseName]; ok && crossed(next.Direction, ix.price, next.LiquidationPrice) {
			field := "leverage"
			if cross != p.Cross {
				field = "cross"
			}
			return rejected(CodeInsufficientMargin, field,
				"the new liquidation price %s would be past the index price %s", next.LiquidationPrice, ix.price)
		}
	}
	modeChanged := p.Cross != next.Cross
	*p = next
	e.putPosition(sym, p)
	// The other cross positions' pool changes with the free balance, and
	// with a position that leaves or joins it (its margin, PNL and
	// maintenance margin): their liquidation prices move either way.
	if !balance.Equal(e.balance) || modeChanged {
		e.balance = balance
		e.refreshCross(q.now)
	}
	return success(positionWireOf(e.snapshot(p)))
}

// rejected is a 400 with a code other than PARAMETER_INVALID.
func rejected(code, field, format string, args ...any) response {
	return fail(http.StatusBadRequest, code, field, format, args...)
}

// strictJSON decodes a JSON object body rejecting unknown fields and
// trailing data.
func strictJSON(body []byte, v any) (response, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalid(jsonField(err), "body: %v", err), true
	}
	if dec.More() {
		return invalid("body", "body: trailing data after the JSON object"), true
	}
	return response{}, false
}

// cancel is POST /v1/contracts/orders/{symbol}/cancel (body and response
// not shown by the spec): the body is empty or a JSON object with no
// fields ({}); every open order of the symbol is cancelled — it becomes a
// closed order with status CANCELLED — and the answer is
// {"symbol": name, "cancelled": count}. Cancelling again answers 0.
func (e *Exchange) cancel(q *request) response {
	sym := q.params["symbol"]
	if len(bytes.TrimSpace(q.body)) > 0 {
		if _, found := e.contract(sym); found {
			var none struct{}
			if res, bad := strictJSON(q.body, &none); bad {
				return res
			}
		}
	}
	n, res, ok := e.cancelAll(sym, q.now)
	if !ok {
		return res
	}
	return success(struct {
		Symbol    string `json:"symbol"`
		Cancelled int    `json:"cancelled"`
	}{sym, n})
}

// cancelAll cancels every open order of sym at now, as cancel does, and
// returns how many there were; a symbol with no contract is refused (res,
// not ok).
func (e *Exchange) cancelAll(sym string, now time.Time) (n int, res response, ok bool) {
	c, found := e.contract(sym)
	if !found {
		return 0, fail(http.StatusNotFound, CodeSymbolNotFound, "symbol", "no contract symbol %q", sym), false
	}
	n = e.openOrders[sym]
	e.openOrders[sym] = 0
	for range n {
		e.closeOrder(c, now, "CANCELLED")
	}
	return n, response{}, true
}

// closedOrder is an order that is no longer open. Its fields are not
// shown by the spec; they are served as closedOrderWire.
type closedOrder struct {
	id        int64
	symbol    string
	symbolID  int64
	side      string
	typ       string
	price     decimal.Decimal
	quantity  decimal.Decimal
	filled    decimal.Decimal
	fee       decimal.Decimal
	status    string
	flags     int
	createdAt int64
	updatedAt int64
}

// closedOrderWire is an element of results in the closed-orders page.
type closedOrderWire struct {
	ID             int64  `json:"id"`
	Symbol         string `json:"symbol"`
	SymbolID       int64  `json:"symbolId"`
	Side           string `json:"side"`
	Type           string `json:"type"`
	Price          str    `json:"price"`
	Quantity       str    `json:"quantity"`
	FilledQuantity str    `json:"filledQuantity"`
	Fee            str    `json:"fee"`
	Status         string `json:"status"`
	Flags          int    `json:"flags"`
	CreatedAt      int64  `json:"createdAt"`
	UpdatedAt      int64  `json:"updatedAt"`
}

// generateClosed makes n closed orders, spaced apart and ending at the
// start, from the seeded generator. Call with e.mu held.
func (e *Exchange) generateClosed(n int, spacing time.Duration) {
	for i := range n {
		c := &e.contracts[e.orderRand.IntN(len(e.contracts))]
		at := e.start.Add(-time.Duration(n-i) * spacing)
		status := "FILLED"
		if e.orderRand.IntN(10) < 3 {
			status = "CANCELLED"
		}
		e.closeOrder(c, at, status)
	}
}

// closeOrder appends a closed order on c at time at with a price near the
// index and a quantity of a few minimum increments. Call with e.mu held.
func (e *Exchange) closeOrder(c *exchange.ContractSymbol, at time.Time, status string) {
	r := e.orderRand
	ref := decimal.NewFromInt(1)
	if ix, ok := e.indexes[c.BaseName]; ok {
		ref = ix.first
	}
	// Within ±2% of the index, on the quote increment grid.
	f := decimal.NewFromFloat(0.98 + 0.04*r.Float64())
	price := ref.Mul(f).DivRound(c.QuoteMinimumIncrement, 16).Floor().Mul(c.QuoteMinimumIncrement)
	if !price.IsPositive() {
		price = c.QuoteMinimumIncrement
	}
	qty := c.BaseMinimumIncrement.Mul(decimal.NewFromInt(int64(1 + r.IntN(100))))
	filled := qty
	if status == "CANCELLED" {
		filled = decimal.Zero
	}
	side := "BUY"
	if r.IntN(2) == 1 {
		side = "SELL"
	}
	typ := "LIMIT"
	if status == "FILLED" && r.IntN(4) == 0 {
		typ = "MARKET"
	}
	flags := []int{0, 0, exchange.PostOnly, exchange.ReduceOnly, exchange.ImmediateOrCancel}[r.IntN(5)]
	ms := at.UnixMilli()
	e.closed = append(e.closed, closedOrder{
		id:        e.nextOrderID,
		symbol:    c.Name,
		symbolID:  c.ID,
		side:      side,
		typ:       typ,
		price:     price,
		quantity:  qty,
		filled:    filled,
		fee:       filled.Mul(price).Mul(c.SettlementFeeRate).Round(8),
		status:    status,
		flags:     flags,
		createdAt: ms - int64(1+r.IntN(600))*1000,
		updatedAt: ms,
	})
	e.nextOrderID++
}

// monthPattern is the form of the range parameter.
var monthPattern = regexp.MustCompile(`^[0-9]{4}(0[1-9]|1[0-2])$`)

// closedOrders is GET /v1/contracts/orders/closed: the closed orders whose
// updatedAt (UTC) falls in the month range (YYYYMM, required), with id above
// offsetId (default 0), ascending by id, limit (1..100, default 50) per
// page. nextOffsetId is the last id of the page (offsetId when empty) and
// hasMore tells whether another page follows.
func (e *Exchange) closedOrders(q *request) response {
	rng := q.query.Get("range")
	if !monthPattern.MatchString(rng) {
		return invalid("range", "range must be a month as YYYYMM, got %q", rng)
	}
	year, _ := strconv.Atoi(rng[:4])
	month, _ := strconv.Atoi(rng[4:])
	from := time.Date(year, time.Month(month), 1, 0, 0, 0, 0, time.UTC)
	lo, hi := from.UnixMilli(), from.AddDate(0, 1, 0).UnixMilli()
	offset := int64(0)
	if v := q.query.Get("offsetId"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return invalid("offsetId", "offsetId must be a non-negative integer, got %q", v)
		}
		offset = n
	}
	limit := defaultClosedLimit
	if v := q.query.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxClosedLimit {
			return invalid("limit", "limit must be an integer in 1..%d, got %q", maxClosedLimit, v)
		}
		limit = n
	}
	page := struct {
		HasMore      bool              `json:"hasMore"`
		NextOffsetID int64             `json:"nextOffsetId"`
		Results      []closedOrderWire `json:"results"`
		Range        string            `json:"range"`
	}{NextOffsetID: offset, Results: []closedOrderWire{}, Range: rng}
	for _, o := range e.closed {
		if o.id <= offset || o.updatedAt < lo || o.updatedAt >= hi {
			continue
		}
		if len(page.Results) == limit {
			page.HasMore = true
			break
		}
		page.Results = append(page.Results, closedOrderWire{
			ID:             o.id,
			Symbol:         o.symbol,
			SymbolID:       o.symbolID,
			Side:           o.side,
			Type:           o.typ,
			Price:          str(o.price),
			Quantity:       str(o.quantity),
			FilledQuantity: str(o.filled),
			Fee:            str(o.fee),
			Status:         o.status,
			Flags:          o.flags,
			CreatedAt:      o.createdAt,
			UpdatedAt:      o.updatedAt,
		})
		page.NextOffsetID = o.id
	}
	return success(page)
}

// positionAnswer is a settings call's success answer with the position as
// it is (the NotApplied fault).
func (e *Exchange) positionAnswer(sym string) response {
	p, held := e.positions[sym]
	if !held {
		return fail(http.StatusNotFound, CodeSymbolNotFound, "symbol", "no position on %q", sym)
	}
	return success(positionWireOf(e.snapshot(p)))
}
