// Package margin is the exchange's margin and liquidation arithmetic for
// linear contracts: the one model that the simulated exchange simulates
// with and the engine predicts with, so that a prediction and a simulation
// cannot disagree by construction, and the live exchange's answers test
// the model's assumptions.
package margin

import (
	"math"

	"github.com/riskguard/riskguard/exchange"
	"github.com/shopspring/decimal"
)

// MaintenanceRate is the maintenance margin rate a position of entry value
// ev pays under rl: the risk limit's maintenanceMarginRate, plus
// marginRateStep for each riskLimitStep (rounded up, at most
// maxRiskLimitSteps) by which ev exceeds riskLimitBase. With a zero
// riskLimitStep the rate is flat.
func MaintenanceRate(rl exchange.RiskLimit, ev decimal.Decimal) decimal.Decimal {
	mmr := rl.MaintenanceMarginRate
	if !rl.RiskLimitStep.IsPositive() || !ev.GreaterThan(rl.RiskLimitBase) {
		return mmr
	}
	steps := ev.Sub(rl.RiskLimitBase).DivRound(rl.RiskLimitStep, 16).Ceil()
	if limit := decimal.NewFromInt(int64(rl.MaxRiskLimitSteps)); steps.GreaterThan(limit) {
		steps = limit
	}
	return mmr.Add(rl.MarginRateStep.Mul(steps))
}

// Margin is the margin of a position of entry value ev at leverage:
// ev/leverage rounded half up to 8 decimal places. A leverage below 1
// counts as 1.
func Margin(ev decimal.Decimal, leverage int) decimal.Decimal {
	if leverage < 1 {
		leverage = 1
	}
	return ev.DivRound(decimal.NewFromInt(int64(leverage)), 8)
}

// LiquidationPrice is the index price at which a position of quantity q,
// entry price entry and the given collateral is liquidated under the
// maintenance margin rate mmr, rounded to scale decimal places towards the
// entry price. It is 0 for a position with no quantity, and for a long that
// no positive price can liquidate.
//
// The margin model. Contracts are linear: one
// contract is one unit of the base currency, margined and settled in the
// quote currency. For a position of quantity q > 0 opened at entry price P
// with leverage L:
//
//	entryValue  EV = q·P
//	margin      M  = EV / L                     (rounded half up to 8 places)
//	mmr            = MaintenanceRate(riskLimit, EV)
//	collateral  C  = M                          isolated
//	            C  = M + free balance           cross (the whole free balance
//	                                             of the account backs it)
//	liquidation    long:  P − (C − mmr·EV) / q   (rounded up to the quote scale, at least 0)
//	               short: P + (C − mmr·EV) / q   (rounded down to the quote scale)
//
// that is, the index price at which the equity C ± q·(index − P) falls to
// the maintenance margin mmr·EV. For an isolated position this is the
// familiar long P·(1 − 1/L + mmr) and short P·(1 + 1/L − mmr). Rounding
// goes towards the entry price, so the exchange liquidates at, never
// after, the exact price.
//
// Each cross position is backed by the whole free balance, as if the other
// positions stood still; a change of the free balance (a settings change
// moving margin, a liquidation) moves every cross position's liquidation
// price. Unrealised profit and loss never changes the free balance.
//
// The simulated exchange computes it for every cross position at every
// step, so it first tries float64 arithmetic and keeps the answer only when
// the error bound of that arithmetic proves the rounding the decimal
// formula would make; near a tick (the price within the bound of a
// multiple of the quote scale) the formula is computed exactly in 128-bit
// integers (liquidationPriceWide), and in decimals only when a figure does
// not fit them.
func LiquidationPrice(direction string, q, entry, collateral, mmr decimal.Decimal, scale int32) decimal.Decimal {
	if !q.IsPositive() {
		return decimal.Zero
	}
	if liq, ok := liquidationPriceFloat(direction, q, entry, collateral, mmr, scale); ok {
		return liq
	}
	// On a tick or next to one: in integers, or the decimals when a
	// figure does not fit 128 bits.
	if liq, ok := liquidationPriceWide(direction, q, entry, collateral, mmr, scale); ok {
		return liq
	}
	return liquidationPriceExact(direction, q, entry, collateral, mmr, scale)
}

