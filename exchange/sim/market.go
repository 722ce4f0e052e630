package sim

import (
	"net/http"

	"strconv"
	"time"

	"github.com/riskguard/riskguard/exchange"

	"github.com/shopspring/decimal"
)

// Market endpoints (spec 4.1). Where the spec shows no shape, the choice
// is documented on the handler. Decimals are JSON numbers.

// Page bounds of the history endpoints.
const (
	defaultHistoryLimit = 500
	maxHistoryLimit     = 5000
	defaultTicksLimit   = 50
	defaultDepth        = 10
	maxDepth            = 100
)

func (e *Exchange) trades(*request) response {
	t := tradesWire{
		Currencies:       e.currencies,
		SpotsSymbols:     make([]spotWire, 0, len(e.spots)),
		ContractsSymbols: make([]contractWire, 0, len(e.contracts)),
	}
	for _, s := range e.spots {
		t.SpotsSymbols = append(t.SpotsSymbols, spotWireOf(s))
	}
	for _, c := range e.contracts {
		t.ContractsSymbols = append(t.ContractsSymbols, contractWire{
			spotWire:          spotWireOf(c.SpotSymbol),
			Type:              c.Type,
			RiskLimit:         riskLimitWireOf[num](c.RiskLimit),
			SettlementFeeRate: num(c.SettlementFeeRate),
		})
	}
	return success(t)
}

func (e *Exchange) timestamp(q *request) response { return success(q.now.UnixMilli()) }

func (e *Exchange) errorCodes(*request) response { return success(errorCodes()) }

// indexPrices maps each index name to its price.
func (e *Exchange) indexPrices(*request) response {
	out := make(map[string]num, len(e.indexes))
	for name, ix := range e.indexes {
		out[name] = num(ix.price)
	}
	return success(out)
}

// prices maps each symbol name (spot and contract) whose base has an index
// to [bid, ask, last]: last is the index price, bid and ask one quote
// increment either side, on the increment grid.
func (e *Exchange) prices(*request) response {
	out := map[string][]num{}
	add := func(name, base string, inc decimal.Decimal) {
		if ix, ok := e.indexes[base]; ok {
			bid, ask := bidAsk(ix.price, inc)
			out[name] = []num{num(bid), num(ask), num(ix.price)}
		}
	}
	for _, s := range e.spots {
		add(s.Name, s.BaseName, s.QuoteMinimumIncrement)
	}
	for _, c := range e.contracts {
		add(c.Name, c.BaseName, c.QuoteMinimumIncrement)
	}
	return success(out)
}

// bidAsk is the best bid and ask around last: one increment away, snapped
// outwards to the increment grid.
func bidAsk(last, inc decimal.Decimal) (bid, ask decimal.Decimal) {
	bid = last.Sub(inc).DivRound(inc, 16).Floor().Mul(inc)
	ask = last.Add(inc).DivRound(inc, 16).Ceil().Mul(inc)
	if bid.IsNegative() {
		bid = decimal.Zero
	}
	return bid, ask
}

// symbolIndex resolves a spot or contract symbol to the index of its base
// (nil when the base has none) and the symbol itself.
func (e *Exchange) symbolIndex(name string) (*index, exchange.SpotSymbol, bool) {
	ref, ok := e.symbolByName[name]
	if !ok {
		return nil, exchange.SpotSymbol{}, false
	}
	s := e.spots
	if ref.contract {
		s := e.contracts[ref.i].SpotSymbol
		return e.indexes[s.BaseName], s, true
	}
	return e.indexes[s[ref.i].BaseName], s[ref.i], true
}

// ticks (not shown by the spec): the latest index samples of the symbol's
// base as [time ms, price] pairs, oldest first; query from, to (ms) and
// limit (default 50, at most 5000).
func (e *Exchange) ticks(q *request) response {
	ix, _, found := e.symbolIndex(q.params["symbol"])
	if !found {
		return fail(http.StatusNotFound, CodeSymbolNotFound, "symbol", "no symbol %q", q.params["symbol"])
	}
	w, bad := window(q, defaultTicksLimit)
	if bad != nil {
		return *bad
	}
	return success(pairs(ix, w))
}

