package rules

import (
	"errors"
	"math"
	"time"
)

// ErrNoData reports that a rule could not be evaluated because its inputs
// are missing or invalid, or because the expression produced a non-finite
// number (a division by zero, for instance). It is a state of its own,
// handled by the rule's on_nodata policy, and never means "false": bad inputs
// must not read as safe. Test for it with errors.Is; errors.As with a
// *NoDataError gives the reason.
var ErrNoData = errors.New("no data")

// NoDataError is the error behind ErrNoData, with the reason.
type NoDataError struct {
	// Reason says what was missing or invalid, e.g. "index price missing".
	Reason string
	// Of, when set, names what had no data: a function over time as the
	// rule writes it, or an account field.
	Of string
}

func (e *NoDataError) Error() string {
	if e.Of != "" {
		return "no data: " + e.Of + ": " + e.Reason
	}
	return "no data: " + e.Reason
}

// Is makes errors.Is(err, ErrNoData) true for every *NoDataError.
func (e *NoDataError) Is(target error) bool { return target == ErrNoData }

// Reasons reported by Env.NoData. They are constants so that Fill never
// allocates.
const (
	ReasonIndexMissing        = "index price missing"
	ReasonIndexNotPositive    = "index price <= 0"
	ReasonIndexNotFinite      = "index price is not a finite number"
	ReasonMaxLeverageZero     = "maxLeverage is 0"
	ReasonLeverageNotPositive = "leverage is 0 or negative on a non-empty position"
	ReasonLiquidationZero     = "liquidation price 0 on a non-empty position"
	ReasonLiquidationInvalid  = "liquidation price is negative or not finite"
	ReasonUnknownDirection    = "position direction is neither LONG nor SHORT"
	ReasonNonFiniteInput      = "a position, risk limit or symbol number is not finite"
)

// Env is the expression environment of a rule: what a `when` expression or
// an action parameter can see, evaluated once per non-empty position. Field
// names in expressions are the expr tags, which are the exchange spec's JSON
// names. Decimals of the exchange arrive as float64 numbers, integers as
// int or int64 (timestamps are milliseconds since the epoch, as on the wire).
//
// Build it with Fill; a zero Env is "no data".
type Env struct {
	// Position is the contract position (spec 2.6), plus its symbol name and
	// side. Its risk limit is the top-level riskLimit, not repeated here.
	Position Position `expr:"position"`
	// RiskLimit is the position's risk limit (spec 2.5).
	RiskLimit RiskLimit `expr:"riskLimit"`
	// Symbol is the position's contract symbol (spec 2.4); its risk limit is
	// the top-level riskLimit.
	Symbol Symbol `expr:"symbol"`
	// IndexPrice is the index price of the symbol's base (by default the
	// symbol's baseName; the config's exchange.index_names can map it).
	// Always > 0 in an evaluated Env.
	IndexPrice float64 `expr:"indexPrice"`
	// LiquidationDistance is how far the index is from the liquidation
	// price, as a fraction of the index: (indexPrice - liquidationPrice) /
	// indexPrice for a long, (liquidationPrice - indexPrice) / indexPrice for
	// a short. 0.05 means the index may move 5% against the position before
	// it is liquidated; negative means already past the liquidation price.
	LiquidationDistance float64 `expr:"liquidationDistance"`
	// Notional is position.quantity × indexPrice.
	Notional float64 `expr:"notional"`
	// LeverageRatio is position.leverage / riskLimit.maxLeverage: 1 means at
	// the maximum, above 1 beyond it.
	LeverageRatio float64 `expr:"leverageRatio"`
	// Now is the evaluation time: the tick's time, not the wall clock, so
	// that backtests replay exactly. expr's now() builtin is disabled for
	// the same reason.
	Now time.Time `expr:"now"`
	// NowMillis is Now in milliseconds since the epoch, comparable with the
	// spec's timestamps such as position.updatedAt.
	NowMillis int64 `expr:"nowMillis"`
	// Account is the whole account, computed once per tick with the margin
	// model; the same for every position of a tick.
	Account Account `expr:"account"`
	// TimeToLiquidation is the seconds until liquidationDistance reaches 0
	// at its velocity over the last minute; no data when it is not
	// shrinking. The engine computes it from its own ticks.
	TimeToLiquidation float64 `expr:"timeToLiquidation"`
	// Windows holds the values of the rule's functions over the recent
	// past (change, rate, …), set by the engine before each evaluation;
	// expressions read them through those functions, never by this name.
	Windows [MaxWindows]float64 `expr:"_windows"`

	windowWhy [MaxWindows]string // "" when the value is known
	noData    string
	filled    bool
}