// pow10f holds the exactly representable powers of ten.
var pow10f = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// liquidationPriceFloat is LiquidationPrice in float64 for a positive
// quantity; ok is false when float64 cannot prove the decimal answer.
func liquidationPriceFloat(direction string, q, entry, collateral, mmr decimal.Decimal, scale int32) (decimal.Decimal, bool) {
	if scale < 0 || scale > 18 {
		return decimal.Decimal{}, false
	}
	return liquidationPriceFloats(direction, floatOf(q), floatOf(entry), floatOf(collateral), floatOf(mmr), scale)
}

// liquidationPriceFloats is liquidationPriceFloat on its figures read as
// float64s, each within a few units of float64's rounding (the error
// bound covers a thousand times more), for a scale in 0..18.
func liquidationPriceFloats(direction string, qf, ef, cf, mf float64, scale int32) (decimal.Decimal, bool) {
	for _, f := range [...]float64{qf, ef, cf, mf} {
		// NaN fails the comparison too.
		if !(math.Abs(f) < floatMaxInput) {
			return decimal.Decimal{}, false
		}
	}
	if qf <= 0 {
		return decimal.Decimal{}, false
	}
	need := mf * qf * ef
	buffer := (cf - need) / qf
	liq := ef - buffer
	if direction == exchange.Short {
		liq = ef + buffer
	}
	// An absolute bound of liq's error, as riskLevelFloat's: the terms'
	// magnitudes times the tolerance; plus the decimal formula's own
	// rounding of the buffer to 16 places.
	tol := (math.Abs(ef)+(math.Abs(cf)+math.Abs(need))/qf)*floatTolerance + 1e-16
	pow := pow10f[scale]
	ticks := liq * pow
	slack := tol*pow + math.Abs(ticks)*floatTolerance
	// Below zero is 0, whichever tick it would round to: a long's price
	// rounds up to a negative tick from −1 tick down, a short's down to
	// one from any negative price.
	below := 0.0
	if direction != exchange.Short {
		below = -1
	}
	switch {
	case ticks+slack < below:
		return decimal.Zero, true
	case !(math.Abs(ticks) < 1<<52):
		return decimal.Decimal{}, false
	}
	if near := math.Round(ticks); math.Abs(ticks-near) <= slack {
		return decimal.Decimal{}, false // too close to a tick to tell the rounding
	}
	// Towards the entry price: a long's rounds up, a short's down.
	n := math.Ceil(ticks)
	if direction == exchange.Short {
		n = math.Floor(ticks)
	}
	if n < 0 {
		return decimal.Zero, true
	}
	return decimal.New(int64(n), -scale), true
}

// liquidationPriceExact is LiquidationPrice in decimal arithmetic: its
// definition.
func liquidationPriceExact(direction string, q, entry, collateral, mmr decimal.Decimal, scale int32) decimal.Decimal {
	if !q.IsPositive() {
		return decimal.Zero
	}
	ev := q.Mul(entry)
	buffer := collateral.Sub(mmr.Mul(ev)).DivRound(q, 16)
	var liq decimal.Decimal
	if direction == exchange.Short {
		liq = entry.Add(buffer).RoundFloor(scale)
	} else {
		liq = entry.Sub(buffer).RoundCeil(scale)
	}
	if liq.IsNegative() {
		return decimal.Zero
	}
	return liq
}

