package act

import (
	"fmt"
	"math"
	"strings"

	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/shopspring/decimal"
)

// A decision compares candidates (doing nothing, what the rules asked, and
// the variants they allow) by one measure: the expected cost over the
// stress horizon at mark to market. Under a price without drift, holding a
// position is worth its mark, so an order that realises a loss costs only
// what it pays the market (its fee and half the spread: Model.OrderCost of
// its notional); what a liquidation costs is what it forfeits at its
// liquidation point, times the probability that a move touches that point
// within the horizon (margin.Forfeit, first passage). A settings call pays
// nothing to the market: it is judged by the forfeit it leaves. The
// cheapest candidate goes out; a few bounds no estimate lifts
// (Model.invariant) hold whatever the measure says.

// Cost is a candidate's expected cost.
type Cost struct {
	// Fee is what the candidate pays the market (0 for a settings call,
	// or doing nothing).
	Fee float64
	// Forfeit is the account after it, first passage.
	Forfeit margin.Forfeit
}

// Total is the candidate's expected cost: Fee plus the expected forfeit.
func (c Cost) Total() float64 { return c.Fee + c.Forfeit.Expected }

// String says the cost as a decision's reason does: "expected cost 12.30
// (fee 2.00, liquidations 10.30: XBTC 4.1% × 250.00)".
func (c Cost) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%.2f", c.Total())
	if c.Fee > 0 {
		fmt.Fprintf(&b, " (fee and spread %.2f, liquidations %.2f)", c.Fee, c.Forfeit.Expected)
	}
	return b.String()
}

// Nearest says the part most likely lost, as "XBTC LONG: 4.1% to lose
// 250.00 at −1.6σ (every index together)", or "" when none is.
func nearest(f margin.Forfeit) string {
	var best *margin.ForfeitPart
	for i := range f.Parts {
		p := &f.Parts[i]
		if best == nil || p.Weight*p.Prob*p.Amount > best.Weight*best.Prob*best.Amount {
			best = p
		}
	}
	if best == nil {
		return ""
	}
	what := strings.Join(best.Symbols, "+")
	if best.Direction != "" {
		what += " " + best.Direction
	} else {
		what = "the cross pool (" + what + ")"
	}
	if best.Family == "" {
		return fmt.Sprintf("%s is past its liquidation point: %.2f lost", what, best.Amount)
	}
	return fmt.Sprintf("%s: %.1f%% to touch its liquidation point at %+.1fσ (%s) and lose %.2f", what, best.Prob*100, best.K, best.Family, best.Amount)
}

// costTolerance is how much cheaper a candidate must be than another to be
// preferred to it, as a fraction of the larger (or a hundredth of a quote
// unit): the measure's own rounding, so that equal candidates are equal.
const costTolerance = 0.001

// cheaper reports whether cost a is cheaper than b beyond the tolerance.
func cheaper(a, b float64) bool {
	return a < b-math.Max(costTolerance*math.Max(math.Abs(a), math.Abs(b)), 0.01)
}

// scored reports whether the model can score candidates: it has σ and
// fits the exchange, and the account can be measured (the free balance is
// known, or no cross pool needs it).
func (v *Model) scored() bool {
	if v == nil || v.Sigma == nil || v.Unfit != "" {
		return false
	}
	memo := v.memoFor()
	if !memo.crossK {
		memo.hasCross, memo.crossK = v.Acct.HasOpenCross(), true
	}
	return v.FreeKnown || !memo.hasCross
}

// forfeitBefore is the account's forfeit before any call, worked out once
// per memo.
func (v *Model) forfeitBefore() margin.Forfeit {
	memo := v.memoFor()
	if memo.forfeit == nil {
		liqs := memo.liqs
		if liqs == nil {
			liqs = v.Acct.LiquidationPricesWith(v.Liqs)
			memo.liqs = liqs
		}
		f := v.Acct.Forfeit(v.Sigma, liqs)
		memo.forfeit = &f
	}
	return *memo.forfeit
}

// orderFee is what an order of qty at price pays the market.
func (v *Model) orderFee(qty, price decimal.Decimal) float64 {
	return v.OrderCost * qty.Mul(price).Abs().InexactFloat64()
}
