// Package conformance is the one suite of tests every venue of the
// exchange contract passes: the signed client over HTTP, the simulated
// exchange in process, and any venue added later (as the CSI and OCI
// conformance tests serve every implementation). It checks what the guard relies on, not the wire: the
// reads' shapes, decimals kept to their last digit, a reduce-only order
// that reduces and is answered with its fill (and one that would grow the
// position refused), a cancel that can be repeated, a settings call that
// can be repeated, a symbol the venue does not list refused with a typed
// error, and the history oldest first.
//
// A venue's test calls Run with a function that builds the venue afresh,
// on an account it may change, for each of the suite's tests.
package conformance

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/shopspring/decimal"
)

// Target is a venue under test and what the suite may assume of its
// account.
type Target struct {
	// Venue is the venue, freshly built: the suite changes its account.
	Venue exchange.Venue
	// Offers is the set of calls the venue is declared to offer (its
	// row of the registry of venues); nil checks only that Capabilities
	// lists the calls every venue offers.
	Offers exchange.Calls
	// Symbol is a contract symbol with an open position of at least two
	// of its base increments, which the suite reduces by one increment.
	Symbol string
	// Quantity is that position's quantity as the venue writes it, e.g.
	// "0.8": read back digit for digit.
	Quantity string
	// Unknown is a symbol the venue does not list.
	Unknown string
	// Index is an index with some history, read when the venue is an
	// exchange.HistoryReader.
	Index string
	// Month is a month (YYYYMM) with closed orders, read when the venue
	// is an exchange.ClosedOrderReader.
	Month string
}

// callTimeout bounds each test's calls: a venue that hangs fails the
// test rather than the run.
const callTimeout = 20 * time.Second

// Run runs the suite against the venues newVenue builds, one for each
// test.
func Run(t *testing.T, newVenue func(t *testing.T) Target) {
	t.Helper()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, ctx context.Context, x Target)
	}{
		{"capabilities", capabilities},
		{"reads", reads},
		{"reduce-only order reduces and is answered with its fill", reduces},
		{"reduce-only order that would grow is refused", refusesGrowth},
		{"cancel is repeatable", cancelRepeats},
		{"settings call is repeatable", settingsRepeat},
		{"unknown symbol is a typed error", unknownSymbol},
		{"history is oldest first", historyOrdered},
		{"closed orders page", closedOrders},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			defer cancel()
			tc.run(t, ctx, newVenue(t))
		})
	}
}

// capabilities: the venue offers at least the calls every venue offers,
// and exactly what it is declared to.
func capabilities(t *testing.T, _ context.Context, x Target) {
	got := exchange.Capabilities(x.Venue)
	for _, c := range exchange.Contract()[:5] {
		if !got.Has(c) {
			t.Errorf("Capabilities = %v: lacks %s, which every venue offers", got, c)
		}
	}
	if x.Offers != nil && !slices.Equal(got, x.Offers) {
		t.Errorf("Capabilities = [%v], declared [%v]", got, x.Offers)
	}
}

// held reads the target's position, failing the test without it.
func held(t *testing.T, ctx context.Context, x Target) exchange.Position {
	t.Helper()
	ps, err := x.Venue.Positions(ctx)
	if err != nil {
		t.Fatalf("Positions: %v", err)
	}
	sym := contract(t, ctx, x, x.Symbol)
	for _, p := range ps {
		if p.SymbolID == sym.ID && !p.Empty {
			return p
		}
	}
	t.Fatalf("Positions: no open position on %s among %d", x.Symbol, len(ps))
	return exchange.Position{}
}

// contract is the listed contract symbol name.
func contract(t *testing.T, ctx context.Context, x Target, name string) exchange.ContractSymbol {
	t.Helper()
	tr, err := x.Venue.Trades(ctx)
	if err != nil {
		t.Fatalf("Trades: %v", err)
	}
	i := slices.IndexFunc(tr.ContractsSymbols, func(c exchange.ContractSymbol) bool { return c.Name == name })
	if i < 0 {
		t.Fatalf("Trades: %s is not listed", name)
	}
	return tr.ContractsSymbols[i]
}

// increment is the smallest quantity step of c.
func increment(c exchange.ContractSymbol) decimal.Decimal {
	if c.BaseMinimumIncrement.IsPositive() {
		return c.BaseMinimumIncrement
	}
	return decimal.New(1, -int32(c.BaseScale))
}