// RiskLevel is the margin ratio of a position in percent, as an integer in
// 0..100: the maintenance margin mmr·EV over the equity
// collateral ± q·(index − entry), rounded up. It reads 100 at the
// liquidation price and beyond, and 0 for an empty position.
//
// Every Positions read computes it for every position, so it first tries
// float64 arithmetic and keeps the answer only when the error bound of that
// arithmetic proves it equal to the decimal result; near a boundary (an
// equity near zero, a ratio near an integer) the decimal formula decides.
func RiskLevel(direction string, q, entry, collateral, mmr, index decimal.Decimal) int {
	if !q.IsPositive() {
		return 0
	}
	if level, ok := riskLevelFloat(direction, q, entry, collateral, mmr, index); ok {
		return level
	}
	return riskLevelExact(direction, q, entry, collateral, mmr, index)
}

// Bounds of riskLevelFloat. The float64 computation below makes a relative
// error of a few units of 2⁻⁵³ (1.1e-16) per operation; floatTolerance is
// a thousand times more than that, so a result it accepts is the decimal one.
const (
	floatTolerance = 1e-13
	floatMaxInput  = 1e100 // larger inputs could overflow the products
)

// riskLevelFloat is RiskLevel in float64 for a positive quantity; ok is
// false when float64 cannot prove the decimal answer and riskLevelExact must
// decide.
func riskLevelFloat(direction string, q, entry, collateral, mmr, index decimal.Decimal) (int, bool) {
	return RiskLevelOfFloats(direction, q.InexactFloat64(), entry.InexactFloat64(), collateral.InexactFloat64(), mmr.InexactFloat64(), index.InexactFloat64())
}

// RiskLevelOfFloats is RiskLevel's float64 path for a positive quantity,
// from the InexactFloat64 of each decimal (qf of q, ef of entry, cf of
// collateral, mf of mmr, xf of index): for a caller that keeps the
// conversions while the figures stay the same. ok is false when float64
// cannot prove the decimal answer: RiskLevel must decide.
func RiskLevelOfFloats(direction string, qf, ef, cf, mf, xf float64) (int, bool) {
	for _, f := range [...]float64{qf, ef, cf, mf, xf} {
		// NaN fails the comparison too.
		if !(math.Abs(f) < floatMaxInput) {
			return 0, false
		}
	}
	if mf < 0 || ef < 0 {
		return 0, false
	}
	pnl := (xf - ef) * qf
	if direction == exchange.Short {
		pnl = -pnl
	}
	equity := cf + pnl
	// An absolute bound of equity's error: the terms' magnitudes times the
	// tolerance.
	tol := (math.Abs(cf) + (math.Abs(xf)+ef)*qf) * floatTolerance
	switch {
	case equity < -tol:
		return 100, true
	case equity <= tol:
		return 0, false // too close to zero to tell its sign
	}
	level := mf * qf * ef * 100 / equity
	// The ratio's error, plus the 1e-16 rounding of the decimal division.
	slack := level*(tol/equity+floatTolerance) + 1e-15
	if level > 101+slack {
		return 100, true
	}
	if frac := level - math.Floor(level); frac <= slack || 1-frac <= slack {
		return 0, false // too close to an integer to tell its ceiling
	}
	n := int(math.Ceil(level))
	return min(max(n, 0), 100), true
}

// riskLevelExact is RiskLevel in decimal arithmetic: its definition.
func riskLevelExact(direction string, q, entry, collateral, mmr, index decimal.Decimal) int {
	if !q.IsPositive() {
		return 0
	}
	pnl := index.Sub(entry).Mul(q)
	if direction == exchange.Short {
		pnl = pnl.Neg()
	}
	equity := collateral.Add(pnl)
	if !equity.IsPositive() {
		return 100
	}
	level := mmr.Mul(q).Mul(entry).Mul(decimal.NewFromInt(100)).DivRound(equity, 16).Ceil()
	switch {
	case level.GreaterThan(decimal.NewFromInt(100)):
		return 100
	case level.IsNegative():
		return 0
	}
	return int(level.IntPart())
}
