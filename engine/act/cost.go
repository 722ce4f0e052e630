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
	return string(appendNearest(nil, f))
}

// appendNearest appends nearest's text to b (b as it was when none is).
func appendNearest(b []byte, f margin.Forfeit) []byte {
	var best *margin.ForfeitPart
	for i := range f.Parts {
		p := &f.Parts[i]
		if best == nil || p.Weight*p.Prob*p.Amount > best.Weight*best.Prob*best.Amount {
			best = p
		}
	}
	if best == nil {
		return b
	}
	if best.Direction == "" {
		b = append(b, "the cross pool ("...)
	}
	for k, s := range best.Symbols {
		if k > 0 {
			b = append(b, '+')
		}
		b = append(b, s...)
	}
	if best.Direction != "" {
		b = append(append(b, ' '), best.Direction...)
	} else {
		b = append(b, ')')
	}
	if best.Family == "" {
		b = append(b, " is past its liquidation point: "...)
		return append(appendFixed(b, best.Amount, 2), " lost"...)
	}
	b = appendFixed(append(b, ": "...), best.Prob*100, 1)
	b = appendSigned(append(b, "% to touch its liquidation point at "...), best.K, 1)
	b = append(append(append(b, "σ ("...), best.Family...), ") and lose "...)
	return appendFixed(b, best.Amount, 2)
}

// costTolerance is how much cheaper a candidate must be than another to be
// preferred to it, as a fraction of the larger (or a hundredth of a quote
// unit): the measure's own rounding, so that equal candidates are equal.
const costTolerance = 0.001

// cheaper reports whether cost a is cheaper than b beyond the tolerance.
func cheaper(a, b float64) bool {
	return a < b-math.Max(costTolerance*math.Max(math.Abs(a), math.Abs(b)), 0.01)
}

// askedMargin is how much cheaper than what the rules asked another
// candidate must be to go out instead (a fraction of the asked one's
// cost): the measure is an estimate, and the rules' own choice stands
// unless it is clearly worse (0.3 of a 0.4 asked came out 0.8% cheaper on
// a position 3% from its liquidation price: noise, not a reason).
const askedMargin = 0.05

// clearlyCheaper reports whether cost a is cheaper than the asked cost b
// by more than askedMargin of it.
func clearlyCheaper(a, b float64) bool {
	return cheaper(a, b) && a < b*(1-askedMargin)
}

// scored reports whether the model can score candidates: it has σ and
// fits the exchange, and the account can be measured (the free balance is
// known, or no cross pool needs it).
func (v *Model) scored() bool {
	if v == nil || v.Sigma == nil || v.Unfit != "" {
		return false
	}
	return v.measured(v.memoFor())
}

// forfeitBefore is the account's forfeit before any call, worked out once
// per memo.
func (v *Model) forfeitBefore() margin.Forfeit {
	memo := v.memoFor()
	if !memo.forfeitK {
		memo.forfeit, memo.forfeitK = v.pricedBefore(memo).Forfeit(), true
	}
	return memo.forfeit
}

// orderFee is what an order of qty at price pays the market.
func (v *Model) orderFee(qty, price decimal.Decimal) float64 {
	return v.OrderCost * qty.Mul(price).Abs().InexactFloat64()
}

