package sim

import (
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/shopspring/decimal"
)

// DefaultScenario is the scenario of `riskguard sim` and `riskguard demo`
// without a scenario file, and of most tests:
//
//   - contracts XBTC (BTC, max leverage 20), XETH (ETH, 25), XSOL (SOL, 10)
//     and XDOGE (DOGE, 5), each with its own risk limit; spot BTC_USDT,
//     ETH_USDT, SOL_USDT; currencies USDT, BTC, ETH, SOL, DOGE;
//   - a free balance of 20,000 USDT;
//   - XBTC: long 0.8 at 64,200, 10×, cross — safe, liquidation near 33,100;
//   - XETH: short 12 at 3,050, 20×, isolated — liquidation 3,172, about 5%
//     above an index that starts at 3,010 and drifts up;
//   - XSOL: long 400 at 152, 15×, isolated — above the risk limit's max
//     leverage of 10 (the limit was lowered after the position was opened),
//     liquidation 144.907; the scripted SOL index falls from 150 to 144.5
//     at 70 s and then recovers, so the position is liquidated at about
//     65 s unless its leverage is lowered first (at 10× the liquidation
//     price is 139.84);
//   - XDOGE: empty;
//   - open orders: 3 on XBTC, 2 on XETH, 5 on XSOL;
//   - 120 closed orders an hour apart (three pages of 50);
//   - BTC, ETH and DOGE follow seeded random walks, volatile enough that
//     within one to two minutes the XETH position crosses typical
//     liquidation-distance thresholds.
func DefaultScenario() *Scenario {
	d := decimal.RequireFromString
	scale := func(n int) *int { return &n }
	return &Scenario{
		Currencies: []string{"USDT", "BTC", "ETH", "SOL", "DOGE"},
		Spots: []SymbolSpec{
			{Name: "BTC_USDT", Base: "BTC", Quote: "USDT", BaseScale: 6, QuoteScale: 2, BaseMaxQuantity: d("100")},
			{Name: "ETH_USDT", Base: "ETH", Quote: "USDT", BaseScale: 5, QuoteScale: 2, BaseMaxQuantity: d("5000")},
			{Name: "SOL_USDT", Base: "SOL", Quote: "USDT", BaseScale: 3, QuoteScale: 3, BaseMaxQuantity: d("100000")},
		},
		Contracts: []ContractSpec{
			{
				SymbolSpec: SymbolSpec{Name: "XBTC", Base: "BTC", Quote: "USDT", BaseScale: 3, BaseIncrement: d("0.001"),
					QuoteScale: 1, QuoteIncrement: d("0.5"), BaseMaxQuantity: d("100")},
				SettlementFeeRate: d("0.0005"),
				RiskLimit: RiskLimitSpec{MaxLeverage: 20, InitialMarginRate: d("0.05"), MaintenanceMarginRate: d("0.005"),
					MarginRateStep: d("0.005"), RiskLimitBase: d("2000000"), RiskLimitStep: d("1000000"),
					MaxRiskLimitSteps: 5, MaxQuantity: d("100")},
			},
			{
				SymbolSpec: SymbolSpec{Name: "XETH", Base: "ETH", Quote: "USDT", BaseScale: 2, QuoteScale: 2,
					BaseMaxQuantity: d("5000")},
				SettlementFeeRate: d("0.0005"),
				RiskLimit: RiskLimitSpec{MaxLeverage: 25, InitialMarginRate: d("0.04"), MaintenanceMarginRate: d("0.01"),
					MarginRateStep: d("0.005"), RiskLimitBase: d("1000000"), RiskLimitStep: d("500000"),
					MaxRiskLimitSteps: 4, MaxQuantity: d("2000")},
			},
			{
				SymbolSpec: SymbolSpec{Name: "XSOL", Base: "SOL", Quote: "USDT", BaseScale: 1, QuoteScale: 3,
					BaseMaxQuantity: d("100000")},
				SettlementFeeRate: d("0.0006"),
				RiskLimit: RiskLimitSpec{MaxLeverage: 10, InitialMarginRate: d("0.1"), MaintenanceMarginRate: d("0.02"),
					MarginRateStep: d("0.01"), RiskLimitBase: d("250000"), RiskLimitStep: d("250000"),
					MaxRiskLimitSteps: 3, MaxQuantity: d("20000")},
			},
			{
				SymbolSpec: SymbolSpec{Name: "XDOGE", Base: "DOGE", Quote: "USDT", BaseScale: 0, BaseIncrement: d("1"),
					QuoteScale: 5, BaseMaxQuantity: d("10000000")},
				SettlementFeeRate: d("0.0006"),
				RiskLimit: RiskLimitSpec{MaxLeverage: 5, InitialMarginRate: d("0.2"), MaintenanceMarginRate: d("0.025"),
					MaxQuantity: d("5000000")},
			},
		},
		Balance:      d("20000"),
		SpotBalances: map[string]decimal.Decimal{"USDT": d("25000"), "BTC": d("0.25"), "ETH": d("3")},
		Positions: []PositionSpec{
			{Symbol: "XBTC", Direction: exchange.Long, Quantity: d("0.8"), EntryPrice: d("64200"), Leverage: 10, Cross: true},
			{Symbol: "XETH", Direction: exchange.Short, Quantity: d("12"), EntryPrice: d("3050"), Leverage: 20},
			{Symbol: "XSOL", Direction: exchange.Long, Quantity: d("400"), EntryPrice: d("152"), Leverage: 15},
			{Symbol: "XDOGE", Direction: exchange.Long, Leverage: 3, Empty: true},
		},
		OpenOrders: map[string]int{"XBTC": 3, "XETH": 2, "XSOL": 5},
		Indexes: []IndexSpec{
			{Name: "BTC", Walk: &WalkSpec{Start: d("65000"), Volatility: 0.0008}, Scale: scale(1)},
			{Name: "ETH", Walk: &WalkSpec{Start: d("3010"), Volatility: 0.0012, Drift: 0.00015}, Scale: scale(2)},
			{Name: "SOL", Scale: scale(3), Points: []PricePoint{
				{At: 0, Price: d("150")},
				{At: Duration(20 * time.Second), Price: d("148.5")},
				{At: Duration(45 * time.Second), Price: d("146.5")},
				{At: Duration(70 * time.Second), Price: d("144.5")},
				{At: Duration(90 * time.Second), Price: d("147")},
				{At: Duration(120 * time.Second), Price: d("151")},
			}},
			{Name: "DOGE", Walk: &WalkSpec{Start: d("0.16"), Volatility: 0.002}, Scale: scale(5)},
		},
		ClosedOrders:       120,
		ClosedOrderSpacing: Duration(time.Hour),
	}
}
