package exchange

import (
	"encoding/json"

	"github.com/shopspring/decimal"
)

// Envelope is the wrapper of every response (spec 2.1). It is read on every
// HTTP status, error statuses included.
type Envelope struct {
	Success      bool            `json:"success"`
	Data         json.RawMessage `json:"data,omitempty"`
	Error        string          `json:"error,omitempty"`
	ErrorField   string          `json:"errorField,omitempty"`
	ErrorMessage string          `json:"errorMessage,omitempty"`
}

// Currency is an element of the currencies array of /v1/market/trades (spec 2.2).
type Currency struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

// SpotSymbol is an element of spotsSymbols (spec 2.3). Decimal fields arrive
// as JSON numbers and decode without loss.
type SpotSymbol struct {
	ID                    int64           `json:"id"`
	Name                  string          `json:"name"`
	StartTime             int64           `json:"startTime"`
	EndTime               int64           `json:"endTime"`
	BaseName              string          `json:"baseName"`
	BaseMinimumIncrement  decimal.Decimal `json:"baseMinimumIncrement"`
	BaseScale             int             `json:"baseScale"`
	BaseMaximumQuantity   decimal.Decimal `json:"baseMaximumQuantity"`
	QuoteName             string          `json:"quoteName"`
	QuoteMinimumIncrement decimal.Decimal `json:"quoteMinimumIncrement"`
	QuoteScale            int             `json:"quoteScale"`
}

// ContractSymbol is an element of contractsSymbols (spec 2.4): every spot
// symbol field plus the contract type, its risk limit and settlement fee.
type ContractSymbol struct {
	SpotSymbol
	Type              string          `json:"type"`
	RiskLimit         RiskLimit       `json:"riskLimit"`
	SettlementFeeRate decimal.Decimal `json:"settlementFeeRate"`
}

// RiskLimit is the risk limit object (spec 2.5). Its decimal fields are JSON
// numbers in market data and decimal strings in position responses; both
// decode into decimal.Decimal without loss.
type RiskLimit struct {
	ID                    int64           `json:"id"`
	InitialMarginRate     decimal.Decimal `json:"initialMarginRate"`
	MaintenanceMarginRate decimal.Decimal `json:"maintenanceMarginRate"`
	MarginRateStep        decimal.Decimal `json:"marginRateStep"`
	MaxLeverage           int             `json:"maxLeverage"`
	RiskLimitBase         decimal.Decimal `json:"riskLimitBase"`
	RiskLimitStep         decimal.Decimal `json:"riskLimitStep"`
	MaxRiskLimitSteps     int             `json:"maxRiskLimitSteps"`
	MaxQuantity           decimal.Decimal `json:"maxQuantity"`
	CreatedAt             int64           `json:"createdAt"`
}

// Direction values of a position. The spec shows LONG only; SHORT is assumed
// (README, Assumptions).
const (
	Long  = "LONG"
	Short = "SHORT"
)

// Position is a contract position (spec 2.6), as returned by the settings
// operation and by the positions listing.
type Position struct {
	ID                           string          `json:"id"`
	UserID                       int64           `json:"userId"`
	SymbolID                     int64           `json:"symbolId"`
	RiskLimit                    RiskLimit       `json:"riskLimit"`
	Cross                        bool            `json:"cross"`
	CreatedAt                    int64           `json:"createdAt"`
	UpdatedAt                    int64           `json:"updatedAt"`
	EntryValue                   decimal.Decimal `json:"entryValue"`
	EntryPrice                   decimal.Decimal `json:"entryPrice"`
	Margin                       decimal.Decimal `json:"margin"`
	Leverage                     int             `json:"leverage"`
	LiquidationPrice             decimal.Decimal `json:"liquidationPrice"`
	Direction                    string          `json:"direction"`
	Quantity                     decimal.Decimal `json:"quantity"`
	RealizedPNL                  decimal.Decimal `json:"realizedPNL"`
	RiskLevel                    int             `json:"riskLevel"`
	MinimumMaintenanceMarginRate decimal.Decimal `json:"minimumMaintenanceMarginRate"`
	MinQuantity                  decimal.Decimal `json:"minQuantity"`
	MaxQuantity                  decimal.Decimal `json:"maxQuantity"`
	Version                      int64           `json:"version"`
	Empty                        bool            `json:"empty"`
}

// Trades is the data of GET /v1/market/trades.
type Trades struct {
	Currencies       []Currency       `json:"currencies"`
	SpotsSymbols     []SpotSymbol     `json:"spotsSymbols"`
	ContractsSymbols []ContractSymbol `json:"contractsSymbols"`
}

// ClosedOrdersPage is the data of the closed-orders listing (spec 2.7). The
// fields of a closed order are not shown by the spec, so each result is kept
// as raw JSON for the caller to decode.
type ClosedOrdersPage struct {
	HasMore      bool              `json:"hasMore"`
	NextOffsetID int64             `json:"nextOffsetId"`
	Results      []json.RawMessage `json:"results"`
	Range        string            `json:"range"`
}

// Settings is the body of POST /v1/contracts/positions/{symbol}/settings.
// Field order is the wire order: {"cross":…,"leverage":…}.
type Settings struct {
	Cross    bool `json:"cross"`
	Leverage int  `json:"leverage"`
}

// Order flags (spec 2.8). The field that carries them is not shown by the spec.
const (
	FillOrKill        = 0x01
	PostOnly          = 0x02
	Hidden            = 0x04
	ImmediateOrCancel = 0x08
	ReduceOnly        = 0x10
)
