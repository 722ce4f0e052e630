package market

import (
	"math"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// FillEnv fills env with one position, its symbol and index price: the
// expression boundary, where decimals become float64. The risk limit is
// the position's own, read in this tick; the symbol's numbers were
// converted once per symbols read (Row.SymEnv). env is filled in place.
func FillEnv(env *rules.Env, p *exchange.Position, sym *rules.Symbol, index decimal.Decimal, hasIndex bool, now time.Time) {
	env.Position = rules.Position{
		ID:                           p.ID,
		UserID:                       p.UserID,
		SymbolID:                     p.SymbolID,
		Symbol:                       sym.Name,
		Cross:                        p.Cross,
		CreatedAt:                    p.CreatedAt,
		UpdatedAt:                    p.UpdatedAt,
		EntryValue:                   ToFloat(p.EntryValue),
		EntryPrice:                   ToFloat(p.EntryPrice),
		Margin:                       ToFloat(p.Margin),
		Leverage:                     p.Leverage,
		LiquidationPrice:             ToFloat(p.LiquidationPrice),
		Direction:                    p.Direction,
		Quantity:                     ToFloat(p.Quantity),
		RealizedPNL:                  ToFloat(p.RealizedPNL),
		RiskLevel:                    p.RiskLevel,
		MinimumMaintenanceMarginRate: ToFloat(p.MinimumMaintenanceMarginRate),
		MinQuantity:                  ToFloat(p.MinQuantity),
		MaxQuantity:                  ToFloat(p.MaxQuantity),
		Version:                      p.Version,
		Empty:                        p.Empty,
	}
	rl := &p.RiskLimit
	env.RiskLimit = rules.RiskLimit{
		ID:                    rl.ID,
		InitialMarginRate:     ToFloat(rl.InitialMarginRate),
		MaintenanceMarginRate: ToFloat(rl.MaintenanceMarginRate),
		MarginRateStep:        ToFloat(rl.MarginRateStep),
		MaxLeverage:           rl.MaxLeverage,
		RiskLimitBase:         ToFloat(rl.RiskLimitBase),
		RiskLimitStep:         ToFloat(rl.RiskLimitStep),
		MaxRiskLimitSteps:     rl.MaxRiskLimitSteps,
		MaxQuantity:           ToFloat(rl.MaxQuantity),
		CreatedAt:             rl.CreatedAt,
	}
	env.Symbol = *sym
	env.IndexPrice = 0
	if hasIndex {
		env.IndexPrice = ToFloat(index)
	}
	env.Now = now
	env.FillDerived(hasIndex)
}

// RulesSymbol is a contract symbol as the rules see it.
func RulesSymbol(s *exchange.ContractSymbol) rules.Symbol {
	return rules.Symbol{
		ID:                    s.ID,
		Name:                  s.Name,
		BaseName:              s.BaseName,
		QuoteName:             s.QuoteName,
		Type:                  s.Type,
		StartTime:             s.StartTime,
		EndTime:               s.EndTime,
		BaseMinimumIncrement:  ToFloat(s.BaseMinimumIncrement),
		BaseMaximumQuantity:   ToFloat(s.BaseMaximumQuantity),
		QuoteMinimumIncrement: ToFloat(s.QuoteMinimumIncrement),
		SettlementFeeRate:     ToFloat(s.SettlementFeeRate),
		BaseScale:             s.BaseScale,
		QuoteScale:            s.QuoteScale,
	}
}

// pow10 holds the exactly representable powers of ten.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// ToFloat converts a decimal to a float64 without allocating in the common
// case. With at most 15 digits the coefficient and a power of ten up to 22
// are both exact, so one multiplication or division rounds correctly (the
// fast path strconv.ParseFloat takes); with 16 to 18 digits the coefficient
// is rounded first, so the result may be one unit in the last place off,
// far below anything a rule can tell. Other values take the exact, slower
// route.
func ToFloat(d decimal.Decimal) float64 {
	exp := d.Exponent()
	if exp < -22 || exp > 22 || d.NumDigits() > 18 {
		return d.InexactFloat64()
	}
	c := float64(d.CoefficientInt64())
	if exp < 0 {
		return c / pow10[-exp]
	}
	if f := c * pow10[exp]; math.Abs(f) < 1<<53 {
		return f
	}
	return d.InexactFloat64()
}
