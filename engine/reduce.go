package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/riskguard/riskguard/engine/act"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/notify"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// OrderPlacer is what reduce_position needs of the exchange besides the
// Actuator: a reduce-only order. The Actuator is asked for it (the
// exchange client and the simulated exchange's Local implement it).
type OrderPlacer interface {
	PlaceOrder(ctx context.Context, symbol string, o exchange.OrderRequest) (*exchange.Order, error)
}

// ErrReduceGrew is the error of a reduce-only order after which the
// exchange read back a larger position: what a reduce-only order can never
// do. It stops reduce_position until a restart (ErrReduceStopped).
var ErrReduceGrew = errors.New("the position grew after a reduce-only order")

// ErrReduceStopped is the error of a reduce_position not sent because an
// earlier one grew its position (ErrReduceGrew): no reduce order goes out
// until the daemon restarts.
var ErrReduceStopped = errors.New("reduce_position stopped")

// errNoOrders is the error of a reduce_position whose Actuator cannot
// place orders.
var errNoOrders = errors.New("the exchange adapter cannot place orders")

// reduceCall is a plan's reduce order: decided, held or sent, and what the
// exchange read back after it.
type reduceCall struct {
	dec    act.ReduceDecision
	pc     *pendingCall
	err    error
	before decimal.Decimal // the position's quantity when decided
	// Read back by the call (on the executor's goroutine; read once the
	// call has ended): the position after, nil when it is gone.
	after    *exchange.Position
	readBack bool
}

// prepareReduce decides the plan's reduce order and prepares its call
// (the pause, the snapshot's age and the breaker's budget, as every
// mutating call). m is the tick's margin model. A reduce that cannot go
// out is said (skipped, with why) and returns with err set when the rule
// should hear of it.
func (e *Engine) prepareReduce(ctx context.Context, now time.Time, m *act.Model, pl *act.Plan, rep *TickReport) *reduceCall {
	sym, pos := pl.Sym.Name, pl.Pos
	names := act.Dedupe(pl.ReduceRules)
	rc := &reduceCall{before: pos.Quantity}
	skip := func(outcome, why string, err error) *reduceCall {
		r := Record{Time: now, Type: "action", Action: string(rules.ReducePosition), Symbol: sym, Position: pos.ID, Rules: names,
			Phase: "skipped", Reason: why}
		e.emit(ctx, rep, event{Audit: &r, Level: slog.LevelWarn, Msg: "skipped reduce_position " + sym + ": " + why,
			Attrs:  []any{"action", r.Action, "symbol", sym, "rule", joinRules(names)},
			Count:  func(m *Metrics) { m.Action(r.Action, outcome) },
			Action: &ActionEvent{Symbol: sym, Action: r.Action, Rules: names, Outcome: outcome, Effect: why}})
		rc.err = err
		return rc
	}
	switch {
	case e.reduceStopped != nil:
		return skip("skipped_stopped", fmt.Sprintf("stopped until restart: %v", e.reduceStopped), fmt.Errorf("%w: %w", ErrReduceStopped, e.reduceStopped))
	case e.orders == nil:
		return skip("skipped", errNoOrders.Error(), errNoOrders)
	}
	rc.dec = act.DecideReduce(m, pl)
	d := rc.dec
	if d.Order == nil {
		return skip("skipped_bounded", d.Skip, nil)
	}
	o := *d.Order
	qty := o.Quantity
	desc := fmt.Sprintf("reduce_position %s %s %s (reduce-only, IOC)", sym, o.Side, qty)
	effect := d.Note
	base := Record{Time: now, Type: "action", Action: string(rules.ReducePosition), Symbol: sym, Position: pos.ID, Rules: names,
		Quantity: &qty, Reason: d.Note}
	if d.Pred != nil {
		effect = joinNonEmpty(d.Note, d.Pred.String())
		base.Prediction = d.Pred.Record()
	}
	actEv := &ActionEvent{Symbol: sym, Action: string(rules.ReducePosition), Rules: names, Quantity: qty, Effect: effect}
	placer, reader, key := e.orders, e.reader, market.KeyOf(pos)
	posCopy := *pos
	rc.pc, rc.err = e.prepare(ctx, rep, base, desc, effect, actEv, func(ctx context.Context) (json.RawMessage, error) {
		if err := act.CheckReduces(&posCopy, o); err != nil {
			return nil, err
		}
		got, err := placer.PlaceOrder(ctx, sym, o)
		if err != nil {
			return nil, err
		}
		raw, _ := json.Marshal(got)
		ps, err := reader.Positions(ctx)
		var partial *exchange.PartialError
		if err != nil && !errors.As(err, &partial) {
			return raw, fmt.Errorf("order %d sent (%s filled %s); reading the position back failed: %w", got.ID, got.Status, got.FilledQuantity, err)
		}
		rc.readBack = true
		for i := range ps {
			if market.KeyOf(&ps[i]) == key {
				p := ps[i]
				rc.after = &p
			}
		}
		left := decimal.Zero
		if rc.after != nil && !rc.after.Empty {
			left = rc.after.Quantity
		}
		actual := fmt.Sprintf("quantity %s → %s read back", rc.before, left)
		if d.Pred != nil {
			actual += fmt.Sprintf(" (%s predicted)", d.Pred.QuantityAfter)
			base.Prediction.ActualQuantity = &left
			if rc.after != nil {
				liq := rc.after.LiquidationPrice
				base.Prediction.Actual = &liq
				actual += fmt.Sprintf(", liquidation %s (%s predicted)", liq, d.Pred.Reduced().After)
			}
		}
		actEv.Actual = actual
		switch {
		case left.GreaterThan(rc.before):
			return raw, fmt.Errorf("%w: %s %s → %s after a reduce-only %s of %s (order %d %s)", ErrReduceGrew, sym, rc.before, left, o.Side, qty, got.ID, got.Status)
		case left.Equal(rc.before):
			return raw, fmt.Errorf("%w: %s quantity still %s after a reduce-only %s of %s (order %d %s, filled %s)", ErrNotApplied, sym, left, o.Side, qty, got.ID, got.Status, got.FilledQuantity)
		}
		return raw, nil
	})
	return rc
}