// Account is the contract account as an expression sees it: account.equity
// and so on. The margin model computes it once per tick from every
// position; a figure that cannot be known (the free balance without a
// cross position to infer it from; any total while one position's data is
// missing) is no data for the rules that read it.
type Account struct {
	// Equity is the free balance plus every position's margin and
	// unrealised PNL.
	Equity float64 `expr:"equity"`
	// FreeBalance is the collateral held as no position's margin, inferred
	// from a cross position's liquidation price.
	FreeBalance float64 `expr:"freeBalance"`
	// Margin is the margin held by every position.
	Margin float64 `expr:"margin"`
	// UnrealizedPNL is the positions' unrealised PNL at the index prices.
	UnrealizedPNL float64 `expr:"unrealizedPNL"`
	// MarginRatio is the cross positions' maintenance margin over their
	// collateral pool (free balance, cross margins and PNL): 1 is
	// liquidation; 0 without a cross position.
	MarginRatio float64 `expr:"marginRatio"`
	// GrossNotional is Σ quantity × index; NetNotional the same signed by
	// side (longs positive).
	GrossNotional float64 `expr:"grossNotional"`
	NetNotional   float64 `expr:"netNotional"`
	// Leverage is GrossNotional / Equity.
	Leverage float64 `expr:"leverage"`
	// Positions is the number of open positions.
	Positions int `expr:"positions"`
	// MinLiquidationDistance is the smallest liquidationDistance of the
	// open positions, RiskiestSymbol the symbol that has it.
	MinLiquidationDistance float64 `expr:"minLiquidationDistance"`
	RiskiestSymbol         string  `expr:"riskiestSymbol"`

	unknown AccountField
	why     [accountFields]string // by field bit
}

// accountFields is the number of Account's fields.
const accountFields = 11

// SetUnknown marks fields as no data, with the reason (the first reason
// given for a field stays).
func (a *Account) SetUnknown(fields AccountField, why string) {
	for i := range accountFields {
		if bit := AccountField(1) << i; fields&bit != 0 && a.unknown&bit == 0 {
			a.why[i] = why
		}
	}
	a.unknown |= fields
}

// Unknown returns the fields that are no data.
func (a *Account) Unknown() AccountField { return a.unknown }

// whyUnknown says which of fields is unknown first, and why.
func (a *Account) whyUnknown(fields AccountField) (string, string) {
	for i := range accountFields {
		if bit := AccountField(1) << i; fields&a.unknown&bit != 0 {
			return accountFieldNames[i], a.why[i]
		}
	}
	return "", ""
}

// SetWindow sets the value of the rule's j-th windowed term before an
// evaluation; why says why it is unknown ("" when it is known).
func (e *Env) SetWindow(j int, v float64, why string) {
	e.Windows[j], e.windowWhy[j] = v, why
}

// FillAccount prepares e for an account rule: the account and the time,
// and no position (account rules cannot read one).
func (e *Env) FillAccount(a *Account, now time.Time) {
	*e = Env{Account: *a, Now: now, NowMillis: now.UnixMilli(), filled: true}
}