// indexHistory: the index's samples as [time ms, price] pairs, oldest
// first; query from, to (ms) and limit (default 500, at most 5000). With
// from the earliest samples from there are returned (page forward with
// from = last time + 1), without it the latest.
func (e *Exchange) indexHistory(q *request) response {
	ix, ok := e.indexes[q.params["name"]]
	if !ok {
		return fail(http.StatusNotFound, CodeIndexNotFound, "name", "no index %q", q.params["name"])
	}
	w, bad := window(q, defaultHistoryLimit)
	if bad != nil {
		return *bad
	}
	return success(pairs(ix, w))
}

func pairs(ix *index, w timeWindow) [][2]any {
	out := [][2]any{}
	if ix == nil {
		return out
	}
	for _, s := range between(ix.history, w.from, w.to, w.limit, w.fromSet) {
		out = append(out, [2]any{s.ms, num(s.price)})
	}
	return out
}

// timeWindow is the from/to/limit of a history query.
type timeWindow struct {
	from, to int64
	limit    int
	fromSet  bool
}

// window reads from, to (ms, default: all) and limit (1..5000) from the
// query.
func window(q *request, defaultLimit int) (timeWindow, *response) {
	w := timeWindow{from: 0, to: q.now.UnixMilli(), limit: defaultLimit}
	for _, p := range []struct {
		name string
		dst  *int64
	}{{"from", &w.from}, {"to", &w.to}} {
		v := q.query.Get(p.name)
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			r := invalid(p.name, "%s must be a time in milliseconds, got %q", p.name, v)
			return w, &r
		}
		*p.dst = n
		if p.name == "from" {
			w.fromSet = true
		}
	}
	if v := q.query.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxHistoryLimit {
			r := invalid("limit", "limit must be an integer in 1..%d, got %q", maxHistoryLimit, v)
			return w, &r
		}
		w.limit = n
	}
	if w.from > w.to {
		r := invalid("from", "from %d is after to %d", w.from, w.to)
		return w, &r
	}
	return w, nil
}

// barPeriod is the period of a bar type of /v1/market/bars/{symbol}/{type}.
func barPeriod(typ string) (time.Duration, bool) {
	switch typ {
	case "1m":
		return time.Minute, true
	case "5m":
		return 5 * time.Minute, true
	case "15m":
		return 15 * time.Minute, true
	case "30m":
		return 30 * time.Minute, true
	case "1h":
		return time.Hour, true
	case "4h":
		return 4 * time.Hour, true
	case "1d":
		return 24 * time.Hour, true
	}
	return 0, false
}

// bars (not shown by the spec): OHLC bars of the symbol's index, each
// [open time ms, open, high, low, close, volume], oldest first, the open
// time a multiple of the period since the epoch (UTC). type is one of 1m,
// 5m, 15m, 30m, 1h, 4h, 1d. volume is the number of index samples in the
// bar: the sim does not trade. Query from, to, limit as for index history,
// applied to open times.
func (e *Exchange) bars(q *request) response {
	ix, _, found := e.symbolIndex(q.params["symbol"])
	if !found {
		return fail(http.StatusNotFound, CodeSymbolNotFound, "symbol", "no symbol %q", q.params["symbol"])
	}
	period, ok := barPeriod(q.params["type"])
	if !ok {
		return invalid("type", "bar type %q is not one of 1m, 5m, 15m, 30m, 1h, 4h, 1d", q.params["type"])
	}
	w, bad := window(q, defaultHistoryLimit)
	if bad != nil {
		return *bad
	}
	p := period.Milliseconds()
	var bars [][6]any
	type bar struct {
		open       int64
		o, h, l, c decimal.Decimal
		n          int64
	}
	var cur *bar
	flush := func() {
		if cur != nil {
			bars = append(bars, [6]any{cur.open, num(cur.o), num(cur.h), num(cur.l), num(cur.c), cur.n})
		}
	}
	if ix != nil {
		for _, s := range between(ix.history, w.from-w.from%p, w.to, len(ix.history), true) {
			open := s.ms - s.ms%p
			if cur == nil || cur.open != open {
				flush()
				cur = &bar{open: open, o: s.price, h: s.price, l: s.price}
			}
			cur.h = decimal.Max(cur.h, s.price)
			cur.l = decimal.Min(cur.l, s.price)
			cur.c = s.price
			cur.n++
		}
		flush()
	}
	if len(bars) > w.limit {
		if w.fromSet {
			bars = bars[:w.limit]
		} else {
			bars = bars[len(bars)-w.limit:]
		}
	}
	if bars == nil {
		bars = [][6]any{}
	}
	return success(bars)
}