// reduceDone applies a reduce order's outcome once it has ended: a
// position that grew stops reduce_position (critical: audited, logged,
// notified); a fill moves the tick's margin model on; the read-back's
// liquidation price is checked against the prediction.
func (e *Engine) reduceDone(ctx context.Context, now time.Time, pl *act.Plan, rc *reduceCall) {
	sym := pl.Sym.Name
	if errors.Is(rc.err, ErrReduceGrew) && e.reduceStopped == nil {
		e.reduceStopped = rc.err
		text := fmt.Sprintf("CRITICAL: %v; reduce_position is stopped: no reduce order goes out until riskguard restarts. Check the exchange's position and the order endpoint (exchange.order_path).", rc.err)
		e.emit(ctx, nil, event{Level: slog.LevelError, Msg: text, Attrs: []any{"action", string(rules.ReducePosition), "symbol", sym, "err", rc.err},
			Audit: &Record{Time: now, Type: "stopped", Action: string(rules.ReducePosition), Symbol: sym, Rules: act.Dedupe(pl.ReduceRules), Reason: text},
			Note: &notify.Message{Time: now, Kind: notify.KindActionFailed, Severity: "critical", Symbol: sym, Action: string(rules.ReducePosition),
				Rule: joinRules(act.Dedupe(pl.ReduceRules)), Text: text},
			Count: func(m *Metrics) { m.Action(string(rules.ReducePosition), "stopped") }})
		return
	}
	pred := rc.dec.Pred
	if rc.err != nil || pred == nil {
		return
	}
	if rc.after != nil && !rc.after.Empty {
		e.checkReduction(ctx, now, sym, pred, rc.after.LiquidationPrice)
	}
	if e.tickView != nil && e.lastTick.Equal(now) {
		e.tickView.Acct = pred.Next // later calls of the tick see the fill
	}
}

// checkReduction compares the reduced position's liquidation price read
// back with the model's, as checkPrediction does for a settings call.
func (e *Engine) checkReduction(ctx context.Context, now time.Time, symbol string, pred *act.ReducePrediction, got decimal.Decimal) {
	m := pred.Reduced()
	if got.Sub(m.After).Abs().GreaterThan(m.Index.Mul(decimal.New(1, -4))) {
		e.emit(ctx, nil, mismatchEvent(now, symbol, m.After, got))
	}
}

// afterReduce is the margin model a plan's settings call is decided on
// when a reduce order goes before it: the tick's model with the fill
// applied, so that a leverage cut moves the margin of the smaller
// position. m is unchanged.
func afterReduce(m *act.Model, rc *reduceCall) *act.Model {
	if m == nil || rc == nil || rc.err != nil || rc.dec.Pred == nil {
		return m
	}
	next := *m
	next.Acct = rc.dec.Pred.Next
	return &next
}

func joinNonEmpty(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}
