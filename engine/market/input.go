package market

import (
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// FillEnv fills env with one position, its symbol and index price: the
// expression boundary, where decimals become float64. The risk limit is
// the position's own, read in this tick; the symbol's numbers were
// converted once per symbols read (Row.SymEnv). env is filled in place.
// The tick fills it from its view's row instead (FillRow), whose numbers
// were converted once per value.
func FillEnv(env *rules.Env, p *exchange.Position, sym *rules.Symbol, index decimal.Decimal, hasIndex bool, now time.Time) {
	var m numsMemo // empty: every number is converted
	indexF := 0.0
	if hasIndex {
		indexF = ToFloat(index)
	}
	fill(env, p, m.of(p), sym, indexF, hasIndex, now)
}

// FillRow is FillEnv for a row of the tick's view: its numbers (Row.N,
// Row.IndexF) are already converted. hasIndex says whether its index price
// is usable (listed and fresh); env.IndexPrice is 0 when it is not.
func FillRow(env *rules.Env, r *Row, hasIndex bool, now time.Time) {
	fill(env, r.P, r.N, r.SymEnv, r.IndexF, hasIndex, now)
}

func fill(env *rules.Env, p *exchange.Position, n *Nums, sym *rules.Symbol, indexF float64, hasIndex bool, now time.Time) {
	env.Position = rules.Position{
		ID:                           p.ID,
		UserID:                       p.UserID,
		SymbolID:                     p.SymbolID,
		Symbol:                       sym.Name,
		Cross:                        p.Cross,
		CreatedAt:                    p.CreatedAt,
		UpdatedAt:                    p.UpdatedAt,
		EntryValue:                   n.EntryValue,
		EntryPrice:                   n.EntryPrice,
		Margin:                       n.Margin,
		Leverage:                     p.Leverage,
		LiquidationPrice:             n.LiquidationPrice,
		Direction:                    p.Direction,
		Quantity:                     n.Quantity,
		RealizedPNL:                  n.RealizedPNL,
		RiskLevel:                    p.RiskLevel,
		MinimumMaintenanceMarginRate: n.MinimumMaintenanceMarginRate,
		MinQuantity:                  n.MinQuantity,
		MaxQuantity:                  n.MaxQuantity,
		Version:                      p.Version,
		Empty:                        p.Empty,
	}
	rl := &p.RiskLimit
	env.RiskLimit = rules.RiskLimit{
		ID:                    rl.ID,
		InitialMarginRate:     n.InitialMarginRate,
		MaintenanceMarginRate: n.MaintenanceMarginRate,
		MarginRateStep:        n.MarginRateStep,
		MaxLeverage:           rl.MaxLeverage,
		RiskLimitBase:         n.RiskLimitBase,
		RiskLimitStep:         n.RiskLimitStep,
		MaxRiskLimitSteps:     rl.MaxRiskLimitSteps,
		MaxQuantity:           n.RiskLimitMaxQuantity,
		CreatedAt:             rl.CreatedAt,
	}
	env.Symbol = *sym
	env.IndexPrice = 0
	if hasIndex {
		env.IndexPrice = indexF
	}
	if env.Now != now { // the same for every position of a tick
		env.Now = now
	}
	env.FillDerived(hasIndex)
}

// Nums are a position's decimals as float64: its own and its risk
// limit's (RiskLimitMaxQuantity is the risk limit's maxQuantity).
type Nums struct {
	EntryValue, EntryPrice, Margin, LiquidationPrice, Quantity, RealizedPNL float64
	MinimumMaintenanceMarginRate, MinQuantity, MaxQuantity                  float64
	InitialMarginRate, MaintenanceMarginRate, MarginRateStep                float64
	RiskLimitBase, RiskLimitStep, RiskLimitMaxQuantity                      float64
}

// numCount is the number of decimals in Nums.
const numCount = 15

// numsMemo is the last conversion of the numbers of the position at one
// place of the view, kept with the decimals it was made from. A decimal is
// an immutable value: one that is the same value as the memo's (the same
// coefficient, by pointer, and exponent: ==) has the same float64, so a
// reader that hands over unchanged numbers as the same decimals (the
// replay's simulated exchange, a steady position) is converted once. The
// memo holds the decimals, so their coefficients cannot be reused for
// other numbers while it compares with them. A decoded answer has fresh
// decimals: the memo then costs a comparison per number.
type numsMemo struct {
	n      Nums
	src    [numCount]decimal.Decimal
	index  decimal.Decimal
	indexF float64
	// sym is the view's symbol of id symID in its build symGen of the
	// symbols (View.gen), nil when it has none.
	sym    *symInfo
	symID  int64
	symGen uint64
	// pos is the place's last position whose numbers were converted
	// (held: there is one), to tell the next join's the same (View.Steady).
	pos  exchange.Position
	held bool
}

// samePosition reports whether q is p but for its risk level: every other
// field equal, each decimal the same copy (coefficient, by pointer, and
// exponent), so that what was worked out from p's figures holds for q.
func samePosition(p, q *exchange.Position) bool {
	a, b := &p.RiskLimit, &q.RiskLimit
	return p.Quantity == q.Quantity && p.EntryValue == q.EntryValue && p.EntryPrice == q.EntryPrice &&
		p.Margin == q.Margin && p.LiquidationPrice == q.LiquidationPrice && p.RealizedPNL == q.RealizedPNL &&
		p.Leverage == q.Leverage && p.Cross == q.Cross && p.Empty == q.Empty && p.Version == q.Version &&
		p.UpdatedAt == q.UpdatedAt && p.CreatedAt == q.CreatedAt && p.SymbolID == q.SymbolID && p.UserID == q.UserID &&
		p.MinimumMaintenanceMarginRate == q.MinimumMaintenanceMarginRate && p.MinQuantity == q.MinQuantity &&
		p.MaxQuantity == q.MaxQuantity && p.ID == q.ID && p.Direction == q.Direction &&
		a.ID == b.ID && a.MaxLeverage == b.MaxLeverage && a.MaxRiskLimitSteps == b.MaxRiskLimitSteps && a.CreatedAt == b.CreatedAt &&
		a.InitialMarginRate == b.InitialMarginRate && a.MaintenanceMarginRate == b.MaintenanceMarginRate &&
		a.MarginRateStep == b.MarginRateStep && a.RiskLimitBase == b.RiskLimitBase && a.RiskLimitStep == b.RiskLimitStep &&
		a.MaxQuantity == b.MaxQuantity
}

// of converts p's numbers, reusing the memo's where the decimal is the
// same.
func (m *numsMemo) of(p *exchange.Position) *Nums {
	n, rl, src := &m.n, &p.RiskLimit, &m.src
	conv(&src[0], p.EntryValue, &n.EntryValue)
	conv(&src[1], p.EntryPrice, &n.EntryPrice)
	conv(&src[2], p.Margin, &n.Margin)
	conv(&src[3], p.LiquidationPrice, &n.LiquidationPrice)
	conv(&src[4], p.Quantity, &n.Quantity)
	conv(&src[5], p.RealizedPNL, &n.RealizedPNL)
	conv(&src[6], p.MinimumMaintenanceMarginRate, &n.MinimumMaintenanceMarginRate)
	conv(&src[7], p.MinQuantity, &n.MinQuantity)
	conv(&src[8], p.MaxQuantity, &n.MaxQuantity)
	conv(&src[9], rl.InitialMarginRate, &n.InitialMarginRate)
	conv(&src[10], rl.MaintenanceMarginRate, &n.MaintenanceMarginRate)
	conv(&src[11], rl.MarginRateStep, &n.MarginRateStep)
	conv(&src[12], rl.RiskLimitBase, &n.RiskLimitBase)
	conv(&src[13], rl.RiskLimitStep, &n.RiskLimitStep)
	conv(&src[14], rl.MaxQuantity, &n.RiskLimitMaxQuantity)
	return n
}

// conv sets *dst to d as a float64 unless *src, what *dst was converted
// from, is d.
func conv(src *decimal.Decimal, d decimal.Decimal, dst *float64) {
	if *src != d {
		*src, *dst = d, ToFloat(d)
	}
}

// indexOf is ToFloat(d), kept like the position's numbers.
func (m *numsMemo) indexOf(d decimal.Decimal) float64 {
	conv(&m.index, d, &m.indexF)
	return m.indexF
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

// ToFloat converts a decimal to the nearest float64 (ties to even), without
// allocating in the common case: margin.Float, the model's one conversion,
// so the floats the view holds are the ones the margin model's grid works
// out from the same decimals (bit for bit: it reads them instead,
// margin.Account.PricedFrom).
func ToFloat(d decimal.Decimal) float64 { return margin.Float(d) }
