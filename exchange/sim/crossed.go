package sim

import (
	"github.com/riskguard/riskguard/exchange"
	"github.com/shopspring/decimal"
)

// crossed reports whether index has reached the liquidation price liq of a
// position in direction: a long at or below it, a short at or above it. A
// zero liquidation price never crosses.
func crossed(direction string, index, liq decimal.Decimal) bool {
	if !liq.IsPositive() || !index.IsPositive() {
		return false
	}
	if direction == exchange.Short {
		return index.GreaterThanOrEqual(liq)
	}
	return index.LessThanOrEqual(liq)
}
