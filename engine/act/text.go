package act

import (
	"math"
	"slices"
	"strconv"

	"github.com/riskguard/riskguard/exchange"
)

// The decisions' reasons are said at every tick a rule fires and its call
// is left out: their figures are appended to one buffer with strconv,
// which writes them as fmt's verbs do (TestFixedIsFmt), without fmt's
// interfaces and allocations.

// appendFixed appends x with prec decimals, as fmt's %.<prec>f does
// (strconv's 'f' format is fmt's, signs, NaN and infinities included).
func appendFixed(b []byte, x float64, prec int) []byte {
	return strconv.AppendFloat(b, x, 'f', prec, 64)
}

// appendSigned appends x as fmt's %+.<prec>f does: with its sign always.
func appendSigned(b []byte, x float64, prec int) []byte {
	if math.IsNaN(x) {
		return append(b, "+NaN"...)
	}
	n := len(b)
	b = appendFixed(b, x, prec)
	if b[n] != '-' && b[n] != '+' {
		b = slices.Insert(b, n, '+')
	}
	return b
}

// appendSettings appends a call's settings as "cross at 5x".
func appendSettings(b []byte, w exchange.Settings) []byte {
	if w.Cross {
		b = append(b, "cross at "...)
	} else {
		b = append(b, "isolated at "...)
	}
	b = strconv.AppendInt(b, int64(w.Leverage), 10)
	return append(b, 'x')
}