// orderBook (not shown by the spec): {"time": ms, "bids": [[price,
// quantity], …], "asks": […]}, best first, depth levels a side (query depth,
// default 10, at most 100) one quote increment apart around the index; the
// quantities are synthetic but fixed per level.
func (e *Exchange) orderBook(q *request) response {
	ix, sym, found := e.symbolIndex(q.params["symbol"])
	if !found {
		return fail(http.StatusNotFound, CodeSymbolNotFound, "symbol", "no symbol %q", q.params["symbol"])
	}
	depth := defaultDepth
	if v := q.query.Get("depth"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxDepth {
			return invalid("depth", "depth must be an integer in 1..%d, got %q", maxDepth, v)
		}
		depth = n
	}
	type book struct {
		Time int64    `json:"time"`
		Bids [][2]num `json:"bids"`
		Asks [][2]num `json:"asks"`
	}
	b := book{Time: q.now.UnixMilli(), Bids: [][2]num{}, Asks: [][2]num{}}
	if ix != nil {
		qi, bi := sym.QuoteMinimumIncrement, sym.BaseMinimumIncrement
		bid, ask := bidAsk(ix.price, qi)
		for i := range depth {
			step := qi.Mul(decimal.NewFromInt(int64(i)))
			qty := bi.Mul(decimal.NewFromInt(int64(10 * (1 + (i*7)%11)))).Round(int32(sym.BaseScale))
			if p := bid.Sub(step); p.IsPositive() {
				b.Bids = append(b.Bids, [2]num{num(p), num(qty)})
			}
			b.Asks = append(b.Asks, [2]num{num(ask.Add(step)), num(qty)})
		}
	}
	return success(b)
}

// indexList (not shown by the spec): every index as {"name", "price",
// "time"} sorted by name; time is the last sample's, in ms.
func (e *Exchange) indexList(*request) response {
	type item struct {
		Name  string `json:"name"`
		Price num    `json:"price"`
		Time  int64  `json:"time"`
	}
	out := []item{}
	for _, n := range e.indexNames() {
		ix := e.indexes[n]
		var t int64
		if len(ix.history) > 0 {
			t = ix.history[len(ix.history)-1].ms
		}
		out = append(out, item{Name: n, Price: num(ix.price), Time: t})
	}
	return success(out)
}

// indexValue is a composite of every index: 1000 × the mean of each
// index's price over its price at the exchange's start, rounded to 4
// places. It reads 1000 at the start.
func (e *Exchange) indexValue(*request) response {
	if len(e.indexes) == 0 {
		return success(num(decimal.Zero))
	}
	sum := decimal.Zero
	for _, ix := range e.indexes {
		sum = sum.Add(ix.price.DivRound(ix.first, 16))
	}
	v := sum.Mul(decimal.NewFromInt(1000)).DivRound(decimal.NewFromInt(int64(len(e.indexes))), 4)
	return success(num(v))
}
