package sim

import (
	"strconv"
	"strings"

	"github.com/riskguard/riskguard/exchange"
	"github.com/shopspring/decimal"
)

// The sim writes its own wire structs so that decimals come out as the spec
// says whatever the package-level options of decimal: JSON numbers in
// market data, JSON strings in private responses.

// num is a decimal written as a JSON number.
type num decimal.Decimal

// MarshalJSON writes the decimal as a plain JSON number.
func (n num) MarshalJSON() ([]byte, error) { return []byte(plain(decimal.Decimal(n))), nil }

// str is a decimal written as a JSON string.
type str decimal.Decimal

// MarshalJSON writes the decimal as a quoted plain number.
func (s str) MarshalJSON() ([]byte, error) {
	return strconv.AppendQuote(nil, plain(decimal.Decimal(s))), nil
}

// plain formats d in fixed point without trailing zeros, never in
// scientific notation.
func plain(d decimal.Decimal) string {
	if d.Exponent() >= 0 {
		return d.StringFixed(0)
	}
	s := d.StringFixed(-d.Exponent())
	if strings.Contains(s, ".") {
		s = strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		return "0"
	}
	return s
}

type spotWire struct {
	ID                    int64  `json:"id"`
	Name                  string `json:"name"`
	StartTime             int64  `json:"startTime"`
	EndTime               int64  `json:"endTime"`
	BaseName              string `json:"baseName"`
	BaseMinimumIncrement  num    `json:"baseMinimumIncrement"`
	BaseScale             int    `json:"baseScale"`
	BaseMaximumQuantity   num    `json:"baseMaximumQuantity"`
	QuoteName             string `json:"quoteName"`
	QuoteMinimumIncrement num    `json:"quoteMinimumIncrement"`
	QuoteScale            int    `json:"quoteScale"`
}

type contractWire struct {
	spotWire
	Type              string             `json:"type"`
	RiskLimit         riskLimitWire[num] `json:"riskLimit"`
	SettlementFeeRate num                `json:"settlementFeeRate"`
}

type riskLimitWire[D num | str] struct {
	ID                    int64 `json:"id"`
	InitialMarginRate     D     `json:"initialMarginRate"`
	MaintenanceMarginRate D     `json:"maintenanceMarginRate"`
	MarginRateStep        D     `json:"marginRateStep"`
	MaxLeverage           int   `json:"maxLeverage"`
	RiskLimitBase         D     `json:"riskLimitBase"`
	RiskLimitStep         D     `json:"riskLimitStep"`
	MaxRiskLimitSteps     int   `json:"maxRiskLimitSteps"`
	MaxQuantity           D     `json:"maxQuantity"`
	CreatedAt             int64 `json:"createdAt"`
}

type tradesWire struct {
	Currencies       []exchange.Currency `json:"currencies"`
	SpotsSymbols     []spotWire          `json:"spotsSymbols"`
	ContractsSymbols []contractWire      `json:"contractsSymbols"`
}

type positionWire struct {
	ID                           string             `json:"id"`
	UserID                       int64              `json:"userId"`
	SymbolID                     int64              `json:"symbolId"`
	RiskLimit                    riskLimitWire[str] `json:"riskLimit"`
	Cross                        bool               `json:"cross"`
	CreatedAt                    int64              `json:"createdAt"`
	UpdatedAt                    int64              `json:"updatedAt"`
	EntryValue                   str                `json:"entryValue"`
	EntryPrice                   str                `json:"entryPrice"`
	Margin                       str                `json:"margin"`
	Leverage                     int                `json:"leverage"`
	LiquidationPrice             str                `json:"liquidationPrice"`
	Direction                    string             `json:"direction"`
	Quantity                     str                `json:"quantity"`
	RealizedPNL                  str                `json:"realizedPNL"`
	RiskLevel                    int                `json:"riskLevel"`
	MinimumMaintenanceMarginRate str                `json:"minimumMaintenanceMarginRate"`
	MinQuantity                  str                `json:"minQuantity"`
	MaxQuantity                  str                `json:"maxQuantity"`
	Version                      int64              `json:"version"`
	Empty                        bool               `json:"empty"`
}

func spotWireOf(s exchange.SpotSymbol) spotWire {
	return spotWire{
		ID:                    s.ID,
		Name:                  s.Name,
		StartTime:             s.StartTime,
		EndTime:               s.EndTime,
		BaseName:              s.BaseName,
		BaseMinimumIncrement:  num(s.BaseMinimumIncrement),
		BaseScale:             s.BaseScale,
		BaseMaximumQuantity:   num(s.BaseMaximumQuantity),
		QuoteName:             s.QuoteName,
		QuoteMinimumIncrement: num(s.QuoteMinimumIncrement),
		QuoteScale:            s.QuoteScale,
	}
}

func riskLimitWireOf[D num | str](rl exchange.RiskLimit) riskLimitWire[D] {
	return riskLimitWire[D]{
		ID:                    rl.ID,
		InitialMarginRate:     D(rl.InitialMarginRate),
		MaintenanceMarginRate: D(rl.MaintenanceMarginRate),
		MarginRateStep:        D(rl.MarginRateStep),
		MaxLeverage:           rl.MaxLeverage,
		RiskLimitBase:         D(rl.RiskLimitBase),
		RiskLimitStep:         D(rl.RiskLimitStep),
		MaxRiskLimitSteps:     rl.MaxRiskLimitSteps,
		MaxQuantity:           D(rl.MaxQuantity),
		CreatedAt:             rl.CreatedAt,
	}
}

func positionWireOf(p exchange.Position) positionWire {
	return positionWire{
		ID:                           p.ID,
		UserID:                       p.UserID,
		SymbolID:                     p.SymbolID,
		RiskLimit:                    riskLimitWireOf[str](p.RiskLimit),
		Cross:                        p.Cross,
		CreatedAt:                    p.CreatedAt,
		UpdatedAt:                    p.UpdatedAt,
		EntryValue:                   str(p.EntryValue),
		EntryPrice:                   str(p.EntryPrice),
		Margin:                       str(p.Margin),
		Leverage:                     p.Leverage,
		LiquidationPrice:             str(p.LiquidationPrice),
		Direction:                    p.Direction,
		Quantity:                     str(p.Quantity),
		RealizedPNL:                  str(p.RealizedPNL),
		RiskLevel:                    p.RiskLevel,
		MinimumMaintenanceMarginRate: str(p.MinimumMaintenanceMarginRate),
		MinQuantity:                  str(p.MinQuantity),
		MaxQuantity:                  str(p.MaxQuantity),
		Version:                      p.Version,
		Empty:                        p.Empty,
	}
}
