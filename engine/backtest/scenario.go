package backtest

import (
	"fmt"
	"slices"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/shopspring/decimal"
)

// ScenarioFrom builds the starting state of a simulated exchange from what
// the live exchange showed: its symbols and risk limits, and the account's
// positions. Every contract base gets an index (the data sets its price).
// The account's free balance is not in the data: a positive balance is
// taken as given; otherwise it is inferred from the first cross position
// (the balance that puts its liquidation price where the exchange did), or
// without one is the sum of the positions' margins. Open orders are not
// recorded: there are none.
func ScenarioFrom(tr *exchange.Trades, positions []exchange.Position, balance decimal.Decimal) (*sim.Scenario, error) {
	sc := &sim.Scenario{}
	currencies := map[string]bool{}
	addCurrency := func(n string) {
		if n != "" && !currencies[n] {
			currencies[n] = true
			sc.Currencies = append(sc.Currencies, n)
		}
	}
	for _, c := range tr.Currencies {
		addCurrency(c.Name)
	}
	byID := map[int64]*exchange.ContractSymbol{}
	bases := map[string]int{}
	for i := range tr.ContractsSymbols {
		c := &tr.ContractsSymbols[i]
		byID[c.ID] = c
		addCurrency(c.BaseName)
		addCurrency(c.QuoteName)
		rl := c.RiskLimit
		sc.Contracts = append(sc.Contracts, sim.ContractSpec{
			SymbolSpec: sim.SymbolSpec{ID: c.ID, Name: c.Name, Base: c.BaseName, Quote: c.QuoteName,
				BaseScale: c.BaseScale, QuoteScale: c.QuoteScale, BaseIncrement: c.BaseMinimumIncrement,
				QuoteIncrement: c.QuoteMinimumIncrement, BaseMaxQuantity: c.BaseMaximumQuantity},
			Type:              c.Type,
			SettlementFeeRate: c.SettlementFeeRate,
			RiskLimit: sim.RiskLimitSpec{MaxLeverage: rl.MaxLeverage, MaintenanceMarginRate: rl.MaintenanceMarginRate,
				InitialMarginRate: rl.InitialMarginRate, MarginRateStep: rl.MarginRateStep, RiskLimitBase: rl.RiskLimitBase,
				RiskLimitStep: rl.RiskLimitStep, MaxRiskLimitSteps: rl.MaxRiskLimitSteps, MaxQuantity: rl.MaxQuantity},
		})
		if _, ok := bases[c.BaseName]; !ok {
			bases[c.BaseName] = c.QuoteScale
		}
	}
	names := make([]string, 0, len(bases))
	for n := range bases {
		names = append(names, n)
	}
	slices.Sort(names)
	// A placeholder price until the data sets the index: the entry price
	// of a position on it, which liquidates nothing sane.
	start := map[string]decimal.Decimal{}
	for _, p := range positions {
		if c, ok := byID[p.SymbolID]; ok && p.EntryPrice.IsPositive() {
			if _, set := start[c.BaseName]; !set {
				start[c.BaseName] = p.EntryPrice
			}
		}
	}
	for _, n := range names {
		scale := bases[n]
		price, ok := start[n]
		if !ok {
			price = decimal.NewFromInt(1)
		}
		sc.Indexes = append(sc.Indexes, sim.IndexSpec{Name: n, Scale: &scale, Points: []sim.PricePoint{{Price: price}}})
	}
	margins := decimal.Zero
	inferred := false
	for _, p := range positions {
		c, ok := byID[p.SymbolID]
		if !ok {
			return nil, fmt.Errorf("backtest: position %s names symbol id %d, which is not listed", p.ID, p.SymbolID)
		}
		spec := positionSpec(c.Name, p)
		sc.Positions = append(sc.Positions, spec)
		if spec.Empty {
			continue
		}
		margins = margins.Add(margin.Margin(p.Quantity.Mul(p.EntryPrice), spec.Leverage))
		if !balance.IsPositive() && !inferred && p.Cross && p.LiquidationPrice.IsPositive() {
			balance, inferred = inferBalance(p), true
		}
	}
	if !balance.IsPositive() && !inferred {
		balance = margins
	}
	sc.Balance = balance
	if err := sc.Validate(); err != nil {
		return nil, fmt.Errorf("backtest: the recorded state: %w", err)
	}
	return sc, nil
}

// inferBalance solves the margin model (sim.LiquidationPrice) for the free
// balance behind a cross position: collateral C = margin + balance with
//
//	long:  liq = P − (C − mmr·EV)/q   →  C = (P − liq)·q + mmr·EV
//	short: liq = P + (C − mmr·EV)/q   →  C = (liq − P)·q + mmr·EV
func inferBalance(p exchange.Position) decimal.Decimal {
	ev := p.Quantity.Mul(p.EntryPrice)
	mmr := margin.MaintenanceRate(p.RiskLimit, ev)
	move := p.EntryPrice.Sub(p.LiquidationPrice)
	if p.Direction == exchange.Short {
		move = move.Neg()
	}
	c := move.Mul(p.Quantity).Add(mmr.Mul(ev))
	b := c.Sub(margin.Margin(ev, max(p.Leverage, 1)))
	if b.IsNegative() {
		return decimal.Zero
	}
	return b.Round(8)
}