// reads: every open position is on a listed contract, with a risk limit,
// and that contract's index has a price; the target's quantity reads
// back to its last digit.
func reads(t *testing.T, ctx context.Context, x Target) {
	tr, err := x.Venue.Trades(ctx)
	if err != nil {
		t.Fatalf("Trades: %v", err)
	}
	if len(tr.ContractsSymbols) == 0 {
		t.Fatal("Trades: no contract symbol")
	}
	byID := map[int64]exchange.ContractSymbol{}
	for _, c := range tr.ContractsSymbols {
		byID[c.ID] = c
		if c.RiskLimit.MaxLeverage < 1 || !c.RiskLimit.MaintenanceMarginRate.IsPositive() {
			t.Errorf("Trades: %s's risk limit %+v: no max leverage or maintenance margin rate", c.Name, c.RiskLimit)
		}
	}
	idx, err := x.Venue.IndexPrices(ctx)
	if err != nil {
		t.Fatalf("IndexPrices: %v", err)
	}
	ps, err := x.Venue.Positions(ctx)
	if err != nil {
		t.Fatalf("Positions: %v", err)
	}
	open := 0
	for _, p := range ps {
		if p.Empty {
			continue
		}
		open++
		c, ok := byID[p.SymbolID]
		switch {
		case !ok:
			t.Errorf("position %s: symbol id %d is not listed by Trades", p.ID, p.SymbolID)
			continue
		case p.Direction != exchange.Long && p.Direction != exchange.Short:
			t.Errorf("position on %s: direction %q", c.Name, p.Direction)
		case !p.Quantity.IsPositive() || p.Leverage < 1:
			t.Errorf("position on %s: quantity %s, leverage %d", c.Name, p.Quantity, p.Leverage)
		}
		if price, ok := idx[c.BaseName]; !ok || !price.IsPositive() {
			t.Errorf("IndexPrices: %s (the index of %s) = %s, %v", c.BaseName, c.Name, price, ok)
		}
	}
	if open == 0 {
		t.Error("Positions: none open")
	}
	if p := held(t, ctx, x); p.Quantity.String() != x.Quantity {
		t.Errorf("%s quantity = %s, want %s digit for digit", x.Symbol, p.Quantity, x.Quantity)
	}
}

// placer is the venue's OrderPlacer; the test is skipped without one.
func placer(t *testing.T, x Target) exchange.OrderPlacer {
	t.Helper()
	op, ok := x.Venue.(exchange.OrderPlacer)
	if !ok {
		t.Skip("the venue places no orders")
	}
	return op
}

// reduces: a reduce-only order for one increment is answered with its
// fill, and the position read back is smaller by exactly that.
func reduces(t *testing.T, ctx context.Context, x Target) {
	op := placer(t, x)
	before := held(t, ctx, x)
	qty := increment(contract(t, ctx, x, x.Symbol))
	side := exchange.CloseSide(before.Direction)
	got, err := op.PlaceOrder(ctx, x.Symbol, exchange.ReduceOnlyIOC(side, qty))
	if err != nil {
		t.Fatalf("PlaceOrder %s %s %s: %v", x.Symbol, side, qty, err)
	}
	if got == nil || !got.FilledQuantity.Equal(qty) || got.Side != side {
		t.Fatalf("PlaceOrder answered %+v, want a %s filled for %s", got, side, qty)
	}
	after := held(t, ctx, x)
	want := before.Quantity.Sub(qty)
	if !after.Quantity.Equal(want) || after.Direction != before.Direction {
		t.Errorf("read back %s %s, want %s %s", after.Direction, after.Quantity, before.Direction, want)
	}
}

// refusesGrowth: a reduce-only order on the side that grows the position
// is refused with a typed error and changes nothing.
func refusesGrowth(t *testing.T, ctx context.Context, x Target) {
	op := placer(t, x)
	before := held(t, ctx, x)
	grow := exchange.Buy // the side that does not close it
	if exchange.CloseSide(before.Direction) == exchange.Buy {
		grow = exchange.Sell
	}
	qty := increment(contract(t, ctx, x, x.Symbol))
	got, err := op.PlaceOrder(ctx, x.Symbol, exchange.ReduceOnlyIOC(grow, qty))
	var apiErr *exchange.APIError
	if !errors.As(err, &apiErr) || apiErr.Status < 400 || apiErr.Status >= 500 {
		t.Fatalf("PlaceOrder %s %s on a %s: %+v, %v; want an *exchange.APIError 4xx", grow, qty, before.Direction, got, err)
	}
	if after := held(t, ctx, x); !after.Quantity.Equal(before.Quantity) {
		t.Errorf("refused order moved %s from %s to %s", x.Symbol, before.Quantity, after.Quantity)
	}
}

