package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/shopspring/decimal"
)

// Direct calls: the private and market operations a backtest needs, called
// in process without HTTP, signing or JSON decoding. They run the same
// handlers as the HTTP API, so a settings change or a cancel has exactly
// the effects and refusals it has over the wire; only the request log
// (Calls) does not see them.

// IndexPrices returns every index price by name, as /v1/market/indexPrices.
func (e *Exchange) IndexPrices() map[string]decimal.Decimal {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]decimal.Decimal, len(e.indexes))
	for name, ix := range e.indexes {
		out[name] = ix.price
	}
	return out
}

// IndexPricesInto empties dst and fills it with what IndexPrices returns:
// a caller that owns dst, and knows nothing else still reads it, reads the
// prices without a new map.
func (e *Exchange) IndexPricesInto(dst map[string]decimal.Decimal) {
	e.mu.Lock()
	defer e.mu.Unlock()
	clear(dst)
	for _, ix := range e.ixList {
		dst[ix.name] = ix.price
	}
}

// LiquidationPrices returns the liquidation price of every non-empty
// position by contract symbol name: what a backtest charts, without the
// risk levels that Positions computes.
func (e *Exchange) LiquidationPrices() map[string]decimal.Decimal {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]decimal.Decimal, len(e.positions))
	for sym, p := range e.positions {
		if !p.Empty {
			out[sym] = p.LiquidationPrice
		}
	}
	return out
}

// IndexPricesOf appends to dst[:0] the price of each index of names, zero
// when there is none: IndexPrices' of a few names, without a map.
func (e *Exchange) IndexPricesOf(names []string, dst []decimal.Decimal) []decimal.Decimal {
	e.mu.Lock()
	defer e.mu.Unlock()
	dst = dst[:0]
	for _, name := range names {
		var price decimal.Decimal
		if ix, ok := e.indexes[name]; ok {
			price = ix.price
		}
		dst = append(dst, price)
	}
	return dst
}

// LiquidationPricesOf appends to dst[:0] the liquidation price of the
// position held on each contract symbol of syms, zero when none is or it
// is empty: LiquidationPrices' of a few symbols, without a map.
func (e *Exchange) LiquidationPricesOf(syms []string, dst []decimal.Decimal) []decimal.Decimal {
	e.mu.Lock()
	defer e.mu.Unlock()
	dst = dst[:0]
	for _, sym := range syms {
		var liq decimal.Decimal
		if p, ok := e.positions[sym]; ok && !p.Empty {
			liq = p.LiquidationPrice
		}
		dst = append(dst, liq)
	}
	return dst
}

// StressAccountInto is the account Stress puts on the grid now (the
// positions as Together reads them) and the liquidation prices it holds,
// copied into ps and liqs (grown as need be): margin.Account.Stress of
// them later is what Stress gives now, for a caller that keeps many
// accounts and puts few on the grid.
func (e *Exchange) StressAccountInto(ps []margin.Position, liqs []decimal.Decimal) (margin.Account, []decimal.Decimal) {
	e.mu.Lock()
	defer e.mu.Unlock()
	acct, held := e.measureAccount()
	acct.Positions = append(ps[:0], acct.Positions...)
	return acct, append(liqs[:0], held...)
}

// SetIndexPrices sets several index prices at once, as SetIndexPrice does
// for one, and then runs the liquidation check once: a backtest step moves
// every index before any position is liquidated.
func (e *Exchange) SetIndexPrices(prices map[string]decimal.Decimal) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	for name, p := range prices {
		if ix, ok := e.indexes[name]; ok {
			ix.set(p, now)
		} else {
			e.addIndex(newManualIndex(name, p, now, e.histLimit))
		}
	}
	e.liquidate(now)
}

// Trades returns the listed currencies and symbols, as /v1/market/trades.
// The slices are copies.
func (e *Exchange) Trades() exchange.Trades {
	e.mu.Lock()
	defer e.mu.Unlock()
	return exchange.Trades{
		Currencies:       slices.Clone(e.currencies),
		SpotsSymbols:     slices.Clone(e.spots),
		ContractsSymbols: slices.Clone(e.contracts),
	}
}

// Routes of the direct calls, named in their errors.
const (
	settingsRoute = exchange.RouteSettings
	cancelRoute   = exchange.RouteCancel
)

