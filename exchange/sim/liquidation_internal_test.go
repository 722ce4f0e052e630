package sim

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/shopspring/decimal"
)

// The liquidation check's memo of the figures it found not crossed
// (nextLiquidation) liquidates what a check of every position afresh
// liquidates, at the same step: two exchanges take the same prices
// around their positions' liquidation prices, index paths that walk,
// positions put again (a direction turned, a leverage changed) and
// settings calls; one forgets its memo before each, and both list the
// same liquidations and positions after each. Its equity, summed from the
// positions' terms it keeps (margin.PositionTerms), is the sum of every
// figure afresh. On the way, TogetherAtLeast
// read in place (once no cross position is open: they are put isolated
// or liquidated) answers as margin's of the account measureAccount
// builds, against bounds around Together.
func TestLiquidationCheckMemoIsAFreshCheck(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 15, 12, 0, 0, 0, time.UTC)
	two := 2
	sc := &Scenario{Currencies: []string{"USDT"}, Balance: decimal.NewFromInt(100_000), OpenOrders: map[string]int{}}
	for i := range 6 {
		base, sym := fmt.Sprintf("C%d", i), fmt.Sprintf("X%d", i)
		sc.Currencies = append(sc.Currencies, base)
		sc.Contracts = append(sc.Contracts, ContractSpec{
			SymbolSpec: SymbolSpec{Name: sym, Base: base, Quote: "USDT", BaseScale: 2, QuoteScale: 2},
			RiskLimit:  RiskLimitSpec{MaxLeverage: 50, MaintenanceMarginRate: decimal.RequireFromString("0.005")}})
		dir := exchange.Long
		if i%2 == 1 {
			dir = exchange.Short
		}
		sc.Positions = append(sc.Positions, PositionSpec{Symbol: sym, Direction: dir, Quantity: decimal.NewFromInt(10),
			EntryPrice: decimal.NewFromInt(100), Leverage: 10 + i, Cross: i == 4 || i == 5})
		ix := IndexSpec{Name: base, Scale: &two, Points: []PricePoint{{Price: decimal.NewFromInt(100)}}}
		if i == 3 {
			ix = IndexSpec{Name: base, Scale: &two, Walk: &WalkSpec{Start: decimal.NewFromInt(100), Volatility: 0.02}, Interval: Duration(time.Minute)}
		}
		sc.Indexes = append(sc.Indexes, ix)
	}
	now := at
	mk := func() *Exchange {
		e, err := New(Config{Key: "k", Secret: "s", Scenario: sc, Seed: 3, Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	memo, fresh := mk(), mk()
	rng := rand.New(rand.NewPCG(1, 2))
	inPlace := 0
	ixInto := map[string]decimal.Decimal{"stale": decimal.Zero}
	names := []string{"C0", "C1", "C2", "C3", "C4", "C5", "NEW57", "NONE"}
	syms := []string{"X0", "X1", "X2", "X3", "X4", "X5", "X6", "NONE"}
	var ixOf, liqOf []decimal.Decimal
	for step := range 400 {
		now = at.Add(time.Duration(step) * time.Minute)
		var op func(e *Exchange)
		switch k := rng.IntN(10); {
		case step%50 == 7:
			name, price := fmt.Sprintf("NEW%d", step), decimal.New(int64(100+step), 0)
			op = func(e *Exchange) { e.SetIndexPrice(name, price) } // an index added
		case k < 6:
			prices := map[string]decimal.Decimal{}
			for range 3 {
				// Around the liquidation prices of 10× to 12× (about ±9%).
				prices[fmt.Sprintf("C%d", rng.IntN(6))] = decimal.New(int64(8800+rng.IntN(2400)), -2)
			}
			op = func(e *Exchange) { e.SetIndexPrices(prices) }
		case k < 8:
			op = func(e *Exchange) {}
		case k < 9:
			sym, dir := fmt.Sprintf("X%d", rng.IntN(6)), exchange.Long
			if rng.IntN(2) == 0 {
				dir = exchange.Short
			}
			spec := PositionSpec{Symbol: sym, Direction: dir, Quantity: decimal.NewFromInt(10), EntryPrice: decimal.NewFromInt(100), Leverage: 5 + rng.IntN(20)}
			op = func(e *Exchange) {
				if err := e.PutPosition(spec); err != nil {
					t.Fatal(err)
				}
			}
		default:
			sym, lev := fmt.Sprintf("X%d", rng.IntN(6)), 2+rng.IntN(30)
			op = func(e *Exchange) { _, _ = e.SetSettings(sym, exchange.Settings{Leverage: lev}) }
		}
		op(memo)
		memo.Step(now)
		fresh.mu.Lock()
		fresh.uncrossed = nil
		fresh.mu.Unlock()
		op(fresh)
		fresh.mu.Lock()
		fresh.uncrossed = nil
		fresh.mu.Unlock()
		fresh.Step(now)
		if got, want := memo.Liquidations(), fresh.Liquidations(); !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d: liquidations %v, checked afresh %v", step, got, want)
		}
		if got, want := memo.Positions(), fresh.Positions(); !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d: positions %+v, checked afresh %+v", step, got, want)
		}
		// The equity summed from the terms kept is the sum afresh.
		if got, want := memo.Equity(), equityAfresh(memo); !margin.SameDec(got, want) {
			t.Fatalf("step %d: equity %s, summed afresh %s", step, got, want)
		}
		// The lists the step's loops read are the maps.
		memo.IndexPricesInto(ixInto)
		if want := memo.IndexPrices(); !reflect.DeepEqual(ixInto, want) {
			t.Fatalf("step %d: index prices %v, of the map %v", step, ixInto, want)
		}
		ixOf, liqOf = memo.IndexPricesOf(names, ixOf), memo.LiquidationPricesOf(syms, liqOf)
		ixMap, liqMap := memo.IndexPrices(), memo.LiquidationPrices()
		for i := range names {
			if ixOf[i] != ixMap[names[i]] || liqOf[i] != liqMap[syms[i]] {
				t.Fatalf("step %d: %s %s, %s %s; of the maps %s, %s", step, names[i], ixOf[i], syms[i], liqOf[i], ixMap[names[i]], liqMap[syms[i]])
			}
		}
		together, ok := memo.Together()
		if !ok {
			continue
		}
		memo.mu.Lock()
		isolated := memo.crossOpen() == 0
		acct, liqs := memo.measureAccount()
		memo.mu.Unlock()
		if isolated {
			inPlace++
		}
		for _, bound := range []decimal.Decimal{together, together.Sub(decimal.New(1, -16)), together.Add(decimal.New(1, -16)),
			together.Mul(decimal.NewFromFloat(0.9)).Round(16), decimal.Zero, decimal.New(11, -1)} {
			if got, want := memo.TogetherAtLeast(bound), acct.TogetherAtLeast(liqs, bound); got != want {
				t.Fatalf("step %d: TogetherAtLeast(%s) %t, of the account built %t", step, bound, got, want)
			}
		}
	}
	if n := len(memo.Liquidations()); n < 5 {
		t.Errorf("%d liquidations: the check is hardly tested", n)
	}
	if inPlace < 50 {
		t.Errorf("TogetherAtLeast read in place at %d steps: hardly tested", inPlace)
	}
}

// equityAfresh is Equity, every figure converted afresh.
func equityAfresh(e *Exchange) decimal.Decimal {
	e.mu.Lock()
	defer e.mu.Unlock()
	eq := margin.NewSum(e.balance)
	for ci, p := range e.slots {
		if p == nil || p.Empty {
			continue
		}
		eq.Add(p.Margin)
		if ix, ok := e.indexOf(ci); ok {
			eq.AddPNL(ix.price, p.EntryPrice, p.Quantity, p.Direction == exchange.Short)
		}
	}
	return eq.Decimal()
}
