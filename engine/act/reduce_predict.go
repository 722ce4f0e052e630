package act

import (
	"fmt"
	"strings"

	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/shopspring/decimal"
)

// ReducePrediction is what the margin model says a reduce order will do:
// the fill at the index (margin.Reduction) and the account after.
type ReducePrediction struct {
	margin.Reduction
	// QuantityBefore is the position's quantity when it was decided.
	QuantityBefore decimal.Decimal
	// FreeKnown: the free balance was inferred (freeWhy says why not);
	// without it the free balance and pool are said as changes only.
	FreeKnown bool
	freeWhy   string
	// Unverified says why the prediction is not verified: the model does
	// not fit the exchange's own figures ("" when it does).
	Unverified string
	// Next is the account after the fill.
	Next margin.Account
	// StressBefore and StressAfter are the account on the stress grid
	// before and after the fill; Stressed says they were worked out. The
	// grid shows an order, it does not decide one: the PNL it realises is
	// no loss a move leaves, and the order goes out as the rules ask.
	StressBefore, StressAfter margin.Stress
	Stressed                  bool
}

// PredictReduce predicts filling a reduce order of qty on the plan's
// position at its index price; nil when the model does not know the
// position or its index price, or refuses the reduction.
func (v *Model) PredictReduce(pl *Plan, qty decimal.Decimal) *ReducePrediction {
	i, ok := v.At[pl.Sym.Name]
	if !ok {
		return nil
	}
	ix := v.Acct.Positions[i].Index
	if !ix.IsPositive() {
		return nil
	}
	f := v.filled(i, qty, ix)
	if f.err != nil {
		return nil
	}
	next := f.next
	p := &ReducePrediction{Reduction: f.r, QuantityBefore: v.Acct.Positions[i].Quantity, FreeKnown: v.FreeKnown, freeWhy: v.FreeWhy, Unverified: v.Unfit, Next: next}
	if sb, ok := v.stressBefore(); ok {
		p.StressBefore, p.StressAfter = sb, v.pricedAfter(v.memoFor(), f).StressJudged(v.Likely)
		p.Stressed = sb.Known && p.StressAfter.Known
	}
	return p
}

// Reduced is the reduced position's liquidation move.
func (p *ReducePrediction) Reduced() margin.LiquidationMove {
	for _, m := range p.Liquidations {
		if m.Reduced {
			return m
		}
	}
	return margin.LiquidationMove{}
}

// String is the prediction as the log, the audit log and the
// notifications say it: "quantity 0.8 → 0.4 at 62000, realised PNL -880,
// margin released 2568, free balance 20000 → 21688, cross pool 23000 →
// 23000; XBTC liquidation 36000 → 12345 (41.94% → 80.09% away); XETH …",
// prefixed with "unverified: model does not fit …" where the model does
// not fit, as a settings call's prediction is.
func (p *ReducePrediction) String() string {
	var b strings.Builder
	if p.Unverified != "" {
		b.WriteString("unverified: model does not fit " + p.Unverified + "; ")
	}
	fmt.Fprintf(&b, "quantity %s → %s at %s, realised PNL %s, margin released %s", p.QuantityBefore, p.QuantityAfter, p.Price,
		p.RealisedPNL.Round(2), p.MarginReleased.Round(2))
	if p.FreeKnown {
		fmt.Fprintf(&b, ", free balance %s → %s", p.FreeBefore.Round(2), p.FreeAfter.Round(2))
		if p.PoolBefore.IsPositive() || p.PoolAfter.IsPositive() {
			fmt.Fprintf(&b, ", cross pool %s → %s", p.PoolBefore.Round(2), p.PoolAfter.Round(2))
		}
	} else {
		fmt.Fprintf(&b, ", free balance %s (before unknown: %s)", signed(p.FreeAfter.Sub(p.FreeBefore).Round(2)), p.freeWhy)
	}
	for _, m := range p.Liquidations {
		db, okb := margin.Distance(m.Direction, m.Index, m.Before)
		da, oka := margin.Distance(m.Direction, m.Index, m.After)
		fmt.Fprintf(&b, "; %s liquidation %s → %s", m.Symbol, m.Before, m.After)
		switch {
		case okb && oka:
			fmt.Fprintf(&b, " (%s%% → %s%% away)", db.Shift(2).StringFixed(2), da.Shift(2).StringFixed(2))
		case okb:
			fmt.Fprintf(&b, " (%s%% away → none)", db.Shift(2).StringFixed(2))
		}
	}
	if p.Stressed {
		fmt.Fprintf(&b, "; stress: expected loss %.2f → %.2f (beside the PNL realised); after: %s", p.StressBefore.Expected, p.StressAfter.Expected, p.StressAfter.Summary())
	}
	return b.String()
}

func signed(d decimal.Decimal) string {
	if d.IsNegative() {
		return d.String()
	}
	return "+" + d.String()
}

// Record is the prediction as an audit record carries it: the reduced
// position's liquidation prices, the margin moved (negative: released),
// the free balance after when known, the PNL realised and the quantity
// left.
func (p *ReducePrediction) Record() *journal.Prediction {
	m := p.Reduced()
	before, _ := margin.Distance(m.Direction, m.Index, m.Before)
	after, _ := margin.Distance(m.Direction, m.Index, m.After)
	pnl, left := p.RealisedPNL, p.QuantityAfter
	r := &journal.Prediction{LiquidationBefore: m.Before, LiquidationAfter: m.After, DistanceBefore: before, DistanceAfter: after,
		MarginMoved: p.MarginReleased.Neg(), RealisedPNL: &pnl, QuantityAfter: &left, Unverified: p.Unverified}
	if p.FreeKnown {
		free := p.FreeAfter
		r.FreeAfter = &free
	}
	if p.Stressed {
		stressRecord(r, p.StressBefore, p.StressAfter)
	}
	return r
}
