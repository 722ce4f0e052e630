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

// The tick's account carries its isolated positions' liquidation prices
// across the ticks its view stays steady (margin.Liquidations.Hold): on
// the simulated exchange's reads, ticks where only the indexes move and
// ticks where a settings call changes a position's leverage or mode or
// another entry and quantity are put, every
// price the model reads (Liqs.Of, the list its memo takes, and a
// candidate's after, IsolatedEffect) is LiquidationPrice's worked out
// afresh, value and exponent, and the grid and the forfeit read from them,
// and a candidate's forfeit after, are the ones worked out afresh; so is
// every position's maintenance margin, kept while the view is steady.
func TestAccountLiquidationPricesAreFresh(t *testing.T) {
	t.Parallel()
	two := 2
	sc := &sim.Scenario{Currencies: []string{"USDT"}, Balance: decimal.NewFromInt(10_000_000_000)}
	const n = 5
	for i := range n {
		base, sym := fmt.Sprintf("C%d", i), fmt.Sprintf("X%d", i)
		sc.Currencies = append(sc.Currencies, base)
		sc.Contracts = append(sc.Contracts, sim.ContractSpec{
			SymbolSpec: sim.SymbolSpec{Name: sym, Base: base, Quote: "USDT", BaseScale: 6, QuoteScale: 2},
			RiskLimit:  sim.RiskLimitSpec{MaxLeverage: 50, MaintenanceMarginRate: decimal.RequireFromString("0.005")}})
		dir := exchange.Long
		if i%2 == 1 {
			dir = exchange.Short
		}
		sc.Positions = append(sc.Positions, sim.PositionSpec{Symbol: sym, Direction: dir, Cross: false,
			Quantity: decimal.New(int64(1234+977*i), -3), EntryPrice: decimal.New(int64(9876543+12345*i), -2), Leverage: 3 + 7*i})
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
	steady, moved, read := 0, 0, 0
	var last uint64
	for s := range 60 {
		now = t0.Add(time.Duration(s) * time.Minute)
		prices := map[string]decimal.Decimal{}
		for i := range n {
			prices[fmt.Sprintf("C%d", i)] = decimal.New(int64(9876543+12345*i+(s*7919+i*131)%90000-45000), -2)
		}
		ex.SetIndexPrices(prices)
		if s%9 == 5 {
			// A position put again between two reads: one isolated
			// position's entry and quantity (as a trade would leave them).
			k := (s / 9) % (n - 1)
			ps := sc.Positions[k]
			ps.EntryPrice = ps.EntryPrice.Add(decimal.New(int64(100+s), -2))
			ps.Quantity = ps.Quantity.Add(decimal.New(int64(s), -3))
			if p, ok := ex.Position(ps.Symbol); ok {
				ps.Leverage, ps.Cross = p.Leverage, p.Cross
			}
			if err := ex.PutPosition(ps); err != nil {
				t.Fatalf("tick %d: put %s: %v", s, ps.Symbol, err)
			}
		}
		if s%7 == 3 {
			// A settings call between two reads: one isolated position's
			// leverage, now and then its mode.
			sym := fmt.Sprintf("X%d", (s/7)%(n-1))
			set := exchange.Settings{Leverage: 2 + (s*13)%40, Cross: s%21 == 17}
			if _, err := ex.SetSettings(sym, set); err != nil {
				t.Fatalf("tick %d: %s to %+v: %v", s, sym, set, err)
			}
		}
		ex.Step(now)
		snap, err := snaps.Read(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		view.Join(snap, snaps, nil)
		if view.Steady(last) {
			steady++
		} else if s > 0 {
			moved++
		}
		last = view.Joins()
		w.Begin(now, "")
		w.Observe(now, &view, Settings{Stress: st})
		v := w.Account(&view)
		liqs := v.Acct.LiquidationPricesWith(v.Liqs)
		// The grid and the forfeit read from the prices as the model's
		// memo lists them (in the floats' scratch, with their floats) are
		// the ones read from the decimals afresh.
		if f, ok := v.Floats(); ok && !v.Acct.HasOpenCross() {
			listed := v.Acct.LiquidationPricesIn(f.Scratch, v.Liqs)
			got := v.Acct.PricedFrom(f, v.Sigma, listed)
			want := v.Acct.Priced(v.Sigma, v.Acct.LiquidationPrices())
			if g, w := got.StressJudged(v.Likely), want.StressJudged(v.Likely); !g.Known || !reflect.DeepEqual(g, w) {
				t.Fatalf("tick %d: judged from the listed prices %+v, afresh %+v", s, g, w)
			}
			if g, w := got.Forfeit(), want.Forfeit(); !g.Known || !reflect.DeepEqual(g, w) {
				t.Fatalf("tick %d: forfeit from the listed prices %+v, afresh %+v", s, g, w)
			}
			read++
		}
		for i, p := range v.Acct.Positions {
			// Its maintenance margin, kept while the view is steady: the
			// one worked out afresh.
			fresh := p
			fresh.MM = decimal.Decimal{}
			if want := fresh.Maintenance(); !margin.SameDec(p.MM, want) {
				t.Fatalf("tick %d, %s: maintenance %s, afresh %s", s, p.Symbol, p.MM, want)
			}
			want := v.Acct.LiquidationPrice(i)
			if got := v.Liqs.Of(v.Acct, i); !margin.SameDec(got, want) {
				t.Fatalf("tick %d, %s (leverage %d, cross %t): carried %s, afresh %s", s, p.Symbol, p.Leverage, p.Cross, got, want)
			}
			if !margin.SameDec(liqs[i], want) {
				t.Fatalf("tick %d, %s: listed %s, afresh %s", s, p.Symbol, liqs[i], want)
			}
			if p.Cross || !p.Open() {
				continue
			}
			// A candidate that keeps it isolated, at a leverage a decision
			// by cost tries (each tick, the same few).
			for _, lev := range []int{2, 3, p.Leverage - 1} {
				np, eff := v.Acct.IsolatedEffect(i, lev, v.Liqs, liqs)
				if want := (margin.Account{Positions: []margin.Position{np}}).LiquidationPrice(0); !margin.SameDec(eff.LiquidationAfter, want) {
					t.Fatalf("tick %d, %s (leverage %d) at %dx: carried %s after, afresh %s", s, p.Symbol, p.Leverage, lev, eff.LiquidationAfter, want)
				}
				if f, ok := v.Floats(); ok && !v.Acct.HasOpenCross() {
					pr := v.Acct.PricedFrom(f, v.Sigma, v.Acct.LiquidationPricesIn(f.Scratch, v.Liqs))
					g, w := pr.ForfeitAfterIsolatedHeld(nil, v.Liqs, &np, eff.FreeAfter, i, eff.LiquidationAfter), pr.ForfeitAfterIsolated(&np, eff.FreeAfter, i, eff.LiquidationAfter)
					if !g.Known || !reflect.DeepEqual(g, w) {
						t.Fatalf("tick %d, %s (leverage %d) at %dx: forfeit after %+v, afresh %+v", s, p.Symbol, p.Leverage, lev, g, w)
					}
				}
				fnp, feff := v.Acct.IsolatedEffect(i, lev, nil, liqs) // nothing remembered
				if !reflect.DeepEqual(np, fnp) || !margin.SameDec(eff.MarginMoved, feff.MarginMoved) || !margin.SameDec(eff.FreeAfter, feff.FreeAfter) ||
					eff.Affordable != feff.Affordable {
					t.Fatalf("tick %d, %s (leverage %d) at %dx: carried %+v, afresh %+v", s, p.Symbol, p.Leverage, lev, eff, feff)
				}
			}
		}
	}
	if steady == 0 || moved == 0 || read == 0 {
		t.Fatalf("%d steady ticks, %d moved, %d grids read: the test misses a path", steady, moved, read)
	}
}