// SetSettings sets the margin mode and leverage of the symbol's position, as
// POST /v1/contracts/positions/{symbol}/settings, and returns the position.
// A refusal is an *exchange.APIError with the status and code the HTTP API
// answers with.
func (e *Exchange) SetSettings(symbol string, s exchange.Settings) (exchange.Position, error) {
	body, err := json.Marshal(s)
	if err != nil {
		return exchange.Position{}, fmt.Errorf("set settings: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	res := e.settings(&request{params: map[string]string{"symbol": symbol}, body: body, now: e.now()})
	if err := directError(res, settingsRoute); err != nil {
		return exchange.Position{}, err
	}
	return e.snapshot(e.positions[symbol]), nil
}

// Cancel cancels every open order of the symbol, as POST
// /v1/contracts/orders/{symbol}/cancel, and returns how many there were.
func (e *Exchange) Cancel(symbol string) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	n, res, ok := e.cancelAll(symbol, e.now())
	if !ok {
		return 0, directError(res, cancelRoute)
	}
	return n, nil
}

// directError turns a handler's failure response into the error the client
// would return for it.
func directError(res response, route string) error {
	if res.status == http.StatusOK {
		return nil
	}
	var env exchange.Envelope
	_ = json.Unmarshal(res.body, &env) // the handlers always write an envelope
	return &exchange.APIError{Status: res.status, Code: env.Error, Field: env.ErrorField, Message: env.ErrorMessage,
		Method: http.MethodPost, Route: route}
}

// Local is the exchange as a client in the same process: the method set of
// exchange.Client that the engine reads and actuates through, served by the
// direct calls above, with no HTTP. Backtests and rule tests drive the
// engine with it.
type Local struct{ ex *Exchange }

// Local returns the exchange's in-process client.
func (e *Exchange) Local() Local { return Local{ex: e} }

// Local is a venue of the exchange contract that places orders; it serves
// no history and lists no closed orders (exchange/conformance runs on it).
var (
	_ exchange.Venue       = Local{}
	_ exchange.OrderPlacer = Local{}
)

// InProcess tells the engine that reads are plain calls: it need not read
// index prices and positions concurrently.
func (l Local) InProcess() bool { return true }

// Positions returns every position, as GET /v1/contracts/positions does.
func (l Local) Positions(context.Context) ([]exchange.Position, error) { return l.ex.Positions(), nil }

// IndexPrices returns the index prices, as GET /v1/market/indexPrices does.
func (l Local) IndexPrices(context.Context) (map[string]decimal.Decimal, error) {
	return l.ex.IndexPrices(), nil
}

// Trades returns the symbols, as GET /v1/market/trades does.
func (l Local) Trades(context.Context) (*exchange.Trades, error) {
	t := l.ex.Trades()
	return &t, nil
}

// SetPositionSettings changes a position's margin mode and leverage, with
// the HTTP endpoint's refusals as *exchange.APIError.
func (l Local) SetPositionSettings(_ context.Context, symbol string, s exchange.Settings) (*exchange.Position, error) {
	p, err := l.ex.SetSettings(symbol, s)
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// CancelOrders cancels the symbol's open orders and answers as the cancel
// endpoint does.
func (l Local) CancelOrders(_ context.Context, symbol string) (json.RawMessage, error) {
	n, err := l.ex.Cancel(symbol)
	if err != nil {
		return nil, err
	}
	// As fmt's %q and %d would write it.
	b := make([]byte, 0, len(`{"symbol":"","cancelled":}`)+len(symbol)+2+20)
	b = strconv.AppendQuote(append(b, `{"symbol":`...), symbol)
	b = strconv.AppendInt(append(b, `,"cancelled":`...), int64(n), 10)
	return json.RawMessage(append(b, '}')), nil
}

// Equity is the account's equity at the current index prices: the balance,
// and each open position's margin and unrealised PNL (a position whose
// index has no price counts its margin only). It is what a backtest
// charts every step, computed without building the positions list.
func (e *Exchange) Equity() decimal.Decimal {
	e.mu.Lock()
	defer e.mu.Unlock()
	eq := margin.NewSum(e.balance) // the decimals' sum, in int64 while it fits
	if len(e.terms) < len(e.slots) {
		e.terms = make([]margin.PositionTerms, len(e.slots))
	}
	for ci, p := range e.slots {
		if p == nil || p.Empty {
			continue
		}
		ix, ok := e.indexOf(ci)
		if !ok {
			eq.Add(p.Margin)
			continue
		}
		// The position's own figures converted once while they stay the
		// same copies: a step moves the index.
		t := &e.terms[ci]
		if !t.Same(p.Margin, p.EntryPrice, p.Quantity) {
			*t = margin.TermsOf(p.Margin, p.EntryPrice, p.Quantity)
		}
		eq.AddPosition(t, ix.price, p.Direction == exchange.Short)
	}
	return eq.Decimal()
}
