package act

import (
	"errors"
	"fmt"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// reducePosition cuts the position's exposure: a reduce-only,
// immediate-or-cancel market order on the side that shrinks it, for the
// largest quantity its rules ask (a fraction of the position, or a
// quantity expression). It is sent after the cancel and before the
// settings call: the settings call then moves the margin of a smaller
// position.
type reducePosition struct{}

// Merge evaluates the rule's quantity: fraction × the position's quantity,
// or its quantity expression on env.
func (reducePosition) Merge(pl *Plan, d *Due, a *rules.Action, ev *rules.Evaluator, env *rules.Env) {
	var qty decimal.Decimal
	if a.Fraction > 0 {
		qty = pl.Pos.Quantity.Mul(decimal.NewFromFloat(a.Fraction))
	} else {
		f, err := ev.ReduceQuantity(a, env)
		if err != nil {
			d.Err = fmt.Errorf("reduce quantity: %w", err)
			return
		}
		qty = decimal.NewFromFloat(f)
	}
	if qty.GreaterThan(pl.Reduce) {
		pl.Reduce = qty
	}
	pl.ReduceAsked = true
	pl.ReduceRules = append(pl.ReduceRules, d.Rule.Name)
	d.Reduce = true
}

// ErrWouldGrow is the error of a reduce order refused before it is sent
// because it would not shrink the position: the side that grows it, a
// quantity over the position's, no reduce-only flag, or a direction the
// guard cannot tell the closing side of.
var ErrWouldGrow = errors.New("the order would grow the position")

// CheckReduces refuses an order that could make pos grow. It is the last
// check before the order goes out.
func CheckReduces(pos *exchange.Position, o exchange.OrderRequest) error {
	switch {
	case pos.Direction != exchange.Long && pos.Direction != exchange.Short:
		return fmt.Errorf("%w: direction %q: which side reduces it is unknown", ErrWouldGrow, pos.Direction)
	case o.Side != exchange.CloseSide(pos.Direction):
		return fmt.Errorf("%w: a %s order on a %s position", ErrWouldGrow, o.Side, pos.Direction)
	case o.Flags&exchange.ReduceOnly == 0:
		return fmt.Errorf("%w: not reduce-only (flags %#x)", ErrWouldGrow, o.Flags)
	case pos.Empty || !o.Quantity.IsPositive() || o.Quantity.GreaterThan(pos.Quantity):
		return fmt.Errorf("%w: %s of a position of %s", ErrWouldGrow, o.Quantity, pos.Quantity)
	}
	return nil
}

// ReduceDecision is a plan's reduce order as decided: Order is set when
// one goes out, Skip says why none does.
type ReduceDecision struct {
	Order *exchange.OrderRequest
	// Asked is the quantity the rules asked, before rounding.
	Asked decimal.Decimal
	// Note says how the order's quantity differs from Asked ("" when it
	// does not).
	Note string
	Pred *ReducePrediction
	Skip string
}

// DecideReduce decides the plan's reduce order: the quantity asked,
// capped at the position's, rounded down to the symbol's
// baseMinimumIncrement; under the position's minQuantity it becomes
// minQuantity when the position holds that much (the smallest order the
// exchange takes, a little more than asked), and is skipped otherwise.
// A quantity that rounds to nothing is skipped, never sent as zero. The
// side is the one that shrinks the position; the margin model m (nil
// predicts nothing) predicts the fill at the index.
func DecideReduce(m *Model, pl *Plan) ReduceDecision {
	pos, sym := pl.Pos, pl.Sym
	d := ReduceDecision{Asked: pl.Reduce}
	qty := pl.Reduce
	if !qty.IsPositive() {
		d.Skip = fmt.Sprintf("the rules asked to reduce by %s: nothing to send", qty)
		return d
	}
	if qty.GreaterThan(pos.Quantity) {
		qty = pos.Quantity
		d.Note = fmt.Sprintf("%s asked, capped at the position's %s", pl.Reduce, pos.Quantity)
	}
	if inc := sym.BaseMinimumIncrement; inc.IsPositive() {
		if r := qty.Div(inc).Floor().Mul(inc); !r.Equal(qty) {
			qty = r
			d.Note = fmt.Sprintf("%s asked, rounded down to %s (increment %s)", pl.Reduce, qty, inc)
		}
	}
	if minQ := pos.MinQuantity; qty.LessThan(minQ) {
		if minQ.GreaterThan(pos.Quantity) {
			d.Skip = fmt.Sprintf("%s asked; the position's %s is under the minimum order quantity %s", pl.Reduce, pos.Quantity, minQ)
			return d
		}
		qty = minQ
		d.Note = fmt.Sprintf("%s asked, raised to the minimum order quantity %s", pl.Reduce, minQ)
	}
	if !qty.IsPositive() {
		d.Skip = fmt.Sprintf("%s asked rounds down to 0 at the increment %s", pl.Reduce, sym.BaseMinimumIncrement)
		return d
	}
	o := exchange.ReduceOnlyIOC(exchange.CloseSide(pos.Direction), qty)
	if err := CheckReduces(pos, o); err != nil {
		d.Skip = err.Error()
		return d
	}
	d.Order = &o
	if m != nil {
		d.Pred = m.PredictReduce(pl, qty)
	}
	return d
}
