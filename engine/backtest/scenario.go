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
	acct := modelAccount(positions, byID)
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
			balance, inferred = inferBalance(acct, c.Name, p), true
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

// modelAccount is the recorded positions as the margin model sees them,
// at their entry prices (the recording's first index prices are not known
// here, so the other cross positions' PNL counts as zero).
func modelAccount(positions []exchange.Position, byID map[int64]*exchange.ContractSymbol) margin.Account {
	var acct margin.Account
	for _, p := range positions {
		if p.Empty || !p.Quantity.IsPositive() {
			continue
		}
		c, ok := byID[p.SymbolID]
		if !ok {
			continue
		}
		mp := margin.PositionOf(&p, c.Name, int32(c.QuoteScale))
		// As the simulated exchange opens it from the scenario's spec: its
		// margin and entry value computed from the quantity, the entry
		// price and the leverage, not the recording's listed ones.
		mp.Held, mp.Value = decimal.Decimal{}, decimal.Decimal{}
		acct.Positions = append(acct.Positions, mp)
	}
	return acct
}

// inferBalance solves the margin model for the free balance behind cross
// position p from its recorded liquidation price (margin.Account.InferFree:
// the cross pool holds every cross position's margin).
func inferBalance(acct margin.Account, symbol string, p exchange.Position) decimal.Decimal {
	for i, mp := range acct.Positions {
		if mp.Symbol == symbol {
			if free, ok := acct.InferFree(i, p.LiquidationPrice); ok {
				return free
			}
		}
	}
	return decimal.Zero
}
