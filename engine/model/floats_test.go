package model

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/shopspring/decimal"
)

// The tick's account hands the grid the floats the view converted for the
// rules and each symbol's σ (act.Model.UseFloats): each figure is
// margin.Float of the account's own decimal, bit for bit, and σ what Sigma
// says, so the grid and the forfeit read from them are the ones read from
// the decimals (margin.Account.PricedFrom against Priced),
// tick after tick while the indexes move, on the simulated exchange's
// reads; an account a call moved the model on to has none.
func TestAccountFloatsAreTheDecimals(t *testing.T) {
	t.Parallel()
	two := 2
	sc := &sim.Scenario{Currencies: []string{"USDT"}, Balance: decimal.NewFromInt(10_000_000_000)}
	for i := range 6 {
		base, sym := fmt.Sprintf("C%d", i), fmt.Sprintf("X%d", i)
		sc.Currencies = append(sc.Currencies, base)
		sc.Contracts = append(sc.Contracts, sim.ContractSpec{
			SymbolSpec: sim.SymbolSpec{Name: sym, Base: base, Quote: "USDT", BaseScale: 6, QuoteScale: 2},
			RiskLimit:  sim.RiskLimitSpec{MaxLeverage: 50, MaintenanceMarginRate: decimal.RequireFromString("0.005")}})
		dir := exchange.Long
		if i%2 == 1 {
			dir = exchange.Short
		}
		// The first position's entry value has 17 digits, past 2^53.
		q := decimal.New(int64(1234+977*i), -3)
		if i == 0 {
			q = decimal.New(10123456789, -6)
		}
		sc.Positions = append(sc.Positions, sim.PositionSpec{Symbol: sym, Direction: dir, Cross: i%3 != 0,
			Quantity: q, EntryPrice: decimal.New(int64(9876543+12345*i), -2), Leverage: 3 + 7*i})
		sc.Indexes = append(sc.Indexes, sim.IndexSpec{Name: base, Scale: &two, Points: []sim.PricePoint{{Price: decimal.New(int64(9876543+12345*i), -2)}}})
	}
	t0 := time.Date(2026, 11, 28, 7, 0, 0, 0, time.UTC)
	now := t0
	ex, err := sim.New(sim.Config{Key: "k", Secret: "s", Scenario: sc, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	snaps := market.NewSnapshotReader(ex.Local(), 10*time.Minute, nil)
	w := New(nil, nil)
	ctx := context.Background()
	var view market.View
	st := Stress{Horizon: time.Hour, Floor: 0.01, Likely: 3}
	for s := range 45 { // σ leaves the floor after volMinReturns returns
		now = t0.Add(time.Duration(s) * time.Minute)
		prices := map[string]decimal.Decimal{}
		for i := range 6 {
			prices[fmt.Sprintf("C%d", i)] = decimal.New(int64(9876543+12345*i+(s*7919+i*131)%90000-45000), -2)
		}
		ex.SetIndexPrices(prices)
		ex.Step(now)
		snap, err := snaps.Read(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		view.Join(snap, snaps, nil)
		w.Begin(now, "")
		w.Observe(now, &view, Settings{Stress: st})
		v := w.Account(&view)
		f, ok := v.Floats()
		if !ok || len(f.Lines) != len(v.Acct.Positions) || len(f.Lines) != 6 || len(f.Sigma) != 6 || !f.Distinct {
			t.Fatalf("tick %d: floats %+v (%t) for %d positions", s, f, ok, len(v.Acct.Positions))
		}
		for i, p := range v.Acct.Positions {
			want := margin.Line{Short: p.Direction == exchange.Short, Cross: p.Cross, Quantity: margin.Float(p.Quantity), Index: margin.Float(p.Index),
				EntryValue: margin.Float(p.Value), Margin: margin.Float(p.Held), Maintenance: margin.Float(p.MM)}
			if f.Lines[i] != want {
				t.Fatalf("tick %d, %s: line %+v, the decimals give %+v", s, p.Symbol, f.Lines[i], want)
			}
			if got, want := f.Sigma[i], v.Sigma(p.Symbol); got != want {
				t.Fatalf("tick %d, %s: σ %v, Sigma says %v", s, p.Symbol, got, want)
			}
		}
		if s == 44 && !(f.Sigma[1] > st.Floor) {
			t.Fatalf("σ %v still the floor %v: the index's own σ not tried", f.Sigma[1], st.Floor)
		}
		liqs := v.Acct.LiquidationPricesWith(v.Liqs)
		got, want := v.Acct.PricedFrom(f, v.Sigma, liqs), v.Acct.Priced(v.Sigma, liqs)
		if g, w := got.StressJudged(v.Likely), want.StressJudged(v.Likely); !g.Known || !reflect.DeepEqual(g, w) {
			t.Fatalf("tick %d: judged from the floats %+v, from the decimals %+v", s, g, w)
		}
		if g, w := got.Forfeit(), want.Forfeit(); !g.Known || !reflect.DeepEqual(g, w) {
			t.Fatalf("tick %d: forfeit from the floats %+v, from the decimals %+v", s, g, w)
		}
		moved := *v
		moved.Acct.Positions = append([]margin.Position(nil), v.Acct.Positions...)
		if _, ok := moved.Floats(); ok {
			t.Fatalf("tick %d: the floats read for an account the model moved on to", s)
		}
	}
}