// Position is a contract position as an expression sees it (spec 2.6).
type Position struct {
	// ID is "userId_symbolId".
	ID       string `expr:"id"`
	UserID   int64  `expr:"userId"`
	SymbolID int64  `expr:"symbolId"`
	// Symbol is the contract symbol's name, e.g. "XBTC".
	Symbol string `expr:"symbol"`
	// Cross is true for cross margin, false for isolated.
	Cross bool `expr:"cross"`
	// CreatedAt and UpdatedAt are milliseconds since the epoch.
	CreatedAt  int64   `expr:"createdAt"`
	UpdatedAt  int64   `expr:"updatedAt"`
	EntryValue float64 `expr:"entryValue"`
	EntryPrice float64 `expr:"entryPrice"`
	Margin     float64 `expr:"margin"`
	// Leverage is the position's leverage setting, an integer.
	Leverage         int     `expr:"leverage"`
	LiquidationPrice float64 `expr:"liquidationPrice"`
	// Direction is "LONG" or "SHORT".
	Direction string `expr:"direction"`
	// Side is +1 for a long, -1 for a short; set by Fill from Direction, so
	// that side-independent formulas can be written once.
	Side                         float64 `expr:"side"`
	Quantity                     float64 `expr:"quantity"`
	RealizedPNL                  float64 `expr:"realizedPNL"`
	RiskLevel                    int     `expr:"riskLevel"`
	MinimumMaintenanceMarginRate float64 `expr:"minimumMaintenanceMarginRate"`
	MinQuantity                  float64 `expr:"minQuantity"`
	// MaxQuantity is the position object's own maxQuantity; the risk
	// limit's is riskLimit.maxQuantity.
	MaxQuantity float64 `expr:"maxQuantity"`
	Version     int64   `expr:"version"`
	// Empty is true when the position holds no quantity; such positions are
	// not evaluated by the engine.
	Empty bool `expr:"empty"`
}

// RiskLimit is a risk limit as an expression sees it (spec 2.5).
type RiskLimit struct {
	ID                    int64   `expr:"id"`
	InitialMarginRate     float64 `expr:"initialMarginRate"`
	MaintenanceMarginRate float64 `expr:"maintenanceMarginRate"`
	MarginRateStep        float64 `expr:"marginRateStep"`
	// MaxLeverage is the highest leverage allowed, an integer; always > 0 in
	// an evaluated Env.
	MaxLeverage       int     `expr:"maxLeverage"`
	RiskLimitBase     float64 `expr:"riskLimitBase"`
	RiskLimitStep     float64 `expr:"riskLimitStep"`
	MaxRiskLimitSteps int     `expr:"maxRiskLimitSteps"`
	MaxQuantity       float64 `expr:"maxQuantity"`
	// CreatedAt is milliseconds since the epoch.
	CreatedAt int64 `expr:"createdAt"`
}

// Symbol is a contract symbol as an expression sees it (spec 2.3 and 2.4).
type Symbol struct {
	ID        int64  `expr:"id"`
	Name      string `expr:"name"`
	BaseName  string `expr:"baseName"`
	QuoteName string `expr:"quoteName"`
	// Type is the contract type, e.g. "FUTURES".
	Type string `expr:"type"`
	// StartTime and EndTime are timestamps as the exchange sends them.
	StartTime             int64   `expr:"startTime"`
	EndTime               int64   `expr:"endTime"`
	BaseMinimumIncrement  float64 `expr:"baseMinimumIncrement"`
	BaseMaximumQuantity   float64 `expr:"baseMaximumQuantity"`
	QuoteMinimumIncrement float64 `expr:"quoteMinimumIncrement"`
	SettlementFeeRate     float64 `expr:"settlementFeeRate"`
	BaseScale             int     `expr:"baseScale"`
	QuoteScale            int     `expr:"quoteScale"`
}

// Input carries the raw facts of one evaluation; Env.Fill derives the rest.
type Input struct {
	Position  Position
	RiskLimit RiskLimit
	Symbol    Symbol
	// IndexPrice is meaningful only when HasIndex is true.
	IndexPrice float64
	HasIndex   bool
	Now        time.Time
}

// Fill sets every field of e from in, computes the derived fields and
// records whether the inputs are valid (see NoData). It does not allocate,
// so the engine can reuse one Env per position and tick.
func (e *Env) Fill(in *Input) {
	e.Position = in.Position
	e.RiskLimit = in.RiskLimit
	e.Symbol = in.Symbol
	e.IndexPrice = in.IndexPrice
	e.Now = in.Now
	e.FillDerived(in.HasIndex)
}