// judgeReduce judges a reduce order of qty on the plan's position, asked
// by its rules (the quantity already capped, rounded and raised to the
// minimum), and returns the quantity to send, or why none is (skip):
//
//   - dust: a position worth less than DustNotional is closed whole when
//     the exchange takes an order that size (said), and left otherwise; a
//     reduce that would leave less than DustNotional, or under the
//     position's minimum order quantity, closes it whole instead;
//   - at mark to market, on a model that scores it and outside a fast
//     move of the position's index (where the order goes out as asked):
//     the candidates are
//     doing nothing and the quantity asked, a quarter, a half and three
//     quarters of it (never more than asked: an order cannot be taken
//     back), each costing its fee and spread plus the expected forfeit of
//     the account after it. The quantity asked goes out unless another is
//     cheaper; none goes out when doing nothing is cheapest, said with the
//     figures.
//
// d's Note says how the quantity changed.
func (v *Model) judgeReduce(pl *Plan, qty decimal.Decimal, d *ReduceDecision) (decimal.Decimal, string) {
	i, ok := v.At[pl.Sym.Name]
	if !ok {
		return qty, ""
	}
	pos := pl.Pos
	ix := v.Acct.Positions[i].Index
	if !ix.IsPositive() {
		return qty, ""
	}
	minQ, inc := pos.MinQuantity, pl.Sym.BaseMinimumIncrement
	dust := func(q decimal.Decimal) bool {
		return q.IsPositive() && (q.LessThan(minQ) || v.DustNotional.IsPositive() && q.Mul(ix).LessThan(v.DustNotional))
	}
	if dust(pos.Quantity) {
		// (A position under its minimum order quantity never gets here:
		// DecideReduce leaves it, saying so.)
		if !qty.Equal(pos.Quantity) {
			d.Note = joinNonEmpty(d.Note, fmt.Sprintf("closed whole: the position's %s is dust (%s, under engine.dust_notional %s)", pos.Quantity, pos.Quantity.Mul(ix).Round(2), v.DustNotional))
		}
		return pos.Quantity, ""
	}
	if left := pos.Quantity.Sub(qty); dust(left) {
		d.Note = joinNonEmpty(d.Note, fmt.Sprintf("closed whole: the %s left would be dust (%s, under the minimum order quantity %s or engine.dust_notional %s)", left, left.Mul(ix).Round(2), minQ, v.DustNotional))
		return pos.Quantity, ""
	}
	if v.OrdersAsAsked || !v.scored() {
		return qty, ""
	}
	if v.Fast != nil && v.Fast(pl.Sym.Name) != "" {
		// In a fast move σ lags the market (it is an hour's), and the
		// estimate would hold back the last resort: the rules' ask
		// stands (a 50% crash in two minutes liquidated a cross XBTC
		// whose halving at 5% was judged too dear at σ's 2% floor).
		return qty, ""
	}
	before := v.forfeitBefore()
	if !before.Known {
		return qty, ""
	}
	type cand struct {
		q    decimal.Decimal
		cost Cost
	}
	costOf := func(q decimal.Decimal) (Cost, bool) {
		fl := v.filled(i, q, ix)
		if fl.err != nil {
			return Cost{}, false
		}
		f := v.forfeitAfter(v.memoFor(), fl)
		return Cost{Fee: v.orderFee(q, ix), Forfeit: f}, f.Known
	}
	askedCost, ok := costOf(qty)
	if !ok {
		return qty, ""
	}
	best := cand{qty, askedCost}
	// The parts of the quantity asked a reduce may send instead, when
	// one is clearly cheaper.
	shares := [...]decimal.Decimal{decimal.New(25, -2), decimal.New(5, -1), decimal.New(75, -2)}
	for _, f := range shares {
		q := qty.Mul(f)
		if inc.IsPositive() {
			q = q.Div(inc).Floor().Mul(inc)
		}
		if !q.IsPositive() || q.LessThan(minQ) || dust(pos.Quantity.Sub(q)) {
			continue
		}
		if c, ok := costOf(q); ok && cheaper(c.Total(), best.cost.Total()) && clearlyCheaper(c.Total(), askedCost.Total()) {
			best = cand{q, c}
		}
	}
	nothing := before.Expected
	if !cheaper(best.cost.Total(), nothing) {
		why := fmt.Sprintf("holding is as cheap in expectation: the expected loss to liquidations over the horizon is %.2f", nothing)
		if n := nearest(before); n != "" {
			why += " (" + n + ")"
		}
		why += fmt.Sprintf("; reducing %s pays %.2f in fee and spread and leaves %.2f", qty, askedCost.Fee, askedCost.Forfeit.Expected)
		return qty, why
	}
	if !best.q.Equal(qty) {
		d.Note = joinNonEmpty(d.Note, fmt.Sprintf("%s of the %s asked, the cheapest in expectation: %s against %s", best.q, qty, best.cost, askedCost))
	}
	return best.q, ""
}