// cancelRepeats: cancelling twice succeeds twice (nothing left to cancel
// is no failure).
func cancelRepeats(t *testing.T, ctx context.Context, x Target) {
	for i := range 2 {
		if _, err := x.Venue.CancelOrders(ctx, x.Symbol); err != nil {
			t.Fatalf("CancelOrders %s, call %d: %v", x.Symbol, i+1, err)
		}
	}
}

// settingsRepeat: the position's own settings, sent twice, are accepted
// twice and leave it as it was.
func settingsRepeat(t *testing.T, ctx context.Context, x Target) {
	before := held(t, ctx, x)
	s := exchange.Settings{Cross: before.Cross, Leverage: before.Leverage}
	for i := range 2 {
		p, err := x.Venue.SetPositionSettings(ctx, x.Symbol, s)
		if err != nil {
			t.Fatalf("SetPositionSettings %s %+v, call %d: %v", x.Symbol, s, i+1, err)
		}
		if p.Cross != s.Cross || p.Leverage != s.Leverage || !p.Quantity.Equal(before.Quantity) {
			t.Errorf("call %d answered cross %v leverage %d quantity %s, want %v %d %s", i+1,
				p.Cross, p.Leverage, p.Quantity, s.Cross, s.Leverage, before.Quantity)
		}
	}
	if after := held(t, ctx, x); after.Cross != s.Cross || after.Leverage != s.Leverage {
		t.Errorf("read back cross %v leverage %d, want %v %d", after.Cross, after.Leverage, s.Cross, s.Leverage)
	}
}

// unknownSymbol: each call on a symbol the venue does not list is an
// *exchange.APIError with a 4xx status, which the guard tells from an
// outage.
func unknownSymbol(t *testing.T, ctx context.Context, x Target) {
	calls := map[exchange.Call]func() error{
		exchange.CallSetPositionSettings: func() error {
			_, err := x.Venue.SetPositionSettings(ctx, x.Unknown, exchange.Settings{Leverage: 1})
			return err
		},
		exchange.CallCancelOrders: func() error { _, err := x.Venue.CancelOrders(ctx, x.Unknown); return err },
	}
	if op, ok := x.Venue.(exchange.OrderPlacer); ok {
		calls[exchange.CallPlaceOrder] = func() error {
			_, err := op.PlaceOrder(ctx, x.Unknown, exchange.ReduceOnlyIOC(exchange.Sell, decimal.NewFromInt(1)))
			return err
		}
	}
	for name, call := range calls {
		err := call()
		var apiErr *exchange.APIError
		if !errors.As(err, &apiErr) || apiErr.Status < 400 || apiErr.Status >= 500 {
			t.Errorf("%s on %q: %v; want an *exchange.APIError 4xx", name, x.Unknown, err)
		}
	}
}

// historyOrdered: the index's history is rows of at least a time and a
// positive price, strictly oldest first.
func historyOrdered(t *testing.T, ctx context.Context, x Target) {
	h, ok := x.Venue.(exchange.HistoryReader)
	if !ok {
		t.Skip("the venue serves no history")
	}
	rows, err := h.IndexHistory(ctx, x.Index, nil)
	if err != nil {
		t.Fatalf("IndexHistory %s: %v", x.Index, err)
	}
	if len(rows) < 2 {
		t.Fatalf("IndexHistory %s: %d rows, want some", x.Index, len(rows))
	}
	for i, r := range rows {
		if len(r) < 2 || !r[1].IsPositive() {
			t.Fatalf("IndexHistory %s row %d = %v: want [time ms, positive price]", x.Index, i, r)
		}
		if i > 0 && !r[0].GreaterThan(rows[i-1][0]) {
			t.Fatalf("IndexHistory %s row %d at %s after %s: not oldest first", x.Index, i, r[0], rows[i-1][0])
		}
	}
	if _, err := h.IndexHistory(ctx, x.Unknown, nil); err == nil {
		t.Errorf("IndexHistory of %q: no error", x.Unknown)
	}
}

// closedOrders: the first page of the month is of that month, no longer
// than asked, and says where the next starts when there is more.
func closedOrders(t *testing.T, ctx context.Context, x Target) {
	r, ok := x.Venue.(exchange.ClosedOrderReader)
	if !ok {
		t.Skip("the venue lists no closed orders")
	}
	const limit = 10
	p, err := r.ClosedOrders(ctx, x.Month, 0, limit)
	if err != nil {
		t.Fatalf("ClosedOrders %s: %v", x.Month, err)
	}
	if p.Range != x.Month || len(p.Results) == 0 || len(p.Results) > limit || (p.HasMore && p.NextOffsetID == 0) {
		t.Errorf("ClosedOrders %s: range %q, %d results, more %v from %d", x.Month, p.Range, len(p.Results), p.HasMore, p.NextOffsetID)
	}
}