// FillDerived is the second half of Fill, for a caller that sets
// Position, RiskLimit, Symbol, IndexPrice (meaningful only with hasIndex)
// and Now in e itself rather than copying them from an Input: it computes
// the derived fields and records whether the inputs are valid. Fill is
// those assignments followed by FillDerived.
func (e *Env) FillDerived(hasIndex bool) {
	e.NowMillis = e.Now.UnixMilli()

	switch e.Position.Direction {
	case "LONG":
		e.Position.Side = 1
	case "SHORT":
		e.Position.Side = -1
	default:
		e.Position.Side = 0
	}

	idx := e.IndexPrice
	p := &e.Position
	e.Notional = p.Quantity * idx
	e.LiquidationDistance = LiquidationDistance(p.Side, idx, p.LiquidationPrice)
	e.LeverageRatio = 0
	if e.RiskLimit.MaxLeverage != 0 {
		e.LeverageRatio = float64(p.Leverage) / float64(e.RiskLimit.MaxLeverage)
	}

	// Written only when it changes: the engine fills one Env per
	// position, and a pointer written while the collector marks costs a
	// barrier.
	if why := noDataReason(e, hasIndex); e.noData != why {
		e.noData = why
	}
	e.filled = true
}

// LiquidationDistance is how far index is from the liquidation price liq,
// as a fraction of index, for a position of side (+1 long, −1 short):
// liquidationDistance as rules see it. 0 when index is 0.
func LiquidationDistance(side, index, liq float64) float64 {
	if index == 0 {
		return 0
	}
	return side * (index - liq) / index
}

// noDataReason returns why e cannot be evaluated, or "".
func noDataReason(e *Env, hasIndex bool) string {
	p := &e.Position
	switch {
	case !hasIndex:
		return ReasonIndexMissing
	case !finite(e.IndexPrice):
		return ReasonIndexNotFinite
	case e.IndexPrice <= 0:
		return ReasonIndexNotPositive
	case e.RiskLimit.MaxLeverage <= 0:
		return ReasonMaxLeverageZero
	case !p.Empty && p.Leverage <= 0:
		return ReasonLeverageNotPositive
	case p.Side == 0:
		return ReasonUnknownDirection
	case !finite(p.LiquidationPrice) || p.LiquidationPrice < 0:
		return ReasonLiquidationInvalid
	case !p.Empty && p.LiquidationPrice == 0:
		return ReasonLiquidationZero
	}
	// Every number finite: x·0 is ±0 for a finite x and NaN for an
	// infinite or NaN one, so the sum is zero exactly when all are finite
	// (one pass of multiply-adds, without a branch per number).
	rl, sy := &e.RiskLimit, &e.Symbol
	z := p.EntryValue*0 + p.EntryPrice*0 + p.Margin*0 + p.Quantity*0 + p.RealizedPNL*0 +
		p.MinimumMaintenanceMarginRate*0 + p.MinQuantity*0 + p.MaxQuantity*0 +
		rl.InitialMarginRate*0 + rl.MaintenanceMarginRate*0 + rl.MarginRateStep*0 + rl.RiskLimitBase*0 +
		rl.RiskLimitStep*0 + rl.MaxQuantity*0 +
		sy.BaseMinimumIncrement*0 + sy.BaseMaximumQuantity*0 + sy.QuoteMinimumIncrement*0 + sy.SettlementFeeRate*0 +
		e.Notional*0 + e.LiquidationDistance*0
	if z != 0 {
		return ReasonNonFiniteInput
	}
	return ""
}

// NoData returns "" when the inputs are valid, otherwise why they are not
// (one of the Reason constants). A zero Env reports a missing index.
func (e *Env) NoData() string {
	if !e.filled {
		// Never filled: do not let a zero Env read as valid.
		return ReasonIndexMissing
	}
	return e.noData
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
